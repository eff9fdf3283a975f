"""Conservation on dense tables (issue 37), without the recogniser: a detection that holds several
table rows is split into its rows (models/compact/page/rowsplit.py), and on generated dense table
pages (bench/table_pages.py: colour bands, shaded rows, rules of every kind, narrow numeric columns
between vertical rules) every number cell drawn lands whole in a line of its own.

The PP-OCR detector returned whole stretches of a narrow numeric column as ONE tall box (3-6 rows at
score 0.52-0.62 on the seed-0 page below; 105 x 1,108 px over 50 rows on the issue's statistics page),
read as one "line": 36 % of that page's numbers were lost.
"""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from bench.table_pages import render_table_page
from models.compact.page.boxes import LineBox
from models.compact.page.rowsplit import split_box, split_rows

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


def _column(rows: int, pitch: int, band: tuple[int, int, int] | None, rules: bool) -> tuple[np.ndarray, list]:
    """A page with one narrow right-aligned numeric column (and a label column beside it, so the page
    has normal lines too); returns (rgb, the numbers' ink boxes)."""
    img = Image.new("RGB", (600, 120 + rows * pitch), (255, 255, 255))
    d = ImageDraw.Draw(img)
    font = ImageFont.truetype(FONT, 22)
    if band:
        d.rectangle((300, 40, 420, 60 + rows * pitch), fill=band)
    if rules:
        for x in (300, 420):
            d.line((x, 40, x, 60 + rows * pitch), fill=(0, 0, 0), width=2)
    boxes = []
    for r in range(rows):
        y = 60 + r * pitch
        text = f"{(r * 7919) % 90000 + 1000:,}"
        x = 410 - font.getlength(text)
        d.text((x, y), text, font=font, fill=(0, 0, 0))
        boxes.append(d.textbbox((x, y), text, font=font))
        d.text((40, y), f"Item {r}", font=font, fill=(0, 0, 0))
    return np.asarray(img), boxes


def _line(box) -> LineBox:
    x0, y0, x1, y1 = box
    return LineBox(np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], np.float32), box, 0.6)


def _holds(line_box, ink_box, slack: float = 1.0) -> bool:
    return (line_box[0] - slack <= ink_box[0] and ink_box[2] <= line_box[2] + slack
            and line_box[1] - slack <= ink_box[1] and ink_box[3] <= line_box[3] + slack)


@pytest.mark.parametrize(("band", "rules", "pitch"), [((214, 232, 250), False, 32), (None, True, 30),
                                                       ((252, 236, 200), True, 36)])
def test_a_tall_box_over_a_numeric_column_becomes_one_line_per_row(band, rules, pitch):
    rgb, ink = _column(12, pitch, band, rules)
    labels = [_line((36.0, 55.0 + r * pitch, 140.0, 86.0 + r * pitch)) for r in range(12)]
    tall = _line((305.0, 57.0, 415.0, 56.0 + 12 * pitch))  # what the detector returned: one box, 12 rows
    out = split_rows(rgb, [*labels, tall])
    assert out[:12] == labels  # the normal lines are kept as they are
    rows = out[12:]
    assert len(rows) == 12
    for r, box in enumerate(ink):
        holding = [ln for ln in rows if _holds(ln.box, box)]
        assert len(holding) == 1, (r, box, [ln.box for ln in rows])
        assert all(ln.box[3] <= nxt[1] + 1 for ln, nxt in zip(holding, ink[r + 1:r + 2], strict=False))


def test_a_box_cutting_its_first_row_gets_that_row_whole():
    rgb, ink = _column(6, 34, (214, 232, 250), False)
    cut = _line((305.0, float(ink[0][1] + 8), 415.0, float(ink[-1][3] - 6)))  # through rows 0 and 5
    rows = split_rows(rgb, [_line((36.0, 55.0, 140.0, 86.0)), _line((36.0, 90.0, 140.0, 120.0)), cut])[2:]
    assert len(rows) == 6 and all(_holds(ln.box, b) for ln, b in zip(rows, ink, strict=True))


def test_a_row_the_box_cuts_through_is_kept_unless_another_line_holds_it():
    """The detector's box over four rows ended 40 % into the fourth (seed 7 page 6 of bench/tables.py:
    ``107`` half inside a 3.4-row box, held by no other detection, lost). Kept whole as a row of its
    own; when another detection holds that row, it is not added twice."""
    rgb, ink = _column(6, 34, None, True)
    cut = ink[3][1] + 0.4 * (ink[3][3] - ink[3][1])
    tall = _line((305.0, float(ink[0][1] - 3), 415.0, float(cut)))
    labels = [_line((36.0, 55.0, 140.0, 86.0)), _line((36.0, 90.0, 140.0, 120.0))]
    rows = split_rows(rgb, [*labels, tall])[2:]
    assert len(rows) == 4, [ln.box for ln in rows]
    assert all(_holds(ln.box, b) for ln, b in zip(rows, ink[:4], strict=True))
    holder = _line((300.0, float(ink[3][1] - 6), 415.0, float(ink[3][3] + 6)))
    rows = split_rows(rgb, [*labels, tall, holder])[2:]
    assert len(rows) == 4 and rows[-1] is holder  # the three rows of the box, then the holder


