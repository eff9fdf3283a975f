"""The band a line of located words is set on in the text layer (gateway/output/text_band.py, issue
42): the reader's box geometry against poppler, word gaps closed under poppler's column gap while
every word keeps its ink, a line number and its line set on one band; and, read back by poppler's
``pdftotext`` and OCRmyPDF's hOCR renderer, seeded transcript pages (a line-number column, spaced
capitals) and pages of spaced capital headings (bench/transcript_pages.py; seeds not used to tune).
"""

from __future__ import annotations

import shutil

import pytest

from bench.transcript_pages import heading_page, transcript_page
from bench.word_boxes import fold, hocr_pdf, measure, pdf_words, pdftotext, result_of
from gateway.output.searchable_pdf import text_layer, write_searchable_pdf
from gateway.output.text_band import JOIN, MIN_WORD_IOU, reader_geometry, same_row, set_line, set_row
from inkstream.page_result import Block, PageResult, Word

needs_poppler = pytest.mark.skipif(shutil.which("pdftotext") is None, reason="poppler-utils not installed")


def _iou_1d(a: tuple[float, float], b: tuple[float, float]) -> float:
    inter = max(0.0, min(a[1], b[1]) - max(a[0], b[0]))
    return inter / (max(a[1], b[1]) - min(a[0], b[0]))


@needs_poppler
def test_the_readers_box_is_where_the_geometry_says(tmp_path):
    words = [Word("HELLO", (100.0, 200.0, 300.0, 240.0), 0.9), Word("WORLD", (330.0, 200.0, 530.0, 240.0), 0.9)]
    block = Block(type="line", text="HELLO WORLD", box=(90.0, 190.0, 540.0, 250.0), confidence=0.9, words=words)
    page = PageResult(index=1, status="ok", width=1000, height=1000, text="HELLO WORLD", blocks=[block])
    text_layer([page], [(1000.0, 1000.0)], tmp_path / "layer.pdf")
    line, _ = set_line([(w.text, w.box, True) for w in words], 0)
    above, below, _ = reader_geometry()
    h = line[3] - line[1]
    for _, (_, y0, _, y1) in pdf_words(tmp_path / "layer.pdf", (1000, 1000)):
        assert y0 == pytest.approx(line[3] - above * h, abs=0.3) and y1 == pytest.approx(line[3] + below * h, abs=0.3)


def test_wide_word_gaps_are_closed_while_each_word_keeps_its_ink():
    # monospaced capitals: 20 px tall, word gaps of 30 px (an em and a half of a font set to the
    # capitals' height)
    ink = [("IN", (100.0, 100.0, 130.0, 120.0)), ("THE", (160.0, 100.0, 205.0, 120.0)),
           ("SUPREME", (235.0, 100.0, 340.0, 120.0)), ("COURT", (370.0, 100.0, 445.0, 120.0))]
    line, boxes = set_line([(t, b, True) for t, b in ink], 0)
    above, below, size = reader_geometry()
    h = line[3] - line[1]
    font = size * h
    shown = (line[3] - above * h, line[3] + below * h)
    for (_, a), b, nxt in zip(ink, boxes, boxes[1:] + [None], strict=True):
        across, along = _iou_1d(shown, (a[1], a[3])), (a[2] - a[0]) / (b[2] - b[0])
        assert b[0] <= a[0] and b[2] >= a[2] and across * along >= MIN_WORD_IOU - 1e-6
        if nxt is not None:
            assert nxt[0] - b[2] <= JOIN * font + 1e-6


def test_a_column_gap_is_left_open():
    ink = [("Name", (100.0, 100.0, 160.0, 120.0)), ("Total", (900.0, 100.0, 970.0, 120.0))]
    _, boxes = set_line([(t, b, True) for t, b in ink], 0)
    assert boxes == [b for _, b in ink]


