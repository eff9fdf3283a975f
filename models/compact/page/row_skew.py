"""A page's skew measured along its rows: the slope between lines that sit on one row, far apart.

A table's cells are short (a number is 2-5 line heights long), and the detector's quad of a short
box measures its slope coarsely: on ``bench/tables.py`` pages turned by a known angle, the median
slope of the cells' own quads read 0.00 degrees at a true 0.97 (most quads came back axis-aligned)
and -3.51 at a true -2.85, and the page was straightened wrongly or not at all: cell text cut at the
box edges, 35 of 104 numbers lost on seed 3 page 5. The cells of one table row, though, share a
baseline over the whole width of the table: the line through two cells' centres, many line heights
apart, has the page's slope to a few hundredths of a degree. :func:`row_pairs_skew` takes the
median of those slopes, weighted by the pairs' distance, over every pair of lines of a similar
height whose centres lie within :data:`ROW_TOLERANCE` line heights of one row once an initial
estimate is undone. On the 12 table pages above (true -2.85 ... +2.85 degrees) it came within
0.07 degrees of the truth (0.37 at a true 0 on one page, under ``MIN_SKEW_DEG``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from models.compact.page.boxes import LineBox

#: Two lines are on one row when their centres, with the initial skew undone, lie within this many
#: line heights (of the lower one) of each other across the row.
ROW_TOLERANCE = 0.3
#: ... and at least this many line heights apart along it (a closer pair's slope is coarse).
MIN_PAIR_GAP = 2.0
#: Lines of one row are of one print: heights within this factor.
SAME_HEIGHT = 1.5
#: At least this many pairs for a measure: a table's rows give 180-2,600 pairs on ``bench/tables.py``
#: pages; a receipt or form of 20-50 lines 9-19, where the lines' own slopes are measured instead
#: (a photographed form's rows are not straight rows of cells: labels and values drift apart).
MIN_PAIRS = 60
#: Offsets (degrees) from the initial estimate also tried for finding the rows: at 160 px between
#: cells a 1 degree error moves a neighbour 3 px, a third of ROW_TOLERANCE of a 24 px line.
TRIES = (1.0, 2.0, 3.0)


def _pairs(centre: np.ndarray, height: np.ndarray, initial_deg: float) -> tuple[np.ndarray, np.ndarray]:
    """(slopes in degrees, weights = distance along the row in pixels) of the pairs of lines on one
    row with ``initial_deg`` undone; ``centre`` [N, 2], ``height`` [N] pixels. Pairs (i, j) in the
    order of i then j (the order of the lines).

    Only lines whose levelled centres lie within :data:`ROW_TOLERANCE` of line ``i``'s own height of
    it can pair with it (the tolerance is of the lower line's height), so the lines are sorted by
    that level and each is tested against its own window of them: O(N log N + pairs tested), where
    testing every line against all the others was O(N^2) (23-92 ms for the 7 tries on table pages of
    140-470 lines).
    """
    x = centre[:, 0]
    y = centre[:, 1] + x * np.tan(np.radians(initial_deg))  # rows level once the estimate is undone
    by_y = np.argsort(y, kind="stable")
    ys = y[by_y]
    reach = ROW_TOLERANCE * height * (1 + 1e-9) + 1e-9  # a window a hair wider: the test below decides
    lo = np.searchsorted(ys, y - reach, side="left")
    counts = np.searchsorted(ys, y + reach, side="right") - lo
    i = np.repeat(np.arange(len(y)), counts)
    j = by_y[np.repeat(lo - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))]
    low = np.minimum(height[j], height[i])
    pair = ((x[j] - x[i] > MIN_PAIR_GAP * low) & (np.abs(y[j] - y[i]) < ROW_TOLERANCE * low)
            & (np.maximum(height[j], height[i]) <= SAME_HEIGHT * low))
    i, j = i[pair], j[pair]
    order = np.lexsort((j, i))
    i, j = i[order], j[order]
    slopes = -np.degrees(np.arctan2(centre[j, 1] - centre[i, 1], centre[j, 0] - centre[i, 0]))
    return slopes, x[j] - x[i]


def _weighted_median(values: np.ndarray, weights: np.ndarray) -> float:
    order = np.argsort(values)
    cum = np.cumsum(weights[order])
    return float(values[order][np.searchsorted(cum, cum[-1] / 2)])


def row_pairs_skew(lines: Sequence[LineBox], initial_deg: float = 0.0) -> float | None:
    """The skew in degrees counter-clockwise (text rising to the right positive, as
    :func:`models.compact.page.regions.line_skew_deg`) measured on pairs of ``lines`` that lie on one
    row (module docstring); None with fewer than :data:`MIN_PAIRS` pairs. The rows are looked for
    with ``initial_deg`` (an estimate) and with it :data:`TRIES` degrees off either way undone (the
    one that puts the most pairs on rows wins), then once more with the measure found. O(N log N) in
    the lines for a page of rows (see :func:`_pairs`).
    """
    if len(lines) < 2:
        return None
    quads = np.array([ln.quad for ln in lines], dtype=np.float64)  # [N, 4, 2]
    centre = quads.mean(axis=1)
    height = np.maximum(1.0, np.hypot(*(quads[:, 3] - quads[:, 0]).T))
    s, w = max((_pairs(centre, height, initial_deg + d) for d in (0.0, *TRIES, *(-t for t in TRIES))),
               key=lambda sw: len(sw[0]))
    if len(s) < MIN_PAIRS:
        return None
    s, w = _pairs(centre, height, _weighted_median(s, w))
    return _weighted_median(s, w) if len(s) >= MIN_PAIRS else None
