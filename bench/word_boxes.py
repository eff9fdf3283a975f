"""Word boxes of the searchable PDF and hOCR, measured as other tools read them (issue 42, item 1).

For each page: the searchable PDF's text by poppler's ``pdftotext`` (default mode) against our own
text (CER, whitespace folded), its words by ``pdftotext -bbox-layout`` against the ink box of each
word (IoU >= 0.5), the same for the hOCR rendered to PDF by OCRmyPDF's hOCR renderer
(``ocrmypdf.hocrtransform.HocrParser`` + ``Fpdf2PdfRenderer``), and whether the page image in the
PDF is pixel-identical to the input.

Pages: seeded rendered pages (:mod:`bench.word_box_pages`, exact word boxes) upright and turned by
90/180/270 degrees; the words' page results are made as the gateway makes them from a line-level
model's segments (the line's loose box and text, words found on the ink:
:func:`gateway.output.word_boxes.locate_segment_words`, then :func:`gateway.output.stitch.page_result`).

    python -m bench.word_boxes [--pages 4]
"""

from __future__ import annotations

import argparse
import pathlib
import re
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from xml.etree import ElementTree

import numpy as np
import pikepdf
from PIL import Image
from rapidfuzz.distance import Levenshtein

from bench.word_box_pages import TruthPage, make_page, turned
from gateway.output.hocr import render_hocr
from gateway.output.searchable_pdf import page_turn, write_searchable_pdf
from gateway.output.stitch import page_result
from gateway.output.word_boxes import locate_segment_words
from gateway.types import PageOutcome, SegmentText
from inkstream.page_result import PageResult

Box = tuple[float, float, float, float]
_NS = "{http://www.w3.org/1999/xhtml}"


def fold(text: str) -> str:
    """Whitespace runs -> one space, stripped (the eval set's scoring rule)."""
    return " ".join(text.split())


def cer(reference: str, hypothesis: str) -> float:
    """Character error rate of ``hypothesis`` against ``reference``, both whitespace-folded."""
    ref, hyp = fold(reference), fold(hypothesis)
    return Levenshtein.distance(ref, hyp) / max(1, len(ref))


def iou(a: Box, b: Box) -> float:
    """Intersection over union of two (x0, y0, x1, y1) boxes."""
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def result_of(truth: TruthPage, image_path: pathlib.Path) -> PageResult:
    """The page result the gateway makes of ``truth``'s lines read as one segment each (loose line
    boxes and their text), words located on the ink of the image at ``image_path``.
    """
    segments = [SegmentText(i, ln.text, ln.box, generated_tokens=len(ln.text), confidence=0.95,
                            rotation=truth.rotation) for i, ln in enumerate(truth.lines)]
    w, h = truth.image.size
    locate_segment_words(image_path.read_bytes(), segments, w, h)
    return page_result(PageOutcome(0, "ok", segments=segments, width=w, height=h), (w, h))


def pdftotext(pdf: pathlib.Path, *args: str) -> str:
    """``pdftotext [args] pdf -`` (poppler) as text."""
    return subprocess.run(["pdftotext", *args, str(pdf), "-"], check=True, capture_output=True,
                          text=True).stdout


def pdf_words(pdf: pathlib.Path, size_px: tuple[int, int], turn: int = 0) -> list[tuple[str, Box]]:
    """Words of page 1 by ``pdftotext -bbox-layout``, boxes scaled from points to ``size_px`` (the
    page as shown). ``turn``: the page's ``/Rotate``; poppler gives the words in the shown frame but
    the page's size unturned.
    """
    root = ElementTree.fromstring(re.sub(r"<!DOCTYPE[^>]*>", "", pdftotext(pdf, "-bbox-layout")))
    page = next(root.iter(_NS + "page"))
    w_pt, h_pt = float(page.get("width", 1)), float(page.get("height", 1))
    if turn % 180:
        w_pt, h_pt = h_pt, w_pt
    sx, sy = size_px[0] / w_pt, size_px[1] / h_pt
    return [((wd.text or ""), (float(wd.get("xMin", 0)) * sx, float(wd.get("yMin", 0)) * sy,
                               float(wd.get("xMax", 0)) * sx, float(wd.get("yMax", 0)) * sy))
            for wd in page.iter(_NS + "word")]


