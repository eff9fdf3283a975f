"""Every line of generated scans read on both towers of the bilingual checkpoint: which tower reads which
degradation better, and what a routing rule would give, without re-reading.

``python -m training.compact.tower_lines --seeds 30000 30036 --cache runs/tower_lines.jsonl [--rules]``

1. Reads documents ``make_document(seed)`` (:mod:`training.compact.scan_docs`; pick seeds that no bench
   scores: ``bench/receipts.py`` reads 10,000 on, ``bench/calibration.py`` 20,000 on, the confidence fit
   0-47) twice, as the stack reads them (:func:`training.compact.read_scored.read_scored`) but with
   every line forced to the Latin tower, then to the PP tower (:func:`read_both`). Each line also keeps
   what routing sees of it: the script head's decision, the read head's doubt (nats), the ink contrast
   (gray levels) and the tower the served rules give it. Cached as JSON lines (one document a line).
2. ``--rules`` prints, from the cache, the order-free CER (:func:`page_cer`) per kind of document and
   over all of them for each tower alone, for the served routing, and for the page rules of
   :func:`rule_routes`; and per tower the CER of the lines where the two towers agree and disagree.
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import pathlib
import sys
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np


def chars(text: str) -> str:
    """``text`` NFC-normalised without whitespace (what order-free CER counts)."""
    return "".join(c for c in unicodedata.normalize("NFC", text) if not c.isspace())


def order_free(hyp: str, ref: str) -> int:
    """Edits between the multisets of the characters of ``hyp`` and ``ref`` (no whitespace)."""
    h, r = collections.Counter(chars(hyp)), collections.Counter(chars(ref))
    return max(sum(h.values()), sum(r.values())) - sum((h & r).values())


def read_both(enc, dec, image) -> dict:
    """``image`` read with every line on the Latin tower, then on the PP tower -> ``{"latin": [line],
    "pp": [line], "cjk", "doubts", "contrasts", "served"}``: per reading the segments (``text``,
    ``confidence``, ``tokens``, ``box``) in reading order; per detected line the script head's decision,
    the doubt, the ink contrast and the served route (True: PP). Raises what the halves raise.
    """
    from models.compact.line.doubt import doubt_routes
    from models.compact.line.grain import paper_grain
    from models.compact.line.image import WIDTH_MULTIPLE, normalised_width
    from models.compact.line.towers import page_routes
    from models.compact.page import prepare
    from training.compact.read_scored import read_scored

    seen: dict = {}

    def forced(to_pp: bool) -> Callable:
        def route(crops: list, page: Any = None) -> tuple[list[bool], list, list]:
            lines = enc.prepare_lines(crops)
            n_frames = [normalised_width(c.width, c.height) // (WIDTH_MULTIPLE // 2) for c in crops]
            cjk, tokens, doubts = enc._pp.script_lines(lines, n_frames)
            contrasts = [prepare.ink_contrast(c) for c in crops]
            doubtful, share, alone, faint, scan, scan_doubt, grain_above = enc._pp.bars
            served = doubt_routes(page_routes(cjk), doubts or [0.0] * len(crops), doubtful, share, alone, contrasts,
                                  faint, scan, scan_doubt, paper_grain(page) if page is not None else 0.0,
                                  grain_above)
            seen.update(cjk=[bool(c) for c in cjk], doubts=[round(float(d), 4) for d in doubts or []],
                        contrasts=[round(c, 1) for c in contrasts], served=served)
            return [to_pp] * len(crops), list(tokens), [None] * len(crops)
        return route

    out: dict = {}
    for name, to_pp in (("latin", False), ("pp", True)):
        enc.route, enc.numbers_to_pp = forced(to_pp), to_pp
        try:
            lines = read_scored(enc, dec, image)
        finally:
            del enc.route
        out[name] = [{"text": ln.text, "confidence": round(ln.confidence, 5), "tokens": ln.tokens,
                      "box": [round(v, 1) for v in ln.box]} for ln in lines]
    return {**out, **seen}


def read_documents(seeds: Iterable[int]) -> Iterator[dict]:
    """One record per document: seed, kind, dpi, printed ``pieces`` [[text, box]] and :func:`read_both`."""
    from training.compact.read_scored import load_halves
    from training.compact.scan_docs import make_document

    enc, dec = load_halves(None)
    for seed in seeds:
        doc = make_document(seed)
        yield {"seed": seed, "kind": doc.kind, "dpi": doc.dpi,
               "pieces": [[t, [round(v, 1) for v in b]] for t, b in doc.pieces], **read_both(enc, dec, doc.image)}


def _iou(a: Sequence[float], b: Sequence[float]) -> float:
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    inter = max(0.0, w) * max(0.0, h)
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def line_pairs(doc: dict) -> list[tuple[int, int]]:
    """(Latin segment, PP segment) index pairs of the same line of ``doc``: each Latin segment with the
    PP segment whose box overlaps it most (IoU >= 0.5), each PP segment used once.
    """
    pairs, used = [], set()
    for i, a in enumerate(doc["latin"]):
        scores = [(_iou(a["box"], b["box"]), j) for j, b in enumerate(doc["pp"]) if j not in used]
        best = max(scores, default=(0.0, -1))
        if best[0] >= 0.5:
            pairs.append((i, best[1]))
            used.add(best[1])
    return pairs


def page_cer(doc: dict, pick_pp: Sequence[bool] | bool) -> tuple[int, int]:
    """(order-free edits, printed characters) of ``doc`` read with each paired line on the tower
    ``pick_pp`` says (per pair of :func:`line_pairs`, or one bool for all); unpaired segments come
    from the Latin reading when ``pick_pp`` is a list, else from the chosen reading.
    """
    ref = "".join(t for t, _ in doc["pieces"])
    if isinstance(pick_pp, bool):
        hyp = "".join(s["text"] for s in doc["pp" if pick_pp else "latin"])
    else:
        pairs = line_pairs(doc)
        paired = {i for i, _ in pairs}
        hyp = "".join(doc["pp"][j]["text"] if p else doc["latin"][i]["text"]
                      for (i, j), p in zip(pairs, pick_pp, strict=True))
        hyp += "".join(s["text"] for i, s in enumerate(doc["latin"]) if i not in paired)
    return order_free(hyp, ref), len(chars(ref))


def served_pp(doc: dict) -> bool:
    """Whether the served rules send most of ``doc``'s lines to the PP tower (a page read there)."""
    return sum(doc["served"]) * 2 > len(doc["served"])


