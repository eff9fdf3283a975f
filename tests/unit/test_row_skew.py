"""The skew of a page of short lines in rows (a table's cells) is measured along its rows."""

from __future__ import annotations

import numpy as np
import pytest

from models.compact.page.boxes import LineBox
from models.compact.page.regions import line_skew_deg
from models.compact.page.row_skew import row_pairs_skew


def _cells(skew_deg: float, rows: int = 20, cols: int = 5, jitter: int = 0) -> list[LineBox]:
    """Axis-aligned boxes of a table's cells (80 x 24 px, rows 36 px apart, columns 160 px apart)
    whose centres follow a page turned ``skew_deg`` counter-clockwise: the detector's quads of short
    cells come back axis-aligned at small angles (``bench/tables.py`` seed 3 page 5, true 0.97)."""
    rng = np.random.default_rng(jitter)
    t = np.tan(np.radians(skew_deg))
    out = []
    for r in range(rows):
        for c in range(cols):
            cx, cy = 200.0 + 160 * c, 300.0 + 36 * r
            cy -= (cx - 200.0) * t  # text rising to the right for a positive skew
            w = 80.0 + (rng.integers(-20, 20) if jitter else 0)
            x0, y0 = cx - w / 2, cy - 12
            q = np.array([[x0, y0], [x0 + w, y0], [x0 + w, y0 + 24], [x0, y0 + 24]], np.float32)
            out.append(LineBox(q, (x0, y0, x0 + w, y0 + 24), 0.9))
    return out


@pytest.mark.parametrize("skew", [0.97, -2.85, 1.5, 0.0])
def test_a_tables_skew_is_measured_along_its_rows_not_on_its_cells_own_slopes(skew):
    """Before, the median of the cells' own (axis-aligned) slopes said 0 degrees at any skew, and
    the page was not straightened: cells' text cut at their boxes' edges, numbers lost."""
    assert line_skew_deg(_cells(skew, jitter=1)) == pytest.approx(skew, abs=0.05)


def test_too_few_pairs_leave_the_measure_to_the_lines_own_slopes():
    """A receipt or form of a few rows gives too few pairs (MIN_PAIRS): no row measure."""
    assert row_pairs_skew(_cells(1.0, rows=3, cols=3)) is None
    assert row_pairs_skew([]) is None


def test_rows_are_found_from_the_initial_estimate_at_larger_angles():
    """At 3 degrees, cells 640 px apart drift 34 px, about a row's pitch: the rows are found with the
    estimate undone (the short lines' own slopes), not on the raw centres."""
    cells = _cells(3.0)
    assert row_pairs_skew(cells, initial_deg=3.4) == pytest.approx(3.0, abs=0.05)
