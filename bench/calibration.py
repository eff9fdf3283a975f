"""Is the page confidence a probability you can act on? ECE and the flag rates of ``low_confidence``.

Pages: ``--docs`` generated documents (:func:`training.compact.scan_docs.make_document`, seeds from
``--seed``, default 20,000: never fitted on, :mod:`training.compact.fit_confidence` fits seeds 0-47),
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
that do; goal <= 0.05). Last line: ``calibration: ece E flagged_above_5pct A flagged_at_most_1pct B
raw_ece R``.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python bench/calibration.py [--docs 24] [--eval-pages]``.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from receipts import order_free_edits  # noqa: E402 - after the sys.path insert above

from gateway.output.signal import LOW_CONFIDENCE, SegmentScore, page_confidence, page_warnings  # noqa: E402
from training.compact.fit_confidence import page_ece  # noqa: E402
from training.compact.read_scored import load_halves, read_scored  # noqa: E402
from training.compact.scan_docs import make_document  # noqa: E402

EVAL_PAGES = ROOT.parent / "shared" / "eval" / "pages"


def _pages(args: argparse.Namespace):
    """(name, image, truth text) of every page to score."""
    for k in range(args.docs):
        d = make_document(args.seed + k)
        yield f"seed{args.seed + k} {d.kind}", d.image, "\n".join(d.truth)
    for k in range(args.clean_docs):
        d = make_document(args.seed + k, degrade=False)
        yield f"seed{args.seed + k} {d.kind}", d.image, "\n".join(d.truth)
    if args.eval_pages:
        from evaluation.engines import find_documents, iter_pages

        for doc, gt in find_documents(EVAL_PAGES):
            if doc.suffix.lower() == ".pdf":
                continue
            img = next(iter(iter_pages(doc, 2200)))
            yield f"eval {doc.name}", img, gt.read_text(encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    """Read the pages, print per-page figures and the calibration summary."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=24)
    ap.add_argument("--seed", type=int, default=20_000)
    ap.add_argument("--clean-docs", type=int, default=12, help="documents also printed cleanly (degrade=False)")
    ap.add_argument("--eval-pages", action="store_true", help="add the single pages of ../shared/eval/pages")
    ap.add_argument("--model", default=None)
    args = ap.parse_args(argv)
    from models.compact import checkpoint as ckpt
    from models.compact import default_checkpoint_dir

    model_id, _ = ckpt.checkpoint_identity(args.model or default_checkpoint_dir())
    enc, dec = load_halves(args.model)
    rows = []
    for name, image, truth in _pages(args):
        lines = read_scored(enc, dec, image)
        segs = [SegmentScore(ln.text, ln.confidence, ln.tokens) for ln in lines]
        text = "\n".join(ln.text for ln in lines)
        conf, warnings = page_warnings(segs, text, model_id)
        raw = page_confidence(segs)
        edits, n = order_free_edits(text, truth)
        cer = edits / max(1, n)
        rows.append((conf, raw, cer, LOW_CONFIDENCE in warnings))
        print(f"{name:<42} CER {100 * cer:6.2f}%  confidence {conf:.3f} (raw {raw:.3f})  {','.join(warnings)}",
              flush=True)
    ece = page_ece([(c, e) for c, _, e, _ in rows])
    raw_ece = page_ece([(r, e) for _, r, e, _ in rows])
    bad = [f for _, _, e, f in rows if e > 0.05]
    good = [f for _, _, e, f in rows if e <= 0.01]
    above = sum(bad) / len(bad) if bad else float("nan")
    at_most = sum(good) / len(good) if good else float("nan")
    print(f"pages {len(rows)}: CER > 5 % {len(bad)}, CER <= 1 % {len(good)}")
    print(f"calibration: ece {ece:.4f} flagged_above_5pct {above:.3f} flagged_at_most_1pct {at_most:.3f} "
          f"raw_ece {raw_ece:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
