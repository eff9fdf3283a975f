"""hOCR output (``format=hocr``): the hOCR 1.2 embedding of OCR results in XHTML.

Specification: http://kba.github.io/hocr-spec/1.2/ . One ``div.ocr_page`` per page of the document
(``title``: ``bbox 0 0 W H; ppageno N-1`` in page pixels), in it one ``div.ocr_carea`` with one
``p.ocr_par`` per block, one ``span.ocr_line`` per line (``bbox``, ``baseline 0 0``) and one
``span.ocrx_word`` per word (``bbox``: the word's ink where it was located, widened into a word
gap too wide for a reader to keep the line together, :mod:`gateway.output.text_band`; ``x_wconf``
0-100 where the model gave a confidence).
Properties are those Tesseract writes, so consumers of Tesseract's hOCR (OCRmyPDF's
``hocrtransform``, hocr-tools) read it. A page that failed is an empty ``ocr_page`` with its error
in an ``inkstream_error`` property, so the page count still matches the document.
"""

from __future__ import annotations

from collections.abc import Iterable
from html import escape

from gateway.output.lines import Box, page_regions
from inkstream.page_result import PageResult

_HEAD = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN"
 "http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">
<html xmlns="http://www.w3.org/1999/xhtml" xml:lang="en" lang="en">
<head>
<title></title>
<meta http-equiv="Content-Type" content="text/html;charset=utf-8"/>
<meta name="ocr-system" content="inkstream {model}"/>
<meta name="ocr-capabilities" content="ocr_page ocr_carea ocr_par ocr_line ocrx_word ocrp_wconf"/>
</head>
<body>
"""


def _bbox(box: Box) -> str:
    return "bbox " + " ".join(str(round(v)) for v in box)


def _page(page: PageResult) -> str:
    n = page.index
    title = f"{_bbox((0, 0, page.width, page.height))}; ppageno {n - 1}"
    if page.status != "ok" and page.error is not None:
        title += f"; inkstream_error {escape(page.error.code)}"
    out = [f" <div class='ocr_page' id='page_{n}' title='{title}'>"]
    for a, region in enumerate(page_regions(page), start=1):
        out.append(f"  <div class='ocr_carea' id='block_{n}_{a}' title='{_bbox(region.box)}'>")
        out.append(f"   <p class='ocr_par' id='par_{n}_{a}' title='{_bbox(region.box)}'>")
        for b, line in enumerate(region.lines, start=1):
            angle = f"; textangle {line.angle}" if line.angle else ""
            out.append(f"    <span class='ocr_line' id='line_{n}_{a}_{b}' title='{_bbox(line.box)}{angle}'>")
            for c, word in enumerate(line.words, start=1):
                conf = f"; x_wconf {round(100 * word.confidence)}" if word.confidence is not None else ""
                out.append(f"     <span class='ocrx_word' id='word_{n}_{a}_{b}_{c}' "
                           f"title='{_bbox(word.box)}{conf}'>{escape(word.text)}</span>")
            out.append("    </span>")
        out.append("   </p>")
        out.append("  </div>")
    out.append(" </div>")
    return "\n".join(out)


def render_hocr(pages: Iterable[PageResult], model_id: str = "") -> str:
    """The hOCR document of ``pages`` (ordered by index): an XHTML string, UTF-8 when encoded."""
    body = "\n".join(_page(p) for p in sorted(pages, key=lambda p: p.index))
    return _HEAD.format(model=escape(model_id)) + body + "\n</body>\n</html>\n"
