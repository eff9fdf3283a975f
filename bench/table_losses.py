"""Why cells are lost on ``bench/tables.py``'s pages: each body cell not matched exactly, by cause.

Causes (first that applies), from the cell's truth text and the predicted cells and page text:

* ``merged``: the text is a whitespace token of a predicted cell holding more tokens (two cells read
  as one: a missed column gutter or row);
* ``split``: the text with spaces removed is inside a predicted cell's text, or is the concatenation
  of adjacent predicted cells of one row (a cell cut in two, or a space inserted);
* ``sep_swap`` (``,`` / ``.`` exchanged), ``minus_lost`` (leading ``-`` dropped), ``paren_lost``
  (``(``/``)`` dropped or changed), ``digits`` (a digit changed, added or dropped), ``label`` (a
  non-numeric cell misread): the most similar unmatched predicted cell (difflib ratio >= 0.6) differs
  that way;
* ``missing``: nothing like it is read (in the page text: ``in_text`` is counted beside).

Run: ``OMP_NUM_THREADS=1 .venv/bin/python bench/table_losses.py [--pages 4] [--seed 0] [--start 0]
[--show 5]``; per page its counts by cause and ``--show`` examples (truth -> read), then the totals.
"""

from __future__ import annotations

import argparse
import difflib
import pathlib
import re
import sys
from collections import Counter

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.table_pages import render_table_page  # noqa: E402 - after sys.path
from bench.tables import Ours, page_spec  # noqa: E402

_NUM = re.compile(r"^[-(]?[\d,.]+%?\)?$")


def _misread(truth: str, read: str) -> str:
    """The cause of ``truth`` read as ``read`` (two different strings)."""
    if not _NUM.match(truth):
        return "label"
    if truth.translate(str.maketrans(",.", ".,")) == read:
        return "sep_swap"
    if truth.startswith("-") and read == truth[1:]:
        return "minus_lost"
    if truth.startswith("(") and read.strip("()|[]{}") == truth.strip("()"):
        return "paren_lost"
    if re.sub(r"\D", "", truth) == re.sub(r"\D", "", read):
        return "punct_other"
    return "digits"


def causes(body: list[list[str]], cells: list, text: str) -> tuple[Counter, list[tuple[str, str, str]]]:
    """(count by cause, [(cause, truth, read)]) of the body cells of ``body`` not read exactly as one
    of ``cells`` (objects with ``row``, ``column``, ``text``); ``text`` the page's text."""
    have = Counter(" ".join(c.text.split()) for c in cells)
    lost: list[str] = []
    for t in (c for row in body for c in row):
        if have[t] > 0:
            have[t] -= 1
        else:
            lost.append(t)
    spare = [t for t, n in have.items() for _ in range(n)]
    by_row: dict[int, list] = {}
    for c in cells:
        by_row.setdefault(c.row, []).append(c)
    pairs = {"".join(a.text.split()) + "".join(b.text.split())
             for row in by_row.values() for a, b in zip(sorted(row, key=lambda c: c.column),
                                                        sorted(row, key=lambda c: c.column)[1:], strict=False)}
    counts: Counter = Counter()
    out: list[tuple[str, str, str]] = []
    tokens = set(text.split())
    for t in lost:
        squeezed = "".join(t.split())
        holder = next((c.text for c in cells if t in c.text.split() and len(c.text.split()) > len(t.split())), None)
        if holder is not None:
            cause, read = "merged", holder
        elif squeezed in pairs or any(squeezed in "".join(s.split()) and s != t for s in spare):
            cause, read = "split", next((s for s in spare if squeezed in "".join(s.split())), "(two cells)")
        else:
            best = max(spare, key=lambda s: difflib.SequenceMatcher(None, t, s).ratio(), default="")
            if best and difflib.SequenceMatcher(None, t, best).ratio() >= 0.6:
                cause, read = _misread(t, best), best
                spare.remove(best)
            else:
                cause, read = "missing", ""
        counts[cause] += 1
        counts["in_text"] += t in tokens
        out.append((cause, t, read))
    return counts, out


def main(argv: list[str] | None = None) -> int:
    """Read the pages, print the lost cells by cause."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pages", type=int, default=4)
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--show", type=int, default=5)
    args = p.parse_args(argv)
    ours, total, n_cells = Ours(), Counter(), 0
    for k in range(args.start, args.start + args.pages):
        spec = page_spec(args.seed, k)
        page = render_table_page(**spec)
        res = ours.read(page)
        cells = [c for b in res.blocks if b.type == "table" for c in b.cells]
        counts, lost = causes(page.body, cells, res.text)
        n = sum(len(r) for r in page.body)
        n_cells += n
        total += counts
        print(f"table_{k} {page.lang} {page.rules} {page.fill}: {n - len(lost)}/{n} cells; "
              + " ".join(f"{c} {v}" for c, v in counts.most_common()), flush=True)
        for cause, t, read in lost[: args.show] if args.show >= 0 else lost:
            print(f"    {cause:11} {t!r} -> {read!r}")
    lost_n = sum(v for c, v in total.items() if c != "in_text")
    print(f"pages {args.pages}: {n_cells - lost_n}/{n_cells} cells; lost by cause: "
          + " ".join(f"{c} {v}" for c, v in total.most_common()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
