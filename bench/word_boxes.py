"""Word boxes of the searchable PDF and hOCR, measured as other tools read them (issue 42, item 1).

For each page: the searchable PDF's text by poppler's ``pdftotext`` (default mode) against our own
text (CER, whitespace folded), its words by ``pdftotext -bbox-layout`` against the ink box of each
word (IoU >= 0.5), the same for the hOCR rendered to PDF by OCRmyPDF's hOCR renderer
(``ocrmypdf.hocrtransform.HocrParser`` + ``Fpdf2PdfRenderer``), and whether the page image in the
PDF is pixel-identical to the input.

Pages: seeded rendered pages (:mod:`bench.word_box_pages`, exact word boxes) upright and turned by
90/180/270 degrees, seeded transcript pages with a line-number column and pages of spaced capital
headings (:mod:`bench.transcript_pages`: what poppler's layout analysis used to read apart); the
words' page results are made as the gateway makes them from a line-level model's segments (the
line's loose box and text, words found on the ink: :func:`gateway.output.word_boxes.locate_segment_words`,
then :func:`gateway.output.stitch.page_result`).

    python -m bench.word_boxes [--pages 4]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from xml.etree import ElementTree

import numpy as np
import pikepdf
from PIL import Image, ImageOps
from rapidfuzz.distance import Levenshtein

from bench.transcript_pages import heading_page, transcript_page
from bench.word_box_pages import TruthLine, TruthPage, make_page, turned
from gateway.output.hocr import render_hocr
from gateway.output.searchable_pdf import page_turn, write_searchable_pdf
from gateway.output.stitch import page_result
from gateway.output.word_boxes import locate_segment_words, turn_box
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
    hocr_path.write_text(render_hocr([result], "bench"), encoding="utf-8")
    hocr_pdf_file(hocr_path, out, dpi, turn)


def hocr_pdf_file(hocr_path: pathlib.Path, out: pathlib.Path, dpi: float, turn: int = 0) -> None:
    """Render the hOCR file's first page as :func:`hocr_pdf` does."""
    import ocrmypdf
    from ocrmypdf.font import MultiFontManager
    from ocrmypdf.fpdf_renderer import Fpdf2PdfRenderer
    from ocrmypdf.hocrtransform import HocrParser

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
    """``pages`` seeded pages, each upright and turned by 90, 180 and 270 degrees, and ``pages``
    seeded transcript pages (a line-number column) and pages of spaced capital headings
    (:mod:`bench.transcript_pages`; seeds 100+ and 200+).
    """
    out = []
    for seed in range(pages):
        base = make_page(seed)
        for deg in (0, 90, 180, 270):
            out.append((f"page{seed}_r{deg}", turned(base, deg) if deg else base))
    out += [(f"transcript{seed}", transcript_page(100 + seed)) for seed in range(pages)]
    out += [(f"headings{seed}", heading_page(200 + seed)) for seed in range(pages)]
    return out


