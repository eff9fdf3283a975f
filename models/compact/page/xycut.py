"""Reading order of line boxes without a page layout: columns left to right, each top to bottom
(recursive XY-cut over the gaps between line boxes, with prose columns kept whole), and side-by-side
panels of a form or an invoice (bill-to beside ship-to, the seller beside the invoice details) read
panel by panel; anything else that is not prose reads in rows (a table's cells, a key and its value).
"""

from __future__ import annotations

import numpy as np

from models.compact.page.boxes import LineBox, centre_y, line_cover
from models.compact.page.layout import interval_gaps


def reading_order(lines: list[LineBox]) -> list[LineBox]:
    """Order line boxes for reading: columns left to right, each top to bottom (recursive XY-cut)."""
    if len(lines) <= 1:
        return list(lines)
    heights = sorted(ln.box[3] - ln.box[1] for ln in lines)
    med_h = heights[len(heights) // 2]
    return _xy_cut(lines, med_h)


def is_prose(side: list[LineBox], med_h: float) -> bool:
    """Whether a side of a candidate gutter reads as a text column: at least 3 boxes much wider than
    tall, and they are 40 % of its boxes or hold 70 % of its boxes' total width (a column beside a
    figure or chart whose many small labels would outnumber its lines; table cells rarely pass).
    """
    width = [ln.box[2] - ln.box[0] for ln in side]
    wide = [w for w in width if w > 10 * med_h]
    return len(wide) >= 3 and (len(wide) >= 0.4 * len(side) or sum(wide) >= 0.7 * sum(width))


#: Side-by-side panels: a gutter at least this many line heights wide (a key-value row's label and
#: value are 1-3 em apart: that gap is not a gutter between panels) ...
PANEL_GAP = 3.0
#: ... each side 2 to this many rows (an address block, a few key-value rows; a longer run of rows
#: beside another is a table's columns, read in rows) ...
PANEL_MAX_ROWS = 8
#: ... whose rows begin with boxes at least this many line heights wide (median; a transcript's column
#: of line numbers, or bullets, beside its text is margin furniture read with its rows) ...
PANEL_MIN_HEAD = 1.5
#: ... and no gap across both sides at least this many line heights tall (a gap between two bands of
#: panels, or between panels and what follows: those are cut first, band by band).
ROW_BAND_GAP = 1.0
#: A panel's values (the second box of a key-value row) start within this many line heights of each
#: other (one tab stop: measured 0.05-0.16 on generated forms, the detector's box edges and glyph side
#: bearings; a right-aligned column's one-digit-longer number starts ~0.4 line heights further left).
VALUE_ALIGN = 0.3
#: A value's box that starts less than this many line heights past the end of its label's box (or
#: before it) reaches back over the label's print: its left edge is not where the value's print starts
#: (the detector's box of ``564-54852`` began 1.35 line heights early, over the colon of ``Policy
#: number:``, ``bench/doc_pages.py --seed 1500`` page 6) and says nothing of the panel's tab stop.
VALUE_REACH = 0.25


def value_lefts(rows: list[list[LineBox]], med_h: float) -> list[float]:
    """Page x (pixels) of the left edges of the values (the second box of a row of two) of ``rows``
    (:func:`row_groups`), leaving out those that reach back to their label (:data:`VALUE_REACH`).
    """
    out = []
    for row in rows:
        if len(row) == 2:
            label, value = sorted(row, key=lambda ln: ln.box[0])
            if value.box[0] - label.box[2] >= VALUE_REACH * med_h:
                out.append(value.box[0])
    return out


#: Between blocks stacked one above the other, a gap at least this many line heights tall ...
SECTION_GAP = 0.5
#: ... and this many times the median gap between the rows inside the blocks is a section gap: an
#: invoice's seller address beside its details, then bill-to beside ship-to, 0.79 line heights apart
#: where the blocks' rows are 0-0.25 apart, are two bands of panels (read band by band), not two
#: columns. Rows of a form at one pitch (every gap the same) have none.
SECTION_RATIO = 2.5


def median_row_gap(blocks: list[list[LineBox]], med_h: float) -> float | None:
    """The median gap in pixels between consecutive rows (:func:`row_groups`) inside each of
    ``blocks`` (lists of line boxes; rows that overlap count 0), or None when no block has two rows.
    """
    gaps: list[float] = []
    for lines in blocks:
        spans = [(min(ln.box[1] for ln in r), max(ln.box[3] for ln in r)) for r in row_groups(lines, med_h)]
        gaps += [max(0.0, b[0] - a[1]) for a, b in zip(spans, spans[1:], strict=False)]
    return float(np.median(gaps)) if gaps else None


def is_panel(side: list[LineBox], med_h: float, ragged_needed: bool = True) -> bool:
    """Whether ``side`` reads as one panel of a form or an invoice (an address block, a few key-value
    rows): 2 to :data:`PANEL_MAX_ROWS` rows (boxes whose centres lie within half a line height make a
    row) of at most two boxes each (a line, or a key and its value), left-aligned (the rows' left
    edges within one line height), ragged on the right (the rows' right edges, or those of their
    first boxes -- the labels, or a label and its value found as one box --, spread over more than
    one line height: a table's last column of right-aligned numbers, or a grid of equal cells, is
    not a panel) and, where a row has a second box (a value at the panel's tab stop), those boxes
    left-aligned within :data:`VALUE_ALIGN` line heights (a table's right-aligned numbers of
    different lengths are not; a value whose box reaches back to its label is not measured,
    :func:`value_lefts`). ``med_h``: the median line height in pixels. ``ragged_needed`` False: the
    rows' right edges may align (see :func:`kv_panel`).
    """
    rows = row_groups(side, med_h)
    if not 2 <= len(rows) <= PANEL_MAX_ROWS or any(len(row) > 2 for row in rows):
        return False
    firsts = [min(row, key=lambda ln: ln.box[0]) for row in rows]
    heads = sorted(ln.box[2] - ln.box[0] for ln in firsts)
    if heads[len(heads) // 2] < PANEL_MIN_HEAD * med_h:  # line numbers or bullets: margin furniture
        return False
    lefts = [ln.box[0] for ln in firsts]
    rights = [max(ln.box[2] for ln in row) for row in rows]
    head_rights = [ln.box[2] for ln in firsts]
    values = value_lefts(rows, med_h)
    ragged = max(rights) - min(rights) > med_h or max(head_rights) - min(head_rights) > med_h
    tabbed = not values or max(values) - min(values) <= VALUE_ALIGN * med_h
    return max(lefts) - min(lefts) <= med_h and (ragged or not ragged_needed) and tabbed


def kv_panel(side: list[LineBox], med_h: float) -> bool:
    """Whether ``side`` is a panel of key-value rows whose right edges may align (its labels and its
    values each of one length: ``邮政编码：  76506309570`` over ``身份证号码：  34359759454``,
    ``bench/doc_pages.py --seed 1800`` page 3): every row a label and a value, at least two values
    measured at one tab stop (:func:`value_lefts`), otherwise :func:`is_panel`. Only beside a panel
    of another number of rows (:func:`panel_cut`): a table's columns share its rows.
    """
    rows = row_groups(side, med_h)
    return (all(len(row) == 2 for row in rows) and len(value_lefts(rows, med_h)) >= 2
            and is_panel(side, med_h, ragged_needed=False))


def empty_cells(left: list[list[LineBox]], right: list[list[LineBox]], med_h: float) -> bool:
    """Whether the side of fewer rows (:func:`row_groups` of two sides of a gutter) is a table's columns
    empty on some rows: every one of its rows on a row of the other side (centres within half a line
    height) and a row of the other side skipped between its first and last (a hole inside the table).
    The shorter of two panels side by side runs on without a hole, or at its own pitch.
    """
    fewer, more = sorted((left, right), key=len)
    centres = [sum(centre_y(ln) for ln in row) / len(row) for row in more]
    at = []
    for row in fewer:
        cy = sum(centre_y(ln) for ln in row) / len(row)
        hits = [i for i, c in enumerate(centres) if abs(cy - c) < 0.5 * med_h]
        if not hits:
            return False
        at.append(hits[0])
    return max(at) - min(at) + 1 > len(set(at))


def panel_cut(lines: list[LineBox], med_h: float,
              gutters: list[tuple[float, float]] | None = None) -> float | None:
    """The page x (pixels) of the widest gutter at least :data:`PANEL_GAP` line heights (``med_h``
    pixels each) wide with a panel (:func:`is_panel`) on each side, or None; where the sides hold
    different numbers of rows, a key-value panel whose right edges align (:func:`kv_panel`) counts,
    unless they are a table's columns empty on some rows (:func:`empty_cells`).
    ``gutters``: the candidate gutters (x0, x1) when already found (default: :func:`_column_gutters`).
    """
    best = None
    for g0, g1 in _column_gutters(lines, med_h) if gutters is None else gutters:
        mid = (g0 + g1) / 2
        left = [ln for ln in lines if (ln.box[0] + ln.box[2]) / 2 < mid]
        right = [ln for ln in lines if (ln.box[0] + ln.box[2]) / 2 >= mid]
        if g1 - g0 < PANEL_GAP * med_h:
            continue
        rows = row_groups(left, med_h), row_groups(right, med_h)
        uneven = len(rows[0]) != len(rows[1]) and not empty_cells(*rows, med_h)
        if all(is_panel(s, med_h) or (uneven and kv_panel(s, med_h)) for s in (left, right)):
            if best is None or g1 - g0 > best[0]:
                best = (g1 - g0, mid)
    return None if best is None else best[1]


def _column_gutters(lines: list[LineBox], med_h: float) -> list[tuple[float, float]]:
    """Candidate gutters (x0, x1): runs at least 0.3 line heights wide where at most ~5 % of the boxes
    cross (the detector's unclipped boxes of adjacent columns often touch or overlap a narrow gutter).
    """
    x_lo, cover = line_cover(lines)
    tol = int(0.05 * len(lines))
    low = cover <= tol
    runs, start = [], None
    for i, flag in enumerate(np.append(low, False)):
        if flag and start is None:
            start = i
        elif not flag and start is not None:
            if start > 0 and i < len(cover) and i - start >= 0.3 * med_h:  # interior runs only
                runs.append((float(start + x_lo), float(i + x_lo)))
            start = None
    return runs


def _straddler_cut(lines: list[LineBox], x_mid: float, med_h: float) -> float | None:
    """A y position separating the boxes that cross the gutter at ``x_mid`` (wider than a line
    height on both sides) from the column boxes, or None. Chosen so the straddlers' side is smallest.
    """
    cross = [ln for ln in lines if ln.box[0] < x_mid - med_h and ln.box[2] > x_mid + med_h]
    if not cross:
        return None
    gaps = [(g0 + g1) / 2 for g0, g1 in interval_gaps([(ln.box[1], ln.box[3]) for ln in lines])]
    best = None
    for y in gaps:
        above = [ln for ln in lines if centre_y(ln) < y]
        side = above if all(centre_y(c) < y for c in cross) else (
            [ln for ln in lines if centre_y(ln) >= y] if all(centre_y(c) >= y for c in cross) else None)
        if side is not None and (best is None or len(side) < best[0]):
            best = (len(side), y)
    if best is None:
        # Straddlers above and below the columns (a title and a centred page number): cut off the
        # top ones or the bottom ones, whichever takes fewer lines; the recursion does the rest.
        top, bottom = min(centre_y(c) for c in cross), max(centre_y(c) for c in cross)
        below_top = [y for y in gaps if y > top]
        above_bottom = [y for y in gaps if y < bottom]
        for y_cut, keep in ((min(below_top, default=None), "above"), (max(above_bottom, default=None), "below")):
            if y_cut is None:
                continue
            n = sum(1 for ln in lines if (centre_y(ln) < y_cut) == (keep == "above"))
            if best is None or n < best[0]:
                best = (n, y_cut)
    return None if best is None else best[1]


def row_groups(lines: list[LineBox], med_h: float) -> list[list[LineBox]]:
    """``lines`` in rows top to bottom: a box joins the row whose mean centre is within half a line
    height of its own (cells of one table row, whose centres differ by a few pixels of descenders).
    """
    rows: list[list[LineBox]] = []
    for ln in sorted(lines, key=centre_y):
        if rows and abs(centre_y(ln) - sum(centre_y(r) for r in rows[-1]) / len(rows[-1])) < 0.5 * med_h:
            rows[-1].append(ln)
        else:
            rows.append([ln])
    return rows


def _rows(lines: list[LineBox], med_h: float) -> list[LineBox]:
    """Boxes that overlap everywhere, read as rows top to bottom, each left to right (so cells of
    one table row stay in one row, in x order; see :func:`row_groups`).
    """
    return [ln for row in row_groups(lines, med_h) for ln in sorted(row, key=lambda b: b.box[0])]


def _one_pitch(gaps: list[float], widest: float) -> bool:
    """Whether ``widest`` (pixels), the widest of the gaps between a band's rows ``gaps``, is below
    :data:`SECTION_RATIO` times their median: rows at one pitch, no section gap among them.
    """
    return widest < SECTION_RATIO * float(np.median(gaps))


def _xy_cut(lines: list[LineBox], med_h: float, panels: bool = True) -> list[LineBox]:
    """``lines`` in reading order by recursive XY-cut (see the module docstring); ``panels`` False: a
    piece of a band of rows at one pitch, each of two boxes or more, that is not side-by-side panels
    as a whole, whose pieces are then not cut into panels either (a form's labels and their values 4.5
    line heights to the right, under a first row whose long label crosses that gap, were read labels
    first below that row: ``bench/doc_pages.py --seed 2400`` page 0).
    """
    if len(lines) <= 1:
        return list(lines)
    best = None  # (gap width in line heights, axis, position)
    gutters = _column_gutters(lines, med_h)
    for g0, g1 in gutters:
        mid = (g0 + g1) / 2
        left = [ln for ln in lines if (ln.box[0] + ln.box[2]) / 2 < mid]
        right = [ln for ln in lines if (ln.box[0] + ln.box[2]) / 2 >= mid]
        if is_prose(left, med_h) and is_prose(right, med_h):
            score = (g1 - g0) / med_h
            if best is None or score > best[0]:
                best = (score, "x", mid)
    if best is None:
        y_gaps = [g1 - g0 for g0, g1 in interval_gaps([(ln.box[1], ln.box[3]) for ln in lines])]
        for g0, g1 in interval_gaps([(ln.box[1], ln.box[3]) for ln in lines]):
            score = (g1 - g0) / med_h
            if best is None or score > best[0]:
                best = (score, "y", (g0 + g1) / 2)
        if best is None or best[0] < ROW_BAND_GAP:  # one band of rows: panels side by side, or rows
            x_panel = panel_cut(lines, med_h, gutters) if panels else None
            if x_panel is not None:
                return _xy_cut([ln for ln in lines if (ln.box[0] + ln.box[2]) / 2 < x_panel], med_h) + \
                    _xy_cut([ln for ln in lines if (ln.box[0] + ln.box[2]) / 2 >= x_panel], med_h)
            if best is not None and _one_pitch(y_gaps, best[0] * med_h) and \
                    all(len(row) >= 2 for row in row_groups(lines, med_h)):
                panels = False  # rows of labels and values (a line over panels leaves them panels)
    if best is None:  # overlapping boxes everywhere: rows top to bottom, then left to right
        return _rows(lines, med_h)
    _, axis, mid = best
    if axis == "x":  # a title / running head spanning the columns is read before (or after) them
        y_cut = _straddler_cut(lines, mid, med_h)
        if y_cut is not None:
            axis, mid = "y", y_cut
    k = 0 if axis == "x" else 1
    first = [ln for ln in lines if (ln.box[k] + ln.box[k + 2]) / 2 < mid]
    second = [ln for ln in lines if (ln.box[k] + ln.box[k + 2]) / 2 >= mid]
    if not first or not second:
        return _rows(lines, med_h)
    return _xy_cut(first, med_h, panels) + _xy_cut(second, med_h, panels)