def box_hits(truth: TruthPage, found: Sequence[tuple[str, Box]]) -> tuple[int, int]:
    """(words of ``truth`` that a found word of the same text overlaps with IoU >= 0.5, words of
    ``truth``). Each found word is used once.
    """
    pool = list(found)
    hits = total = 0
    for ln in truth.lines:
        for word, box in zip(ln.words, ln.word_boxes, strict=True):
            total += 1
            best = max(range(len(pool)), key=lambda k: iou(pool[k][1], box) if pool[k][0] == word else -1.0,
                       default=None)
            if best is not None and pool[best][0] == word and iou(pool[best][1], box) >= 0.5:
                hits += 1
                pool.pop(best)
    return hits, total


def hocr_pdf(result: PageResult, hocr_path: pathlib.Path, out: pathlib.Path, dpi: float, turn: int = 0) -> None:
    """Render our hOCR of ``result`` to a text-only PDF with OCRmyPDF's own hOCR renderer, the page
    shown turned by ``turn`` degrees clockwise (``/Rotate``, as ``ocrmypdf --rotate-pages`` shows a
    page Tesseract found turned).
    """
    import ocrmypdf
    from ocrmypdf.font import MultiFontManager
    from ocrmypdf.fpdf_renderer import Fpdf2PdfRenderer
    from ocrmypdf.hocrtransform import HocrParser

    hocr_path.write_text(render_hocr([result], "bench"), encoding="utf-8")
    page = HocrParser(hocr_path).parse()
    fonts = MultiFontManager(pathlib.Path(str(ocrmypdf.__file__)).parent / "data")
    Fpdf2PdfRenderer(page=page, dpi=dpi, multi_font_manager=fonts, invisible_text=False).render(out)
    if turn:
        with pikepdf.open(out, allow_overwriting_input=True) as doc:
            doc.pages[0].obj.Rotate = turn
            doc.save(out)


def embedded_image_identical(pdf: pathlib.Path, image: Image.Image) -> bool:
    """Whether the one image of the PDF's page 1 has exactly the pixels of ``image``."""
    with pikepdf.open(pdf) as doc:
        [(_, raw)] = list(doc.pages[0].get_images().items())
        shown = pikepdf.PdfImage(raw).as_pil_image().convert("RGB")
    return shown.size == image.size and np.array_equal(np.asarray(shown), np.asarray(image.convert("RGB")))


@dataclass
class PageFigures:
    """The figures of one page (see the module docstring)."""

    name: str
    pdf_cer: float
    pdf_hits: int
    hocr_cer: float
    hocr_hits: int
    words: int
    pixels_same: bool


def measure(name: str, truth: TruthPage, work: pathlib.Path) -> PageFigures:
    """Write ``truth``'s image as PNG, its searchable PDF and hOCR in ``work``, and measure them."""
    png = work / f"{name}.png"
    truth.image.save(png, dpi=(150, 150))
    result = result_of(truth, png)
    pdf = work / f"{name}.pdf"
    write_searchable_pdf([result], png, "png", pdf)
    turn = page_turn(result)  # the PDF shows a page read turned upright: compare in that frame
    shown = turned(truth, (360 - turn) % 360) if turn else truth
    size = shown.image.size
    pdf_hits, total = box_hits(shown, pdf_words(pdf, size, turn))
    hocr_out = work / f"{name}.hocr.pdf"
    hocr_pdf(result, work / f"{name}.hocr", hocr_out, 150.0, turn)
    hocr_hits, _ = box_hits(shown, pdf_words(hocr_out, size, turn))
    return PageFigures(name, cer(result.text, pdftotext(pdf)), pdf_hits, cer(result.text, pdftotext(hocr_out)),
                       hocr_hits, total, embedded_image_identical(pdf, truth.image))


