"""Reading order of a form's labels beside their values when the page analysis split one of them in
blocks (issue 37, item 3), on line boxes and region blocks alone (no model): a section's labels read
row by row with their values, a table whose right-hand columns are empty on some rows read as a table.
"""

from __future__ import annotations

import numpy as np

from models.compact.page.bands import join_key_values
from models.compact.page.layout import TABLE, TEXT, PageLayout, Region
from models.compact.page.order import lines_box
from models.compact.page.regions import region_order
from models.compact.page.table import table_lines
from models.compact.page.xycut import reading_order
from tests.unit.test_form_order import H, _box, _group, _ids, _line, _read_page

#: Section 3 of the Chinese form ``bench/doc_pages.py --seed 3300`` page 3: a heading and four labels
#: one block, the first (long) value a block of its own, the other three values another.
SEED3300_ROWS = [
    ((127, 990, 337, 1033), "三、其他信息"),
    ((145, 1068, 308, 1110), "开户银行："), ((378, 1065, 840, 1106), "北京市海淀区中关村大街199号"),
    ((143, 1124, 242, 1174), "学历："), ((372, 1122, 455, 1169), "赵敏"),
    ((144, 1186, 307, 1229), "电子邮箱："), ((374, 1184, 454, 1226), "陈静"),
    ((147, 1246, 307, 1290), "申请金额："), ((409, 1246, 522, 1285), "186.88"),
]
SEED3300_BLOCKS = [(TEXT, (152, 997, 298, 1283)), (TEXT, (384, 1070, 835, 1101)), (TEXT, (382, 1131, 515, 1276))]


def test_labels_beside_values_split_in_two_blocks_are_read_row_by_row():
    """Only 3 of the label block's 5 lines sat on the rows of the larger value block (under
    ``KV_ROW_SHARE``): all four labels were read before their values (13.3 % CER at 0.9 % order-free)."""
    order = _read_page(SEED3300_ROWS, SEED3300_BLOCKS, (1700, 2200))
    assert order == [t for _, t in SEED3300_ROWS]


def test_a_label_block_joins_its_value_blocks_only_when_they_hold_its_rows():
    labels = [_line(130, r, 150 + 20 * (r % 3)) for r in range(5)]
    long_value, values = [_line(420, 1, 460)], [_line(420, r, 90 + 10 * r) for r in (2, 3, 4)]
    joined = join_key_values([_group(TEXT, labels), _group(TEXT, long_value), _group(TEXT, values)], H)
    assert len(joined) == 1 and sorted(_ids(joined[0].lines)) == sorted(_ids(labels + long_value + values))
    # two of five rows with a value (a note beside two labels): not the labels' values
    few = [_group(TEXT, labels), _group(TEXT, [_line(420, 1, 300)]), _group(TEXT, [_line(420, 3, 120)])]
    assert len(join_key_values(few, H)) == 3
    # value blocks past a form's tab stop (a panel beside): not joined
    far = [_group(TEXT, labels), _group(TEXT, [_line(900, 1, 460)]),
           _group(TEXT, [_line(900, r, 100) for r in (2, 3, 4)])]
    assert len(join_key_values(far, H)) == 3


def _sparse_table() -> list[list]:
    """A table without rules, a header and five rows: names (ragged), a code column left-aligned at one
    tab stop, then a phone number and an extension of one length each, empty on rows 2 and 4."""
    rows = []
    for r in range(6):
        row = [_line(130, r, 150 + 30 * (r % 3)), _line(480, r, 130)]
        if r not in (2, 4):
            row += [_line(900, r, 260), _line(1250, r, 90)]
        rows.append(row)
    return rows


def test_a_table_whose_right_columns_are_empty_on_some_rows_is_read_row_by_row():
    """Its two left columns look like a key-value panel (every row a label and a value at one tab stop)
    and its right ones like another of fewer rows (:func:`models.compact.page.xycut.kv_panel`): read as
    two panels, each row's phone number would come after every name."""
    rows = _sparse_table()
    lines = [ln for row in rows for ln in row]
    assert _ids(reading_order(lines[::-1])) == _ids(lines)
    page = [((*ln.box,), f"r{r}c{c}") for r, row in enumerate(rows) for c, ln in enumerate(row)]
    for kind in (TEXT, TABLE):  # the analysis' block of it a text block or a table block
        assert _read_page(page, [(kind, lines_box(lines))], (1700, 2200)) == [t for _, t in page]


#: ``bench/doc_pages.py --seed 3900`` page 11, a Chinese report: the table region (its caption, a header,
#: four rows of three cells and a note) took in the two lines of prose above it and the one below.
SEED3900_LINES = [
    (127, 504, 1560, 545), (129, 566, 1560, 603), (127, 645, 592, 690),
    (131, 704, 211, 752), (861, 704, 983, 749), (1445, 704, 1566, 749),
    (131, 771, 248, 820), (867, 774, 982, 819), (1406, 775, 1563, 818),
    (134, 843, 346, 885), (840, 843, 983, 886), (1407, 843, 1566, 885),
    (133, 909, 281, 957), (840, 912, 983, 955), (1452, 912, 1567, 955),
    (130, 976, 248, 1026), (842, 982, 977, 1021), (1451, 979, 1567, 1023),
    (129, 1086, 486, 1124), (129, 1170, 1563, 1207), (130, 1229, 675, 1266), (129, 1287, 1550, 1328),
]
SEED3900_BLOCKS = [(TABLE, (132, 509, 1560, 1205)), (TEXT, (132, 1187, 1546, 1324))]
#: Blanks in the prose lines' print (page x, 0.5 line heights wide: after ``：`` and ``，``), in the
#: table's column gutters.
SEED3900_BLANKS = {0: (700, 1335), 1: (1300,), 19: (760, 1030, 1300)}


