"""gateway.output.parted: words a reader would join into one (a duplicate read over its neighbour's
ink) are laid apart in the text layer; what was read stays as it is."""

from __future__ import annotations

from gateway.output.lines import Line, Word
from gateway.output.parted import parted
from gateway.output.text_band import BREAK, reader_geometry


def _font(height: float) -> float:
    above, below, size = reader_geometry()
    return size * height / (above + below)


def test_a_duplicate_read_overlapping_its_neighbour_in_one_line_is_laid_apart():
    # the seed-0 table page of bench/table_pages.py on an AVX2 CPU: '2,799.55 2', the '2' a second
    # detection over the number's first digit; poppler read the layer as '22,799.55'
    number, dup = Word("2,799.55", (654.0, 812.0, 764.0, 849.0)), Word("2", (646.0, 816.0, 678.0, 849.0))
    line = Line("2,799.55 2", (646.0, 812.0, 764.0, 849.0), [number, dup])
    parted([line])
    assert number.box[0] - dup.box[2] >= BREAK * _font(37.0) - 1e-6
    assert dup.box[0] == 646.0 and number.box[2] == 764.0  # laid over the span the two cover
    assert dup.box[2] - dup.box[0] > 0 and number.box[2] - number.box[0] > dup.box[2] - dup.box[0]
    assert (line.box[0], line.box[2]) == (646.0, 764.0)


def test_two_lines_on_one_row_that_overlap_are_laid_apart_and_others_are_left_alone():
    a = Line("-11", (646.0, 100.0, 688.0, 130.0), [Word("-11", (646.0, 100.0, 688.0, 130.0))])
    b = Line("-112.63%", (651.0, 100.0, 762.0, 130.0), [Word("-112.63%", (651.0, 100.0, 762.0, 130.0))])
    far = Line("703", (800.0, 100.0, 850.0, 130.0), [Word("703", (800.0, 100.0, 850.0, 130.0))])
    below = Line("9", (650.0, 160.0, 680.0, 190.0), [Word("9", (650.0, 160.0, 680.0, 190.0))])
    parted([a, b, far, below])
    assert b.words[0].box[0] - a.words[0].box[2] >= BREAK * _font(30.0) - 1e-6
    assert far.words[0].box == (800.0, 100.0, 850.0, 130.0)
    assert below.words[0].box == (650.0, 160.0, 680.0, 190.0)


def test_a_duplicate_read_set_after_the_number_it_overlaps_reads_as_two_words_in_the_layer(tmp_path):
    import shutil

    import pytest

    from bench.word_boxes import pdftotext
    from gateway.output.searchable_pdf import text_layer
    from inkstream.page_result import Block, PageResult

    if shutil.which("pdftotext") is None:
        pytest.skip("poppler-utils not installed")
    pieces = [("管理费用", (117, 812, 216, 841)), ("(80,324)", (295, 815, 391, 849)), ("16,584", (428, 815, 511, 849)),
              ("-3,352", (565, 816, 646, 849)), ("2,799.55", (654, 812, 764, 849)), ("2", (646, 816, 678, 849)),
              ("-0.1599", (805, 816, 893, 846)), ("3,966.57", (916, 814, 1016, 849))]
    text = "  ".join(t for t, _ in pieces[:4]) + "  2,799.55 2  " + "  ".join(t for t, _ in pieces[6:])
    blocks = [Block(type="line", text=t, box=b, confidence=0.9) for t, b in pieces]
    page = PageResult(index=1, status="ok", width=1240, height=1754, text=text, blocks=blocks)
    text_layer([page], [(1240 * 72 / 150, 1754 * 72 / 150)], tmp_path / "layer.pdf")
    assert sorted(pdftotext(tmp_path / "layer.pdf").split()) == sorted(t for t, _ in pieces)
