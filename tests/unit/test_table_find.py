"""Tables found from our own lines (models/compact/page/table_find.py): a text block whose short lines
stand in rows and columns is read as a table, cell by cell; forms, panels and prose are not."""

from __future__ import annotations

import numpy as np

from inkstream.segments import parse_cell
from models.compact.page.boxes import LineBox
from models.compact.page.layout import TABLE, TEXT, PageLayout, Region
from models.compact.page.order import Group
from models.compact.page.regions import region_order
from models.compact.page.table_find import is_grid, promote_grids


def _line(x0: float, y0: float, x1: float, y1: float) -> LineBox:
    q = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], dtype=np.float32)
    return LineBox(q, (x0, y0, x1, y1), 0.9)


def _grid(rows: int, cols: list[tuple[float, float]], y0: float = 100.0, pitch: float = 40.0) -> list[LineBox]:
    return [_line(a, y0 + r * pitch, b, y0 + r * pitch + 26) for r in range(rows) for a, b in cols]


TABLE_COLS = [(100, 260), (330, 420), (470, 560), (610, 700), (750, 840)]  # label + 4 numbers


def test_a_block_of_short_lines_in_rows_and_columns_is_a_grid():
    assert is_grid(_grid(12, TABLE_COLS), 26.0)
    assert is_grid(_grid(5, TABLE_COLS[:3]), 26.0)  # three columns, a few rows


def test_forms_panels_prose_and_small_blocks_are_not_grids():
    assert not is_grid(_grid(12, [(100, 260), (330, 500)]), 26.0)  # key-value rows: two per row
    assert not is_grid(_grid(3, TABLE_COLS), 26.0)  # three rows: a heading over a few figures
    prose = _grid(12, [(100, 700), (760, 1360), (1420, 2020)])  # three text columns, baselines aligned
    assert not is_grid(prose, 26.0)
    # a form's two key-value panels side by side (label, value | label, value), far apart
    panels = _grid(5, [(100, 220), (260, 420), (700, 820), (860, 1020)])
    assert not is_grid(panels, 26.0)
    ragged = _grid(12, TABLE_COLS[:2]) + _grid(4, TABLE_COLS[2:], y0=1000.0)  # most rows two lines
    assert not is_grid(ragged, 26.0)


def test_promote_grids_turns_only_grid_text_blocks_into_tables_and_keeps_every_line():
    grid = Group(TEXT, (100, 100, 840, 566), _grid(12, TABLE_COLS))
    form = Group(TEXT, (100, 700, 500, 1166), _grid(12, [(100, 260), (330, 500)], y0=700.0))
    out = promote_grids([grid, form], 26.0)
    assert [g.kind for g in out] == [TABLE, TEXT]
    assert out[0].lines is grid.lines and out[1] is form


def test_a_rule_less_table_the_analysis_called_text_is_read_cell_by_cell():
    """Regression (bench/tables.py seed 2 page 4: a rule-less table on colour bands that Tesseract
    returned as text blocks, 0 cells): its lines come back once each, row by row, with cell joins."""
    lines = _grid(10, TABLE_COLS)
    order = region_order(lines[::-1], PageLayout(regions=[Region(TEXT, (95, 95, 845, 495), 0)]), 1000)
    assert sorted(map(id, order)) == sorted(map(id, lines))  # every line exactly once
    cells = [parse_cell(ln.join) for ln in order]
    assert all(c is not None for c in cells)
    assert [(c.row, c.column) for c in cells if c is not None] == [(r, k) for r in range(10) for k in range(5)]
    assert order == lines


def test_the_rule_less_table_page_reaches_the_segments_as_cells():
    """Through the encoder's whole page preparation on the bench page (seed 2 page 4: Chinese, no
    rules, column bands and zebra rows, skewed 1.9 degrees): every segment of the table carries a cell
    join, and the grid has the page's rows and columns."""
    from bench.table_pages import render_table_page
    from bench.tables import page_spec
    from evaluation.engines import default_model_dir
    from models.compact.encoder_half import CompactEncoderHalf

    page = render_table_page(**page_spec(2, 4))
    prepared = CompactEncoderHalf.load(default_model_dir()).preprocess(page.image, "lines")
    cells = [c for c in map(parse_cell, prepared.meta["joins"]) if c is not None]
    assert len({c.row for c in cells}) >= len(page.body)
    assert len({c.column for c in cells}) == len(page.body[0])


