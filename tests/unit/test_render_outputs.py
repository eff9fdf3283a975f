"""Searchable PDF and hOCR from page results (no servers, no model): a page image with known lines,
page results that say where those lines are, and real consumers reading the output (poppler's
pdftotext / pdftoppm, OCRmyPDF's hOCR parser and renderer)."""

from __future__ import annotations

import io
import pathlib
import re
import shutil
import subprocess

import pikepdf
import pytest
from PIL import Image, ImageDraw, ImageFont
from rapidfuzz.distance import Levenshtein

from gateway.output.hocr import render_hocr
from gateway.output.lines import page_regions, words_of
from gateway.output.searchable_pdf import write_searchable_pdf
from gateway.output.stitch import PageError
from inkstream.page_result import Block, PageResult

pytestmark = pytest.mark.skipif(shutil.which("pdftotext") is None, reason="poppler-utils not installed")

LINES = ["Searchable output of a scanned page", "second line with numbers 12,345.67", "the last line, short"]
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


def _page(w: int = 1275, h: int = 1650) -> tuple[Image.Image, list[Block]]:
    """A 150 dpi letter page with LINES drawn at known boxes (pixels)."""
    im = Image.new("L", (w, h), 255)
    d = ImageDraw.Draw(im)
    font = ImageFont.truetype(FONT, 36) if pathlib.Path(FONT).exists() else ImageFont.load_default(36)
    blocks = []
    for i, text in enumerate(LINES):
        x, y = 120, 200 + 120 * i
        x0, y0, x1, y1 = d.textbbox((x, y), text, font=font)
        d.text((x, y), text, fill=0, font=font)
        blocks.append(Block("line", text, (float(x0 - 4), float(y0 - 6), float(x1 + 4), float(y1 + 6))))
    return im, blocks


def _result(index: int, blocks: list[Block], size: tuple[int, int]) -> PageResult:
    return PageResult(index=index, status="ok", text="\n".join(b.text for b in blocks), blocks=blocks,
                      width=size[0], height=size[1])


def _cer(ref: str, hyp: str) -> float:
    norm = lambda s: " ".join(s.split())  # noqa: E731 - a one-line local helper
    return Levenshtein.distance(norm(ref), norm(hyp)) / max(1, len(norm(ref)))


def _pdftotext(path: pathlib.Path, *args: str) -> str:
    return subprocess.run(["pdftotext", *args, str(path), "-"], capture_output=True, text=True, check=True).stdout


def _render(path: pathlib.Path, out: pathlib.Path, dpi: int = 75) -> list[bytes]:
    subprocess.run(["pdftoppm", "-r", str(dpi), "-gray", str(path), str(out)], check=True)
    return [p.read_bytes() for p in sorted(out.parent.glob(out.name + "*.pgm"))]


def test_words_span_the_line_box():
    words = words_of("ab  cde f", (0.0, 0.0, 90.0, 10.0))
    assert [w.text for w in words] == ["ab", "cde", "f"]
    assert words[0].box[0] == 0.0 and words[-1].box[2] == 90.0
    assert all(a.box[2] < b.box[0] for a, b in zip(words, words[1:], strict=False))


def test_error_page_has_no_regions():
    page = PageResult(index=1, status="error", error=PageError("INVALID_ARGUMENT", "bad"))
    assert page_regions(page) == []