def test_a_line_number_and_its_line_share_one_band():
    number = [("12", (40.0, 98.0, 66.0, 120.0), True)]
    text = [("argument", (120.0, 100.0, 260.0, 126.0), True), ("before", (282.0, 98.0, 380.0, 120.0), True)]
    assert same_row(number, text, 0) and not same_row(text, number, 0)
    assert not same_row(number, [("next", (120.0, 160.0, 200.0, 182.0), True)], 0)  # the next row
    assert not same_row(number, [("Chapter", (120.0, 70.0, 400.0, 125.0), True)], 0)  # a heading beside it
    (a, _), (b, _) = set_row([number, text], 0)
    assert (a[1], a[3]) == (b[1], b[3]) and a[2] <= b[0]


@needs_poppler
@pytest.mark.parametrize("seed", [3, 4])
def test_spaced_capital_headings_read_as_our_text(seed, tmp_path):
    f = measure(f"headings{seed}", heading_page(seed), tmp_path)
    assert f.pdf_cer < 0.02 and f.hocr_cer < 0.02
    assert f.pdf_hits >= 0.95 * f.words and f.hocr_hits >= 0.95 * f.words and f.pixels_same


@needs_poppler
@pytest.mark.parametrize("seed", [3, 4])
def test_transcript_lines_read_whole_and_on_their_ink(seed, tmp_path):
    truth = transcript_page(seed)
    f = measure(f"transcript{seed}", truth, tmp_path)
    assert f.pdf_hits >= 0.95 * f.words and f.hocr_hits >= 0.95 * f.words and f.pixels_same
    # every line of ours comes out of poppler's default mode in one piece (its words not read as
    # columns); where a numbered row cannot be one block, poppler still orders the number column its
    # own way (Breuel's rule), so the page as a whole is only near our text
    png = tmp_path / "page.png"
    truth.image.save(png, dpi=(150, 150))
    result = result_of(truth, png)
    write_searchable_pdf([result], png, "png", tmp_path / "page.pdf")
    hocr_pdf(result, tmp_path / "page.hocr", tmp_path / "hocr.pdf", 150.0)
    for out in (tmp_path / "page.pdf", tmp_path / "hocr.pdf"):
        read = fold(pdftotext(out))
        assert [ln for ln in result.text.split("\n") if fold(ln) not in read] == []
    assert f.pdf_cer < 0.08 and f.hocr_cer < 0.08


def test_transcript_pages_are_seeded():
    a, b = transcript_page(5), transcript_page(5)
    assert [ln.words for ln in a.lines] == [ln.words for ln in b.lines]
    numbers = [int(ln.words[0]) for ln in a.lines if len(ln.words) == 1 and ln.words[0].isdigit()]
    assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) >= 20


@needs_poppler
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_words_whose_boxes_touch_are_still_read_as_two_words(seed, tmp_path):
    # Word boxes 0-2 px apart (the located ink of two words whose letters nearly touch, or a word box
    # that took a neighbour's first letter: "input" [378, 446] and "to" [447, 467] on a 300 dpi
    # page): poppler joins two glyph runs into one word when the gap between them is under 0.1 font
    # sizes, so the text layer must open each gap wide enough to be read as a word break.
    rng = __import__("random").Random(seed)
    texts = ["attack", "sensor", "input", "to", "the", "flight", "FCC", "A", "and", "large", "angle"]
    rng.shuffle(texts)
    words, x = [], 100.0
    for t in texts:
        width = 13.0 * len(t)
        top = 100.0 + rng.choice([0.0, 3.0, -4.0])
        words.append(Word(t, (x, top, x + width, top + 22.0 + rng.choice([0.0, 6.0])), 0.9))
        x += width + rng.choice([0.0, 1.0, 2.0])
    line = " ".join(texts)
    block = Block(type="line", text=line, box=(90.0, 90.0, x + 10.0, 140.0), confidence=0.9, words=words)
    page = PageResult(index=1, status="ok", width=1600, height=400, text=line, blocks=[block])
    text_layer([page], [(1600 * 72 / 300, 400 * 72 / 300)], tmp_path / "layer.pdf")
    assert fold(pdftotext(tmp_path / "layer.pdf", "-raw")) == line
    assert fold(pdftotext(tmp_path / "layer.pdf")) == line
    hocr_pdf(page, tmp_path / "page.hocr", tmp_path / "hocr.pdf", 300.0)  # our hOCR, OCRmyPDF's renderer
    assert fold(pdftotext(tmp_path / "hocr.pdf", "-raw")) == line
