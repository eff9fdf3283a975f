"""Tables found from our own lines: a text block whose lines stand in a grid of rows and columns.

Tesseract's layout analysis marks a table region only where it recognises one; a rule-less table on
column bands and zebra rows came back as one text block per column (then joined into one text block
of 290 lines by :func:`models.compact.page.bands.join_key_values`), and with no table block the page had
no cells at all (``bench/tables.py`` seed 2 page 4: cell recall 0 %, TEDS 0) and its lines were read
in the order of a text block. :func:`is_grid` tells such a block by its lines alone (after Kieninger &
Dengel's T-Recs idea of tables as blocks of short words aligned in rows and columns, here on line
boxes): many rows of at least :data:`MIN_CELLS` short lines, those lines in at least
:data:`MIN_CELLS` different columns -- columns cut at the gutters that (almost) no line crosses,
:func:`models.compact.page.table.column_of` -- and the block neither prose nor two side-by-side
panels of a form (:func:`models.compact.page.xycut.panel_cut`). :func:`promote_grids` makes such
text blocks table blocks; the table code (:mod:`models.compact.page.table`) then reads them cell by
cell like Tesseract's own table regions. Columns of a rule-less table far apart (an invoice's items:
item names, then quantities, prices and amounts each a block or loose lines, ten line heights
apart, too far for :func:`models.compact.page.bands.join_key_values`) are first made one text block
when together they are a grid (:func:`join_grid_columns`).

Columns come from the gutters between the line boxes (:func:`models.compact.page.table.gutter_boundaries`)
or, when those show no grid, from the gutters in the page's ink (``ink_bounds``, the cuts of
:func:`models.compact.page.table_gutters.ink_gutters`). Why both: the detector's box of a short cell
is grown by DB's unclip on every side (a 24 px tall number's box is 45-50 px tall and about 10 px
wider each side), so between columns set close (6-8 px of padding each side of a cell) the boxes
leave gutters of 14-34 px, under :data:`models.compact.page.table.GUTTER_MIN_WIDTH` of the page's
(equally grown) line height: no column was found and a rule-less 35 x 9 table on colour bands and
shaded rows was read as text (``bench/tables.py --seed 9`` page 4: no table, cell recall 86 %). The
ink shows the same gutters at their printed width (34-60 px there).
"""

from __future__ import annotations

from collections.abc import Callable

from models.compact.page.layout import TABLE, TEXT
from models.compact.page.order import Group, lines_box
from models.compact.page.table import column_of, gutter_boundaries, rows_beside, table_rows
from models.compact.page.xycut import is_prose, panel_cut

#: A grid row holds at least this many lines in that many different columns (a label and two values;
#: a form's key-value row holds two, a numbered line two).
MIN_CELLS = 3
#: ... and a grid has at least this many such rows (a table, not a heading over a few figures) ...
MIN_ROWS = 4
#: ... holding at least this share of the block's lines (a paragraph with a small table in it stays
#: text: its long lines are no cells).
ROW_SHARE = 0.7
#: The block's lines are cells: their median width is at most this many line heights (a numeric cell
#: 1.5-4, a row label up to 6; lines of text columns side by side are over 10, :func:`is_prose`).
MAX_CELL_WIDTH = 6.0


#: Column boundaries of a block's lines found in the page's ink: lines -> page x of each gutter's cut.
InkBounds = Callable[[list], list[float]]


def _rows_in_columns(rows: list[list], bounds: list[float], n_lines: int) -> bool:
    """Whether at least :data:`MIN_ROWS` of ``rows`` hold lines in :data:`MIN_CELLS` different
    columns between ``bounds`` (page x), together :data:`ROW_SHARE` of the ``n_lines`` lines.
    """
    if len(bounds) < MIN_CELLS - 1:
        return False
    grid_rows = [row for row in rows if len({column_of(ln.box, bounds) for ln in row}) >= MIN_CELLS]
    return len(grid_rows) >= MIN_ROWS and sum(len(r) for r in grid_rows) >= ROW_SHARE * n_lines