def test_searchable_pdf_of_a_pdf_keeps_pages_and_adds_invisible_text(tmp_path):
    im, blocks = _page()
    src = tmp_path / "scan.pdf"
    blank = Image.new("L", im.size, 255)
    im.save(src, "PDF", resolution=150.0, save_all=True, append_images=[blank])
    pages = [_result(1, blocks, im.size), _result(2, [], im.size)]
    out = tmp_path / "out.pdf"
    write_searchable_pdf(pages, src, "pdf", out)
    with pikepdf.open(src) as a, pikepdf.open(out) as b:
        assert len(a.pages) == len(b.pages) == 2
        assert [list(p.mediabox) for p in a.pages] == [list(p.mediabox) for p in b.pages]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert _render(src, tmp_path / "a" / "p") == _render(out, tmp_path / "b" / "p")  # the text is invisible
    text = _pdftotext(out, "-f", "1", "-l", "1")
    assert _cer("\n".join(LINES), text) <= 0.01, text
    assert _pdftotext(out, "-f", "2", "-l", "2").strip() == ""  # a page without text gets none
    # every word pdftotext finds lies inside one of our line boxes (points = pixels * 72 / 150)
    boxes = [tuple(v * 72 / 150 for v in b.box) for b in blocks]
    html = _pdftotext(out, "-bbox", "-f", "1", "-l", "1")
    words = re.findall(r'xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" yMax="([\d.]+)">([^<]*)<', html)
    assert len(words) == sum(len(t.split()) for t in LINES)
    for x0, y0, x1, y1, w in words:
        cx, cy = (float(x0) + float(x1)) / 2, (float(y0) + float(y1)) / 2
        assert any(b[0] - 1 <= float(x0) and float(x1) <= b[2] + 1 and b[1] <= cy <= b[3] for b in boxes), (w, cx, cy)


def test_searchable_pdf_hides_a_born_digital_text_layer(tmp_path):
    """Text a PDF page already has still shows but is not extracted twice."""
    im, blocks = _page()
    pdf = pikepdf.new()
    pdf.add_blank_page(page_size=(612, 792))
    page = pdf.pages[0]
    font = pdf.make_indirect(pikepdf.Dictionary(Type=pikepdf.Name.Font, Subtype=pikepdf.Name.Type1,
                                                BaseFont=pikepdf.Name.Helvetica))
    page.obj.Resources = pikepdf.Dictionary(Font=pikepdf.Dictionary(F1=font))
    page.obj.Contents = pdf.make_stream(b"BT /F1 24 Tf 72 700 Td (ORIGINAL TEXT) Tj ET")
    src = tmp_path / "digital.pdf"
    pdf.save(src)
    out = tmp_path / "out.pdf"
    write_searchable_pdf([_result(1, blocks, (1275, 1650))], src, "pdf", out)
    text = _pdftotext(out)
    assert "ORIGINAL" not in text and "Searchable output" in text
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert _render(src, tmp_path / "a" / "p") == _render(out, tmp_path / "b" / "p")


def test_searchable_pdf_of_a_multipage_tiff(tmp_path):
    im, blocks = _page()
    second = Image.new("L", im.size, 255)
    src = tmp_path / "scan.tif"
    im.convert("1").save(src, "TIFF", save_all=True, append_images=[second.convert("1")], compression="group4",
                         dpi=(150, 150))
    out = tmp_path / "out.pdf"
    write_searchable_pdf([_result(1, blocks, im.size), _result(2, [], im.size)], src, "tiff", out)
    with pikepdf.open(out) as b:
        assert len(b.pages) == 2
        assert [round(float(v)) for v in b.pages[0].mediabox] == [0, 0, 612, 792]  # 1275 px at 150 dpi
        image = b.pages[0].obj.Resources.XObject
        filters = [str(f) for x in image.values() if x.get("/Subtype") == "/Image"
                   for f in (x.Filter if isinstance(x.Filter, pikepdf.Array) else [x.Filter])]
        assert filters == ["/CCITTFaxDecode"]  # embedded as it was, not recompressed
    assert _cer("\n".join(LINES), _pdftotext(out, "-f", "1", "-l", "1")) <= 0.01


def test_image_without_dpi_is_placed_at_300_dpi(tmp_path):
    im, blocks = _page(600, 300)
    src = tmp_path / "page.png"
    im.save(src)
    out = tmp_path / "out.pdf"
    write_searchable_pdf([_result(1, blocks, im.size)], src, "png", out)
    with pikepdf.open(out) as b:
        assert [round(float(v)) for v in b.pages[0].mediabox] == [0, 0, 144, 72]


