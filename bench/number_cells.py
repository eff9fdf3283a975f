"""Number cells read exactly: signs, parentheses, decimals and thousands marks in generated table cells
(issue 37: ``-1,234`` read ``-,234`` or ``1,234``).

Pages: :func:`bench.table_pages.render_table_page` (seeded fonts, sizes, rules, fills, scan noise on
about 40 % of them; no skew, so each cell's drawn ink box is where it lies on the page) with every
numeric cell drawn from :func:`signed_number`: half of them negative, a third of those starting
``-1`` (the digit the reading lost most), and parentheses, percentages and small decimals beside.

Each number is scored where it is printed, not by the table's structure: its reading is the text of
the segments (as the decoder half finishes them, before the gateway's table votes) whose boxes overlap
its ink box (left to right); ``exact`` when that is the number,
``merged`` when it is one whitespace token of a longer reading (two cells read as one segment) and
``missing`` when no segment of its row covers it (rows left unsplit): structure matters, left out of
the shares; else one of ``minus_lost`` (the leading ``-`` dropped),
``one_lost`` (a ``1`` after the sign dropped), ``other``.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python bench/number_cells.py [--pages 6] [--seed 0] [--lang en]
[--show 10]``: per page its counts, ``--show`` examples, then per class of number (``-1...``,
``-...``, ``(...)``, other) numbers read exactly / numbers.
"""

from __future__ import annotations

import argparse
import pathlib
import random
import sys
import time
from collections import Counter
from typing import Any

from PIL import Image

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.table_pages import render_table_page  # noqa: E402 - after sys.path

#: A segment over this many times a cell's ink height spans several rows: no reading of the cell.
TALL = 3.0
#: Verdicts left out of the shares read exactly: structure, not reading (:func:`verdict`).
STRUCTURE = ("merged", "missing")


def signed_number(rng: random.Random) -> str:
    """A numeric cell biased to signs: negatives with and without a leading ``1``, accounting
    negatives, signed percentages and decimals, and positives with thousands marks."""
    kind = rng.random()
    if kind < 0.2:  # a leading 1 after the sign: -1, -1,234, -11,234, -1.5%
        return rng.choice((f"-{rng.randint(1, 19)}", f"-{rng.randint(100, 199)}", f"-{rng.randint(1000, 1999):,}",
                           f"-{rng.randint(10000, 19999):,}", f"-{rng.uniform(1, 2):.2f}%"))
    if kind < 0.45:
        return f"-{rng.randint(2, 99999):,}"
    if kind < 0.55:
        return f"({rng.randint(100, 99999):,})"
    if kind < 0.65:
        return f"{rng.uniform(-120, 120):.2f}%"
    if kind < 0.75:
        return f"{rng.uniform(-0.2, 0.2):.4f}"
    if kind < 0.9:
        return f"{rng.randint(1000, 99999):,}"
    return f"{rng.uniform(0, 9999):,.2f}"


def number_class(text: str) -> str:
    """``-1`` (a sign then a 1), ``-`` (another negative), ``(`` (accounting negative) or ``+``."""
    if text.startswith("-1"):
        return "-1"
    if text.startswith("-"):
        return "-"
    return "(" if text.startswith("(") else "+"


def verdict(truth: str, read: str) -> str:
    """How ``read`` (the reading of the cell's segments) stands to ``truth`` (the printed number)."""
    if read == truth:
        return "exact"
    if not read:
        return "missing"
    if truth in read.split() and read != truth:
        return "merged"
    if truth.startswith("-") and read == truth[1:]:
        return "minus_lost"
    if truth.startswith("-1") and read in (truth[:1] + truth[2:], truth[:1] + truth[2:].lstrip(",")):
        return "one_lost"
    return "other"


def cell_readings(boxes: list[tuple[float, ...]], segments: list) -> list[str]:
    """The reading of each ink box in ``boxes`` (x0, y0, x1, y1 page pixels): the texts of the
    ``segments`` (``.box``, ``.text``) overlapping it by at least half its height and a third of its
    width, left to right, joined by one space; a segment over :data:`TALL` times the box's height (rows
    the row split left together: a structure matter) is not a reading of it."""
    out = []
    for x0, y0, x1, y1 in boxes:
        hits = []
        for s in segments:
            sx0, sy0, sx1, sy1 = s.box
            dy = min(y1, sy1) - max(y0, sy0)
            dx = min(x1, sx1) - max(x0, sx0)
            if dy >= 0.5 * (y1 - y0) and dx >= (x1 - x0) / 3 and sy1 - sy0 <= TALL * (y1 - y0):
                hits.append((sx0, s.text))
        out.append(" ".join(t for _, t in sorted(hits)).strip())
    return out


def read_segments(ours: Any, image: Image.Image) -> list[Any]:
    """The page's segments as the decoder half finishes them (``.text``, ``.box`` page pixels), before
    the gateway joins them into cells: ``ours`` a :class:`bench.tables.Ours`."""
    from gateway.types import SegmentText
    from models.inprocess import segment_texts

    encoded = ours.enc.encode_batch([ours.enc.preprocess(image, "lines")])[0]
    return [SegmentText(index=i, text=text, box=s.box, join=s.join, generated_tokens=n, confidence=1.0)
            for i, ((text, n), s) in enumerate(zip(segment_texts(ours.dec, encoded.segments), encoded.segments,
                                                   strict=True))]


def main(argv: list[str] | None = None) -> int:
    """Read the pages, print per page, examples and per class of number."""
    from bench.tables import Ours

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pages", type=int, default=6)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lang", default="en", choices=("en", "zh", "any"))
    p.add_argument("--show", type=int, default=10)
    args = p.parse_args(argv)
    ours = Ours()
    tot: Counter = Counter()
    seconds = 0.0
    for k in range(args.pages):
        page = render_table_page(args.seed * 1000 + k, lang=None if args.lang == "any" else args.lang,
                                 skew_deg=0.0, numbers=signed_number)
        t0 = time.perf_counter()
        segments = read_segments(ours, page.image)
        seconds += time.perf_counter() - t0
        reads = cell_readings(page.number_boxes, segments)
        counts: Counter = Counter()
        shown = 0
        for truth, read in zip(page.numbers, reads, strict=True):
            v, c = verdict(truth, read), number_class(truth)
            counts[v] += 1
            tot[(c, v)] += 1
            if v not in ("exact", *STRUCTURE) and shown < args.show:
                print(f"    {v:10} {truth!r} -> {read!r}")
                shown += 1
        print(f"page {k} {page.lang} {page.rules} {page.fill}: "
              + " ".join(f"{v} {n}" for v, n in counts.most_common()), flush=True)
    print(f"pages {args.pages}, ours {seconds:.1f} s")
    for c in ("-1", "-", "(", "+", "all"):
        row = {v: sum(n for (cc, vv), n in tot.items() if vv == v and c in (cc, "all")) for v in
               ("exact", *STRUCTURE, "minus_lost", "one_lost", "other")}
        scored = sum(row.values()) - sum(row[v] for v in STRUCTURE)
        print(f"class {c:3}: exact {row['exact']}/{scored} = {100 * row['exact'] / max(1, scored):.2f} %  "
              + " ".join(f"{v} {n}" for v, n in row.items() if v != "exact"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
