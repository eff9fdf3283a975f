"""The engines ``inkstream eval`` compares: the stack through its gateway, the model halves in this
process, Tesseract and RapidOCR; and the documents they read (pages rasterised as the gateway does).
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from typing import Protocol

import pypdfium2 as pdfium
from PIL import Image, ImageOps

import models.compact
from inkstream.page_image import fit_pixels, prepare_image, render_pdf_page
from inkstream.pdf_fonts import install_upright_fonts
from models.images import to_rgb
from models.registry import decoder_half_class, encoder_half_class, family_of

IMAGE_EXTS = {".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".webp"}


DOC_EXTS = IMAGE_EXTS | {".pdf"}


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


def iter_pages(path: pathlib.Path, long_side_px: int | None = None, dpi: float = 200.0,
               max_pixels: int = 0) -> Iterator[Image.Image]:
    """RGB pages of a document. With ``long_side_px`` (the encoder mode's ``page_long_side_px``)
    exactly as the gateway prepares them for the encoder, with the very same functions
    (:mod:`inkstream.page_image`): PDF pages rendered at that long side, image frames (every frame
    of a TIFF, the first of other formats) normalised and shrunk to it, both within ``max_pixels``
    (0: what the served stack fits pages to by default, :func:`inkstream.page_image.fit_pixels`: the
    encoder's ``max_image_pixels`` under the gateway's ``limits.max_page_pixels``); then converted to RGB as the encoder
    service converts what it receives. Without it (Tesseract, RapidOCR): PDF pages rendered at
    ``dpi``, image frames at their own size (EXIF orientation applied).
    """
    max_pixels = max_pixels or fit_pixels()
    if path.suffix.lower() == ".pdf":
        install_upright_fonts()  # as the gateway does (gateway.ingest.pdf.PdfDocument)
        pdf = pdfium.PdfDocument(str(path))
        try:
            for i in range(len(pdf)):
                page = pdf[i]
                try:
                    if long_side_px:
                        yield render_pdf_page(page, long_side_px, max_pixels)
                    else:
                        yield page.render(scale=dpi / 72.0).to_pil().convert("RGB")
                finally:
                    page.close()
        finally:
            pdf.close()
        return
    with Image.open(path) as im:
        frames = getattr(im, "n_frames", 1) if im.format == "TIFF" or not long_side_px else 1
        for frame in range(frames):
            im.seek(frame)
            if long_side_px:
                page, _ = prepare_image(im, long_side_px, max_pixels)
                yield to_rgb(page)  # as the encoder service converts it
            else:
                yield to_rgb(ImageOps.exif_transpose(im))


class Engine(Protocol):
    r"""An OCR engine: ``name`` and ``ocr(path) -> (text with pages separated by \f, n_pages)``."""

    name: str

    def ocr(self, path: pathlib.Path) -> tuple[str, int]:
        """Read every page of the document at ``path``; raises on failure (any exception)."""


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
