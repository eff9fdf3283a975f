r"""``inkstream eval DIR``: CER / WER of a folder of documents with ground truth, through the running
stack (``--gateway URL``), in-process (``--in-process``: encoder half + decoder half + greedy loop),
and with Tesseract on the same pages when the ``tesseract`` binary is installed.

Documents: every ``NAME.{png,jpg,jpeg,tif,tiff,bmp,webp,pdf}`` under DIR (recursively) with a
``NAME.gt.txt`` beside it. Multi-page ground truth separates pages with a form feed (``\f``).
Scoring (as /work/shared/eval/README.md prescribes): both texts are NFC-normalised (Unicode UAX #15,
so a decomposed accent counts as one character), then every run of whitespace (spaces, newlines,
form feeds) is folded to one space. CER = Levenshtein distance / reference characters (rapidfuzz);
WER = word-level edit distance / reference words (jiwer). A ``~`` in the
ground truth (UNLV-ISRI: a character the transcriber could not encode) is masked in the CER: it is
not counted in the reference length and no edit at its place counts. "overall" sums edits and reference lengths
over all documents (micro average).

Page rasterisation: in-process, PDF pages are rendered (pypdfium2) so their long side is the encoder
mode's ``page_long_side_px`` (what the gateway does); for Tesseract at 200 dpi. Through the gateway
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
import subprocess
import sys
import tempfile
import time
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import jiwer
import pypdfium2 as pdfium
from PIL import Image, ImageOps
from rapidfuzz.distance import Levenshtein

import models.compact
from models.images import to_rgb
from models.registry import decoder_half_class, encoder_half_class, family_of

IMAGE_EXTS = {".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".webp"}
DOC_EXTS = IMAGE_EXTS | {".pdf"}
_WS = re.compile(r"\s+")
#: Marks a character the transcriber could not encode (UNLV-ISRI ground truth): not scored in the CER.
MASK_CHAR = "~"


def fold(text: str) -> str:
    """NFC-normalise and fold whitespace runs to one space (strip ends)."""
    return _WS.sub(" ", unicodedata.normalize("NFC", text)).strip()


@dataclass
class Score:
    """Edit counts of one document: character edits / reference chars, word edits / reference words."""

    char_edits: int
    ref_chars: int
    word_edits: int
    ref_words: int

    @property
    def cer(self) -> float:
        """Character error rate: character edits / reference characters (at least 1)."""
        return self.char_edits / max(1, self.ref_chars)

    @property
    def wer(self) -> float:
        """Word error rate: word edits / reference words (at least 1)."""
        return self.word_edits / max(1, self.ref_words)

    def __add__(self, other: Score) -> Score:
        return Score(self.char_edits + other.char_edits, self.ref_chars + other.ref_chars,
                     self.word_edits + other.word_edits, self.ref_words + other.ref_words)


def score(hyp: str, ref: str) -> Score:
    """Score ``hyp`` against ``ref`` after :func:`fold` (see the module docstring)."""
    h, r = fold(hyp), fold(ref)
    rw = r.split()
    if rw:
        out = jiwer.process_words(r, h if h else "")
        word_edits = out.substitutions + out.deletions + out.insertions
    else:
        word_edits = len(h.split())
    if MASK_CHAR in r:
        return Score(_masked_distance(h, r), len(r) - r.count(MASK_CHAR), word_edits, len(rw))
    return Score(Levenshtein.distance(h, r), len(r), word_edits, len(rw))


def _masked_distance(h: str, r: str) -> int:
    """Levenshtein edits of ``h`` against ``r`` where no edit touching a masked reference character
    (``MASK_CHAR``: read as anything, or nothing, or with a stray character beside it) counts.
    """
    edits = 0
    for op in Levenshtein.editops(h, r):  # turns the hypothesis into the reference
        j = op.dest_pos
        if op.tag in ("insert", "replace") and r[j] == MASK_CHAR:
            continue
        if op.tag == "delete" and ((j > 0 and r[j - 1] == MASK_CHAR) or (j < len(r) and r[j] == MASK_CHAR)):
            continue
        edits += 1
    return edits


def find_documents(root: str | pathlib.Path) -> list[tuple[pathlib.Path, pathlib.Path]]:
    """(document, ground truth) pairs under ``root``, sorted by path. Raises FileNotFoundError."""
    root = pathlib.Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: not a directory")
    docs = []
    for p in sorted(root.rglob("*")):
        if p.suffix.lower() in DOC_EXTS and p.is_file():
            gt = p.with_name(p.name[: -len(p.suffix)] + ".gt.txt")
            if gt.is_file():
                docs.append((p, gt))
    return docs


def iter_pages(path: pathlib.Path, long_side_px: int | None = None, dpi: float = 200.0) -> Iterator[Image.Image]:
    """RGB pages of a document: image frames (EXIF orientation applied) or PDF pages rendered with
    pypdfium2 so the long side is ``long_side_px`` pixels (if given) else at ``dpi``.
    """
    if path.suffix.lower() == ".pdf":
        pdf = pdfium.PdfDocument(str(path))
        try:
            for i in range(len(pdf)):
                page = pdf[i]
                w, h = page.get_size()  # PDF points (1/72 in)
                scale = long_side_px / max(w, h) if long_side_px else dpi / 72.0
                yield page.render(scale=scale).to_pil().convert("RGB")
        finally:
            pdf.close()
        return
    with Image.open(path) as im:
        for frame in range(getattr(im, "n_frames", 1)):
            im.seek(frame)
            yield to_rgb(ImageOps.exif_transpose(im))  # as the encoder service converts it


class Engine(Protocol):
    r"""An OCR engine: ``name`` and ``ocr(path) -> (text with pages separated by \f, n_pages)``."""

    name: str

    def ocr(self, path: pathlib.Path) -> tuple[str, int]:
        """Read every page of the document at ``path``; raises on failure (any exception)."""
        ...


class InProcessEngine:
    """Encoder half + decoder half of a checkpoint in this process, greedy decoding."""

    def __init__(self, model_dir: str | pathlib.Path | None = None, threads: int = 1):
        import torch  # heavy: torch and the model code, only for in-process evaluation

        from models.inprocess import ocr_page

        torch.set_num_threads(threads)
        model_dir = pathlib.Path(model_dir) if model_dir else default_model_dir()
        fam = family_of(model_dir)
        self.enc = encoder_half_class(fam).load(model_dir)
        self.dec = decoder_half_class(fam).load(model_dir)
        self.mode = next(m for m in self.enc.modes() if m.name == self.enc.default_mode)
        self._ocr_page = ocr_page
        self.name = f"inkstream in-process ({fam})"

    def ocr(self, path: pathlib.Path) -> tuple[str, int]:
        """Rasterise and read every page in this process (greedy decoding)."""
        pages = [self._ocr_page(self.enc, self.dec, img).text
                 for img in iter_pages(path, self.mode.page_long_side_px or None)]
        return "\f".join(pages), len(pages)


class GatewayEngine:
    """The running stack: ``POST {url}/v1/ocr`` (multipart ``file``, ``format=text``)."""

    def __init__(self, url: str, timeout_s: float = 1800.0):
        self.url, self.timeout_s, self.name = url.rstrip("/"), timeout_s, f"inkstream stack ({url})"

    def ocr(self, path: pathlib.Path) -> tuple[str, int]:
        """Upload the file to the gateway; raises RuntimeError for an answer other than 200."""
        import httpx  # lazy: only for evaluations through a gateway

        with path.open("rb") as fh:
            r = httpx.post(f"{self.url}/v1/ocr", files={"file": (path.name, fh)}, data={"format": "text"},
                           timeout=self.timeout_s)
        if r.status_code != 200:
            raise RuntimeError(f"gateway answered {r.status_code} for {path.name}: {r.text[:300]}")
        n_pages = int(r.headers.get("x-inkstream-pages", "0") or 0) or r.text.count("\f") + 1
        return r.text, n_pages


class TesseractEngine:
    """The ``tesseract`` CLI, one thread, page segmentation mode 3 (automatic), language ``lang``
    (``eng``; ``chi_sim+eng`` for Chinese, Debian ``tesseract-ocr-chi-sim``).
    """

    def __init__(self, lang: str = "eng"):
        if not shutil.which("tesseract"):
            raise FileNotFoundError("tesseract is not installed (apt-get install tesseract-ocr)")
        self.lang = lang
        self.name = "tesseract (1 thread)" if lang == "eng" else f"tesseract {lang} (1 thread)"

    def ocr(self, path: pathlib.Path) -> tuple[str, int]:
        """Rasterise each page at 200 dpi and run tesseract on it; raises RuntimeError when it fails."""
        env = {**os.environ, "OMP_THREAD_LIMIT": "1"}
        texts = []
        with tempfile.TemporaryDirectory() as tmp:
            for i, img in enumerate(iter_pages(path, dpi=200.0)):
                p = pathlib.Path(tmp) / f"p{i}.png"
                img.save(p)
                r = subprocess.run(["tesseract", str(p), "-", "-l", self.lang, "--psm", "3"], env=env,
                                   capture_output=True, text=True, timeout=600)
                if r.returncode != 0:
                    raise RuntimeError(f"tesseract failed on {path.name}: {r.stderr[-300:]}")
                texts.append(r.stdout)
        return "\f".join(texts), len(texts)


class RapidOCREngine:
    """RapidOCR (the ``rapidocr`` package: PP-OCRv6 detector + recogniser, onnxruntime) with one
    intra-op thread; a page's text is its recognised lines in RapidOCR's order, one per line. Pages are
    rasterised at 200 dpi like Tesseract's.
    """

    def __init__(self) -> None:
        from rapidocr import RapidOCR  # lazy: only for comparisons

        self._engine = RapidOCR(params={"EngineConfig.onnxruntime.intra_op_num_threads": 1,
                                        "EngineConfig.onnxruntime.inter_op_num_threads": 1,
                                        "Global.log_level": "warning"})
        self.name = "rapidocr PP-OCRv6 (1 thread)"

    def ocr(self, path: pathlib.Path) -> tuple[str, int]:
        """Read every page; raises whatever RapidOCR raises."""
        import numpy as np

        texts = []
        for img in iter_pages(path, dpi=200.0):
            out = self._engine(np.asarray(img.convert("RGB"))[:, :, ::-1])
            texts.append("\n".join(getattr(out, "txts", None) or ()))
        return "\f".join(texts), len(texts)


def default_model_dir() -> pathlib.Path:
    """The embedded default compact checkpoint (:func:`models.compact.default_checkpoint_dir`)."""
    return models.compact.default_checkpoint_dir()


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
