"""Layout steps of :meth:`models.compact.page.detect.LineDetector.detect` on detected lines: the page's
skew from the lines' slopes, cutting a line at an x position, and the reading order by the page's regions
(:mod:`models.compact.page.order`, cut into bands where the page's lines leave a gap across it:
:mod:`models.compact.page.bands`; table regions cell by cell, :mod:`models.compact.page.table`). Rule
lines that are not rules, and detections that are: :mod:`models.compact.page.rule_lines`.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from models.compact.line.image import ink_columns
from models.compact.line.runs import true_runs
from models.compact.page import order as layout_order
from models.compact.page import table
from models.compact.page.band_panels import regroup_panels
from models.compact.page.bands import join_key_values, split_bands
from models.compact.page.boxes import LineBox
from models.compact.page.kv_rows import join_far_values
from models.compact.page.layout import IMAGE, TABLE, TEXT, PageLayout
from models.compact.page.order import Group, lines_box
from models.compact.page.row_skew import row_pairs_skew
from models.compact.page.tab_stops import ink_span
from models.compact.page.table_find import join_grid_columns, promote_grids
from models.compact.page.table_gutters import ink_gutters
from models.compact.page.table_prose import prose_rows
from models.compact.page.xycut import reading_order, row_groups

#: Skew below this (degrees) is left alone: a line then drifts < 1/4 of its height over 1,500 px.
MIN_SKEW_DEG = 0.4
#: Skew above this is not trusted (Tesseract's estimate is for scans laid slightly askew).
MAX_SKEW_DEG = 15.0
#: Lines measured for the skew: at least this many times as long as tall (their slope is precise) ...
SKEW_LINE_ASPECT = 6.0
#: ... and at least this many of them (a median of fewer is one stray line's say).
SKEW_MIN_LINES = 5

#: A page of short lines (a form's labels and values, none ``SKEW_LINE_ASPECT`` long) is measured on
#: the lines at least this many times as long as tall ...
SKEW_SHORT_ASPECT = 2.5
#: ... when there are at least this many of them (a short box's slope is coarser: more make the median).
SKEW_MIN_SHORT = 8


def line_skew_deg(lines: list[LineBox]) -> float | None:
    """The page's skew in degrees counter-clockwise (text rising to the right is positive; PIL
    ``rotate`` by minus it straightens the page): the median slope of the top edges of the lines at least
    ``SKEW_LINE_ASPECT`` times as long as tall; with fewer than ``SKEW_MIN_LINES`` of them, of the lines
    at least :data:`SKEW_SHORT_ASPECT` times as long as tall when there are :data:`SKEW_MIN_SHORT` of
    them (a photographed form of labels and values, 2-7 line heights long each, tilted by 4 degrees:
    its values ~0.7 row pitches higher than their labels, read a row off, ``bench/receipts.py`` seed
    33004); but on a page of many rows of short lines (a table) the slope along its rows
    (:func:`~models.compact.page.row_skew.row_pairs_skew`), which short boxes' own slopes measure
    coarsely; else None.
    """
    long_, short = [], []
    for ln in lines:
        q = ln.quad.astype(np.float64)
        dx, dy = float(q[1, 0] - q[0, 0]), float(q[1, 1] - q[0, 1])
        tall, length = max(1.0, float(np.hypot(*(q[3] - q[0])))), float(np.hypot(dx, dy))
        if dx > 0 and length >= SKEW_SHORT_ASPECT * tall:
            short.append(-np.degrees(np.arctan2(dy, dx)))
            if length >= SKEW_LINE_ASPECT * tall:
                long_.append(short[-1])
    if len(long_) >= SKEW_MIN_LINES:
        return float(np.median(long_))
    rough = float(np.median(short)) if len(short) >= SKEW_MIN_SHORT else None
    rows = row_pairs_skew(lines, rough or 0.0)  # a table's rows of short cells
    return rows if rows is not None else rough


def line_piece(line: LineBox, x0: float, x1: float) -> LineBox:
    """The part of ``line`` between page x ``x0`` and ``x1`` (its quad cut along its top and bottom
    edges at those x positions; a piece of a table cell's line keeps no join).
    """
    q = line.quad.astype(np.float32)
    def at(p: np.ndarray, r: np.ndarray, x: float) -> np.ndarray:
        t = 0.0 if abs(float(r[0] - p[0])) < 1e-6 else (x - float(p[0])) / float(r[0] - p[0])
        return p + min(1.0, max(0.0, t)) * (r - p)
    quad = np.stack([at(q[0], q[1], x0), at(q[0], q[1], x1), at(q[3], q[2], x1), at(q[3], q[2], x0)])
    y0, y1 = float(quad[:, 1].min()), float(quad[:, 1].max())
    return LineBox(quad.astype(np.float32), (float(x0), y0, float(x1), y1), line.score)


#: A line crosses a column gutter only where it holds a blank run at least this many times its
#: height wide (a gutter is 1-3 em; a space between words is ~0.3 em, between hanzi ~0.1 em).
GUTTER_GAP = 0.7


def gutter_gap(gray: np.ndarray, line: LineBox, x0: float, x1: float, least: float = GUTTER_GAP) -> bool:
    """Whether ``line``'s pixels in ``gray`` (uint8 [H, W], the page, dark ink on light paper), between
    page x ``x0`` and ``x1`` (the facing edges of two side-by-side blocks, widened by the line's
    height: the blocks' edges are loose), hold a run of columns without ink at least ``least`` times
    the line's height wide (default :data:`GUTTER_GAP`). Ink: :func:`models.compact.line.image.ink_columns`.
    """
    bx0, by0, bx1, by1 = line.box
    h = max(1.0, by1 - by0)
    lo, hi = int(max(bx0, x0 - h, 0)), int(min(bx1, x1 + h, gray.shape[1]))
    patch = gray[int(max(0, by0)):int(min(gray.shape[0], by1)), lo:hi]
    if patch.size == 0:
        return True
    dark = ink_columns(patch)
    if dark is None:
        return True  # no ink there at all
    return max((b - a for a, b in true_runs(~dark)), default=0) >= least * h


#: A page at most this many median line heights wide is a till roll (a receipt: 80 mm paper, 19-26
#: line heights of a 7-10 pt receipt face scanned at 150-200 dpi; a letter page's forms and reports are
#: 37 or more, a photographed form's 37-45).
TILL_ROLL_WIDTH = 30.0


def till_roll(lines: list[LineBox], page_width: float | None) -> bool:
    """Whether the page, ``page_width`` pixels wide (None: unknown, False), is a till roll: at most
    :data:`TILL_ROLL_WIDTH` median line heights of ``lines`` wide. A till roll is read row by row, each
    row left to right: an item's name and its amount at the right margin are one row, however the
    page analysis cut the roll into blocks (the amounts one column block beside the names': all the
    names were read, then all the amounts, ``bench/receipts.py`` seed 33000: 35 % CER at 0.9 %
    order-free).
    """
    if page_width is None or not lines:
        return False
    heights = sorted(ln.box[3] - ln.box[1] for ln in lines)
    return page_width <= TILL_ROLL_WIDTH * heights[len(heights) // 2]


def _blank_inside(gray: np.ndarray, line: LineBox, least: float) -> bool:
    """Whether ``line``'s print in ``gray`` (uint8 [H, W], the page), from its first inked column to its
    last (:func:`models.compact.page.tab_stops.ink_span`), holds a blank run at least ``least`` times the
    line's height wide (:func:`gutter_gap`).
    """
    x0, x1 = ink_span(gray, line.box)
    h = line.box[3] - line.box[1]
    return gutter_gap(gray, line, x0 + h, x1 - h, least)


def _ink_bounds(gray: np.ndarray, lines: list[LineBox], med_h: float) -> list[float]:
    """Page x of the column gutters of ``lines`` in the ink of ``gray`` (uint8 [H, W], the page):
    the cuts of :func:`models.compact.page.table_gutters.ink_gutters`, left to right.
    """
    return [x for x, _, _ in ink_gutters(gray, lines, med_h)]


def region_order(lines: list[LineBox], page: PageLayout, page_height: float,
                 gray: np.ndarray | None = None, page_width: float | None = None) -> list[LineBox]:
    """Lines in reading order by the page's regions (:mod:`models.compact.page.order`); table
    regions, and text blocks whose lines stand in a grid (:mod:`models.compact.page.table_find`), with a
    header row just above them, cell by cell, their lines carrying cell joins.
    ``gray`` uint8 [H, W]: the page, for the column gutters of tables without column rules
    (:mod:`models.compact.page.table_gutters`); ``page_width`` pixels (default: ``gray``'s width). A
    till roll (:func:`till_roll`) is read row by row, whatever its regions. Falls back to
    :func:`reading_order` when the analysis found no region.
    """
    if page_width is None and gray is not None:
        page_width = float(gray.shape[1])
    if till_roll(lines, page_width):
        heights = sorted(ln.box[3] - ln.box[1] for ln in lines)
        rows = row_groups(lines, heights[len(heights) // 2])
        return [ln for row in rows for ln in sorted(row, key=lambda b: b.box[0])]
    if not page.regions or not lines:
        return reading_order(lines)
    groups = layout_order.assign(lines, page, line_piece, None if gray is None else partial(gutter_gap, gray))
    heights = sorted(ln.box[3] - ln.box[1] for g in groups for ln in g.lines) or [1.0]
    med_h = heights[len(heights) // 2]
    if layout_order.numbered_lines(groups, med_h):
        return reading_order(lines)
    groups = split_bands(join_key_values(groups, med_h), med_h)
    ink_bounds = None if gray is None else partial(_ink_bounds, gray, med_h=med_h)
    groups = promote_grids(join_grid_columns(regroup_panels(groups, med_h), med_h, ink_bounds), med_h, ink_bounds)
    groups = join_far_values(groups, med_h, page_width,
                             None if gray is None else lambda ln: ink_span(gray, ln.box))
    for t in [g for g in groups if g.kind == TABLE]:
        if t not in groups:  # merged into an earlier table
            continue
        beside = [1]
        while beside:  # columns of the table the analysis made text blocks of (a table without rules)
            others = [g for g in groups if g is not t and g.kind != IMAGE and g.lines]
            beside = table.rows_beside(t.box, t.lines, others, med_h)
            for i in beside:
                t.lines += others[i].lines
                t.box = (min(t.box[0], others[i].box[0]), min(t.box[1], others[i].box[1]),
                         max(t.box[2], others[i].box[2]), max(t.box[3], others[i].box[3]))
                groups.remove(others[i])
        for i in sorted(table.header_row_above(t.box, groups, med_h), reverse=True):
            head = groups.pop(i)
            t.lines += head.lines
            t.box = (min(t.box[0], head.box[0]), head.box[1], max(t.box[2], head.box[2]), t.box[3])
        while True:  # its last row(s), left below the rule that closes it
            others = [g for g in groups if g is not t and g.kind != IMAGE and g.lines]
            feet = [others[i] for i in table.row_below(t.box, others, med_h)]
            if not feet:
                break
            for foot in feet:
                groups.remove(foot)
                t.lines += foot.lines
                t.box = (min(t.box[0], foot.box[0]), t.box[1], max(t.box[2], foot.box[2]), max(t.box[3], foot.box[3]))
    for t in [g for g in groups if g.kind == TABLE]:  # prose lines run across its top or bottom rows
        top, body, bottom = prose_rows(t.lines, med_h, None if gray is None else partial(_blank_inside, gray))
        if top or bottom:
            at = groups.index(t)
            groups[at:at + 1] = [*([Group(TEXT, lines_box(top), top)] if top else []),
                                 Group(TABLE, lines_box(body), body),
                                 *([Group(TEXT, lines_box(bottom), bottom)] if bottom else [])]
    out: list[LineBox] = []
    n_tables = 0
    for g in layout_order.order_groups(groups, page_height):
        if g.kind == TABLE and len(g.lines) >= 4:
            n_tables += 1
            find = None if gray is None else partial(ink_gutters, gray, med_h=med_h)
            for ln, join in table.table_lines(g.lines, page.rules, n_tables, med_h, line_piece, find):
                assert isinstance(ln, LineBox)
                ln.join = join
                out.append(ln)
        elif g.rows:
            out += [ln for row in row_groups(g.lines, med_h) for ln in sorted(row, key=lambda b: b.box[0])]
        else:
            out += reading_order(g.lines)
    return out