def test_page_selection_keeps_only_the_selected_pages(tmp_path):
    im, blocks = _page()
    src = tmp_path / "scan.pdf"
    im.save(src, "PDF", resolution=150.0, save_all=True, append_images=[im.copy(), im.copy()])
    out = tmp_path / "out.pdf"
    write_searchable_pdf([_result(2, blocks, im.size)], src, "pdf", out)
    with pikepdf.open(out) as b:
        assert len(b.pages) == 1


def test_hocr_is_read_by_ocrmypdf(tmp_path):
    from ocrmypdf.font import MultiFontManager
    from ocrmypdf.fpdf_renderer import Fpdf2PdfRenderer
    from ocrmypdf.hocrtransform import HocrParser

    im, blocks = _page()
    hocr = render_hocr([_result(1, blocks, im.size)], "test-model")
    path = tmp_path / "page.hocr"
    path.write_text(hocr, encoding="utf-8")
    page = HocrParser(path).parse()
    assert page.bbox is not None and (page.bbox.width, page.bbox.height) == im.size
    assert [w.text for w in page.iter_by_class("ocrx_word")] == " ".join(LINES).split()
    import ocrmypdf

    fonts = MultiFontManager(pathlib.Path(ocrmypdf.__file__).parent / "data")
    Fpdf2PdfRenderer(page=page, dpi=150, multi_font_manager=fonts, invisible_text=True).render(tmp_path / "h.pdf")
    assert _cer("\n".join(LINES), _pdftotext(tmp_path / "h.pdf")) <= 0.01


def test_hocr_escapes_text_and_keeps_error_pages():
    blocks = [Block("line", "a <b> & 'c'", (10.0, 10.0, 200.0, 40.0))]
    hocr = render_hocr([_result(2, blocks, (300, 100)),
                        PageResult(index=1, status="error", error=PageError("INVALID_ARGUMENT", "x"))])
    assert hocr.index("page_1") < hocr.index("page_2")
    assert "&lt;b&gt;" in hocr and "&amp;" in hocr and "inkstream_error INVALID_ARGUMENT" in hocr
    io.StringIO(hocr)  # well-formed XML:
    import xml.etree.ElementTree as ET

    ET.fromstring(hocr.split("\n", 3)[3])


@pytest.mark.parametrize("rotate", [0, 90, 180, 270])
def test_rotated_pdf_pages_get_their_text_where_it_shows(tmp_path, rotate):
    """A page with /Rotate: the gateway reads it as shown (pdfium renders the rotation), so the
    text layer must land where the text shows, reading left to right."""
    import numpy as np
    import pypdfium2 as pdfium

    upright, blocks = _page(1650, 1275)
    src = tmp_path / "turned.pdf"
    upright.rotate(rotate, expand=True).save(src, "PDF", resolution=150.0)  # counter-clockwise
    with pikepdf.open(src, allow_overwriting_input=True) as pdf:
        pdf.pages[0].obj.Rotate = rotate  # clockwise on display: upright again
        pdf.save(src)
    shown = pdfium.PdfDocument(str(src))[0].render(scale=150 / 72).to_pil().convert("L")
    assert abs(shown.width - upright.width) <= 1 and abs(shown.height - upright.height) <= 1  # pdfium rounds up
    shown_px = np.asarray(shown.crop((0, 0, *upright.size)), float)
    assert np.mean(np.abs(shown_px - np.asarray(upright, float))) < 8  # shown upright
    out = tmp_path / "out.pdf"
    write_searchable_pdf([_result(1, blocks, shown.size)], src, "pdf", out)
    assert _cer("\n".join(LINES), _pdftotext(out, "-raw")) <= 0.01
    html = _pdftotext(out, "-bbox")
    words = re.findall(r'xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" yMax="([\d.]+)">([^<]*)<', html)
    first = blocks[0].box
    x0, y0, x1, y1, w = words[0]
    assert w == LINES[0].split()[0]
    assert abs(float(x0) - first[0] * 72 / 150) < 3 and first[1] * 72 / 150 - 3 < float(y0) < first[3] * 72 / 150
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert _render(src, tmp_path / "a" / "p") == _render(out, tmp_path / "b" / "p")


