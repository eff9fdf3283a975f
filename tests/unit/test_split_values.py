"""Reading order of a form's labels beside their values when the page analysis split one of them in
blocks (issue 37, item 3), on line boxes and region blocks alone (no model): a section's labels read
row by row with their values, a table whose right-hand columns are empty on some rows read as a table.
"""

from __future__ import annotations

from models.compact.page.bands import join_key_values
from models.compact.page.layout import TABLE, TEXT
from models.compact.page.order import lines_box
from models.compact.page.xycut import reading_order
from tests.unit.test_form_order import H, _group, _ids, _line, _read_page

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

