"""Table structure for the compact model: the detected lines of a table region -> cells (row, column).

Rows: lines whose vertical centres lie within half a line height of a row's mean centre form one row
(the cells of a row share a baseline band). Columns: where the table has vertical rules
(:attr:`models.compact.page.layout.PageLayout.rules`) spanning most of its height, the column boundaries
are the rules (a line the detector ran across a rule is cut there, if the rule runs at the line's
height: one region may hold two tables with different columns); otherwise they are the gutters
that (almost) no line crosses. A line belongs to the column holding most of its width
(:func:`column_of`); several lines of one row in one column are one cell, read left to right / top
to bottom. Each cell's first line gets the join
``cell:T:R:C`` (:func:`inkstream.segments.cell_join`), its further lines ``space``; empty rows and
columns are dropped, so row and column numbers are dense.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from inkstream.segments import JOIN_SPACE, Cell, cell_join
from models.compact.page.boxes import centre_y, line_cover
from models.compact.page.layout import Box

#: Lines whose centres are within this many line heights of a row's mean centre share the row.
ROW_TOLERANCE = 0.5
#: A vertical rule is a column boundary when it spans this share of the table's height.
RULE_SPAN = 0.5
#: Gutters without rules: x positions crossed by at most this share of the table's lines ...
GUTTER_CROSSING = 0.1
#: ... and by at most this share of the lines that cross the most crossed x position (a full column:
#: about one line per row). A share of all the lines alone is a share of the rows times the columns:
#: with over 1 / GUTTER_CROSSING columns every x position is crossed by fewer than that (one column
#: holds 1/11 of an 11-column table's lines), so the whole table was one gutter, no boundary was
#: found and the table was not found at all (``bench/tables.py --seed 7`` page 4, 26 x 11 cells
#: without rules: cell recall 0 %). Up to 1 / (GUTTER_CROSSING / GUTTER_PEAK_SHARE) = 5 full columns
#: the share of all lines is the lower bound and nothing changes.
GUTTER_PEAK_SHARE = 0.5
#: ... over at least this many line heights of width (the space between two cells' texts).
GUTTER_MIN_WIDTH = 0.8
#: A header row just above a table joins it when the gap is below this many line heights.
HEADER_GAP = 1.5


def table_rows(lines: list, med_h: float) -> list[list]:
    """``lines`` (objects with ``box`` (x0, y0, x1, y1), page pixels) grouped into rows top to bottom:
    a line joins the row above when its centre lies within :data:`ROW_TOLERANCE` x ``med_h`` (the
    page's median line height, pixels) of that row's mean centre; each row in the order of the centres.
    """
    rows: list[list] = []
    for ln in sorted(lines, key=lambda b: (b.box[1] + b.box[3]) / 2):
        cy = (ln.box[1] + ln.box[3]) / 2
        if rows and abs(cy - np.mean([(r.box[1] + r.box[3]) / 2 for r in rows[-1]])) < ROW_TOLERANCE * med_h:
            rows[-1].append(ln)
        else:
            rows.append([ln])
    return rows


def _rule_boundaries(lines: list, rules: list[Box], box: Box) -> list[tuple[float, float, float]]:
    """(x, y0, y1) of the vertical rules spanning RULE_SPAN of the height of ``box`` (the lines'
    union) and lying strictly inside it (the table's outer border is no boundary), sorted by x.
    """
    x0, y0, x1, y1 = box
    xs = sorted(((r[0] + r[2]) / 2, r[1], r[3]) for r in rules
                if r[3] - r[1] > 2 * (r[2] - r[0]) and min(r[3], y1) - max(r[1], y0) >= RULE_SPAN * (y1 - y0))
    return [x for x in xs if x0 < x[0] < x1]


def gutter_boundaries(lines: list, med_h: float) -> list[float]:
    """Midpoints (page pixels, ascending) of the x runs crossed by <= :data:`GUTTER_CROSSING` of
    ``lines`` and <= :data:`GUTTER_PEAK_SHARE` of the most lines crossing one x, and >=
    :data:`GUTTER_MIN_WIDTH` x ``med_h`` wide: the column gutters of a table without rules.
    """
    return [(a + b) / 2 for a, b in gutter_runs(lines, med_h)]


def gutter_runs(lines: list, med_h: float) -> list[tuple[float, float]]:
    """The x runs (x0, x1 page pixels, ascending) whose midpoints :func:`gutter_boundaries` gives."""
    lo, cover = line_cover(lines)
    most = float(cover.max()) if cover.size else 0.0
    low = np.append(cover <= min(GUTTER_CROSSING * len(lines), GUTTER_PEAK_SHARE * most), False)
    out, start = [], None
    for i, flag in enumerate(low):
        if flag and start is None:
            start = i
        elif not flag and start is not None:
            if start > 0 and i < len(cover) and i - start >= GUTTER_MIN_WIDTH * med_h:
                out.append((float(lo + start), float(lo + i)))
            start = None
    return out


def column_of(box: Box, bounds: list[float]) -> int:
    """The column (0-based) of a line with ``box`` (x0, y0, x1, y1 page pixels) between the sorted
    column boundaries ``bounds`` (page x): the column that holds the most of its width (the first of
    equals). Not the column it starts in: in a table without rules the gutter between two
    right-aligned numeric columns is placed where (almost) no line crosses it, and a wide value of
    the right column (``-119.57%``, ``9,363.90``) starts left of it -- it was put into the column
    before and read as one cell with that column's number (``43,351 -119.57%``; issue 37).
    """
    edges = [-np.inf, *bounds, np.inf]
    overlaps = [min(box[2], hi) - max(box[0], lo) for lo, hi in zip(edges, edges[1:], strict=False)]
    return int(np.argmax(overlaps))


#: Column gutters: (page x in pixels, indices of the table's lines that have ink there, {index of such
#: a line: page x of a blank run of its own in the gutter to cut it at instead}).
Gutters = list[tuple[float, frozenset[int], dict[int, float]]]


def _cut_at(lines: list, gutters: Gutters, med_h: float, make_piece: Callable) -> list:
    """``lines`` with each line cut at the gutters it runs across (more than half a line height on
    both sides): at the gutter's x where it has no ink of its own there, else at its own blank run in
    the gutter when it has one (``gutters``: (x, indices of the lines inked there, {index: own x})).
    """
    out = []
    for i, ln in enumerate(lines):
        at = [x if i not in inked else own.get(i) for x, inked, own in gutters]
        inner = [x for x in at if x is not None and ln.box[0] + med_h / 2 < x < ln.box[2] - med_h / 2]
        edges = [ln.box[0], *inner, ln.box[2]]
        out += [ln] if not inner else [make_piece(ln, a, b) for a, b in zip(edges, edges[1:], strict=False)]
    return out


def table_lines(lines: list, rules: list[Box], table: int, med_h: float, make_piece: Callable,
                gutters: Callable[[list], Gutters] | None = None) -> list[tuple[object, str]]:
    """(line, join) of a table's lines in reading order (rows top to bottom, cells left to right).
    ``lines``: objects with ``box`` (x0, y0, x1, y1 page pixels); ``rules``: the page's rule boxes;
    ``table``: this table's 1-based number on the page; ``med_h``: the page's median line height;
    ``make_piece(line, x0, x1)`` cuts a line at a rule. ``gutters(lines)``: the column gutters found
    in the page's ink (:func:`models.compact.page.table_gutters.ink_gutters`), used instead of the
    boxes' gutters when there are no column rules and the ink shows more columns (rows detected
    whole: their lines are cut there). Raises ValueError for ``table`` < 1.
    """
    if table < 1:
        raise ValueError(f"table numbers start at 1, got {table}")
    if not lines:
        return []
    box = (min(ln.box[0] for ln in lines), min(ln.box[1] for ln in lines),
           max(ln.box[2] for ln in lines), max(ln.box[3] for ln in lines))
    spans = _rule_boundaries(lines, rules, box)
    bounds = [x for x, _, _ in spans]
    if bounds:  # cut lines run across a rule, where the rule is (two tables one region: not the other's)
        cut = []
        for ln in lines:
            cy = (ln.box[1] + ln.box[3]) / 2
            inner = [x for x, ry0, ry1 in spans
                     if ln.box[0] + med_h / 2 < x < ln.box[2] - med_h / 2 and ry0 <= cy <= ry1]
            edges = [ln.box[0], *inner, ln.box[2]]
            cut += [ln] if not inner else [make_piece(ln, a, b) for a, b in zip(edges, edges[1:], strict=False)]
        lines = cut
        # columns the rules leave unruled (a rule after the labels only): their gutters, no rule inside
        bounds = sorted(bounds + [(a + b) / 2 for a, b in gutter_runs(lines, med_h)
                                  if not any(a <= x <= b for x in bounds)])
    else:
        bounds = gutter_boundaries(lines, med_h)
        found = gutters(lines) if gutters is not None else []
        if found and len(found) >= len(bounds):
            lines, bounds = _cut_at(lines, found, med_h, make_piece), [x for x, _, _ in found]
    rows = table_rows(lines, med_h)
    cells: dict[tuple[int, int], list] = {}
    for r, row in enumerate(rows):
        for ln in sorted(row, key=lambda b: b.box[0]):
            cells.setdefault((r, column_of(ln.box, bounds)), []).append(ln)
    used_cols = sorted({c for _, c in cells})
    col_no = {c: i for i, c in enumerate(used_cols)}
    out: list[tuple[object, str]] = []
    for (r, c), cell_lines in sorted(cells.items()):
        cell_lines.sort(key=lambda b: ((b.box[1] + b.box[3]) / 2 // max(1.0, med_h), b.box[0]))
        for k, ln in enumerate(cell_lines):
            out.append((ln, cell_join(Cell(table, r, col_no[c])) if k == 0 else JOIN_SPACE))
    return out


def header_row_above(table_box: Box, candidates: list, med_h: float) -> list[int]:
    """Indices of ``candidates`` (objects with ``box`` and ``lines``) that are the table's header
    row: one line high, just above it (gap < HEADER_GAP line heights), within its width (± 2 line
    heights) and cut into at least 3 detected lines (its cells).
    """
    x0, y0, x1, _ = table_box
    out = []
    for i, g in enumerate(candidates):
        gx0, gy0, gx1, gy1 = g.box
        if (gy1 <= y0 + med_h / 2 and y0 - gy1 < HEADER_GAP * med_h and gy1 - gy0 <= 1.6 * med_h
                and gx0 >= x0 - 2 * med_h and gx1 <= x1 + 2 * med_h and len(g.lines) >= 3):
            out.append(i)
    return out


def row_below(table_box: Box, candidates: list, med_h: float) -> list[int]:
    """Indices of ``candidates`` (objects with ``box`` and ``lines``) that are the table's last row,
    left out of it by the page analysis (below a rule that closes a booktabs or horizontally ruled
    table, ``bench/tables.py`` seeds 1-3: one row of 5-11 cells read as loose lines after the table):
    the mirror of :func:`header_row_above` -- one line high, just below the table (gap <
    :data:`HEADER_GAP` line heights), within its width (± 2 line heights) and cut into at least 3
    detected lines (its cells). A caption or a note below a table is one line, not three.
    """
    x0, _, x1, y1 = table_box
    out = []
    for i, g in enumerate(candidates):
        gx0, gy0, gx1, gy1 = g.box
        if (gy0 >= y1 - med_h / 2 and gy0 - y1 < HEADER_GAP * med_h and gy1 - gy0 <= 1.6 * med_h
                and gx0 >= x0 - 2 * med_h and gx1 <= x1 + 2 * med_h and len(g.lines) >= 3):
            out.append(i)
    return out


#: A group beside a table joins it when at least this share of its lines sit on the table's rows ...
BESIDE_ROW_SHARE = 0.7
#: ... it has at least this many lines, its lines' median width is at most this many line heights
#: (cells, not a column of prose) ...
BESIDE_MIN_LINES, BESIDE_MAX_WIDTH = 3, 12.0
#: ... and it is at most this many line heights from the table across (a column of the same table) ...
BESIDE_GAP = 5.0
#: A column of row labels stands left of its table's numbers across a wider blank: a statement's
#: labels are set flush left and its amounts far right (``bench/statements.py --seed 0`` page 5: the
#: longest label 6.5 line heights from the note column, every label read outside the table; an
#: invoice's description column 8.7 line heights left of its quantities, ``bench/doc_pages.py --seed
#: 4500`` page 7, read before all the numbers, 24.4 % CER). Such a column joins from up to this many
#: line heights away on the left, with nothing between them ...
BESIDE_FAR_GAP = 12.0
#: ... when its lines stand on at least this share of the table's rows (one label per row; that
#: statement's labels 0.93; three of an invoice's four rows are not enough). A block whose every line
#: stands on a row of the table, one a row, on as many of its rows joins from as far on either side
#: (an invoice's totals: ``Subtotal:`` / ``Tax:`` / ``Total:`` labels, their amounts 5.2 line heights
#: to the right, ``bench/doc_pages.py --seed 4500`` page 7).
BESIDE_FAR_COVER = 0.8


#: A block lies within a table when this share of its box is inside the table's box (grown by half
#: a line height on every side).
WITHIN_SHARE = 0.8


def _within(box: Box, table_box: Box, med_h: float) -> bool:
    """Whether at least :data:`WITHIN_SHARE` of ``box``'s area lies inside ``table_box`` grown by
    half of ``med_h`` (page pixels).
    """
    m = med_h / 2
    w = min(box[2], table_box[2] + m) - max(box[0], table_box[0] - m)
    h = min(box[3], table_box[3] + m) - max(box[1], table_box[1] - m)
    area = max(1e-6, (box[2] - box[0]) * (box[3] - box[1]))
    return w > 0 and h > 0 and w * h >= WITHIN_SHARE * area


def rows_beside(table_box: Box, table_lines: list, candidates: list, med_h: float) -> list[int]:
    """Indices of ``candidates`` (objects with ``box`` and ``lines``) that are more columns of the
    table (``table_box``, ``table_lines``): a table without rules is often cut by the page analysis
    into a table block and text blocks of its other columns (its labels, a few numeric columns), read
    one after the other -- labels first, then the numbers. A candidate is such a column when it lies
    beside the table (within :data:`BESIDE_GAP` line heights across, mostly within its height), holds
    at least :data:`BESIDE_MIN_LINES` short lines (median width <= :data:`BESIDE_MAX_WIDTH` line
    heights) and at least :data:`BESIDE_ROW_SHARE` of its lines lie on a row of the table (centres
    within :data:`ROW_TOLERANCE` line heights of a table line's centre). A column of row labels on the
    left joins from further (up to :data:`BESIDE_FAR_GAP` line heights, no other candidate between)
    when its lines stand on :data:`BESIDE_FAR_COVER` of the table's rows; a candidate whose every
    line stands on a row of its own, on as many rows, joins from as far on either side. A candidate of any size
    that lies within the table's box (:func:`_within`) is part of it too: cells the analysis left
    in blocks of their own (one to three lines: a header, a few cells of a skewed page) were read
    after the table, outside its grid.
    """
    x0, y0, x1, y1 = table_box
    centres = np.sort(np.array([centre_y(ln) for ln in table_lines], dtype=np.float64))
    out = []
    for i, g in enumerate(candidates):
        gx0, gy0, gx1, gy1 = g.box
        if _within(g.box, table_box, med_h):
            out.append(i)
            continue
        if len(g.lines) < BESIDE_MIN_LINES or not len(centres):
            continue
        across = max(gx0 - x1, x0 - gx1)
        inside = min(gy1, y1) - max(gy0, y0)
        widths = sorted(ln.box[2] - ln.box[0] for ln in g.lines)
        wide = widths[len(widths) // 2] > BESIDE_MAX_WIDTH * med_h
        far = across > BESIDE_GAP * med_h
        if across > BESIDE_FAR_GAP * med_h or inside < 0.5 * (gy1 - gy0) or wide:
            continue
        ys = np.array([centre_y(ln) for ln in g.lines], dtype=np.float64)
        k = np.clip(np.searchsorted(centres, ys), 1, len(centres) - 1) if len(centres) > 1 else np.zeros(len(ys), int)
        near = np.minimum(np.abs(centres[k] - ys), np.abs(centres[np.maximum(k - 1, 0)] - ys))
        share = (near < ROW_TOLERANCE * med_h).mean()
        if not far and share >= BESIDE_ROW_SHARE:
            out.append(i)
        elif far and share >= BESIDE_ROW_SHARE and gx1 <= x0 and _clear_between(g, table_box, candidates) \
                and _row_cover(ys, table_lines, med_h) >= BESIDE_FAR_COVER:
            out.append(i)
        elif far and share == 1.0 and _one_a_row(g.lines, table_lines, med_h):
            out.append(i)
    return out


def _clear_between(group, table_box: Box, candidates: list) -> bool:
    """Whether no other of ``candidates`` (objects with ``box``) overlaps the blank between ``group``
    (left of the table) and ``table_box`` on ``group``'s rows (page pixels).
    """
    gx0, gy0, gx1, gy1 = group.box
    return not any(c is not group and c.box[0] < table_box[0] and c.box[2] > gx1
                   and min(c.box[3], gy1) > max(c.box[1], gy0) for c in candidates)


def _row_cover(ys: np.ndarray, table_lines: list, med_h: float) -> float:
    """Share of the rows of ``table_lines`` (:func:`table_rows`) with one of the centres ``ys``
    (page y) within :data:`ROW_TOLERANCE` line heights of the row's mean centre.
    """
    rows = table_rows(table_lines, med_h)
    mids = [float(np.mean([centre_y(ln) for ln in row])) for row in rows]
    return sum(1 for m in mids if np.any(np.abs(ys - m) < ROW_TOLERANCE * med_h)) / max(1, len(mids))


def _one_a_row(lines: list, table_lines: list, med_h: float) -> bool:
    """Whether ``lines`` (a block beside a table, each on one of its rows) stand one a row of the table
    (``table_lines``' rows, :func:`table_rows`) and on :data:`BESIDE_FAR_COVER` of its rows at least.
    """
    rows = [float(np.mean([centre_y(ln) for ln in row])) for row in table_rows(table_lines, med_h)]
    at = [min(range(len(rows)), key=lambda r: abs(rows[r] - centre_y(ln))) for ln in lines]
    return len(set(at)) == len(at) >= BESIDE_FAR_COVER * len(rows)
