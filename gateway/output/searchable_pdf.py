"""Searchable PDF output (``format=pdf``): the document's own pages with an invisible text layer.

As OCRmyPDF makes it (https://ocrmypdf.readthedocs.io/en/latest/introduction.html), but from the
page results of the stack:

* a PDF input keeps every selected page as it was (its content stream, images and vector content are
  not touched or re-rasterised); the text layer is added under it as a form XObject
  (``pikepdf.Page.add_underlay``), so each page renders pixel-identically;
* an image input (PNG, JPEG, JPEG 2000, TIFF incl. multi-page, GIF, BMP, WebP) becomes one page per
  frame at the image's resolution (dpi from its metadata, 300 when it has none); img2pdf embeds JPEG,
  JPEG 2000, PNG and CCITT G3/G4 TIFF data without recompressing it; other images are converted to
  PNG first (lossless);
* text the page already had (a born-digital PDF) still shows but is hidden from text extraction
  (an empty ``/ActualText`` span around the page's own content), so the OCR text is the page's one
  text layer and agrees with the JSON result;
* the text is drawn in text render mode 3 (invisible) by OCRmyPDF's fpdf2 renderer
  (:class:`ocrmypdf.fpdf_renderer.Fpdf2PdfRenderer`, glyphless and Noto fonts with ToUnicode maps so
  ``pdftotext`` and viewers' search read it), one ``Tj`` per word stretched to its box
  (:mod:`gateway.output.lines`), in reading order; a page without text (an error page, a blank page)
  keeps its image and gets no text;
* an encrypted (password-protected) PDF input gives an output encrypted the same way (the same user and
  owner passwords, algorithm and permissions), so the OCR result is no less protected than its source;
* each word is drawn at its own box (``Block.words``: the ink the model's segment and the page
  image give it) with the font scaled horizontally to fit, a line turned on the page (``Block.angle``,
  a page fed in sideways or upside down) along its angle; such a page is then shown upright by
  growing its ``/Rotate`` (as ``ocrmypdf --rotate-pages`` does; :func:`page_turn`), so viewers and
  ``pdftotext`` read its lines in order; its image is not touched.

Memory: only the text of the pages is held in memory; the output is written by qpdf, which copies
the source pages' streams from the input file as it writes, so a 500-page scan costs about as much
memory as a 1-page one. Raises InvalidInput when the source cannot be opened (it was read once
already for rasterising, so this means it changed or was removed).
"""

from __future__ import annotations

import contextlib
import io
import pathlib
from collections.abc import Sequence

import img2pdf
import pikepdf
from ocrmypdf.font import MultiFontManager
from ocrmypdf.fpdf_renderer import Fpdf2MultiPageRenderer, Fpdf2PdfRenderer
from ocrmypdf.models.ocr_element import BoundingBox, OcrClass, OcrElement
from PIL import Image

from gateway.ingest.images import normalise
from gateway.output.glyph_room import FONT_DIR, advances
from gateway.output.lines import Box, Line, page_regions
from inkstream.errors import InvalidInput
from inkstream.page_result import PageResult

#: dpi given to an image without resolution metadata (the scanning default of archives and OCRmyPDF).
DEFAULT_IMAGE_DPI = 300.0
#: image formats img2pdf embeds as they are (no recompression); others are converted to PNG first.
_PASSTHROUGH = {"JPEG", "JPEG2000", "PNG", "TIFF"}
_MASK_BEGIN = b"/Span <</ActualText ()>> BDC\n"
_MASK_END = b"\nEMC\n"


def _bbox(box: Box) -> BoundingBox:
    return BoundingBox(left=box[0], top=box[1], right=box[2], bottom=box[3])


def _cjk_only(text: str) -> bool:
    """Whether OCRmyPDF's renderer treats ``text`` as CJK only (its own test, so the two agree)."""
    return bool(Fpdf2PdfRenderer._is_cjk_only(None, text))  # type: ignore[arg-type] # self is unused


def _advance(text: str) -> float:
    """Advance width of ``text`` in ems in the font the renderer picks for it (harfbuzz, unshaped)."""
    return sum(advances(text))


def _grown(box: Box, by: float, angle: int) -> Box:
    """``box`` grown by ``by`` pixels at the end of a line running at ``angle`` degrees."""
    x0, y0, x1, y1 = box
    return {0: (x0, y0, x1 + by, y1), 180: (x0 - by, y0, x1, y1), 90: (x0, y0 - by, x1, y1),
            270: (x0, y0, x1, y1 + by)}[angle % 360]


