"""Every word of a line reaches the searchable PDF's text layer whole, whatever boxes the detector
gave its pieces (gateway/output/glyph_room.py, text_band.py): a piece whose box runs far across the
line (down a table column) must not make the line's font so large that poppler takes the other
words' squeezed glyphs for duplicates and drops them, and two pieces whose boxes overlap by more
than trimming opens must still read as two words. The pieces are those of bench/table_pages.py's
seed 0 page as the embedded model read it on an AVX2 CPU (test_table_formats.py); the shifted
copies are not it.
"""

from __future__ import annotations

import shutil

import pytest

from bench.word_boxes import pdftotext
from gateway.output.glyph_room import MIN_ADVANCE, largest_font
from gateway.output.lines import page_regions
from gateway.output.searchable_pdf import text_layer
from gateway.output.text_band import reader_geometry, set_line
from inkstream.page_result import Block, PageResult

needs_poppler = pytest.mark.skipif(shutil.which("pdftotext") is None, reason="poppler-utils not installed")


def _page(pieces: list[tuple[str, tuple[float, float, float, float]]], joiner: str = "  ") -> PageResult:
    text = joiner.join(t for t, _ in pieces)
    blocks = [Block(type="line", text=t, box=b, confidence=0.9) for t, b in pieces]
    return PageResult(index=1, status="ok", width=1240, height=1754, text=text, blocks=blocks)


def _layer_words(page: PageResult, tmp_path) -> list[str]:
    text_layer([page], [(1240 * 72 / 150, 1754 * 72 / 150)], tmp_path / "layer.pdf")
    return pdftotext(tmp_path / "layer.pdf").split()


@needs_poppler
@pytest.mark.parametrize("shift", [0.0, 37.0, -61.0])
def test_a_piece_running_down_a_column_does_not_cost_the_lines_numbers_their_digits(shift, tmp_path):
    # two pieces 300 px tall ("s" read in a column strip) on a row of numbers 34 px tall: the union
    # of the pieces made the line box 307 px tall, a 236 px font over words 55 px wide, and poppler
    # read "25,10" and "10," "5" (its glyphs under 0.1 font sizes apart)
    rows = [("广东省", (115, 284, 193, 319)), ("25,100", (308, 289, 392, 323)), ("25,475", (427, 289, 510, 323)),
            ("87,069", (557, 289, 643, 323)), ("10,055", (679, 289, 763, 323)), ("18,068", (811, 289, 895, 323)),
            ("s", (875, 169, 904, 472)), ("s", (904, 165, 1063, 472))]
    page = _page([(t, (x0, y0 + shift, x1, y1 + shift)) for t, (x0, y0, x1, y1) in rows])
    assert _layer_words(page, tmp_path) == [t for t, _ in rows]
    line = page_regions(page)[0].lines[0]
    assert line.box[3] - line.box[1] < 100  # the row's band, not the column strip's


@needs_poppler
def test_pieces_whose_boxes_overlap_past_trimming_read_as_two_words(tmp_path):
    # "-11" [646, 688] and "-112.63%" [651, 762]: trimming each by 15 % of its width left them
    # overlapping, and poppler read "-11-112.63%"
    pieces = [("山东省", (116, 1651, 192, 1682)), ("86", (356, 1656, 391, 1686)), ("-0.0337", (420, 1656, 508, 1686)),
              ("21,467", (559, 1656, 646, 1689)), ("-11", (646, 1656, 688, 1689)),
              ("-112.63%", (651, 1656, 762, 1686)), ("702", (844, 1655, 895, 1687)), ("508", (966, 1655, 1017, 1687))]
    assert _layer_words(_page(pieces), tmp_path) == [t for t, _ in pieces]


def test_a_line_of_located_words_is_no_taller_than_its_narrowest_glyphs_allow():
    # located words of a normal row, and one whose ink box runs 300 px across it
    words = [("25,100", (318.0, 289.0, 373.0, 323.0), True), ("10,055", (697.0, 289.0, 751.0, 323.0), True),
             ("s", (886.0, 169.0, 895.0, 472.0), True), ("ss", (983.0, 165.0, 1063.0, 472.0), True)]
    box, boxes = set_line(words, 0)
    above, below, size = reader_geometry()
    font = size * (box[3] - box[1]) / (above + below)
    assert font <= largest_font((w[0], b[2] - b[0]) for w, b in zip(words, boxes, strict=True)) + 1e-6
    assert largest_font([("s", 5.0)]) == float("inf")  # one glyph: no advance to keep
    assert largest_font([("11", 20.0)]) == pytest.approx(10.0 / MIN_ADVANCE)  # two equal glyphs, 10 px each
