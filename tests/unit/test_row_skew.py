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


def _pairs_reference(centre: np.ndarray, height: np.ndarray, initial_deg: float) -> tuple[np.ndarray, np.ndarray]:
    """The O(N^2) pairing row_skew._pairs replaced (every line tested against all the others), kept
    here as the reference the sorted one must equal."""
    from models.compact.page.row_skew import MIN_PAIR_GAP, ROW_TOLERANCE, SAME_HEIGHT

    x = centre[:, 0]
    y = centre[:, 1] + x * np.tan(np.radians(initial_deg))
    slopes, weights = [np.zeros(0)], [np.zeros(0)]
    for i in range(len(centre)):
        low = np.minimum(height, height[i])
        pair = ((x - x[i] > MIN_PAIR_GAP * low) & (np.abs(y - y[i]) < ROW_TOLERANCE * low)
                & (np.maximum(height, height[i]) <= SAME_HEIGHT * low))
        j = np.flatnonzero(pair)
        slopes.append(-np.degrees(np.arctan2(centre[j, 1] - centre[i, 1], centre[j, 0] - centre[i, 0])))
        weights.append(x[j] - x[i])
    return np.concatenate(slopes), np.concatenate(weights)


def _row_pairs_skew_reference(lines: list[LineBox], initial_deg: float = 0.0) -> float | None:
    from models.compact.page.row_skew import MIN_PAIRS, TRIES, _weighted_median

    if len(lines) < 2:
        return None
    quads = np.array([ln.quad for ln in lines], dtype=np.float64)
    centre = quads.mean(axis=1)
    height = np.maximum(1.0, np.hypot(*(quads[:, 3] - quads[:, 0]).T))
    s, w = max((_pairs_reference(centre, height, initial_deg + d) for d in (0.0, *TRIES, *(-t for t in TRIES))),
               key=lambda sw: len(sw[0]))
    if len(s) < MIN_PAIRS:
        return None
    s, w = _pairs_reference(centre, height, _weighted_median(s, w))
    return _weighted_median(s, w) if len(s) >= MIN_PAIRS else None


def _random_lines(seed: int, n: int) -> list[LineBox]:
    """``n`` seeded lines: rows of cells of 2-3 print sizes, slanted quads, repeated centres (ties)
    and heights on the row tolerance's edge."""
    rng = np.random.default_rng(seed)
    out = []
    skew = np.radians(rng.uniform(-3, 3))
    for _ in range(n):
        h = float(rng.choice([12.0, 16.0, 24.0, 30.0, 20.0 / 0.3]))
        cx = float(rng.integers(0, 40)) * 40.0
        cy = float(rng.integers(0, n // 4 + 2)) * 36.0 + rng.choice([0.0, 0.3 * h, -0.3 * h, rng.normal(0, 3)])
        cy -= cx * np.tan(skew)  # rows follow the page's skew
        w = float(rng.uniform(1, 12)) * h
        c, s = np.cos(skew), np.sin(skew)
        corners = np.array([[-w / 2, -h / 2], [w / 2, -h / 2], [w / 2, h / 2], [-w / 2, h / 2]])
        q = (corners @ np.array([[c, -s], [s, c]]) + [cx, cy]).astype(np.float32)
        out.append(LineBox(q, (float(q[:, 0].min()), float(q[:, 1].min()), float(q[:, 0].max()),
                               float(q[:, 1].max())), 0.9))
    return out


@pytest.mark.parametrize("lines", [
    *(_cells(s, rows=r, cols=c, jitter=j) for s, r, c, j in [(0.97, 20, 5, 1), (-2.85, 40, 8, 2), (3.0, 20, 5, 0),
                                                              (1.0, 3, 3, 0), (0.0, 94, 5, 3)]),
    *(_random_lines(seed, n) for seed, n in [(1, 5), (2, 60), (3, 200), (4, 470), (5, 900)]),
], ids=lambda lines: f"{len(lines)}-lines")
def test_the_sorted_pairing_gives_the_quadratic_ones_result(lines):
    """row_pairs_skew paired every line with all the others, O(N^2) per try (23-92 ms on 140-470
    lines); sorted by row it tests each against its row's lines: the same pairs in the same order,
    so the same measure to the last bit."""
    from models.compact.page.row_skew import _pairs

    quads = np.array([ln.quad for ln in lines], dtype=np.float64)
    centre = quads.mean(axis=1)
    height = np.maximum(1.0, np.hypot(*(quads[:, 3] - quads[:, 0]).T))
    for deg in (0.0, 1.7, -3.0, 2.85):
        for new, ref in zip(_pairs(centre, height, deg), _pairs_reference(centre, height, deg), strict=True):
            assert np.array_equal(new, ref)
    for deg in (0.0, 0.97, -2.5):
        assert row_pairs_skew(lines, deg) == _row_pairs_skew_reference(lines, deg)
