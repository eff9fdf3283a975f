"""Region-based reading order, rules, skew and box mapping of the compact detector (no recogniser)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw

from evaluation.score import score
from models.compact.page.boxes import LineBox
from models.compact.page.layout import HEADING, IMAGE, TABLE, TEXT, LayoutAnalyser, PageLayout, Region, erase_rules
from models.compact.page.regions import line_piece, line_skew_deg, region_order
from models.compact.page.unrotate import unrotate_box


def _line(x0, y0, x1, y1) -> LineBox:
    q = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], dtype=np.float32)
    return LineBox(q, (x0, y0, x1, y1), 0.9)


def _column(x0, x1, y0, n, step=40):
    return [_line(x0, y0 + step * i, x1, y0 + step * i + 28) for i in range(n)]


def test_columns_around_a_photo_under_a_title_with_header_and_page_number():
    """Four columns, a photo across the first two (the first column's lines run beside it), a title
    spanning the last three below their text, a running header and a page number: read header, then
    each column (the photo's line after the first, the block just above it), then the title, then
    the page number."""
    header = _line(100, 20, 500, 44)
    cols = [_column(100 + 420 * c, 480 + 420 * c, 150, 20) for c in range(4)]
    title = _line(520, 1000, 1800, 1080)
    photo_line = _line(150, 1100, 300, 1130)  # "text" the detector found in the photo
    number = _line(1700, 1400, 1740, 1424)
    layout = PageLayout(regions=[
        Region(TEXT, (95, 15, 505, 48), 0), Region(IMAGE, (80, 950, 900, 1300), 1),
        *[Region(TEXT, (95 + 420 * c, 145, 485 + 420 * c, 950), 2 + c) for c in range(4)],
        Region(HEADING, (515, 995, 1805, 1085), 7), Region(TEXT, (1695, 1395, 1745, 1428), 8)])
    lines = [number, title, photo_line, *[ln for col in cols[::-1] for ln in col[::-1]], header]
    order = region_order(lines, layout, 1500)
    assert order == [header, *cols[0], photo_line, *[ln for col in cols[1:] for ln in col], title, number]


def test_line_run_across_a_gutter_is_cut_and_overlapping_blocks_merge():
    left, right = _column(100, 480, 150, 10), _column(540, 920, 150, 10)
    across = _line(100, 550, 920, 578)  # the detector ran one line over both columns
    drop_cap_block = Region(TEXT, (95, 140, 490, 260), 2)  # overlaps the first column's block
    layout = PageLayout(regions=[Region(TEXT, (95, 145, 485, 590), 0), Region(TEXT, (535, 145, 925, 590), 1),
                                 drop_cap_block])
    order = region_order([*right, across, *left], layout, 1200)
    assert len(order) == 22
    assert order[:10] == left and order[10].box[2] == pytest.approx(512.5) and order[11:21] == right
    assert order[21].box[0] == pytest.approx(512.5)


def test_table_region_with_header_row_gets_cell_joins():
    rows = [[_line(100, 300 + 40 * r, 220, 328 + 40 * r), _line(400, 300 + 40 * r, 520, 328 + 40 * r),
             _line(560, 300 + 40 * r, 600, 328 + 40 * r)] for r in range(5)]
    head = [_line(100, 255, 200, 283), _line(400, 255, 480, 283), _line(560, 255, 640, 283)]
    layout = PageLayout(regions=[Region(TEXT, (95, 250, 650, 286), 0),
                                 Region(TABLE, (95, 295, 650, 500), 1)])
    order = region_order([*head, *[c for r in rows for c in r]], layout, 1200)
    assert [ln.join for ln in order[:3]] == ["cell:1:0:0", "cell:1:0:1", "cell:1:0:2"]
    assert order[3].join == "cell:1:1:0" and order[-1].join == "cell:1:5:2"


def test_table_last_row_left_below_its_closing_rule_joins_it_and_a_note_does_not():
    """A booktabs / horizontally ruled table whose last row the analysis left in a block of its own
    below the table (issue 37, bench/tables.py seeds 1-3: that row's cells were read as loose lines
    after the table); a one-line note under it stays outside."""
    rows = [[_line(100, 300 + 40 * r, 220, 328 + 40 * r), _line(400, 300 + 40 * r, 520, 328 + 40 * r),
             _line(560, 300 + 40 * r, 600, 328 + 40 * r)] for r in range(5)]
    last = [_line(100, 510, 210, 538), _line(400, 510, 500, 538), _line(560, 510, 610, 538)]
    note = _line(100, 560, 480, 588)
    layout = PageLayout(regions=[Region(TABLE, (95, 295, 650, 490), 0), Region(TEXT, (95, 505, 650, 542), 1),
                                 Region(TEXT, (95, 555, 650, 592), 2)])
    order = region_order([*[c for r in rows for c in r], *last, note], layout, 1200)
    assert [ln.join for ln in order[15:18]] == ["cell:1:5:0", "cell:1:5:1", "cell:1:5:2"]
    assert order[-1] is note and note.join != "cell:1:6:0"


def test_skew_is_measured_from_the_lines():
    lines = []
    for i in range(8):  # lines rising to the right by 5 degrees
        x0, y0, length = 100.0, 300.0 + 50 * i, 800.0
        dy = -length * np.tan(np.radians(5))
        q = np.array([[x0, y0], [x0 + length, y0 + dy], [x0 + length, y0 + dy + 30], [x0, y0 + 30]], np.float32)
        lines.append(LineBox(q, (x0, y0 + dy, x0 + length, y0 + 30), 0.9))
    assert line_skew_deg(lines) == pytest.approx(5.0, abs=0.01)
    assert line_skew_deg(lines[:3]) is None
    piece = line_piece(lines[0], 100.0, 500.0)
    assert piece.box[0] == 100.0 and piece.box[2] == 500.0 and piece.quad[1, 1] < lines[0].quad[0, 1]


@pytest.mark.parametrize("angle", [90, 180, 270, 7.5, -4.0, 97.0])
def testunrotate_box_maps_a_marked_pixel_back(angle):
    w, h = 300, 200
    page = Image.new("L", (w, h), 0)
    page.paste(255, (240, 30, 246, 36))  # a marked square in the received page
    up = page.rotate(angle, expand=True)
    ys, xs = np.nonzero(np.asarray(up) > 128)
    x0, y0, x1, y1 = unrotate_box((float(xs.min()), float(ys.min()), float(xs.max()) + 1, float(ys.max()) + 1),
                                   angle, w, h)
    assert x0 <= 241 and x1 >= 245 and y0 <= 31 and y1 >= 35, (x0, y0, x1, y1)
    assert x1 - x0 < 16 and y1 - y0 < 16


def test_tesseract_finds_rules_and_columns_and_rules_are_erased():
    from PIL import ImageFont

    analyser = LayoutAnalyser()
    if not analyser.available:
        pytest.skip("tesserocr not installed")
    page = Image.new("RGB", (1700, 1100), "white")
    draw = ImageDraw.Draw(page)
    font = ImageFont.truetype("/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf", 30)
    for x0 in (120, 900):  # two columns of text with a vertical rule between them
        for i in range(14):
            draw.text((x0, 200 + 50 * i), "The quick brown fox jumps over", font=font, fill="black")
    draw.rectangle((860, 180, 862, 900), fill="black")
    layout = analyser.analyse(page)
    assert any(r[3] - r[1] > 600 and r[2] - r[0] < 10 for r in layout.rules), layout.rules
    texts = sorted(r.box[0] for r in layout.regions if r.kind == TEXT)
    assert texts[0] < 200 and texts[-1] > 850
    clean = np.asarray(erase_rules(page, layout.rules).convert("L"))
    assert clean[180:900, 858:865].min() > 200 and clean[200:240, 120:600].min() < 60
    assert erase_rules(page, []) is page


def test_masked_reference_characters_are_not_scored():
    assert score("ab x cd", "ab ~ cd").char_edits == 0
    s = score("successful", "~~ successful")
    assert s.ref_chars == len("successful") + 1 and s.char_edits <= 1
    assert score("abXcd", "abcd").char_edits == 1


def test_page_with_margin_line_numbers_keeps_numbers_with_their_rows():
    """A transcript: line numbers in the left margin, each Tesseract's block of its own, and the text
    in a few blocks: read row by row, each number before its line (not the numbers column first)."""
    rows = []
    regions = []
    for i in range(12):
        y = 100 + 60 * i
        rows += [_line(60, y, 90, y + 24), _line(160, y, 900 - 20 * (i % 3), y + 24)]
        regions.append(Region(TEXT, (58, y - 2, 92, y + 26), i))
    regions += [Region(TEXT, (155, 95, 905, 400), 20), Region(TEXT, (155, 450, 905, 800), 21)]
    order = region_order(rows[::-1], PageLayout(regions=regions), 1000)
    assert order == rows


def test_strokes_inside_a_text_line_are_not_rules():
    """Tesseract reports the long horizontal strokes of hanzi (董, 事, 三) as rule lines; erasing them
    loses the characters. A rule in the middle band of a detected line is dropped; an underline at the
    line's bottom edge and a table border between two lines are kept."""
    from models.compact.page.rule_lines import character_strokes_dropped

    lines = [_line(100, 100, 800, 140), _line(100, 200, 800, 240)]
    stroke = (300.0, 118.0, 420.0, 121.0)  # across three hanzi, mid-height of the first line
    underline = (100.0, 137.0, 800.0, 139.0)  # at the first line's bottom edge
    border = (80.0, 168.0, 820.0, 170.0)  # between the lines
    assert character_strokes_dropped([stroke, underline, border], lines) == [underline, border]
    top = (300.0, 102.0, 360.0, 104.0)  # the top stroke of one character (三, 币) in the top band
    assert character_strokes_dropped([top, underline], lines) == [underline]


def test_a_column_rule_inside_a_box_over_several_rows_is_kept():
    """A detection over many rows of two table columns (the detector's tall box that the row split
    could not cut) holds the column rule between them from end to end: that rule is a rule, not a
    stroke of the box's "characters" (seed 2 page 6 of bench/tables.py lost four column rules so)."""
    from models.compact.page.rule_lines import character_strokes_dropped

    lines = [_line(100, 100 + 40 * i, 300, 130 + 40 * i) for i in range(20)]
    tall = _line(400, 90, 600, 900)  # 810 px over 20 rows of two columns, 200 px wide
    rule = (428.0, 95.0, 431.0, 895.0)  # the column rule inside it
    stroke = (150.0, 114.0, 250.0, 116.0)  # a dash mid-height of a text line stays a stroke
    assert character_strokes_dropped([rule, stroke], [*lines, tall]) == [rule]


def test_rules_that_are_strokes_lined_up_are_not_erased():
    """Tesseract joins strokes that line up into one rule (the top strokes of a run of hanzi, the left
    strokes of three lines' first characters across the gaps between the lines); only a run of ink
    from end to end is a rule."""
    from models.compact.page.rule_lines import unbroken_rules

    img = Image.new("L", (600, 400), 255)
    draw = ImageDraw.Draw(img)
    draw.rectangle((50, 20, 550, 22), fill=0)  # a table border: solid
    for x in range(100, 400, 40):  # top strokes of seven characters, 10 px apart
        draw.rectangle((x, 60, x + 29, 62), fill=0)
    for y in (100, 160, 220):  # three lines' first strokes, blank paper between the lines
        draw.rectangle((60, y, 62, y + 30), fill=0)
    border, strokes, column = (50.0, 20.0, 550.0, 22.0), (100.0, 60.0, 369.0, 62.0), (60.0, 100.0, 62.0, 250.0)
    assert unbroken_rules([border, strokes, column], np.asarray(img)) == [border]


def _inked(lines: list[LineBox], size: tuple[int, int], pitch: int = 40, glyph: int = 36) -> np.ndarray:
    """A white page (uint8 [H, W]) with each line's box filled with black "glyphs" ``glyph`` px wide
    every ``pitch`` px (hanzi set solid: 4 px between them, no word spaces)."""
    im = Image.new("L", size, 255)
    d = ImageDraw.Draw(im)
    for ln in lines:
        x0, y0, x1, y1 = (int(v) for v in ln.box)
        for x in range(x0, x1 - glyph + 1, pitch):
            d.rectangle((x, y0 + 3, x + glyph - 1, y1 - 3), fill=0)
    return np.asarray(im)


def test_a_line_across_two_blocks_without_a_gutter_joins_them_and_is_kept_whole():
    """Generated Chinese report, ``bench/doc_pages.py --seed 700`` page 5: Tesseract cut a paragraph of
    hanzi into side-by-side blocks; its lines were cut between them and read as two columns, the
    last line first (13 % CER, 0 % order-free). A line with ink all across the gap between two
    blocks is one block's line; with a blank gutter it is still cut (test above)."""
    para = [_line(140, 285, 1350, 326), _line(140, 343, 1575, 387), _line(140, 406, 383, 444)]
    layout = PageLayout(regions=[Region(TEXT, (144, 287, 617, 321), 0), Region(TEXT, (144, 348, 617, 439), 1),
                                 Region(TEXT, (875, 287, 1568, 381), 2)])
    order = region_order(para[::-1], layout, 2200, _inked(para, (1700, 2200)))
    assert order == para
    left, right = _column(100, 480, 150, 10), _column(540, 920, 150, 10)
    across = _line(100, 550, 920, 578)
    page = _inked(left + right, (1200, 1200)).copy()
    page[550:578, 100:480], page[550:578, 540:920] = 0, 0  # the line's ink stops at the gutter
    layout = PageLayout(regions=[Region(TEXT, (95, 145, 485, 590), 0), Region(TEXT, (535, 145, 925, 590), 1)])
    order = region_order([*right, across, *left], layout, 1200, page)
    assert len(order) == 22 and order[:10] == left and order[10].box[2] == pytest.approx(510.0)


def test_a_line_is_not_cut_into_a_block_that_holds_nothing_else_at_a_stops_blank():
    """Generated Chinese report, ``bench/doc_pages.py --seed 400`` page 11: Tesseract made the tail of a
    prose line (after ``。`` and a narrow character, 0.72 line heights of paper) a one-line block beside
    the paragraph; the line was cut there and its tail read after the next line (5.8 % CER, 0.0 %
    order-free). A block holding nothing but that line's tail is no column: the line stays whole. A
    blank of a real gutter (two line heights) into such a block still cuts it: a column read after the
    block beside it."""
    para = [_line(141, 909, 1559, 938), _line(141, 955, 1145, 983), _line(141, 1000, 1414, 1028)]
    page = _inked(para, (1700, 2200)).copy()
    page[909:938, 1132:1153] = 255  # the stop's blank: 21 px, 0.72 x the line's 29 px
    layout = PageLayout(regions=[Region(TEXT, (143, 911, 1142, 980), 0), Region(HEADING, (1163, 911, 1556, 935), 1),
                                 Region(HEADING, (143, 1002, 1411, 1026), 2)])
    assert region_order(para[::-1], layout, 2200, page) == para
    page[909:938, 1100:1160] = 255  # a gutter two line heights wide: cut, tail in its own block
    order = region_order(para[::-1], layout, 2200, page)
    assert len(order) == 4 and order[0].box[2] == pytest.approx(1152.5) and order[1] is para[1]
    assert order[2].box[0] == pytest.approx(1152.5) and order[3] is para[2]
