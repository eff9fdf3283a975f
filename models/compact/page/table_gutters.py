"""Column gutters of a table without vertical rules, from the page's ink rather than the line boxes.

On a table with shaded (zebra) rows or horizontal rules the DB detector often returns each whole row
as one line -- its cells, 12-30 px apart, read as words of one line -- so no x range is free of line
boxes and :func:`models.compact.page.table.table_lines` found one column (``bench/tables.py``: 11
columns read as 1, cell recall 0 %). Here the gutters come from the ink: inside the table's box, ink
is what :func:`models.compact.page.rowsplit.ink_mask` finds (bands, shading and rules are not ink),
and a gutter is an interior run of pixel columns, at least :data:`MIN_WIDTH` line heights wide, where
at most :data:`CROSSING` of the table's lines have ink. The caller cuts the lines that run across one
(at the gutter's emptiest point, :data:`NEAR`). A line with ink at that point is cut instead at a
blank run of its own inside the gutter (:func:`own_gap`): two numbers of adjacent columns that the
detector joined, the right one wider than its column's other values.
"""

from __future__ import annotations

import numpy as np

from models.compact.page.rowsplit import ink_mask

#: A gutter is at least this many median line heights wide (the paper between two right-aligned
#: numbers of adjacent narrow columns is 0.35-1 line height; a word gap about 0.2).
MIN_WIDTH = 0.3
#: ... and at most this share of the table's lines has ink in it.
CROSSING = 0.1
#: A gutter's cut lies where the fewest lines have ink in it (the middle of the longest such run); a line
#: with ink within this many line heights of the cut is not cut there (a header spanning two columns).
#: Not the gutter's whole width: the few lines allowed across it include a wide value of the right
#: column that the detector joined with the number before it (``(57,941) -102.98%``, 14 px apart).
NEAR = 0.1


#: A gutter: (page x of its cut, indices of the lines with ink at the cut, {line index: page x of that
#: line's own cut} for those of them that have a blank run of their own in the gutter, :func:`own_gap`).
Gutter = tuple[float, frozenset[int], dict[int, float]]


def own_gap(inked_cols: np.ndarray, a: int, b: int, least: float) -> int | None:
    """Where to cut one line with ink at a gutter's cut: the middle of its widest blank run (columns
    of ``inked_cols`` bool [W], the line's ink per column of the table's crop) that lies between ink
    on both sides, overlaps the gutter's free run [``a``, ``b``) and is at least ``least`` pixels wide
    (the gutter's :data:`MIN_WIDTH`: more than a word space, 0.15-0.2 line heights, so a header
    spanning two columns stays whole); None without one. Regression: ``bench/tables.py --seed 3``
    page 4 (rule-less, column bands): ``74,732`` and a wide ``-115.74%`` 14 px apart were found as one
    line; its ink at the gutter's cut kept it whole, one cell ``74,732 -115.74%`` for two.
    """
    ink = np.flatnonzero(inked_cols)
    if ink.size < 2:
        return None
    blank = np.concatenate([[False], ~inked_cols[ink[0]: ink[-1] + 1], [False]])
    edges = np.flatnonzero(blank[1:] != blank[:-1])
    runs = [(int(s) + int(ink[0]), int(e) + int(ink[0])) for s, e in zip(edges[::2], edges[1::2], strict=True)]
    runs = [(s, e) for s, e in runs if e - s >= least and min(e, b) > max(s, a)]
    if not runs:
        return None
    s, e = max(runs, key=lambda r: r[1] - r[0])
    return (s + e - 1) // 2


def ink_gutters(gray: np.ndarray, lines: list, med_h: float) -> list[Gutter]:
    """The gutters between a table's columns: (page x in pixels of the gutter's emptiest point, the
    indices of ``lines`` that have ink within :data:`NEAR` line heights of it -- a header spanning two
    columns, not to be cut there --, and for those of them with a blank run of their own in the gutter
    the page x to cut them at instead, :func:`own_gap`) per gutter, left to right.
    ``gray`` uint8 [H, W] is the page (dark print), ``lines`` the table's lines (objects with ``box``
    (x0, y0, x1, y1) page pixels), ``med_h`` the page's median line height in pixels. [] for fewer
    than 4 lines.
    """
    if len(lines) < 4:
        return []
    x0 = max(0, int(min(ln.box[0] for ln in lines)))
    x1 = min(gray.shape[1], int(max(ln.box[2] for ln in lines)) + 1)
    y0 = max(0, int(min(ln.box[1] for ln in lines)))
    y1 = min(gray.shape[0], int(max(ln.box[3] for ln in lines)) + 1)
    if x1 - x0 < 4 or y1 - y0 < 4:
        return []
    ink = ink_mask(gray[y0:y1, x0:x1], max(2, int(0.2 * med_h)))
    per_line = np.zeros((len(lines), x1 - x0), dtype=bool)
    for i, ln in enumerate(lines):
        a, b = max(0, int(ln.box[1]) - y0), max(0, int(ln.box[3]) - y0)
        if b > a:
            per_line[i] = ink[a:b].any(axis=0)
    count = per_line.sum(axis=0)
    free = np.concatenate([[False], count <= CROSSING * len(lines), [False]])
    edges = np.flatnonzero(free[1:] != free[:-1])
    near = max(2, int(round(NEAR * med_h)))
    out = []
    for a, b in zip(edges[::2], edges[1::2], strict=True):
        if a > 0 and b < x1 - x0 and b - a >= MIN_WIDTH * med_h:
            x = a + _emptiest(count[a:b])
            inked = np.flatnonzero(per_line[:, max(0, x - near): x + near + 1].any(axis=1)).tolist()
            own = {}
            for i in inked:
                lx0, lx1 = max(0, int(lines[i].box[0]) - x0), max(0, int(lines[i].box[2]) - x0)
                cut = own_gap(per_line[i, lx0:lx1], a - lx0, b - lx0, MIN_WIDTH * med_h) if lx1 > lx0 else None
                if cut is not None:
                    own[i] = float(x0 + lx0 + cut)
            out.append((float(x0 + x), frozenset(inked), own))
    return out


def _emptiest(count: np.ndarray) -> int:
    """Index of the middle of the longest run of the smallest value in ``count`` (int [n], n >= 1)."""
    low = np.concatenate([[False], count == count.min(), [False]])
    edges = np.flatnonzero(low[1:] != low[:-1])
    a, b = max(zip(edges[::2], edges[1::2], strict=True), key=lambda r: r[1] - r[0])
    return int((a + b - 1) // 2)
