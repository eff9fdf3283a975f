"""Column gutters from the ink (models/compact/page/table_gutters.py): a line the detector ran across
a gutter is cut there -- at a blank run of its own when it has ink at the gutter's cut."""

from __future__ import annotations

from functools import partial

import numpy as np

from inkstream.segments import parse_cell
from models.compact.page.boxes import LineBox
from models.compact.page.regions import line_piece
from models.compact.page.table import table_lines
from models.compact.page.table_gutters import ink_gutters, own_gap

MED_H = 30.0


def _line(x0: float, y0: float, x1: float, y1: float) -> LineBox:
    q = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], dtype=np.float32)
    return LineBox(q, (x0, y0, x1, y1), 0.9)


def _ink(gray: np.ndarray, x0: int, x1: int, y0: int) -> None:
    """Print-like ink over [x0, x1): 2 px strokes 6 px apart (no blank run a gutter could take)."""
    for x in range(x0, x1 - 1, 6):
        gray[y0 + 6: y0 + 24, x: x + 2] = 0


def test_own_gap_is_a_blank_run_between_ink_within_the_gutter():
    cols = np.zeros(100, dtype=bool)
    cols[0:40] = cols[56:100] = True  # two numbers, 16 px apart
    assert own_gap(cols, 30, 70, 9.0) == 47
    assert own_gap(cols, 60, 90, 9.0) is None  # the blank run is not in the gutter
    assert own_gap(cols, 30, 70, 20.0) is None  # narrower than a gutter: a word space
    cols[44:48] = True
    assert own_gap(cols, 30, 70, 9.0) is None  # no run of 9 px left


def test_two_numbers_joined_across_a_narrow_gutter_are_two_cells():
    """Regression (bench/tables.py seed 3 page 4, rule-less, column bands: ``74,732 -115.74%`` and
    ``-2,557 -110.94%`` one cell each for two): the detector joined a number and the wide value of
    the next column 22 px apart into one line, and that line has ink within NEAR of the gutter's
    emptiest point, so it was not cut there. It is now cut at its own blank run in the gutter."""
    gray = np.full((900, 600), 255, dtype=np.uint8)
    lines = []
    for r in range(20):
        y = 20 + 40 * r
        lines.append(_line(100, y, 200, y + 30))
        _ink(gray, 100, 200, y)
        a_end = 316 if r in (3, 8) else 300  # two values 16 px wider (the gutter's emptiest run moves right)
        _ink(gray, 240, a_end, y)
        if r == 15:  # one detection over this row's two numbers
            _ink(gray, 318, 450, y)
            lines.append(_line(240, y, 450, y + 30))
        else:
            _ink(gray, 360, 450, y)
            lines += [_line(240, y, a_end, y + 30), _line(360, y, 450, y + 30)]
    out = table_lines(lines, [], 1, MED_H, line_piece, partial(ink_gutters, gray, med_h=MED_H))
    cells = [(parse_cell(j), ln.box) for ln, j in out if parse_cell(j) is not None]
    assert len(cells) == 60  # every row: label and two numbers, each its own cell
    row15 = sorted((c.column, round(b[0]), round(b[2])) for c, b in cells if c.row == 15)
    assert [c for c, _, _ in row15] == [0, 1, 2]
    assert row15[1][2] < 318 and row15[2][1] > 296  # cut in the 22 px between the numbers (ink ends at 296)