@pytest.mark.parametrize("sliver_px", [1, 2])
def test_a_neighbours_sliver_at_the_crops_edge_does_not_stop_the_split(sliver_px):
    """The crop reaches half a line above the detection, where the bottom of the row above can leave
    a sliver of ink at the crop's top edge, far from the first row (seed 7 page 6 of bench/tables.py:
    joined to row 0's band, it made that band 2x the others' height, so no split, 4 numbers lost)."""
    img = Image.new("L", (160, 130), 255)
    d = ImageDraw.Draw(img)
    font = ImageFont.truetype(FONT, 18)
    d.rectangle((20, 0, 110, sliver_px - 1), fill=0)  # the header's descenders, cut by the crop
    for r, text in enumerate(("92,219", "70,930", "-5,134")):
        d.text((40, 22 + r * 34), text, font=font, fill=0)
    inner = (12, 118)  # the detection's own rows: the sliver is wholly above it
    rows = sorted({(b[1], b[3]) for b in split_box(np.asarray(img), 3, inner)})
    assert len(rows) == 3, rows
    assert rows[0][0] > sliver_px  # the first row's box starts below the sliver's gap


def test_a_dash_cell_alone_on_its_row_does_not_stop_the_split():
    """A table's '-' for a missing value, alone on its row a row's gap above the first number
    (pdfjs_tracemonkey_14p page 12): joined to that row's band it made the band 2x the print size,
    so the 14-row box over the column was not split and its 13 numbers were lost. The dash is a row
    of its own, at the column's print size, so the cell is read too (not dropped)."""
    img = Image.new("L", (160, 150), 255)
    d = ImageDraw.Draw(img)
    font = ImageFont.truetype(FONT, 18)
    d.rectangle((70, 12, 80, 13), fill=0)  # the '-' cell: 2 px tall, 15+ px above the first number
    for r, text in enumerate(("1.1", "1.3", "2.0")):
        d.text((60, 34 + r * 34), text, font=font, fill=0)
    boxes = sorted(split_box(np.asarray(img), 3, (4, 146)), key=lambda b: b[1])
    assert len(boxes) == 4, boxes
    dash, first = boxes[0], boxes[1]
    assert dash[1] <= 12 and dash[3] >= 14 and dash[3] <= first[1] + 4  # the dash's own row
    assert dash[0] >= 66 and dash[2] <= 85  # around the dash's ink, not the numbers' columns
    assert dash[3] - dash[1] >= 0.6 * (first[3] - first[1])  # read at the print size of its column
    assert first[1] > 13  # the first number's row does not reach up to the dash


def test_specks_where_a_column_rule_crosses_the_header_rules_do_not_stop_the_split():
    """A tall box between two column rules, reaching up past the header's rules: where a vertical
    rule crosses a horizontal one, the pixel beside the rule is shaded (anti-aliasing) on a row or
    two. Such 1-px specks, 40 px above the header row, were joined to it as one 77 px band against
    15-19 px rows, so the box was not split (seed 11 page 6 of bench/tables.py: 52 cells lost, their
    numbers missing from the page text too)."""
    img = Image.new("L", (142, 330), 255)
    d = ImageDraw.Draw(img)
    font = ImageFont.truetype(FONT, 18)
    for x in (17, 121):
        d.rectangle((x, 0, x + 1, 329), fill=0)  # the column rules, 2 px
    for y in (1, 76):
        d.rectangle((0, y, 141, y + 1), fill=0)  # the table's top rule and the header's bottom rule
    px = img.load()
    for y in (0, 3, 75, 78):
        px[16, y] = px[19, y] = px[120, y] = px[123, y] = 110  # the rules' shaded edge at the junctions
    d.text((60, 48), "Q3", font=font, fill=0)
    for r, text in enumerate(("-9,509", "6,919.56", "854", "-66.84%", "-0.1122", "28.53%")):
        d.text((110 - font.getlength(text), 87 + r * 38), text, font=font, fill=0)
    rows = sorted({(b[1], b[3]) for b in split_box(np.asarray(img), 6, (16, 314))})
    assert len(rows) == 7, rows  # the header row and six number rows
    assert rows[0][0] > 30  # the header row's box starts at its text, not at the top rule's specks


