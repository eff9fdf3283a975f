"""Assemble multi-page PDFs from page images with pypdfium2 (for system tests and benchmarks).

Each PDF page is one image scaled to the page box at ``dpi`` (page size in points = pixels * 72 /
dpi), so the gateway's rasteriser sees real image pages. Images are embedded once per PDF page
(no sharing between pages), so file size grows with the page count like a real scan.
"""

from __future__ import annotations

import io
import pathlib
from collections.abc import Sequence

import pypdfium2 as pdfium
from PIL import Image


def make_pdf(images: Sequence[bytes], n_pages: int, path: str | pathlib.Path, dpi: float = 150.0) -> pathlib.Path:
    """Write an ``n_pages``-page PDF to ``path``; page ``i`` shows ``images[i % len(images)]``
    (PNG/JPEG bytes, converted to RGB). Returns the path. Raises ValueError with no images."""
    if not images:
        raise ValueError("make_pdf needs at least one image")
    pils = [Image.open(io.BytesIO(b)).convert("RGB") for b in images]
    pdf = pdfium.PdfDocument.new()
    try:
        for i in range(n_pages):
            pil = pils[i % len(pils)]
            w_pt, h_pt = pil.width * 72.0 / dpi, pil.height * 72.0 / dpi
            page = pdf.new_page(w_pt, h_pt)
            img = pdfium.PdfImage.new(pdf)
            bitmap = pdfium.PdfBitmap.from_pil(pil)
            img.set_bitmap(bitmap)
            img.set_matrix(pdfium.PdfMatrix().scale(w_pt, h_pt))
            page.insert_obj(img)
            page.gen_content()
            bitmap.close()
            page.close()
        path = pathlib.Path(path)
        pdf.save(str(path))
    finally:
        pdf.close()
    return path


def line_images(shared: str | pathlib.Path) -> list[bytes]:
    """PNG bytes of the scanned text lines in ``<shared>/eval/lines``."""
    paths = sorted(pathlib.Path(shared, "eval", "lines").glob("*.png"))
    if not paths:
        raise FileNotFoundError(f"no line images under {shared}/eval/lines")
    return [p.read_bytes() for p in paths]


def line_pages(shared: str | pathlib.Path, width_px: int = 850, height_px: int = 1100) -> list[bytes]:
    """Small real pages: the eval set's scanned text lines stacked on a white ``width_px`` x
    ``height_px`` page (letter proportions), one page per rotation of the line order, so the pages
    differ from each other. Returns PNG bytes, one per line image."""
    lines = [Image.open(io.BytesIO(b)).convert("RGB") for b in line_images(shared)]
    pages = []
    for k in range(len(lines)):
        page = Image.new("RGB", (width_px, height_px), "white")
        y = 60
        for line in lines[k:] + lines[:k]:
            scale = min(1.0, (width_px - 80) / line.width)
            im = line.resize((max(1, int(line.width * scale)), max(1, int(line.height * scale))))
            page.paste(im, (40, y))
            y += im.height + 30
        buf = io.BytesIO()
        page.save(buf, format="PNG")
        pages.append(buf.getvalue())
    return pages