def main(argv: list[str] | None = None) -> int:
    """Print the figures of the rendered set, one line a page and the totals."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pages", type=int, default=2, help="seeded pages (each also turned 90/180/270)")
    ap.add_argument("--stack", action="store_true",
                    help="also read the shared eval pages (and a turned rendered page) with the embedded model "
                         "through a local stack (minutes on CPU)")
    args = ap.parse_args(argv)
    if args.stack:
        stack_report()
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


#: eval pages (../shared/eval/pages) the stack report reads
EVAL_PAGES = ("tess_phototest.tif", "tess_phototest-rotated-R.png", "tess_eurotext.tif", "pdfplumber_scotus_p01.pdf")


def stack_documents(shared: pathlib.Path, work: pathlib.Path) -> list[pathlib.Path]:
    """The eval pages and three generated ones: a rendered page turned 90 and 270 degrees (PNG), and
    the same page in a PDF page stored sideways with ``/Rotate`` 90.
    """
    docs = [shared / "eval" / "pages" / n for n in EVAL_PAGES]
    base = make_page(11, size=(1275, 1000), n_lines=10)
    for deg in (90, 270):
        path = work / f"rendered_r{deg}.png"
        turned(base, deg).image.save(path, dpi=(150, 150))
        docs.append(path)
    import img2pdf

    raw = work / "rendered_rotate.png"
    base.image.rotate(90, expand=True).save(raw, dpi=(150, 150))
    pdf = work / "rendered_rotate.pdf"
    pdf.write_bytes(img2pdf.convert(str(raw)))
    with pikepdf.open(pdf, allow_overwriting_input=True) as doc:
        doc.pages[0].obj.Rotate = 90
        doc.save(pdf)
    docs.append(pdf)
    return docs


def stack_report() -> None:
    """Read :func:`stack_documents` through a local stack with the embedded compact model and print
    :func:`served_figures` of each.
    """
    from launcher.local_stack import LocalStack
    from models.compact import default_checkpoint_dir

    shared = pathlib.Path(__file__).resolve().parents[1].parent / "shared"
    with tempfile.TemporaryDirectory() as tmp, LocalStack(default_checkpoint_dir(), encoders=1, decoders=1,
                                                          startup_timeout_s=300) as st:
        for src in stack_documents(shared, pathlib.Path(tmp)):
            f = served_figures(st.gateway_url, src, pathlib.Path(tmp))
            print(f"{src.name:32} turn {int(f['turn']):3}  pdf CER {f['pdf_cer']:6.2%} (-raw {f['pdf_raw_cer']:6.2%}) "
                  f"boxes {f['pdf_boxes']:6.1%}   hOCR CER {f['hocr_cer']:6.2%} boxes {f['hocr_boxes']:6.1%}   "
                  f"blocks with words {f['located']:6.1%}   pixels same {bool(f['pixels_same'])}", flush=True)



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


def _rendered(pdf: pathlib.Path, out: pathlib.Path) -> bytes:
    """Page 1 of ``pdf`` rendered by poppler (``pdftoppm``, 50 dpi, PNG)."""
    subprocess.run(["pdftoppm", "-r", "50", "-png", "-f", "1", "-l", "1", "-singlefile", str(pdf), str(out)],
                   check=True)
    return out.with_suffix(".png").read_bytes()


def served_figures(gateway_url: str, src: pathlib.Path, work: pathlib.Path) -> dict[str, float]:
    """One document read by a running gateway (``gateway_url``) as JSON, searchable PDF and hOCR:
    the PDF's ``pdftotext`` default-mode and ``-raw`` CER against the JSON text, the share of the
    JSON's located words (``Block.words``) that a ``-bbox-layout`` word of the same text overlaps
    with IoU >= 0.5 (page 1, in the frame the PDF shows), the same for the hOCR rendered by
    OCRmyPDF, and the share of blocks that have located words.
    """
    import httpx

    def ocr(fmt: str) -> httpx.Response:
        with open(src, "rb") as f:
            r = httpx.post(f"{gateway_url}/v1/ocr", files={"file": (src.name, f)}, data={"format": fmt}, timeout=600)
        r.raise_for_status()
        return r

    doc = ocr("json").json()
    result = PageResult.from_dict(doc["pages"][0])
    ours = "\n".join(p["text"] for p in doc["pages"])
    pdf = work / f"{src.stem}.out.pdf"
    pdf.write_bytes(ocr("pdf").content)
    turn = page_turn(result)
    size = (result.width, result.height) if turn % 180 == 0 else (result.height, result.width)
    with pikepdf.open(pdf) as out:
        rotate = int(out.pages[0].obj.get("/Rotate", 0))  # poppler gives the page's size unturned
    words = [(w.text, w.box) for b in result.blocks for w in b.words]
    shown = [(t, turn_box(b, (result.width, result.height), (360 - turn) % 360)) for t, b in words]
    truth = TruthPage(Image.new("L", (1, 1)), [TruthLine([t for t, _ in shown], [b for _, b in shown], (0, 0, 0, 0))])
    hits, total = box_hits(truth, pdf_words(pdf, size, rotate)) if shown else (0, 0)
    hocr_out = work / f"{src.stem}.hocr.pdf"
    dpi = 150.0  # any: pdf_words scales the renderer's points back to page pixels
    (work / f"{src.stem}.hocr").write_text(ocr("hocr").text, encoding="utf-8")
    hocr_pdf_file(work / f"{src.stem}.hocr", hocr_out, dpi, turn)
    hhits, _ = box_hits(truth, pdf_words(hocr_out, size, turn)) if shown else (0, 0)
    if os.environ.get("WORD_BOXES_DEBUG"):
        (work / f"{src.stem}.json").write_text(json.dumps(doc))
    lines = [b for b in result.blocks if b.type != "table" and b.text.strip()]
    if src.suffix.lower() == ".pdf":  # the page renders as before (at the same /Rotate when turn is 0)
        same = turn != 0 or _rendered(src, work / "a") == _rendered(pdf, work / "b")
    else:
        with Image.open(src) as im:
            same = embedded_image_identical(pdf, ImageOps.exif_transpose(im).convert("RGB"))
    return {"pixels_same": float(same), "pdf_cer": cer(ours, pdftotext(pdf)),
            "pdf_raw_cer": cer(ours, pdftotext(pdf, "-raw")),
            "hocr_cer": cer(result.text, pdftotext(hocr_out)), "pdf_boxes": hits / max(1, total),
            "hocr_boxes": hhits / max(1, total), "located": sum(bool(b.words) for b in lines) / max(1, len(lines)),
            "turn": float(turn)}


if __name__ == "__main__":
    raise SystemExit(main())
