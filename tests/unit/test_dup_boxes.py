"""models.compact.page.dup_boxes: a detection over ink a wider detection on its row already holds (a
duplicate read, issue 37: ``2,799.55 2``) is dropped where boxes become lines; separate numbers close
together, a sign in its own box, footnote marks, are all kept."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from bench.table_metrics import cell_precision, numbers_added
from models.compact.page.boxes import LineBox
from models.compact.page.dup_boxes import drop_duplicates

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
MARGIN = 6  # paper a detector's box keeps around its ink (DB's unclip), px


def _row(items: list[tuple[str, int]], size: int = 26) -> tuple[np.ndarray, list[tuple[float, float, float, float]]]:
    """A 1,000 x 120 px white page with each (text, x) drawn on one row; (rgb, ink boxes)."""
    img = Image.new("RGB", (1000, 120), "white")
    draw, font = ImageDraw.Draw(img), ImageFont.truetype(FONT, size)
    boxes = []
    for text, x in items:
        draw.text((x, 40), text, font=font, fill="black")
        boxes.append(tuple(float(v) for v in draw.textbbox((x, 40), text, font=font)))
    return np.asarray(img), boxes


def _line(box, margin: float = MARGIN) -> LineBox:
    x0, y0, x1, y1 = box[0] - margin, box[1] - margin, box[2] + margin, box[3] + margin
    quad = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], np.float32)
    return LineBox(quad, (x0, y0, x1, y1), 0.8)


def _detector_lines(rgb: np.ndarray, found: list[LineBox]) -> list[LineBox]:
    """The lines :meth:`LineDetector._detect` makes of a page whose DB detector found ``found``."""
    from models.compact.page.detect import LineDetector

    det = LineDetector.__new__(LineDetector)  # no ONNX sessions: the network's output is given
    det.det_long_side, det.pad = 1600, 24
    det._detect_band = lambda _rgb, enlarge=True: list(found) if enlarge else []  # type: ignore[method-assign]
    return det._detect(rgb)


def test_a_box_over_a_numbers_first_digit_is_not_a_line_of_its_own():
    # seed 0 page 0 of bench/table_pages.py on an AVX2 CPU: '2,799.55 2', the '2' a second box over
    # the number's first digit; before, the sliver reached the reader and its '2' was a number of its own
    rgb, (left, number) = _row([("-3,352", 500), ("2,799.55", 640)])
    sliver = (number[0], number[1], number[0] + 14, number[3])
    found = [_line(left), _line(number), _line(sliver)]
    kept = _detector_lines(rgb, found)
    assert [ln.box for ln in kept] == [found[0].box, found[1].box]


def test_a_row_split_off_a_tall_box_lets_go_of_the_next_columns_first_digits():
    # the real path of '2,799.55 2' (seed 0 of bench/table_pages.py, AVX2): the detector's box over a
    # column of 3 rows reached into the next column's first digits; the row split made one line
    # '-3,352 2' of each row (the cells closer than a cell gap), the reader split off and read the '2'
    img = Image.new("RGB", (1000, 260), "white")
    draw, font = ImageDraw.Draw(img), ImageFont.truetype(FONT, 22)
    left, right = [], []
    for r, (a, b) in enumerate([("-3,352", "2,799.55"), ("16,584", "-112.63%"), ("(80,324)", "3,966.57")]):
        y, xa = 30 + 56 * r, 580 - draw.textlength(a, font=font)
        draw.text((xa, y), a, font=font, fill="black")
        draw.text((598, y), b, font=font, fill="black")
        left.append(draw.textbbox((xa, y), a, font=font))
        right.append(draw.textbbox((598, y), b, font=font))
    x0, x1 = min(b[0] for b in left) - 6, 598 + 12
    tall = LineBox(np.array([[x0, 20], [x1, 20], [x1, 180], [x0, 180]], np.float32), (x0, 20.0, x1, 180.0), 0.6)
    lines = _detector_lines(np.asarray(img), [tall, *(_line(b) for b in right)])
    assert len(lines) == 6  # each cell one line
    mine = [ln for ln in lines if ln.box[0] < 590]
    assert len(mine) == 3 and all(left[k][2] < ln.box[2] < 598 for k, ln in enumerate(mine))  # whole, no more


def test_a_box_over_a_numbers_sign_and_first_digits_is_dropped_whichever_comes_first():
    # '-11 -112.63%': the box over '-11' of '-112.63%' came before the number's own
    rgb, (number,) = _row([("-112.63%", 600)])
    head = (number[0], number[1], number[0] + 34, number[3])
    found = [_line(head), _line(number)]
    assert [ln.box for ln in _detector_lines(rgb, found)] == [found[1].box]


@pytest.mark.parametrize("items", [
    [("12", 600), ("345", 640)],            # adjacent narrow columns, boxes overlapping in their margins
    [("1", 600), ("2", 618)],               # footnote marks
    [("-", 600), ("3,352", 616)],           # a minus sign in its own box
    [("$", 600), ("1,204.50", 618)],        # a currency sign in its own box
    [("2", 600), ("2,799.55", 622)],        # a real '2' beside a number that begins with 2
    [("7", 600), ("77", 616), ("777", 650)],
])
def test_separate_numbers_close_together_are_all_kept(items):
    rgb, boxes = _row(items)
    found = [_line(b) for b in boxes]
    assert len(_detector_lines(rgb, found)) == len(found)


def test_a_row_inside_a_box_over_several_rows_is_kept():
    img = Image.new("RGB", (600, 200), "white")
    draw, font = ImageDraw.Draw(img), ImageFont.truetype(FONT, 26)
    for k, t in enumerate(("1,204", "3,352", "88")):
        draw.text((300, 20 + 50 * k), t, font=font, fill="black")
    quad = np.array([[290, 14], [390, 14], [390, 170], [290, 170]], np.float32)
    tall = LineBox(quad, (290.0, 14.0, 390.0, 170.0), 0.6)
    row = _line(draw.textbbox((300, 120), "88", font=font))
    assert len(drop_duplicates(np.asarray(img), [tall, row])) == 2


def test_a_box_over_blank_paper_beside_a_number_is_kept_for_the_reader():
    rgb, (number,) = _row([("3,352", 600)])
    blank = (number[2] + 2, number[1], number[2] + 30, number[3])
    assert len(drop_duplicates(rgb, [_line(number), _line(blank, 0)])) == 2  # no ink: nothing repeated


def test_the_table_bench_counts_numbers_that_are_not_on_the_page():
    lines = ["Totals 2024", "Ohio 2,799.55 -112.63%"]
    assert numbers_added(lines, "Totals 2024\nOhio 2,799.55 -112.63%") == (0, 0, 3)
    assert numbers_added(lines, "Totals 2024\nOhio 2,799.55 2 -11 -112.63%") == (2, 2, 5)
    assert numbers_added(lines, "Totals 2024\nOhio 2,799.56 -112.63%") == (1, 0, 3)  # a misread, no duplicate
    assert cell_precision(["2,799.55", "-112.63%"], ["2,799.55 2", "-112.63%", ""]) == (1, 1, 2)


def test_a_wide_page_in_strips_lets_go_of_the_next_columns_first_digit_too():
    # A 3,400 x 300 px page (wider than 2 x its height and than det_long_side: detected in strips,
    # models/compact/page/wide.py): a tall box over a column's rows 1-3 cuts row 4 and reaches into the
    # right-aligned next column's longest number there. Its row split made a line '1,204 2' (the
    # number's first digit read twice); the whole and banded paths dropped it, the strips' did not.
    img = Image.new("RGB", (3400, 300), "white")
    draw, font = ImageDraw.Draw(img), ImageFont.truetype(FONT, 22)
    left, right = [], []
    for r, (a, b) in enumerate([("-3,352", "12.5"), ("16,584", "7.25"), ("(80,324)", "3.1"), ("1,204", "2,799.55")]):
        y, xa, xb = 30 + 56 * r, 580 - draw.textlength(a, font=font), 700 - draw.textlength(b, font=font)
        draw.text((xa, y), a, font=font, fill="black")
        draw.text((xb, y), b, font=font, fill="black")
        left.append(draw.textbbox((xa, y), a, font=font))
        right.append(draw.textbbox((xb, y), b, font=font))
    x0, y1 = min(b[0] for b in left) - 6, left[3][1] + (left[3][3] - left[3][1]) / 3
    tall = LineBox(np.array([[x0, 20], [610, 20], [610, y1], [x0, y1]], np.float32), (x0, 20.0, 610.0, y1), 0.6)
    found = [tall, *(_line(b) for b in right)]

    from models.compact.page.detect import LineDetector

    det = LineDetector.__new__(LineDetector)
    det.det_long_side, det.pad = 1600, 24
    strips: list[tuple[int, ...]] = []

    def first_strip(rgb: np.ndarray, enlarge: bool = True) -> list[LineBox]:  # the table lies in strip 0
        strips.append(rgb.shape)
        return list(found) if len(strips) == 1 else []

    det._detect_band = first_strip  # type: ignore[method-assign]
    lines = det._detect(np.asarray(img))
    assert len(strips) > 1  # the strips path
    assert len(lines) == 8
    row4 = [ln for ln in lines if ln.box[1] > left[3][1] - 10 and ln.box[0] < 590]
    assert len(row4) == 1 and left[3][2] < row4[0].box[2] < right[3][0]  # '1,204' whole, no digit of '2,799.55'