def renderer_words(line: Line) -> list[tuple[str, Box]]:
    """(text, box in page pixels) of each of ``line``'s words as the renderer is given them: the
    word's own, except that a CJK-only word followed by a space in the line's text and then by
    another CJK-only word carries that space, its box grown along the line by the space's width (at
    the word's scale) so its glyphs still cover the word's own box. OCRmyPDF's renderer joins two
    CJK-only words with no separator (stretching the first to meet the second: Tesseract cuts
    unspaced Chinese into words), so without it a space the model read between two Chinese words
    ("第二节 公司基本情况") is lost from the text layer; with it the renderer writes the word with a
    trailing space glyph, which readers take as the word break.
    """
    out = [(w.text, w.box) for w in line.words]
    pos, ends, starts = 0, [], []
    for text, _ in out:
        at = line.text.find(text, pos)
        starts.append(at)
        ends.append(at + len(text) if at >= 0 else -1)
        pos = ends[-1] if at >= 0 else pos
    for k in range(len(out) - 1):
        text, box = out[k]
        spaced = ends[k] >= 0 and starts[k + 1] > ends[k] and line.text[ends[k]:starts[k + 1]].isspace()
        if spaced and _cjk_only(text) and _cjk_only(out[k + 1][0]):
            x0, y0, x1, y1 = box
            length = (x1 - x0) if line.angle % 180 == 0 else (y1 - y0)
            own = _advance(text)
            by = length * (_advance(text + " ") - own) / own if own > 0 else 0.0
            out[k] = (text + " ", _grown(box, by, line.angle))
    return out


def ocr_tree(page: PageResult, size_pt: tuple[float, float]) -> tuple[OcrElement, float]:
    """The OCRmyPDF element tree of one page and the dpi that maps its pixels onto ``size_pt``
    (width, height in PDF points, 1/72 inch): page > carea > par > line > word, boxes in page pixels.
    """
    width_px, height_px = (page.width, page.height) if page.width and page.height else size_pt
    dpi = 72.0 * width_px / size_pt[0]
    root = OcrElement(ocr_class=OcrClass.PAGE, bbox=_bbox((0, 0, width_px, height_px)), dpi=dpi,
                      page_number=page.index - 1)
    for region in page_regions(page):
        lines = [OcrElement(ocr_class=OcrClass.LINE, bbox=_bbox(line.box), text=line.text,
                            textangle=float(line.angle) if line.angle else None,
                            children=[OcrElement(ocr_class=OcrClass.WORD, bbox=_bbox(box), text=text,
                                                 confidence=w.confidence)
                                      for w, (text, box) in zip(line.words, renderer_words(line), strict=True)])
                 for line in region.lines]
        par = OcrElement(ocr_class=OcrClass.PARAGRAPH, bbox=_bbox(region.box), children=lines)
        root.children.append(OcrElement(ocr_class=OcrClass.CAREA, bbox=_bbox(region.box), children=[par]))
    return root, dpi


def text_layer(pages: Sequence[PageResult], sizes_pt: Sequence[tuple[float, float]], out: pathlib.Path) -> None:
    """Write a PDF of invisible text only, page i of size ``sizes_pt[i]`` (points) holding the text
    of ``pages[i]``.
    """
    trees = [(i, *ocr_tree(p, s)) for i, (p, s) in enumerate(zip(pages, sizes_pt, strict=True))]
    Fpdf2MultiPageRenderer(trees, MultiFontManager(FONT_DIR), invisible_text=True).render(out)


def _visible_box(page: pikepdf.Page) -> tuple[float, float, float, float]:
    """The crop box (what a viewer and pdfium show, and what the gateway rasterised), in points."""
    x0, y0, x1, y1 = (float(v) for v in page.cropbox)
    return min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1)


def _shown_size(page: pikepdf.Page) -> tuple[float, float]:
    x0, y0, x1, y1 = _visible_box(page)
    w, h = x1 - x0, y1 - y0
    return (h, w) if int(page.obj.get("/Rotate", 0)) % 180 else (w, h)


def _underlay(pdf: pikepdf.Pdf, pages: Sequence[PageResult], layer_path: pathlib.Path) -> None:
    with pikepdf.open(layer_path) as layer:
        for page, result, text_page in zip(pdf.pages, pages, layer.pages, strict=True):
            if not page_regions(result):
                continue
            # The page's own text (a born-digital page) is kept visible but no longer extracted: an empty
            # /ActualText over its content (ISO 32000-1 §14.9.4) makes the OCR layer the page's only
            # text, so search, copy and pdftotext give what the JSON result says, not both.
            page.contents_add(_MASK_BEGIN, prepend=True)
            page.contents_add(_MASK_END)
            # The text page is laid out as the page shows (pdfium applied /Rotate when the gateway
            # rasterised it); qpdf's placement inverts the page's /Rotate, so the text lands upright.
            page.add_underlay(text_page, pikepdf.Rectangle(*_visible_box(page)))


def page_turn(page: PageResult) -> int:
    """Degrees clockwise (0, 90, 180, 270) that show ``page`` upright: the angle most of its text
    runs at (``Block.angle``, counted by characters), 0 when it has no text.
    """
    counts: dict[int, int] = {}
    for block in page.blocks:
        if block.type != "table":
            counts[block.angle % 360] = counts.get(block.angle % 360, 0) + len(block.text.strip())
    return max(counts, key=lambda a: (counts[a], a == 0)) if any(counts.values()) else 0


