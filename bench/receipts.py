"""Receipts and filled-in forms, printed and scanned: our CER beside RapidOCR's and Tesseract's.

Documents: ``--docs`` seeded documents of :mod:`training.compact.scan_docs` from ``--seed`` on
(thermal and dot-matrix receipts in receipt faces, Chinese receipts, forms with typed values on
underlines and in boxes scanned at 150-200 dpi, the same forms photographed; JPEG on half of them).
The default seeds (10,000 on) are not among those the confidence calibration is fitted on
(:mod:`training.compact.fit_confidence`: 0-1,999).

Each document is written to ``--out`` (``scan_K.png`` + ``scan_K.gt.txt``, a folder ``inkstream eval``
reads) and read by: our model in this process (``evaluation.engines.InProcessEngine``, the default
bilingual checkpoint unless ``--model``; or the running stack with ``--url``), RapidOCR (PP-OCRv6,
one thread) and Tesseract (``eng``; ``chi_sim+eng`` for the Chinese receipts). Scores: CER as
``inkstream eval`` (:func:`evaluation.score.score`) and order-free CER (:func:`order_free_cer`: the
multiset of non-space characters alone, so the order rows are read in does not count).

Run: ``OMP_NUM_THREADS=1 .venv/bin/python bench/receipts.py [--docs 10] [--seed 10000]``. The last
line is ``receipts_cer: OURS rapidocr: R tesseract: T ratio_vs_rapidocr: OURS/R`` (order-free CER over
all documents; < 1: we read better than RapidOCR).
"""

from __future__ import annotations

import argparse
import collections
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluation.score import fold, score  # noqa: E402 - after the sys.path insert above
from training.compact.scan_docs import make_document  # noqa: E402


def order_free_edits(hyp: str, ref: str) -> tuple[int, int]:
    """(edits, reference characters) of the multisets of non-space characters of ``hyp`` and ``ref``
    after :func:`evaluation.score.fold`: edits = max(len(hyp), len(ref)) - common characters, i.e. the
    substitutions + insertions + deletions of the best alignment that may reorder characters.
    """
    h = collections.Counter(c for c in fold(hyp) if not c.isspace())
    r = collections.Counter(c for c in fold(ref) if not c.isspace())
    common = sum((h & r).values())
    return max(sum(h.values()), sum(r.values())) - common, sum(r.values())


def order_free_cer(hyp: str, ref: str) -> float:
    """Order-free CER of one text (:func:`order_free_edits`), 0.0 for an empty reference."""
    e, n = order_free_edits(hyp, ref)
    return e / max(1, n)


def _engines(args: argparse.Namespace) -> dict[str, object]:
    from evaluation.engines import GatewayEngine, InProcessEngine, RapidOCREngine, TesseractEngine

    engines: dict[str, object] = {"ours": GatewayEngine(args.url) if args.url else InProcessEngine(args.model)}
    if not args.ours_only:
        engines["rapidocr"] = RapidOCREngine()
        try:
            engines["tesseract"], engines["tesseract_zh"] = TesseractEngine(), TesseractEngine("chi_sim+eng")
        except FileNotFoundError as e:
            print(f"# {e}", file=sys.stderr)
    return engines


def main(argv: list[str] | None = None) -> int:
    """Write the documents, read them with every engine, print per-document and total figures."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=10)
    ap.add_argument("--seed", type=int, default=10_000)
    ap.add_argument("--out", default="runs/receipts")
    ap.add_argument("--model", default=None, help="checkpoint directory (default: the embedded one)")
    ap.add_argument("--url", default=None, help="read through a running gateway instead of in-process")
    ap.add_argument("--ours-only", action="store_true", help="skip RapidOCR and Tesseract")
    args = ap.parse_args(argv)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    docs = []
    for k in range(args.docs):
        d = make_document(args.seed + k)
        path = out / f"scan_{k}.png"
        d.image.save(path)
        (out / f"scan_{k}.gt.txt").write_text("\n".join(d.truth) + "\n", encoding="utf-8")
        docs.append((path, d))
    engines = _engines(args)
    totals: dict[str, list[int]] = {name: [0, 0, 0, 0] for name in ("ours", "rapidocr", "tesseract") if
                                    name in engines}  # order-free edits and chars, CER edits and chars
    print(f"{'document':<28}" + "".join(f"{n + ' cer/of':>22}" for n in totals))
    for path, d in docs:
        ref, cells = "\n".join(d.truth), []
        for name in totals:
            engine = engines["tesseract_zh" if name == "tesseract" and d.kind == "receipt_zh" else name]
            text, _ = engine.ocr(path)  # type: ignore[attr-defined]
            s, (of, n) = score(text, ref), order_free_edits(text, ref)
            for j, v in enumerate((of, n, s.char_edits, s.ref_chars)):
                totals[name][j] += v
            cells.append(f"{100 * s.cer:9.2f}% {100 * of / max(1, n):9.2f}%")
        print(f"{path.stem + ' ' + d.kind + ' ' + str(d.dpi):<28}" + "".join(f"{c:>22}" for c in cells), flush=True)
    of = {name: t[0] / max(1, t[1]) for name, t in totals.items()}
    for name, t in totals.items():
        print(f"{name}: CER {100 * t[2] / max(1, t[3]):.2f}%, order-free {100 * of[name]:.2f}%")
    line = f"receipts_cer: {of['ours']:.4f}"
    if "rapidocr" in of:
        line += f" rapidocr: {of['rapidocr']:.4f}"
    if "tesseract" in of:
        line += f" tesseract: {of['tesseract']:.4f}"
    if "rapidocr" in of:
        line += f" ratio_vs_rapidocr: {of['ours'] / max(1e-4, of['rapidocr']):.3f}"
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
