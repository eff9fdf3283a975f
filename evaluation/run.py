r"""``inkstream eval DIR``: CER / WER of a folder of documents with ground truth, through the running
stack (``--gateway URL``), in-process (``--in-process``: encoder half + decoder half + greedy loop),
and with Tesseract on the same pages when the ``tesseract`` binary is installed.

Documents: every ``NAME.{png,jpg,jpeg,tif,tiff,bmp,webp,pdf}`` under DIR (recursively) with a
``NAME.gt.txt`` beside it. Multi-page ground truth separates pages with a form feed (``\f``).
Scoring (as the shared evaluation corpus prescribes, ``../shared/eval/README.md`` beside a checkout):
both texts are NFC-normalised (Unicode UAX #15, so a decomposed accent counts as one character),
then every run of whitespace (spaces, newlines, form feeds) is folded to one space.
CER = Levenshtein distance / reference characters (rapidfuzz); WER = word-level edit distance /
reference words (jiwer). A ``~`` in the ground truth (UNLV-ISRI: a character the transcriber could not
encode) is masked in the CER: it is not counted in the reference length and no edit at its place
counts. "overall" sums edits and reference lengths
over all documents (micro average).

Page rasterisation: in-process, every page is prepared by the gateway's own functions
(:mod:`inkstream.page_image`: PDF pages rendered, image frames normalised and shrunk, to the encoder
mode's ``page_long_side_px``), so its figures are the stack's; for Tesseract at 200 dpi. Through the gateway
the original file is uploaded (``POST {gateway}/v1/ocr``, multipart field ``file``, ``format=text``).
Timings are wall-clock seconds per document; Tesseract runs with one thread (``OMP_THREAD_LIMIT=1``).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import pathlib
import re
import shutil
import sys
import time
from dataclasses import dataclass

from evaluation.engines import (
    Engine,
    GatewayEngine,
    InProcessEngine,
    RapidOCREngine,
    TesseractEngine,
    find_documents,
)
from evaluation.score import Score, score


@dataclass
class DocResult:
    """One engine on one document: score, pages and wall seconds (``error`` set if it failed)."""

    doc: str
    score: Score | None
    pages: int
    seconds: float
    error: str = ""


def run_engine(engine: Engine, docs: list[tuple[pathlib.Path, pathlib.Path]], root: pathlib.Path,
               verbose: bool = True, concurrency: int = 1) -> list[DocResult]:
    """OCR and score every document with ``engine``, ``concurrency`` documents at a time (threads;
    results in document order); failures are recorded, not raised.
    """

    def one(item: tuple[pathlib.Path, pathlib.Path]) -> DocResult:
        doc, gt = item
        rel = str(doc.relative_to(root))
        t0 = time.perf_counter()
        try:
            text, pages = engine.ocr(doc)
            res = DocResult(rel, score(text, gt.read_text(encoding="utf-8")), pages, time.perf_counter() - t0)
        except Exception as exc:  # noqa: BLE001 - one bad document must not stop the evaluation
            res = DocResult(rel, None, 0, time.perf_counter() - t0, f"{type(exc).__name__}: {exc}")
        if verbose:
            print(f"  [{engine.name}] {format_row(res)}", file=sys.stderr, flush=True)
        return res

    if concurrency <= 1:
        return [one(d) for d in docs]
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        return list(pool.map(one, docs))


def format_row(r: DocResult) -> str:
    """One table row: document, CER %, WER %, pages, s/page."""
    if r.score is None:
        return f"{r.doc:<45} ERROR {r.error[:80]}"
    return (f"{r.doc:<45} CER {100 * r.score.cer:6.2f}%  WER {100 * r.score.wer:6.2f}%  "
            f"pages {r.pages:3d}  {r.seconds / max(1, r.pages):6.2f} s/page")


def summary(results: list[DocResult]) -> tuple[Score, int, float]:
    """(summed Score over scored documents, pages, seconds)."""
    total = Score(0, 0, 0, 0)
    for r in results:
        if r.score is not None:
            total = total + r.score
    return total, sum(r.pages for r in results), sum(r.seconds for r in results)


def print_table(engine_name: str, results: list[DocResult]) -> None:
    """Per-document rows and the overall line of one engine, on stdout."""
    print(f"\n== {engine_name}")
    for r in results:
        print(format_row(r))
    total, pages, secs = summary(results)
    failed = sum(1 for r in results if r.score is None)
    print(f"{'overall':<45} CER {100 * total.cer:6.2f}%  WER {100 * total.wer:6.2f}%  pages {pages:3d}  "
          f"{secs / max(1, pages):6.2f} s/page (sum of per-document latencies)"
          + (f"  ({failed} failed)" if failed else ""))


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``inkstream eval``; exit code 0, 2 for bad arguments, 1 if every document failed."""
    p = argparse.ArgumentParser(prog="inkstream eval", description=__doc__.split("\n\n")[0])
    p.add_argument("dir", help="folder of documents with NAME.gt.txt ground truth (searched recursively)")
    p.add_argument("--gateway", default=os.environ.get("INKSTREAM_GATEWAY", ""), help="gateway base URL, e.g. http://127.0.0.1:8080")
    p.add_argument("--in-process", action="store_true", help="run encoder + decoder halves here (no services)")
    p.add_argument("--model", default=None, help="checkpoint dir for --in-process (default: embedded compact)")
    p.add_argument("--threads", type=int, default=1, help="torch threads for --in-process")
    p.add_argument("--no-tesseract", action="store_true", help="skip the Tesseract comparison")
    p.add_argument("--tesseract-lang", default="eng", help="Tesseract language(s), e.g. chi_sim+eng for Chinese")
    p.add_argument("--rapidocr", action="store_true", help="also run RapidOCR (PP-OCRv6) on the same documents")
    p.add_argument("--include", default="", help="only documents whose relative path matches this regex")
    p.add_argument("--exclude", default="", help="skip documents whose relative path matches this regex")
    args = p.parse_args(list(argv or []))
    if not args.gateway and not args.in_process:
        print("inkstream eval: give --gateway URL (running stack) or --in-process", file=sys.stderr)
        return 2
    root = pathlib.Path(args.dir)
    try:
        docs = find_documents(root)
    except FileNotFoundError as e:
        print(f"inkstream eval: {e}", file=sys.stderr)
        return 2
    docs = [(d, g) for d, g in docs if (not args.include or re.search(args.include, str(d.relative_to(root))))
            and not (args.exclude and re.search(args.exclude, str(d.relative_to(root))))]
    if not docs:
        print(f"inkstream eval: no documents with NAME.gt.txt under {root}", file=sys.stderr)
        return 2
    engines: list[Engine] = []
    if args.gateway:
        engines.append(GatewayEngine(args.gateway))
    if args.in_process:
        engines.append(InProcessEngine(args.model, args.threads))
    if args.rapidocr:
        engines.append(RapidOCREngine())
    if not args.no_tesseract and shutil.which("tesseract"):
        engines.append(TesseractEngine(args.tesseract_lang))
    all_failed = True
    for eng in engines:
        results = run_engine(eng, docs, root)
        print_table(eng.name, results)
        all_failed &= all(r.score is None for r in results)
    return 1 if all_failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