def _read_seed3900(blank: int) -> list[tuple]:
    """The boxes of :data:`SEED3900_LINES` in reading order on a page of their print, ``blank`` px wide blanks."""
    gray = np.full((2200, 1700), 255, dtype=np.uint8)
    for k, (x0, y0, x1, y1) in enumerate(SEED3900_LINES):  # the print: strokes 8 px apart, but for its blanks
        for x in range(x0 + 4, x1 - 6, 8):
            gray[y0 + 8:y1 - 8, x:x + 3] = 0
        for x in SEED3900_BLANKS.get(k, ()):
            gray[y0:y1, x:x + blank] = 255
    lines = [_box(*b) for b in SEED3900_LINES]
    layout = PageLayout(regions=[Region(kind, box, k) for k, (kind, box) in enumerate(SEED3900_BLOCKS)])
    return [tuple(round(v) for v in ln.box) for ln in region_order(lines[::-1], layout, 2200, gray)]


def test_prose_lines_a_table_region_took_in_are_read_whole():
    """Read as the table's rows, the prose lines were cut at the blanks after their punctuation in the
    table's gutters, the pieces read one a line (2.5 % CER on the page at 0.6 % order-free)."""
    order = _read_seed3900(20)
    assert order[:2] == SEED3900_LINES[:2] and order[-3:] == SEED3900_LINES[-3:]
    assert sorted(order) == sorted(SEED3900_LINES)  # nothing cut: the table's cells are single lines


def test_a_table_row_found_as_one_line_across_the_table_is_still_cut_into_cells():
    """Blanks as wide as a column gutter (1.5 line heights): cells of one row, not prose."""
    order = _read_seed3900(60)
    assert (127, 504, 1560, 545) not in order and (129, 1170, 1563, 1207) not in order


def test_a_table_ruled_after_its_labels_only_keeps_its_unruled_columns():
    """The table of :data:`SEED3900_LINES` has rules round it and after its labels, none between its
    two numeric columns: once its box no longer held the prose lines, the rules spanned half its height
    and were its only column boundaries (both years one cell, ``869.89 60,749.31``)."""
    rules = [(130.0, 695.0, 132.0, 1039.0), (402.0, 695.0, 404.0, 1039.0), (1570.0, 695.0, 1572.0, 1039.0)]
    lines = [_box(*b) for b in SEED3900_LINES[2:19]]
    joins = [join for _, join in table_lines(lines, rules, 1, 42.0, lambda ln, a, b: ln)]
    assert joins[1:4] == ["cell:1:1:0", "cell:1:1:1", "cell:1:1:2"]


#: The items of the English invoice ``bench/doc_pages.py --seed 4500`` page 7: the description column a
#: text block of its own 8.7 line heights left of the table block of quantities, prices and amounts.
SEED4500_ITEMS = [
    ((143, 673, 347, 715), "Description"), ((729, 673, 801, 721), "Qty"), ((1012, 673, 1187, 717), "Unit price"),
    ((1432, 676, 1578, 714), "Amount"),
    ((143, 735, 292, 775), "Desk lamp"), ((768, 735, 802, 778), "1"), ((1115, 734, 1189, 778), "3.89"),
    ((1472, 735, 1574, 776), "607.76"),
    ((141, 790, 371, 837), "Training session"), ((754, 796, 800, 840), "11"), ((1117, 796, 1189, 840), "0.41"),
    ((1431, 797, 1572, 837), "26,420.47"),
    ((141, 851, 324, 897), "Maintenance"), ((754, 855, 800, 898), "18"), ((1117, 855, 1189, 898), "7.87"),
    ((1429, 855, 1575, 899), "26,326.62"),
]
SEED4500_BLOCKS = [(TEXT, (147, 679, 363, 893)), (TABLE, (736, 680, 1578, 899))]


def test_a_tables_description_column_far_left_of_its_numbers_is_read_with_its_rows():
    """Over ``BESIDE_GAP`` line heights from the table, the descriptions were read before all the
    quantities and amounts (24.4 % CER on the page at 0.8 % order-free): a block whose lines stand one
    a row on the table's rows is its column up to ``BESIDE_FAR_GAP`` line heights away."""
    assert _read_page(SEED4500_ITEMS, SEED4500_BLOCKS, (1700, 2200)) == [t for _, t in SEED4500_ITEMS]
    short = [(box, t) for box, t in SEED4500_ITEMS if t != "Maintenance"]  # on three of the four rows
    blocks = [(TEXT, (147, 679, 363, 833)), SEED4500_BLOCKS[1]]
    assert _read_page(short, blocks, (1700, 2200))[:3] == ["Description", "Desk lamp", "Training session"]