def test_header_rules_ending_before_the_boxs_edge_do_not_stop_the_split():
    """The detector's box reaches past the table's end into blank paper (seed 0 of
    bench/table_pages.py on a CPU without AVX-512: 41 px), so the top and header rules cover under
    80 % of the crop's width. Left in, they joined the header row into a band twice the number rows'
    height, taken for a larger print: a box over 7 rows of a numeric column was not split."""
    img = Image.new("L", (188, 340), 255)
    d = ImageDraw.Draw(img)
    font = ImageFont.truetype(FONT, 18)
    for y in (31, 66):
        d.rectangle((0, y, 146, y + (1 if y == 31 else 0)), fill=0)  # top rule 2 px, header rule 1 px
    d.text((60, 38), "Q2", font=font, fill=0)
    for r, text in enumerate(("308", "-43.91%", "9,232.89", "5,897.42", "77,949", "20,183", "1,196.84")):
        d.text((135 - font.getlength(text), 76 + r * 35), text, font=font, fill=0)
    rows = sorted({(b[1], b[3]) for b in split_box(np.asarray(img), 6, (16, 308))})
    assert len(rows) == 8, rows  # the header row and seven number rows
    assert rows[0][0] > 33 and rows[0][1] < 66  # the header row's box lies between the two rules


def test_one_row_of_display_type_or_a_ruled_line_is_not_split():
    img = Image.new("L", (900, 260), 255)
    d = ImageDraw.Draw(img)
    d.text((20, 20), "Quarterly", font=ImageFont.truetype(FONT, 150), fill=0)
    assert split_box(np.asarray(img), 6) == []
    line = Image.new("L", (400, 60), 255)
    d = ImageDraw.Draw(line)
    d.text((10, 10), "1,234  5,678", font=ImageFont.truetype(FONT, 26), fill=0)
    d.line((0, 50, 400, 50), fill=0, width=2)  # an underline / table rule under the row
    assert split_box(np.asarray(line), 4) == []


def _segments_hold_every_number(page, boxes) -> list[str]:
    """Problems: number cells held by no segment box (their rows whole: the box may trim a glyph's
    side bearing by a few pixels, as the detector's own boxes do), and segment boxes holding two
    number cells (two rows, or two cells of one row: read as one cell)."""
    problems = []
    centres = [((b[0] + b[2]) / 2, (b[1] + b[3]) / 2) for b in page.number_boxes]
    for text, b in zip(page.numbers, page.number_boxes, strict=True):
        h = b[3] - b[1]
        core = (b[0] + 0.25 * h, b[1], b[2] - 0.25 * h, b[3])
        if not any(_holds(s, core, slack=2.0) for s in boxes):
            problems.append(f"{text} at {[round(v) for v in b]}: in no line whole")
    for s in boxes:
        held = [(cx, cy) for cx, cy in centres if s[0] <= cx <= s[2] and s[1] <= cy <= s[3]]
        if len(held) > 1:
            problems.append(f"line {[round(v) for v in s]} holds {len(held)} number cells")
    return problems


def test_the_detector_returns_no_box_over_several_rows_of_a_dense_table():
    """Regression: the seed-0 page (Chinese report, colour column bands, 50 rows) where the detector
    ran 3-6 rows of a numeric column into one box."""
    from models.compact.page.detect import LineDetector

    page = render_table_page(0, skew_deg=0.0, noise=False)
    lines = LineDetector()._detect(np.asarray(page.image))
    assert _segments_hold_every_number(page, [ln.box for ln in lines]) == []


def test_a_ruled_column_under_a_ruled_header_is_split_into_its_rows():
    """Regression: seed 11 page 6 of bench/tables.py (vertical rules, no fill), where two 35-row boxes
    of the detector crossed the header's rules and were left whole (rule-junction specks)."""
    from models.compact.page.detect import LineDetector

    page = render_table_page(11006, rules="vertical", fill="none", lang="en")  # bench.tables.page_spec(11, 6)
    lines = LineDetector()._detect(np.asarray(page.image.convert("RGB")))
    assert _segments_hold_every_number(page, [ln.box for ln in lines]) == []


@pytest.fixture(scope="module")
def encoder():
    from evaluation.engines import default_model_dir
    from models.compact.encoder_half import CompactEncoderHalf

    return CompactEncoderHalf.load(default_model_dir())


@pytest.mark.parametrize(("seed", "rules", "fill", "lang"), [
    (101, "vertical", "bands", "en"), (102, "grid", "zebra", "zh"), (103, "none", "both", "en"),
    (104, "booktabs", "bands", "zh"),
    (105, "horizontal", "none", "en"),  # a line held two cells of one row, 14 px apart: cut at the ink gutter
    (106, "vertical", "both", "zh"),
])
def test_every_number_cell_of_a_dense_table_reaches_one_segment_whole(encoder, seed, rules, fill, lang):
    """The invariant, through the encoder's whole page preparation (detection, row splitting, rule
    erasing, layout, table cells): each number cell drawn is held whole by a segment, and no segment
    holds two number cells."""
    page = render_table_page(seed, lang=lang, skew_deg=0.0, noise=False, rules=rules, fill=fill)
    prepared = encoder.preprocess(page.image, "lines")
    assert _segments_hold_every_number(page, prepared.meta["boxes"]) == []