def test_columns_of_a_rule_less_table_far_apart_are_read_row_by_row():
    """Generated invoice, ``bench/doc_pages.py --seed 600`` page 10: the items table without rules came
    as one text block per column (item names, prices, amounts; the quantities as loose lines), ten
    line heights apart: each column was read whole, one after the other (42 % CER, 0.8 % order-free)."""
    xs = [(142, 260), (656, 721), (1084, 1150), (1450, 1578)]
    rows = [[_line(x0, 557 + 53 * r, x1, 595 + 53 * r) for x0, x1 in xs] for r in range(5)]
    regions = [Region(TEXT, (x0 + 5, 560, x1 - 5, 800), k) for k, (x0, x1) in enumerate(xs) if k != 1]
    order = region_order([ln for row in rows[::-1] for ln in row[::-1]], PageLayout(regions=regions), 2200)
    assert order == [ln for row in rows for ln in row]
    assert [parse_cell(ln.join)[1:] for ln in order] == [(r, c) for r in range(5) for c in range(4)]


def _block(rows: int, cols: list[tuple[float, float]], y0: float = 100.0) -> Group:
    lines = _grid(rows, cols, y0)
    return Group(TEXT, (min(ln.box[0] for ln in lines), min(ln.box[1] for ln in lines),
                        max(ln.box[2] for ln in lines), max(ln.box[3] for ln in lines)), lines)


def test_a_table_cut_into_one_text_block_per_band_is_promoted_and_forms_are_not():
    """Regression (bench/tables.py seed 4 page 4: a rule-less table on column bands that the analysis
    returned as a label block and blocks of two numeric columns each, none a grid alone: no table,
    224 cells lost): a block that is a grid with the blocks beside it on its rows becomes a table."""
    labels, left, right = _block(12, TABLE_COLS[:1]), _block(12, TABLE_COLS[1:3]), _block(12, TABLE_COLS[3:])
    out = promote_grids([labels, left, right], 26.0)
    assert [g.kind for g in out] == [TABLE, TABLE, TABLE] and [g.lines for g in out] == [b.lines for b in
                                                                                         (labels, left, right)]
    keys, values = _block(12, [(100, 260)]), _block(12, [(330, 500)])  # a form: key and value blocks
    assert [g.kind for g in promote_grids([keys, values], 26.0)] == [TEXT, TEXT]
    lines = [ln for b in (labels, left, right) for ln in b.lines]
    regions = [Region(TEXT, b.box, i) for i, b in enumerate((labels, left, right))]
    order = region_order(lines[::-1], PageLayout(regions=regions), 1000)
    assert sorted(map(id, order)) == sorted(map(id, lines))
    assert [parse_cell(ln.join) for ln in order[:5]] == [parse_cell(f"cell:1:0:{c}") for c in range(5)]


def test_a_rule_less_table_of_many_columns_is_found_and_cut_at_every_gutter():
    """Regression (bench/tables.py seed 7 page 4: a rule-less table of 26 rows x 11 columns read as
    text, cell recall 0 %): each column holds 1/11 of the lines, under the 10 % of all lines that
    may cross a gutter, so every x was a gutter and no column boundary was found. The gutters are
    now also held to half the lines of a full column (``GUTTER_PEAK_SHARE``)."""
    cols = [(100.0, 200.0)] + [(240.0 + 120 * k, 320.0 + 120 * k) for k in range(10)]  # a label, ten numbers
    lines = _grid(26, cols)
    assert is_grid(lines, 26.0)
    box = (95, 95, 1325, 100 + 25 * 40 + 31)
    order = region_order(lines[::-1], PageLayout(regions=[Region(TEXT, box, 0)]), 1200)
    assert sorted(map(id, order)) == sorted(map(id, lines))  # every line exactly once
    cells = [parse_cell(ln.join) for ln in order]
    assert [(c.row, c.column) for c in cells if c is not None] == [(r, k) for r in range(26) for k in range(11)]