def rule_routes(doc: dict, contrast_below: float, doubt_above: float) -> bool:
    """A page rule: the whole page to the PP tower when its median line contrast is below
    ``contrast_below`` and its Latin lines' median doubt is above ``doubt_above`` (the served
    scan rule's shape, :func:`models.compact.line.doubt.doubt_routes`), or when the served rules send
    most of its lines there (:func:`served_pp`).
    """
    lat = [d for d, c in zip(doc["doubts"], doc["cjk"], strict=True) if not c]
    med_c = float(np.median(doc["contrasts"])) if doc["contrasts"] else 255.0
    return bool(served_pp(doc) or (lat and med_c < contrast_below and float(np.median(lat)) > doubt_above))


def pair_truths(doc: dict, pairs: Sequence[tuple[int, int]]) -> list[str]:
    """The printed text of each pair's line: the pieces at least half inside its Latin segment's box."""
    out = []
    for i, _ in pairs:
        b = doc["latin"][i]["box"]
        own = []
        for text, p in doc["pieces"]:
            w = min(b[2], p[2]) - max(b[0], p[0])
            h = min(b[3], p[3]) - max(b[1], p[1])
            if max(0.0, w) * max(0.0, h) >= 0.5 * max(1e-6, (p[2] - p[0]) * (p[3] - p[1])):
                own.append((p[0], text))
        out.append(" ".join(t for _, t in sorted(own)))
    return out