def is_grid(lines: list, med_h: float, ink_bounds: InkBounds | None = None) -> bool:
    """Whether ``lines`` (objects with ``box`` (x0, y0, x1, y1) page pixels) stand in a table's grid:
    at least :data:`MIN_ROWS` rows (:func:`models.compact.page.table.table_rows`) with lines in at least
    :data:`MIN_CELLS` columns, holding :data:`ROW_SHARE` of the lines, the lines' median width at
    most :data:`MAX_CELL_WIDTH` x ``med_h`` (the page's median line height, pixels), and the lines
    neither prose nor side-by-side panels. Columns: between the gutters of the line boxes, else
    (when those show no grid) between ``ink_bounds(lines)`` (page x of the gutters in the page's
    ink; see the module docstring). False for fewer than ``MIN_CELLS * MIN_ROWS`` lines.
    """
    if len(lines) < MIN_CELLS * MIN_ROWS or med_h <= 0:
        return False
    widths = sorted(ln.box[2] - ln.box[0] for ln in lines)
    if widths[len(widths) // 2] > MAX_CELL_WIDTH * med_h or is_prose(lines, med_h):
        return False
    rows = table_rows(lines, med_h)
    if not _rows_in_columns(rows, gutter_boundaries(lines, med_h), len(lines)) and (
            ink_bounds is None or not _rows_in_columns(rows, ink_bounds(lines), len(lines))):
        return False
    return panel_cut(lines, med_h) is None


def grid_with_beside(group: Group, groups: list[Group], med_h: float, ink_bounds: InkBounds | None = None) -> bool:
    """Whether the text ``group`` and the text groups beside it on its rows
    (:func:`models.compact.page.table.rows_beside` among ``groups``) stand in a grid together
    (:func:`is_grid`): a rule-less table on column bands that the page analysis cut into one text
    block per band or two (labels; two numeric columns each), none of them a grid of
    :data:`MIN_CELLS` columns alone (``bench/tables.py`` seed 4 page 4: no table, cell recall 0 %).
    ``ink_bounds``: as for :func:`is_grid`.
    """
    if group.kind != TEXT or len(group.lines) < MIN_ROWS:
        return False
    others = [g for g in groups if g is not group and g.kind == TEXT and g.lines]
    beside = rows_beside(group.box, group.lines, others, med_h)
    return bool(beside) and is_grid(group.lines + [ln for i in beside for ln in others[i].lines], med_h, ink_bounds)


def promote_grids(groups: list[Group], med_h: float, ink_bounds: InkBounds | None = None) -> list[Group]:
    """``groups`` with every text group whose lines are a grid (:func:`is_grid`), alone or with the
    text groups beside it on its rows (:func:`grid_with_beside`), made a table group (same box, same
    lines, in its place; the table code then takes the groups beside it in). Other groups unchanged.
    ``med_h``: the page's median line height in pixels; ``ink_bounds``: as for :func:`is_grid`.
    Every line is kept exactly once.
    """
    return [Group(TABLE, g.box, g.lines)
            if g.kind == TEXT and (is_grid(g.lines, med_h, ink_bounds)
                                   or grid_with_beside(g, groups, med_h, ink_bounds)) else g
            for g in groups]


#: A block beside another is one of its table's columns when at least this share of its lines sit on
#: the other's rows (centres within half a line height; as
#: :data:`models.compact.page.bands.KV_ROW_SHARE`).
COLUMN_ROW_SHARE = 0.7


def _on_rows(lines: list, others: list, med_h: float) -> float:
    """Share of ``lines`` whose centre lies within half a line height of the centre of one of ``others``."""
    cy = [(ln.box[1] + ln.box[3]) / 2 for ln in others]
    return sum(1 for ln in lines if any(abs((ln.box[1] + ln.box[3]) / 2 - c) < med_h / 2 for c in cy)) / len(lines)


def join_grid_columns(groups: list[Group], med_h: float, ink_bounds: InkBounds | None = None) -> list[Group]:
    """``groups`` with each set of side-by-side text groups that are the columns of one table made one
    text group, in the place of the first: a group of at least :data:`MIN_ROWS` lines and every text
    group beside it (apart in x, sharing its height) with :data:`COLUMN_ROW_SHARE` of its lines on
    its rows, when there are at least :data:`MIN_CELLS` of them together and their lines are a grid
    (:func:`is_grid`). ``med_h``: the page's median line height in pixels; ``ink_bounds``: as for
    :func:`is_grid`. Every line is kept once.
    """
    out = list(groups)
    for a in sorted((g for g in groups if g.kind == TEXT and len(g.lines) >= MIN_ROWS), key=lambda g: g.box[0]):
        if not any(a is g for g in out):
            continue
        cols = [a] + [g for g in out if g is not a and g.kind == TEXT and g.lines
                      and (g.box[0] >= a.box[2] or g.box[2] <= a.box[0])
                      and min(g.box[3], a.box[3]) > max(g.box[1], a.box[1])
                      and _on_rows(g.lines, a.lines, med_h) >= COLUMN_ROW_SHARE]
        lines = [ln for g in cols for ln in g.lines]
        if len(cols) < MIN_CELLS or not is_grid(lines, med_h, ink_bounds):
            continue
        at = min(i for i, g in enumerate(out) if any(g is c for c in cols))
        out = [g for g in out if not any(g is c for c in cols)]
        out.insert(at, Group(TEXT, lines_box(lines), lines))
    return out
