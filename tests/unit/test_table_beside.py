"""Columns of a rule-less table that the page analysis made text blocks of join the table
(models/compact/page/table.rows_beside), and a line crop's paper is flattened across a band's edge
(models/compact/page/prepare.flat_paper)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from PIL import Image

from models.compact.page.prepare import flat_paper
from models.compact.page.table import rows_beside


@dataclass
class _Line:
    box: tuple[float, float, float, float]


@dataclass
class _Group:
    box: tuple[float, float, float, float]
    lines: list = field(default_factory=list)


def _column(x0: float, x1: float, n: int, y0: float = 100.0, pitch: float = 40.0) -> _Group:
    lines = [_Line((x0, y0 + i * pitch, x1, y0 + i * pitch + 24)) for i in range(n)]
    return _Group((x0, y0, x1, y0 + (n - 1) * pitch + 24), lines)


def test_columns_on_the_table_rows_join_it_and_prose_or_far_blocks_do_not():
    table = _column(400, 500, 10)
    labels = _column(200, 330, 10)  # the label column, same rows
    numbers = _column(560, 640, 10)  # more numbers on the right
    off_rows = _column(560, 640, 10, y0=120.0)  # half a pitch off every row
    prose = _column(560, 1400, 10)  # long lines: a column of text beside the table
    far = _column(1500, 1580, 10)  # beyond the gap
    below = _column(400, 500, 5, y0=600.0)  # under the table, not beside it
    got = rows_beside(table.box, table.lines, [labels, numbers, off_rows, prose, far, below], med_h=24.0)
    assert got == [0, 1]


def test_flat_paper_removes_a_band_edge_and_keeps_the_ink():
    a = np.full((30, 120, 3), 255, np.uint8)
    a[:, :90] = (214, 232, 250)  # a column band ending inside the crop
    a[8:22, 20:24] = 0  # a glyph's stroke in the band
    out = np.asarray(flat_paper(Image.fromarray(a)).convert("L"), dtype=np.int32)
    assert out[:, 30:].max() - out[:2, 30:].min() <= 3  # one paper colour across the width
    assert out[8:22, 20:24].max() < 80  # the stroke is still ink
    white = Image.fromarray(np.full((30, 120, 3), 255, np.uint8))
    assert flat_paper(white) is white  # a clean crop is left alone


def test_a_label_column_far_left_joins_when_it_labels_the_rows_and_nothing_stands_between():
    """A statement's labels flush left, its amounts far right: 8 line heights of blank between
    (``bench/statements.py --seed 0`` page 5: every label read outside the table before)."""
    table = _column(600, 700, 10)
    labels = _column(200, 400, 10)  # 200 px = 8.3 line heights left of the table, on its rows
    got = rows_beside(table.box, table.lines, [labels], med_h=24.0)
    assert got == [0]
    few = _column(200, 400, 4)  # on 4 of the table's 10 rows only: not its label column
    assert rows_beside(table.box, table.lines, [few], med_h=24.0) == []
    wrapped = _column(200, 400, 10)  # a label wrapped onto a second line: not one line a row ...
    wrapped.lines.append(_Line((200, 274, 330, 298)))
    assert rows_beside(table.box, table.lines, [wrapped], med_h=24.0) == [0]
    between = _column(420, 480, 10)  # ... and another column between: the labels are that one's
    assert rows_beside(table.box, table.lines, [wrapped, between], med_h=24.0) == [1]
    right = _column(900, 1100, 4)  # as far on the right, on 4 of its rows: not joined
    assert rows_beside(table.box, table.lines, [right], med_h=24.0) == []
    totals = _column(900, 1100, 10)  # one a row on every row: the table's own column, whichever side
    assert rows_beside(table.box, table.lines, [totals], med_h=24.0) == [0]
