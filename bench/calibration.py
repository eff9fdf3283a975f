"""Is the page confidence a probability you can act on? ECE and the flag rates of ``low_confidence``.

Pages: ``--docs`` generated documents (:func:`training.compact.scan_docs.make_document`, seeds from
``--seed``, default 20,000: never fitted on, :mod:`training.compact.fit_confidence` fits seeds 0-95 and
recalibrates on 96-191),
the first ``--clean-docs`` of them printed cleanly too (``degrade=False``) and, with
``--eval-pages``, the single pages of ../shared/eval/pages. Each is read in this process as
the stack reads it (:func:`training.compact.read_scored.read_scored`: each line's text, raw confidence
and tokens) and given the confidence and warnings the gateway gives it
(:func:`gateway.output.signal.page_warnings` with the model's id: calibrated when
:data:`gateway.output.calibration_tables.TABLES` has it). The raw page confidence (token-weighted
geometric mean, what the gateway reported before) is scored beside it.

A page's CER: generated documents, the order-free CER of its lines against the printed rows
(``bench/receipts.py``'s :func:`order_free_edits`: what the text holds, whatever the reading order);
eval pages, the same against their ground truth.

Printed: per page (kind, CER, calibrated and raw confidence, warnings), then ``ece`` (10 bins,
:func:`training.compact.fit_confidence.page_ece`), ``flagged_above_5pct`` (share of pages with CER > 5 %
that carry ``low_confidence``; goal >= 0.9) and ``flagged_at_most_1pct`` (share of pages with CER <= 1 %
that do; goal <= 0.05), with the counts (``low_confidence on CER > 5 %: k/n, on CER <= 1 %: k/n``), and the
pages read without any text (:func:`no_text_line`: ``no_text_found pages: n, low_confidence on them: k/n``; a
page with ink the model could not read must carry ``low_confidence``, a blank one need not).
Last line: ``calibration: ece E flagged_above_5pct A flagged_at_most_1pct B
raw_ece R``.

Each page's ``unread_ink`` (text-like ink outside every segment per ink inside, which the encoder
sends the gateway: :func:`training.compact.fit_unread.measure`, here on the page as drawn with the
boxes of its lines) enters its confidence and warnings as in the gateway; the mean time the measure
takes per page is printed (``unread_ink_ms``).

``--cache F.jsonl`` keeps each page's lines as read (text, raw confidence, tokens, box, the tower that
read it, the printed text it covers) and its ``unread_ink`` with the page's truth, keyed by the page's
name (a cached page without ``unread_ink`` is drawn again and measured, and the cache rewritten): a second run
with the same cache re-scores without reading (the reading is deterministic), so a change of the
calibration or of the warnings is compared on the same readings.

Defaults: 96 scanned documents and 48 of them printed cleanly (144 pages: 9 above 5 % CER, 59 at or below
1 % with the embedded model; about 3 s a page on one thread), enough to tell a flag rate of 5 % from 20 %.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python bench/calibration.py [--docs 96] [--eval-pages] [--cache F]``.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from receipts import order_free_edits  # noqa: E402 - after the sys.path insert above

from gateway.output.signal import (  # noqa: E402
    LOW_CONFIDENCE,
    NO_TEXT_FOUND,
    SegmentScore,
    page_confidence,
    page_warnings,
)
from training.compact.fit_confidence import page_ece  # noqa: E402

EVAL_PAGES = ROOT.parent / "shared" / "eval" / "pages"


def _pages(args: argparse.Namespace):
    """(name, image factory, truth text, printed pieces) of every page to score; the image is drawn
    only when the page is not in the cache.
    """
    from training.compact.scan_docs import make_document

    for clean, count in ((False, args.docs), (True, args.clean_docs)):
        for k in range(count):
            seed = args.seed + k
            d = make_document(seed, degrade=not clean)
            yield f"seed{seed} {d.kind}", (lambda d=d: d.image), "\n".join(d.truth), d.pieces
    if args.eval_pages:
        from evaluation.engines import find_documents, iter_pages

        for doc, gt in find_documents(EVAL_PAGES):
            if doc.suffix.lower() == ".pdf":
                continue
            yield (f"eval {doc.name}", (lambda doc=doc: next(iter(iter_pages(doc, 2200)))),
                   gt.read_text(encoding="utf-8"), [])


def read_record(halves, name: str, image, truth: str, pieces) -> dict:
    """One page read as the stack reads it (:func:`training.compact.read_scored.read_scored`): ``{"name",
    "truth", "missed", "lines": [{"text", "confidence", "tokens", "box", "tower", "truth"}]}`` (each
    line's ``truth``: the printed pieces it covers, :func:`training.compact.read_scored.match_truth`;
    ``missed``: the pieces no line covers).
    """
    from training.compact.read_scored import match_truth, read_scored

    lines = read_scored(*halves, image)
    missed = match_truth(lines, list(pieces)) if pieces else []
    return {"name": name, "truth": truth, "missed": missed,
            "lines": [{"text": ln.text, "confidence": ln.confidence, "tokens": ln.tokens, "tower": ln.tower,
                       "box": [round(v, 1) for v in ln.box], "truth": ln.truth} for ln in lines]}


def _measure(rec: dict, page) -> float:
    """Measure ``rec``'s ``unread_ink`` on ``page`` with its lines' boxes and keep it in ``rec``; returns
    the seconds the measure took.
    """
    from training.compact.fit_unread import measure

    t0 = time.perf_counter()
    rec["unread_ink"] = measure(page, [ln["box"] for ln in rec["lines"]])
    return time.perf_counter() - t0


def score_record(rec: dict, model_id: str) -> tuple[float, float, float, list[str]]:
    """(calibrated confidence, raw confidence, order-free CER, warnings) of one page record
    (:func:`read_record`), as the gateway would give them for ``model_id``.
    """
    segs = [SegmentScore(ln["text"], ln["confidence"], ln["tokens"], ln.get("tower", "")) for ln in rec["lines"]]
    text = "\n".join(ln["text"] for ln in rec["lines"])
    conf, warnings = page_warnings(segs, text, model_id, float(rec.get("unread_ink", 0.0)))
    edits, n = order_free_edits(text, rec["truth"])
    return conf, page_confidence(segs), edits / max(1, n), warnings


def summary(rows: list[tuple[float, float, float, bool]]) -> dict[str, float]:
    """The bench's figures over (confidence, raw confidence, CER, flagged) rows: ``ece``, ``raw_ece``,
    ``bad`` / ``good`` (pages with CER > 5 % / <= 1 %), ``bad_flagged`` / ``good_flagged`` (how many of
    them carry ``low_confidence``), ``flagged_above_5pct`` / ``flagged_at_most_1pct`` (the shares; NaN
    without such pages).
    """
    bad = [f for _, _, e, f in rows if e > 0.05]
    good = [f for _, _, e, f in rows if e <= 0.01]
    return {"ece": page_ece([(c, e) for c, _, e, _ in rows]), "raw_ece": page_ece([(r, e) for _, r, e, _ in rows]),
            "bad": len(bad), "good": len(good), "bad_flagged": sum(bad), "good_flagged": sum(good),
            "flagged_above_5pct": sum(bad) / len(bad) if bad else float("nan"),
            "flagged_at_most_1pct": sum(good) / len(good) if good else float("nan")}


def no_text_line(warnings: list[list[str]]) -> str:
    """The bench's line on the pages read without text, from every page's warnings:
    ``no_text_found pages: n, low_confidence on them: k/n`` (``n`` pages carry ``no_text_found``, ``k``
    of them ``low_confidence`` too).
    """
    empty = [w for w in warnings if NO_TEXT_FOUND in w]
    flagged = sum(LOW_CONFIDENCE in w for w in empty)
    return f"no_text_found pages: {len(empty)}, low_confidence on them: {flagged}/{len(empty)}"


def main(argv: list[str] | None = None) -> int:
    """Read the pages (or take them from the cache), print per-page figures and the calibration summary."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=96)
    ap.add_argument("--seed", type=int, default=20_000)
    ap.add_argument("--clean-docs", type=int, default=48, help="documents also printed cleanly (degrade=False)")
    ap.add_argument("--eval-pages", action="store_true", help="add the single pages of ../shared/eval/pages")
    ap.add_argument("--model", default=None)
    ap.add_argument("--cache", default=None, help="JSON lines of the pages read (see the module docstring)")
    args = ap.parse_args(argv)
    from models.compact import checkpoint as ckpt
    from models.compact import default_checkpoint_dir

    model_id, _ = ckpt.checkpoint_identity(args.model or default_checkpoint_dir())
    cache = pathlib.Path(args.cache) if args.cache else None
    cached = {}
    if cache and cache.is_file():
        cached = {r["name"]: r for r in map(json.loads, cache.read_text(encoding="utf-8").splitlines())}
    halves = None
    rows, measured, warned = [], [], []
    for name, image, truth, pieces in _pages(args):
        rec = cached.get(name)
        if rec is not None and rec["truth"] == truth and "unread_ink" not in rec:
            measured.append(_measure(rec, image()))
        if rec is None or rec["truth"] != truth:
            if halves is None:
                from training.compact.read_scored import load_halves

                halves = load_halves(args.model)
            page = image()
            rec = read_record(halves, name, page, truth, pieces)
            measured.append(_measure(rec, page))
            if cache:
                cache.parent.mkdir(parents=True, exist_ok=True)
                with cache.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
        conf, raw, cer, warnings = score_record(rec, model_id)
        rows.append((conf, raw, cer, LOW_CONFIDENCE in warnings))
        warned.append(warnings)
        print(f"{name:<42} CER {100 * cer:6.2f}%  confidence {conf:.3f} (raw {raw:.3f})  {','.join(warnings)}",
              flush=True)
    if cache and measured and cached:  # cached pages measured now: kept, so a rerun draws no page
        recs = {r["name"]: r for r in map(json.loads, cache.read_text(encoding="utf-8").splitlines())}
        recs.update({k: v for k, v in cached.items() if "unread_ink" in v})
        cache.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs.values()), encoding="utf-8")
    if measured:
        print(f"unread_ink_ms {1000 * sum(measured) / len(measured):.1f} per page ({len(measured)} pages measured)")
    s = summary(rows)
    print(f"pages {len(rows)}: CER > 5 % {s['bad']}, CER <= 1 % {s['good']}")
    print(f"low_confidence on CER > 5 %: {s['bad_flagged']}/{s['bad']}, on CER <= 1 %: {s['good_flagged']}/{s['good']}")
    print(no_text_line(warned))
    print(f"calibration: ece {s['ece']:.4f} flagged_above_5pct {s['flagged_above_5pct']:.3f} "
          f"flagged_at_most_1pct {s['flagged_at_most_1pct']:.3f} raw_ece {s['raw_ece']:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