def line_choices(doc: dict) -> dict[str, list[bool]]:
    """Per-line routings of ``doc``'s pairs (True: the PP reading) to score with :func:`page_cer`:
    ``oracle`` (the reading nearer the truth), ``disagree_pp`` (the PP reading where the two differ),
    ``disagree_conf`` (where they differ, the reading of the higher decoder confidence).
    """
    pairs = line_pairs(doc)
    truths = pair_truths(doc, pairs)
    out: dict[str, list[bool]] = {"oracle": [], "disagree_pp": [], "disagree_conf": []}
    for (i, j), truth in zip(pairs, truths, strict=True):
        a, b = doc["latin"][i], doc["pp"][j]
        out["oracle"].append(order_free(b["text"], truth) < order_free(a["text"], truth))
        differ = chars(a["text"]) != chars(b["text"])
        out["disagree_pp"].append(differ)
        out["disagree_conf"].append(differ and b["confidence"] > a["confidence"])
    return out


def _pct(t: Sequence[int]) -> str:
    return f"{100 * t[0] / max(1, t[1]):6.2f}%"


def _line_rule(doc: dict, name: str) -> bool | list[bool]:
    """The per-line routing ``name`` of :func:`line_choices`; a page served on the PP tower stays there."""
    return True if served_pp(doc) else line_choices(doc)[name]


def print_rules(docs: list[dict]) -> None:
    """Print the tables of the module docstring's step 2."""
    kinds = sorted({d["kind"] for d in docs})
    fixed: dict[str, Callable[[dict], bool | list[bool]]] = {
        "latin": lambda d: False, "pp": lambda d: True,
        "served": served_pp,
    }
    for c in (230.0, 240.0, 250.0, 256.0):
        for t in (0.0, 0.05, 0.08, 0.1):
            fixed[f"page c<{c:.0f} d>{t}"] = functools.partial(rule_routes, contrast_below=c, doubt_above=t)
    for name in ("oracle", "disagree_pp", "disagree_conf"):
        fixed[f"line {name}"] = functools.partial(_line_rule, name=name)
    print(f"{'routing':<24}" + "".join(f"{k[:16]:>18}" for k in kinds) + f"{'all':>10}")
    for name, rule in fixed.items():
        per: dict[str, list[int]] = {k: [0, 0] for k in [*kinds, "all"]}
        for d in docs:
            e, n = page_cer(d, rule(d))
            for k in (d["kind"], "all"):
                per[k][0] += e
                per[k][1] += n
        print(f"{name:<24}" + "".join(f"{_pct(per[k]):>18}" for k in kinds) + f"{_pct(per['all']):>10}")
    agree = {"agree": [0, 0, 0], "differ": [0, 0, 0]}  # latin edits, pp edits, chars
    for d in docs:
        pairs = line_pairs(d)
        for (i, j), truth in zip(pairs, pair_truths(d, pairs), strict=True):
            a, b = d["latin"][i]["text"], d["pp"][j]["text"]
            row = agree["agree" if chars(a) == chars(b) else "differ"]
            row[0] += order_free(a, truth)
            row[1] += order_free(b, truth)
            row[2] += len(chars(truth))
    for k, (el, ep, n) in agree.items():
        print(f"lines where the towers {k}: {n} chars, Latin {100 * el / max(1, n):.2f}%, "
              f"PP {100 * ep / max(1, n):.2f}%")


def main(argv: list[str] | None = None) -> int:
    """Read the missing seeds into the cache; with ``--rules`` print the tables."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs=2, default=(30_000, 30_036), metavar=("FIRST", "STOP"))
    ap.add_argument("--cache", default="runs/tower_lines.jsonl")
    ap.add_argument("--rules", action="store_true")
    args = ap.parse_args(argv)
    cache = pathlib.Path(args.cache)
    docs = [json.loads(s) for s in cache.read_text().splitlines()] if cache.is_file() else []
    have = {d["seed"] for d in docs}
    missing = [s for s in range(*args.seeds) if s not in have]
    if missing:
        cache.parent.mkdir(parents=True, exist_ok=True)
        with cache.open("a", encoding="utf-8") as fh:
            for doc in read_documents(missing):
                fh.write(json.dumps(doc, ensure_ascii=False) + "\n")
                fh.flush()
                docs.append(doc)
                print(f"read seed {doc['seed']} ({doc['kind']})", file=sys.stderr, flush=True)
    docs = [d for d in docs if d["seed"] in range(*args.seeds)]
    if args.rules:
        print_rules(docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