def _show_upright(pdf: pikepdf.Pdf, pages: Sequence[PageResult]) -> None:
    """Turn the view of each page the model read turned (its text runs at 90, 180 or 270 degrees)
    so it shows upright, as ``ocrmypdf --rotate-pages`` does: ``/Rotate`` grows by the turn, the
    page's content (its image, the text layer under it) is not touched.
    """
    for page, result in zip(pdf.pages, pages, strict=True):
        turn = page_turn(result)
        if turn:
            page.obj.Rotate = (int(page.obj.get("/Rotate", 0)) + turn) % 360


def _source_pdf(path: pathlib.Path, password: str) -> pikepdf.Pdf:
    try:
        return pikepdf.open(path, password=password)
    except (pikepdf.PdfError, OSError) as exc:
        raise InvalidInput("the PDF could not be opened again to add the text layer") from exc


def _frames_as_png(path: pathlib.Path) -> list[bytes]:
    """Every frame (TIFF) or the first frame (other formats) as lossless 8-bit PNG, normalised as
    the gateway reads the image (EXIF orientation, alpha composited on white).
    """
    out = []
    with Image.open(path) as im:
        for i in range(getattr(im, "n_frames", 1) if im.format == "TIFF" else 1):
            im.seek(i)
            buf = io.BytesIO()
            normalise(im).save(buf, "PNG")
            out.append(buf.getvalue())
    return out


def _image_pdf(path: pathlib.Path, out: pathlib.Path) -> pathlib.Path:
    """Write the image document as a PDF of one page per frame to ``out`` (see the module docstring)."""
    with Image.open(path) as im:
        dpi = im.info.get("dpi")
        passthrough = im.format in _PASSTHROUGH and "A" not in im.getbands() and "transparency" not in im.info
        exif_turned = im.getexif().get(0x0112, 1) not in (0, 1)
    has_dpi = bool(dpi and all(float(d) > 1 for d in dpi))
    layout = (img2pdf.default_layout_fun if has_dpi
              else img2pdf.get_fixed_dpi_layout_fun((DEFAULT_IMAGE_DPI, DEFAULT_IMAGE_DPI)))
    with open(out, "wb") as f:
        if passthrough and not exif_turned:
            try:
                img2pdf.convert(str(path), layout_fun=layout, outputstream=f)
                return out
            except Exception:  # noqa: BLE001 - img2pdf refuses some valid images (odd TIFF layouts, ...)
                f.seek(0)
                f.truncate()
        try:
            img2pdf.convert(*_frames_as_png(path), layout_fun=layout, outputstream=f)
        except (OSError, ValueError, img2pdf.ImageOpenError) as exc:
            raise InvalidInput("the image could not be embedded in a PDF page") from exc
    return out


def write_searchable_pdf(pages: Sequence[PageResult], source: pathlib.Path, kind: str, out: pathlib.Path,
                         *, password: str = "") -> None:
    """Write the searchable PDF of ``pages`` (results of the pages selected from ``source``, a
    document of ``kind`` as sniffed: "pdf" or an image kind) to ``out``; pages in index order, each
    once; an encrypted PDF ``source`` (opened with ``password``) gives an ``out`` encrypted as it is.
    Raises InvalidInput (see the module docstring) and ValueError for duplicate pages.
    """
    ordered = sorted(pages, key=lambda p: p.index)
    if len({p.index for p in ordered}) != len(ordered):
        raise ValueError(f"duplicate page results: {[p.index for p in ordered]}")
    scratch = out.parent
    layer_path = scratch / (out.name + ".text-layer.pdf")
    with contextlib.ExitStack() as stack:
        if kind == "pdf":
            pdf = stack.enter_context(_source_pdf(source, password))
        else:
            pdf = stack.enter_context(pikepdf.open(_image_pdf(source, scratch / (out.name + ".images.pdf"))))
        keep = {p.index for p in ordered}
        for i in reversed(range(len(pdf.pages))):  # only the selected pages, as in every other format
            if i + 1 not in keep:
                del pdf.pages[i]
        if len(pdf.pages) != len(ordered):
            raise InvalidInput(f"the document has {len(pdf.pages)} of the {len(ordered)} pages read")
        text_layer(ordered, [_shown_size(p) for p in pdf.pages], layer_path)
        _underlay(pdf, ordered, layer_path)
        _show_upright(pdf, ordered)
        # An encrypted input stays encrypted, with its own user and owner passwords and permissions
        # (qpdf copies its encryption parameters): the text layer must not hand the document out openly.
        pdf.save(out, encryption=bool(kind == "pdf" and pdf.is_encrypted))
    layer_path.unlink(missing_ok=True)
    (scratch / (out.name + ".images.pdf")).unlink(missing_ok=True)