def rendered_set(pages: int) -> list[tuple[str, TruthPage]]:
    """``pages`` seeded pages, each upright and turned by 90, 180 and 270 degrees."""
    out = []
    for seed in range(pages):
        base = make_page(seed)
        for deg in (0, 90, 180, 270):
            out.append((f"page{seed}_r{deg}", turned(base, deg) if deg else base))
    return out


def main(argv: list[str] | None = None) -> int:
    """Print the figures of the rendered set, one line a page and the totals."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pages", type=int, default=2, help="seeded pages (each also turned 90/180/270)")
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, truth in rendered_set(args.pages):
            f = measure(name, truth, pathlib.Path(tmp))
            rows.append(f)
            print(f"{f.name:14} pdf CER {f.pdf_cer:6.2%} boxes {f.pdf_hits / f.words:6.1%}   hOCR CER "
                  f"{f.hocr_cer:6.2%} boxes {f.hocr_hits / f.words:6.1%}   pixels same {f.pixels_same}")
    words = sum(f.words for f in rows)
    print(f"{'all':14} pdf CER {max(f.pdf_cer for f in rows):6.2%} (worst) boxes "
          f"{sum(f.pdf_hits for f in rows) / words:6.1%}   hOCR CER {max(f.hocr_cer for f in rows):6.2%} (worst) "
          f"boxes {sum(f.hocr_hits for f in rows) / words:6.1%}   pixels same {all(f.pixels_same for f in rows)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


def measure_rotate_pdf(name: str, truth: TruthPage, work: pathlib.Path, rotate: int = 90) -> PageFigures:
    """A PDF page whose content is ``truth`` turned sideways and whose ``/Rotate`` (``rotate``
    degrees clockwise) shows it upright, read as the gateway reads it (upright, pdfium applies
    ``/Rotate``): its searchable PDF measured as it is shown.
    """
    import img2pdf

    raw = truth.image.rotate(rotate, expand=True)  # counter-clockwise: /Rotate turns it back
    png = work / f"{name}.raw.png"
    raw.save(png, dpi=(150, 150))
    src = work / f"{name}.src.pdf"
    src.write_bytes(img2pdf.convert(str(png)))
    with pikepdf.open(src, allow_overwriting_input=True) as doc:
        doc.pages[0].obj.Rotate = rotate
        doc.save(src)
    upright = work / f"{name}.png"
    truth.image.save(upright)
    result = result_of(truth, upright)
    pdf = work / f"{name}.pdf"
    write_searchable_pdf([result], src, "pdf", pdf)
    hits, total = box_hits(truth, pdf_words(pdf, truth.image.size, rotate))
    return PageFigures(name, cer(result.text, pdftotext(pdf)), hits, float("nan"), 0, total,
                       embedded_image_identical(pdf, raw))


def measure_exif(name: str, truth: TruthPage, work: pathlib.Path) -> PageFigures:
    """A PNG stored sideways with EXIF orientation 6 (shown turned 90 degrees clockwise, upright),
    read as the gateway reads it (EXIF applied): its searchable PDF measured as it is shown; the
    PDF's image must be the upright pixels.
    """
    raw = truth.image.rotate(90, expand=True)
    exif = Image.Exif()
    exif[0x0112] = 6
    src = work / f"{name}.exif.png"
    raw.save(src, exif=exif, dpi=(150, 150))
    upright = work / f"{name}.png"
    truth.image.save(upright)
    result = result_of(truth, upright)
    pdf = work / f"{name}.pdf"
    write_searchable_pdf([result], src, "png", pdf)
    hits, total = box_hits(truth, pdf_words(pdf, truth.image.size))
    return PageFigures(name, cer(result.text, pdftotext(pdf)), hits, float("nan"), 0, total,
                       embedded_image_identical(pdf, truth.image))