def _striped_page(rows: int, ink_cols: list[tuple[int, int]], pitch: int = 44, ink_h: int = 24,
                  grow: int = 11, width: int = 1700) -> tuple[np.ndarray, list[LineBox]]:
    """A rule-less table with shaded rows (every other row grey): each cell's print a run of 2 px
    strokes 5 px apart over ``ink_cols`` (x ranges) and ``ink_h`` px of height, and its detected line
    the print grown by ``grow`` px on every side, as DB's unclip grows a short cell's box (a 24 px
    number: a 46 px tall box); on a page ``width`` px wide (a letter page at 200 dpi: a page under
    30 line heights wide is a till roll, read row by row, see regions.till_roll)."""
    gray = np.full((200 + rows * pitch, max(width, 200 + ink_cols[-1][1])), 255, np.uint8)
    lines = []
    for r in range(rows):
        top = 100 + r * pitch
        if r % 2:
            gray[top: top + pitch, 90: ink_cols[-1][1] + 10] = 215
        y0 = top + (pitch - ink_h) // 2
        for a, b in ink_cols:
            for x in range(a, b - 1, 5):
                gray[y0: y0 + ink_h, x: x + 2] = 30
            lines.append(_line(a - grow, y0 - grow, b + grow, y0 + ink_h + grow))
    return gray, lines


def test_a_rule_less_table_whose_boxes_leave_narrow_gutters_is_found_in_the_ink():
    """Regression (bench/tables.py seed 9 page 4: Chinese, no rules, column bands and shaded rows,
    cells set 6-8 px from their column's edge: no table, 321 cells lost): the detector's boxes of
    short cells are grown on every side (24 px print, 46 px boxes), so between columns they leave
    14-34 px, under the 0.8 line heights a gutter between boxes needs, and no column was found. The
    gutters are now also looked for in the page's ink (40 px here), and the table is read cell by cell."""
    cols = [(110, 230)] + [(270 + 120 * k, 350 + 120 * k) for k in range(6)]  # a label, six numbers
    gray, lines = _striped_page(20, cols)
    assert not is_grid(lines, 46.0)  # the boxes alone show no columns
    box = (80, 80, cols[-1][1] + 20, 100 + 20 * 44 + 10)
    order = region_order(lines[::-1], PageLayout(regions=[Region(TEXT, box, 0)]), gray.shape[0], gray)
    assert sorted(map(id, order)) == sorted(map(id, lines))  # every line exactly once
    cells = [parse_cell(ln.join) for ln in order]
    assert [(c.row, c.column) for c in cells if c is not None] == [(r, k) for r in range(20) for k in range(7)]


def test_prose_and_a_form_on_shaded_rows_stay_text_with_the_ink_gutters():
    """The ink's gutters find columns only where the lines stand in them: a form's key-value rows
    (two per row) and lines of prose (one per row) on the same shaded page stay text."""
    gray, lines = _striped_page(12, [(110, 230), (270, 350)])
    box = (80, 80, 380, 100 + 12 * 44 + 10)
    order = region_order(lines, PageLayout(regions=[Region(TEXT, box, 0)]), gray.shape[0], gray)
    assert all(parse_cell(ln.join or "") is None for ln in order)
    gray, lines = _striped_page(12, [(110, 1400)])
    box = (80, 80, 1420, 100 + 12 * 44 + 10)
    order = region_order(lines, PageLayout(regions=[Region(TEXT, box, 0)]), gray.shape[0], gray)
    assert all(parse_cell(ln.join or "") is None for ln in order)


def test_a_rule_less_chinese_table_on_bands_and_shaded_rows_is_found_with_all_its_cells():
    """Through the encoder's whole page preparation on the bench page (``bench/tables.py --seed 9``
    page 4: Chinese, no rules, column bands and shaded rows, cells 6-8 px from their column's edges):
    no table was found (the boxes' gutters too narrow); now every body cell is a cell of one table,
    in the page's columns."""
    from bench.table_pages import render_table_page
    from bench.tables import page_spec
    from evaluation.engines import default_model_dir
    from models.compact.encoder_half import CompactEncoderHalf

    page = render_table_page(**page_spec(9, 4))
    prepared = CompactEncoderHalf.load(default_model_dir()).preprocess(page.image, "lines")
    cells = {(c.table, c.row, c.column) for c in map(parse_cell, prepared.meta["joins"]) if c is not None}
    assert {t for t, _, _ in cells} == {1}
    assert len({c for _, _, c in cells}) == len(page.body[0])
    assert len(cells) >= len(page.body) * len(page.body[0])
