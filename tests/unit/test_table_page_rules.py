"""bench/table_pages.py: no rule is drawn through a header cell spanning two columns or two rows.

A group header is centred over its span, so a column rule drawn through the span cut its text on
grid and vertical pages (``2025`` read ``202`` and ``5``, ``Domestic`` read ``Don estic``: bench/tables.py
seed 3 page 6), and a row rule between the two header rows cut the label spanning both (``Item``).
"""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw

from bench.table_pages import _draw_rules, _header_grid

XS = [10.0, 60.0, 110.0, 160.0, 210.0, 260.0]  # a label column and four numeric columns
YS = [10, 40, 70, 100, 130]  # two header rows, two body rows
HEADER = [[("Item", 1, 2), ("Domestic", 2, 1), ("2025", 2, 1)],
          [("Q1", 1, 1), ("Q2", 1, 1), ("Q3", 1, 1), ("Q4", 1, 1)]]


def _ruled(rules: str) -> np.ndarray:
    img = Image.new("RGB", (280, 150), (255, 255, 255))
    _draw_rules(ImageDraw.Draw(img), rules, XS, YS, HEADER, 1)
    return np.asarray(img.convert("L")) < 128


def test_header_grid_spreads_spans() -> None:
    assert _header_grid(HEADER) == [[0, 1, 1, 2, 2], [0, 3, 4, 5, 6]]


def test_no_column_rule_through_a_group_header() -> None:
    for rules in ("grid", "vertical"):
        ink = _ruled(rules)
        assert not ink[15:35, 110].any() and not ink[15:35, 210].any()  # inside Domestic's / 2025's span
        assert ink[15:35, 160].all()  # between the two groups
        assert ink[45:125, 110].all() and ink[45:125, 210].all()  # below them, between the columns


def test_no_row_rule_through_the_label_spanning_both_header_rows() -> None:
    for rules in ("grid", "horizontal"):
        ink = _ruled(rules)
        assert not ink[40, 15:55].any()  # the label cell
        assert ink[40, 65:255].all()  # under the group headers
        assert ink[70, 15:255].all()  # under the header