@pytest.mark.parametrize("located", [True, False])
def test_a_space_between_two_chinese_words_reaches_the_pdf_text_layer(tmp_path, located):
    """OCRmyPDF's renderer joins two CJK-only words of a line with no separator (Tesseract splits
    Chinese text into words that had no space between them); a space the model read between two
    Chinese words ("第二节 公司基本情况", a heading of the zh eval page) must still reach ``pdftotext``,
    and two words without one stay joined. Before the fix: "第二节公司基本情况".
    """
    from inkstream.page_result import Word
    im = Image.new("L", (1654, 600), 255)
    src = tmp_path / "page.png"
    im.save(src, dpi=(200, 200))
    first = Block("line", "第二节 公司基本情况", (610.0, 260.0, 1044.0, 310.0))
    if located:
        first.words = [Word("第二节", (616.0, 265.0, 747.0, 306.0), 1.0),
                       Word("公司基本情况", (774.0, 265.0, 1038.0, 306.0), 1.0)]
    second = Block("line", "报告全文", (610.0, 400.0, 800.0, 450.0))
    out = tmp_path / "out.pdf"
    write_searchable_pdf([_result(1, [first, second], im.size)], src, "png", out)
    for mode in ((), ("-raw",)):
        lines = [ln.strip() for ln in _pdftotext(out, *mode).splitlines() if ln.strip()]
        assert lines == ["第二节 公司基本情况", "报告全文"], (mode, lines)


@pytest.mark.parametrize("located", [True, False])
def test_a_line_cut_inside_a_word_is_not_split_there_in_hocr_and_pdf(tmp_path, located):
    """A line-level model cuts a long line into pieces, at a word gap or inside a word; the page text
    joins them back ("…非经常性损益》中列举…", a line of the zh eval page cut after "》"). Cut inside a
    word, the two parts must stay one word: hOCR had two ``ocrx_word`` and the PDF text layer a space
    (OCRmyPDF's renderer puts one after a word that is not CJK only). Before the fix:
    "…非经常性损益》 中列举…" and "inter national" from ``pdftotext -raw``.
    """
    from inkstream.page_result import Word
    im = Image.new("L", (1654, 600), 255)
    src = tmp_path / "page.png"
    im.save(src, dpi=(200, 200))
    a = Block("line", "公告第 1号--非经常性损益》", (155.0, 260.0, 874.0, 300.0))
    b = Block("line", "中列举的非经常性损益项目", (874.0, 260.0, 1400.0, 300.0))
    c = Block("line", "an inter", (155.0, 400.0, 400.0, 440.0))
    d = Block("line", "national treaty", (400.0, 400.0, 800.0, 440.0))
    if located:
        a.words = [Word("公告第", (159.0, 264.0, 300.0, 296.0), 1.0),
                   Word("1号--非经常性损益》", (318.0, 264.0, 868.0, 296.0), 1.0)]
        b.words = [Word("中列举的非经常性损益项目", (880.0, 264.0, 1395.0, 296.0), 1.0)]
        c.words = [Word("an", (160.0, 404.0, 220.0, 436.0), 1.0), Word("inter", (245.0, 404.0, 398.0, 436.0), 1.0)]
        d.words = [Word("national", (402.0, 404.0, 640.0, 436.0), 1.0),
                   Word("treaty", (665.0, 404.0, 795.0, 436.0), 1.0)]
    lines = ["公告第 1号--非经常性损益》中列举的非经常性损益项目", "an international treaty"]
    page = PageResult(index=1, status="ok", text="\n".join(lines), blocks=[a, b, c, d], width=im.size[0],
                      height=im.size[1])
    hocr = render_hocr([page])
    assert hocr.count("class='ocrx_word'") == 5, hocr
    out = tmp_path / "out.pdf"
    write_searchable_pdf([page], src, "png", out)
    got = [ln.strip() for ln in _pdftotext(out, "-raw").splitlines() if ln.strip()]
    assert got == lines
