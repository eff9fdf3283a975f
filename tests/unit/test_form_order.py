"""Reading order on forms and invoices (issue 37, item 3), on line boxes and region groups alone (no
model): side-by-side panels read panel by panel, a key and its value read together, a form's blocks
read band by band, a table's far column and a label block's values joined, every line kept once.
"""

from __future__ import annotations

import numpy as np

from models.compact.page.band_panels import regroup_panels
from models.compact.page.bands import join_key_values, kv_list, split_bands
from models.compact.page.boxes import LineBox
from models.compact.page.kv_rows import join_far_values
from models.compact.page.layout import HEADING, TABLE, TEXT, PageLayout, Region
from models.compact.page.order import Group, lines_box, xy_cut
from models.compact.page.regions import region_order
from models.compact.page.xycut import is_panel, reading_order

H = 36  # line height, pixels


def _box(x0: float, y0: float, x1: float, y1: float) -> LineBox:
    q = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], dtype=np.float32)
    return LineBox(q, (x0, y0, x1, y1), 0.9)


def _line(x: float, row: int, width: float, top: float = 200) -> LineBox:
    y = top + row * 60
    return _box(x, y, x + width, y + H)


def _ids(lines: list[LineBox]) -> list[int]:
    return [id(ln) for ln in lines]


def _group(kind: str, lines: list[LineBox]) -> Group:
    return Group(kind, lines_box(lines), list(lines))


def test_bill_to_beside_ship_to_is_read_panel_by_panel():
    bill = [_line(130, 0, 140), _line(130, 1, 260), _line(130, 2, 330), _line(130, 3, 200)]
    ship = [_line(900, 0, 150), _line(900, 1, 230), _line(900, 2, 360)]
    shuffled = [ship[1], bill[2], ship[0], bill[0], bill[3], ship[2], bill[1]]
    assert _ids(reading_order(shuffled)) == _ids(bill + ship)


def test_key_and_value_on_one_baseline_are_read_together():
    rows = []
    for r, width in enumerate((150, 90, 210, 120)):  # labels ragged, values at a tab 2 em on
        rows += [_line(130, r, width), _line(130 + 210 + 2 * H, r, 180 + 20 * r)]
    assert _ids(reading_order(rows[::-1])) == _ids(rows)


def test_small_table_with_right_aligned_numbers_is_not_panels():
    rows = []
    for r in range(5):  # item names ragged left-aligned, two columns of right-aligned numbers
        rows += [_line(130, r, 120 + 37 * r), _box(1000 - 20 * (r % 2), 200 + 60 * r, 1000, 236 + 60 * r),
                 _box(1400 - 30 * (r % 3), 200 + 60 * r, 1400, 236 + 60 * r)]
    assert not is_panel(rows[1::3] + rows[2::3], H)
    assert _ids(reading_order(rows[::-1])) == _ids(rows)


def test_form_with_a_tall_key_value_block_beside_panels_is_read_band_by_band():
    """Tesseract's block of the left column runs down past the sections beside it; the right panel
    of section 1 was read after the signature line."""
    title = _line(130, 0, 400)
    s1_left = [ln for r in (2, 3, 4) for ln in (_line(130, r, 150 + 9 * r), _line(380, r, 200 - 7 * r))]
    s2 = [_line(130, r, 600) for r in (7, 8)]  # a declaration and a signature line
    s1_right = [ln for r in (2, 3, 4) for ln in (_line(900, r, 120 + 9 * r), _line(1100, r, 240 - 7 * r))]
    left = _group(TABLE, [title, *s1_left, *s2])
    right = _group(TEXT, s1_right)
    groups = split_bands([left, right], H)
    assert sorted(_ids([ln for g in groups for ln in g.lines])) == sorted(_ids(left.lines + right.lines))
    ordered = [ln for g in xy_cut(groups) for ln in reading_order(g.lines)]
    assert _ids(ordered) == _ids([title, *s1_left, *s1_right, *s2])


def test_two_prose_columns_are_still_read_column_by_column():
    left = [_group(TEXT, [_line(130, r, 700) for r in range(6)]),
            _group(TEXT, [_line(130, r, 700) for r in (8, 9, 10)])]
    right = [_group(TEXT, [_line(900, r, 700) for r in range(11)])]
    order = xy_cut(left + right)
    assert order == [*left, *right]


def test_label_block_and_value_block_become_one_block_read_in_rows():
    labels = _group(TEXT, [_line(130, r, 100 + 15 * r) for r in range(4)])
    values = _group(TEXT, [_line(130 + 160 + 2 * H, r, 250) for r in range(4)])
    (joined,) = join_key_values([labels, values], H)
    expected = [ln for pair in zip(labels.lines, values.lines, strict=True) for ln in pair]
    assert _ids(reading_order(joined.lines)) == _ids(expected)


def test_panels_far_apart_are_not_joined_but_a_tables_far_column_is():
    left = _group(TEXT, [_line(130, r, 300) for r in range(3)])
    right = _group(TEXT, [_line(900, r, 300) for r in range(3)])
    assert len(join_key_values([left, right], H)) == 2
    table = _group(TABLE, [_line(x, r, 100) for r in range(5) for x in (130, 500, 800)])
    amounts = _group(TEXT, [_box(1400 - 15 * (r % 2), 200 + 60 * r, 1450, 236 + 60 * r) for r in range(5)])
    (joined,) = join_key_values([table, amounts], H)
    assert joined.kind == TABLE and len(joined.lines) == 20


def test_the_next_text_columns_lines_beside_a_table_region_do_not_join_it():
    """A two-column paper's references: the analysis made the left column's first entries a table
    region, and the right column's lines on its rows (each 23 line heights wide) were taken into it
    as a far column of the table, both columns then read interleaved (pdfjs_tracemonkey_14p page 14)."""
    table = _group(TABLE, [_line(130, 0, 250), _line(130, 1, 230), _line(360, 1, 440),
                           _line(150, 2, 180), _line(130, 3, 230), _line(360, 3, 440)])
    column = _group(TEXT, [_line(900, 1, 23 * H), _line(900, 2, 22 * H)])
    out = join_key_values([table, column], H)
    assert [g.kind for g in out] == [TABLE, TEXT]
    assert _ids(out[1].lines) == _ids(column.lines)


def test_panels_inside_a_table_block_are_taken_out_of_it():
    panels = [_line(130, 0, 150), _line(900, 0, 160), _line(130, 1, 260), _line(900, 1, 220),
              _line(130, 2, 330), _line(900, 2, 300)]
    table = [_line(x, r, 100) for r in range(4, 9) for x in (130, 600, 1000)]
    out = split_bands([_group(TABLE, panels + table)], H)
    assert [g.kind for g in out] == [TEXT, TABLE]
    assert sorted(_ids(out[0].lines)) == sorted(_ids(panels)) and sorted(_ids(out[1].lines)) == sorted(_ids(table))


def test_narrow_text_columns_at_one_pitch_are_not_label_and_value_blocks():
    """A three-column page's columns (9-10 line heights wide, lines filling them, rows at one pitch)
    are not prose by width, and were joined as labels and values: read across the columns."""
    cols = [_group(TEXT, [_line(x, r, 400 - (60 if r % 7 == 6 else 0)) for r in range(20)]) for x in (150, 650, 1150)]
    assert join_key_values(cols, 43) == cols
    assert split_bands(cols, 43) == cols


def _pipeline(groups: list[Group]) -> list[Group]:
    """The region groups as :func:`models.compact.page.regions.region_order` prepares them."""
    return regroup_panels(split_bands(join_key_values(groups, H), H), H)


def _read(groups: list[Group]) -> list[LineBox]:
    return [ln for g in xy_cut(groups, H) for ln in reading_order(g.lines)]


def test_panels_whose_values_end_alike_are_read_panel_by_panel():
    """Generated form, seed 300 page 6: two key-value panels in one table block, values of one length
    (`391-52040`, `336-91480`) so the rows' right edges align; a label and its value are sometimes one
    box. Only the labels are ragged: the block was read as a table, row by row across both panels."""
    left = [_line(130, 0, 430), _line(130, 1, 430), _line(130, 2, 76), _line(394, 2, 143)]
    right = [_line(870, 0, 170), _line(1110, 0, 160), _line(870, 1, 385), _line(870, 2, 76), _line(1110, 2, 141)]
    out = _pipeline([_group(TABLE, left + right)])
    assert [g.kind for g in out] == [TEXT]
    assert _ids(_read(out)) == _ids(left + right)


def test_a_panel_cut_in_two_blocks_is_read_whole_before_the_panel_beside_it():
    """Generated form, seed 300 page 6, section 2: the left panel's last two rows are a block of their
    own under the block holding its first rows and the right panel: they were read after the right panel."""
    head = _line(130, 0, 150)
    top_left = [ln for r in (1, 2) for ln in (_line(130, r, 110 - 10 * r), _line(300, r, 160 + 20 * r))]
    right = [ln for r in (1, 2) for ln in (_line(875, r, 215 - 40 * r), _line(1145, r, 175 - 30 * r))]
    low_left = [ln for r in (3, 4) for ln in (_line(130, r, 135 - 10 * r), _line(300, r, 180 - 10 * r))]
    title = _line(130, -3, 400)
    declaration = _line(130, 7, 700)
    groups = [_group(TEXT, [title]), _group(TABLE, [head, *top_left, *right]), _group(TEXT, low_left),
              _group(TEXT, [declaration])]
    out = _pipeline(groups)
    assert sorted(_ids([ln for g in out for ln in g.lines])) == sorted(_ids([ln for g in groups for ln in g.lines]))
    assert _ids(_read(out)) == _ids([title, head, *top_left, *low_left, *right, declaration])


def test_a_table_block_that_is_one_key_value_panel_is_read_as_text():
    """Generated form, seed 300 page 9: one column of key-value sections found as one table block; its
    cells were read value first on one row (`¥1,397.14 申请金额：`). Each section is a text block now."""
    sections = []
    for top in (200, 560):
        rows = [_line(130, 0, 180, top)]
        rows += [ln for r in (1, 2, 3) for ln in (_line(130, r, 140 - 20 * r, top), _line(300, r, 150 + 40 * r, top))]
        sections.append(rows)
    out = split_bands([_group(TABLE, sections[0] + sections[1])], H)
    assert [g.kind for g in out] == [TEXT, TEXT]
    assert [_ids(reading_order(g.lines)) for g in out] == [_ids(s) for s in sections]


def test_right_aligned_numbers_beside_labels_stay_a_table():
    """A label column beside right-aligned numbers (one length or not) is a table, not a key-value panel."""
    same = [ln for r in range(4) for ln in (_line(130, r, 100 + 30 * r), _box(500, 200 + 60 * r, 640, 236 + 60 * r))]
    ragged = [ln for r in range(4) for ln in (_line(130, r, 100 + 30 * r),
                                              _box(640 - 20 * r, 200 + 60 * r, 640, 236 + 60 * r))]
    assert not kv_list(same, H) and not kv_list(ragged, H) and not is_panel(ragged, H)
    assert [g.kind for g in split_bands([_group(TABLE, same)], H)] == [TABLE]


#: Generated form, ``bench/doc_pages.py --seed 400`` page 0: the detector's lines (page pixels) and
#: Tesseract's blocks. One table block runs from section 1's left panel's last row ("City:
#: Springfield") down through section 2; another holds section 1's right panel and the first row of
#: section 2's right panel. Section 1's band was not regrouped into panels (a block ran out of it):
#: the right panel was read first, as table cells (36 % CER, 0.2 % order-free).
SEED400_FORM = [
    ((124, 62, 371, 108), "Application form"), ((1437, 63, 1576, 102), "No.8052"),
    ((123, 168, 664, 243), "Employee Details"), ((129, 278, 491, 320), "1. Personal details"),
    ((129, 354, 557, 396), "Postal code: 111-75838"), ((126, 413, 545, 462), "Department: Westfield"),
    ((123, 471, 227, 527), "City:"), ((399, 470, 569, 523), "Springfield"),
    ((896, 351, 1000, 407), "City:"), ((1249, 357, 1384, 396), "Lakeside"),
    ((896, 414, 1423, 465), "Signature date: 2022-11-08"),
    ((898, 475, 1076, 518), "Address:"), ((1251, 475, 1491, 517), "204 Park Terrace"),
    ((126, 576, 335, 618), "2. Contact"),
    ((124, 652, 227, 704), "City:"), ((386, 653, 529, 697), "Westfield"),
    ((126, 711, 307, 754), "Position:"), ((388, 714, 595, 756), "Anna Schmidt"),
    ((124, 771, 304, 823), "Country:"), ((386, 773, 564, 820), "Northbridge"),
    ((858, 653, 1059, 701), "Employer:"), ((1203, 655, 1344, 694), "Westfield"),
    ((857, 712, 1374, 759), "Signature date: 2017-02-24"),
    ((127, 874, 526, 916), "3. Other information"),
    ((129, 950, 396, 992), "Date of birth:"), ((468, 951, 636, 993), "23/04/2017"),
    ((126, 1009, 372, 1055), "Postal code:"), ((470, 1010, 612, 1054), "162-7416"),
    ((126, 1069, 305, 1113), "Position:"), ((469, 1070, 641, 1113), "John Carter"),
    ((124, 1172, 804, 1214), "I declare that the information given above is true."),
    ((126, 1231, 336, 1278), "Signature:"), ((849, 1233, 1146, 1271), "Date: 2023-06-10"),
]
SEED400_BLOCKS = [
    (TEXT, (130, 67, 365, 98)), (TEXT, (135, 180, 655, 233)), (TEXT, (134, 284, 486, 310)),
    (TEXT, (133, 361, 553, 454)), (TABLE, (132, 480, 588, 811)), (TEXT, (132, 879, 522, 905)),
    (TABLE, (133, 956, 633, 1101)), (TEXT, (131, 1177, 799, 1208)), (TEXT, (132, 1236, 328, 1269)),
    (TABLE, (864, 69, 1568, 692)), (TEXT, (863, 718, 1367, 751)), (TEXT, (853, 1237, 1142, 1262)),
]


def test_panels_of_a_band_are_read_whole_when_a_block_runs_out_of_the_band():
    """Each band's panels are read panel by panel though Tesseract's blocks run across the bands:
    the blocks give up their lines in the band; every line is read exactly once, in order."""
    lines = [_box(*box) for box, _ in SEED400_FORM]
    text = {id(ln): t for ln, (_, t) in zip(lines, SEED400_FORM, strict=True)}
    layout = PageLayout(regions=[Region(kind, box, k) for k, (kind, box) in enumerate(SEED400_BLOCKS)])
    order = region_order(lines[::-1], layout, 2200)
    assert [text[id(ln)] for ln in order] == [t for _, t in SEED400_FORM]


#: Generated invoice, ``bench/doc_pages.py --seed 700`` page 7: the seller's address beside the
#: invoice's details, then bill-to beside ship-to, 33 px (0.79 line heights) apart where the rows of
#: each block are 0-10 px apart; the bill-to's last line ("Springfield") fell in the items table's block.
SEED700_INVOICE = [
    ((130, 126, 311, 172), "INVOICE"),
    ((133, 198, 431, 236), "Northwind Supplies Ltd"), ((131, 240, 427, 281), "66 Mill Lane, Ashford"),
    ((133, 291, 319, 324), "Tel: 438-1568"),
    ((1038, 204, 1311, 240), "Invoice No: 88475165"), ((1038, 250, 1276, 287), "Date: 07/12/2019"),
    ((1038, 296, 1332, 333), "Due date: 05/07/2016"),
    ((127, 366, 222, 411), "Bill to:"), ((127, 413, 308, 458), "Maria Lopez"),
    ((130, 459, 335, 501), "11 King Street"), ((129, 506, 287, 548), "Springfield"),
    ((1036, 375, 1144, 419), "Ship to:"), ((1035, 421, 1206, 459), "Lena Novak"),
    ((1035, 469, 1210, 507), "44 Mill Lane"),
    ((134, 586, 291, 629), "Description"), ((755, 593, 814, 638), "Qty"),
    ((1057, 591, 1191, 640), "Unit price"), ((1461, 597, 1569, 636), "Amount"),
    ((134, 637, 318, 682), "Maintenance"), ((766, 645, 811, 687), "13"),
    ((1120, 648, 1190, 690), "0.97"), ((1466, 650, 1569, 690), "899.78"),
    ((134, 688, 380, 733), "Toner cartridge"), ((770, 696, 811, 738), "4"),
    ((1120, 699, 1190, 741), "2.46"), ((1446, 701, 1569, 741), "9,504.76"),
]
SEED700_BLOCKS = [
    (TEXT, (140, 135, 304, 164)), (TEXT, (136, 204, 427, 316)), (TEXT, (136, 377, 327, 494)),
    (TEXT, (1043, 211, 1327, 325)), (TEXT, (1041, 383, 1206, 496)), (TABLE, (136, 513, 1568, 741)),
]


def test_two_bands_of_panels_closer_than_a_line_are_read_band_by_band():
    """The gap between the bands is well above the blocks' own row gaps: a section gap. The seller's
    address was read with bill-to below it as one left-hand panel, the details after both (16 % CER
    on the page; 4 % before the bands' blocks were regrouped across the table block)."""
    lines = [_box(*box) for box, _ in SEED700_INVOICE]
    text = {id(ln): t for ln, (_, t) in zip(lines, SEED700_INVOICE, strict=True)}
    layout = PageLayout(regions=[Region(kind, box, k) for k, (kind, box) in enumerate(SEED700_BLOCKS)])
    order = [text[id(ln)] for ln in region_order(lines[::-1], layout, 2200)]
    assert order == [t for _, t in SEED700_INVOICE]


def _totals(top: float = 852) -> tuple[list[LineBox], list[LineBox]]:
    """An invoice's totals: three short labels at a tab stop mid-page, their amounts right-aligned at the
    right margin nine to ten line heights away (``bench/doc_pages.py --seed 600`` page 10)."""
    labels = [_box(1067, top + 46 * r, 1127 + 8 * (r == 0), top + 46 * r + H) for r in range(3)]
    amounts = [_box(1581 - w, top + 46 * r + 2, 1581, top + 46 * r + H + 2) for r, w in enumerate((102, 60, 68))]
    return labels, amounts


def test_totals_far_from_their_labels_are_read_row_by_row():
    """Seed 600 page 10 (Chinese invoice): the labels were two blocks, the amounts a third, too far apart
    for a form's key-value join: read all labels, then all amounts (6.0 % CER at 0.8 % order-free)."""
    labels, amounts = _totals()
    note = _box(143, 1016, 567, 1052)
    layout = PageLayout(regions=[Region(TEXT, (1067, 852, 1135, 934), 0), Region(TEXT, (1067, 944, 1127, 980), 1),
                                 Region(TEXT, (1479, 854, 1581, 984), 2), Region(TEXT, (143, 1016, 567, 1052), 3)])
    order = region_order([note, *amounts[::-1], *labels], layout, 2200)
    assert _ids(order) == _ids([labels[0], amounts[0], labels[1], amounts[1], labels[2], amounts[2], note])


def test_far_values_join_only_a_right_aligned_column_with_nothing_between():
    labels, amounts = _totals()
    bank = [_box(143, 852 + 46 * r, 600, 852 + 46 * r + H) for r in range(3)]  # payment details left of the totals
    joined = join_far_values([_group(TEXT, bank), _group(TEXT, labels), _group(TEXT, amounts)], H)
    assert len(joined) == 2 and _ids(joined[0].lines) == _ids(bank) and len(joined[1].lines) == 6
    middle = [_box(1300 - 10 * r, 852 + 46 * r, 1340, 852 + 46 * r + H) for r in range(3)]  # a third column
    assert len(join_far_values([_group(TEXT, labels), _group(TEXT, middle), _group(TEXT, amounts)], H)) == 3
    ragged = [_box(1400, 852 + 46 * r, 1480 + 40 * r, 852 + 46 * r + H) for r in range(3)]  # a left-aligned panel
    assert len(join_far_values([_group(TEXT, labels), _group(TEXT, ragged)], H)) == 2


def test_form_labels_cut_into_two_blocks_beside_one_block_of_values_are_read_row_by_row():
    """``bench/doc_pages.py --seed 900`` page 6 (English form): the analysis made two rows of labels one
    block, the third another, their values at the form's tab stop a third block; a label block with its
    value block is joined only when each sits on 70 % of the other's rows (2 of 3: not), and all the
    labels were read before all the values (34 % CER at 0.4 % order-free)."""
    labels = [_box(124, 276, 268, 313), _box(126, 326, 265, 360), _box(127, 378, 321, 412)]
    values = [_box(389, 274, 597, 315), _box(391, 326, 561, 364), _box(391, 375, 561, 413)]
    note = _box(126, 456, 262, 495)
    layout = PageLayout(regions=[Region(TEXT, (133, 286, 260, 354), 0), Region(TEXT, (133, 384, 314, 409), 1),
                                 Region(TEXT, (398, 286, 588, 408), 2), Region(TEXT, (133, 468, 255, 487), 3)])
    order = region_order([note, *values[::-1], *labels], layout, 2200)
    assert _ids(order) == _ids([labels[0], values[0], labels[1], values[1], labels[2], values[2], note])


def test_form_values_one_of_which_starts_early_are_still_at_one_tab_stop():
    """``bench/doc_pages.py --seed 900`` page 0 (English form): six labels in four blocks of the analysis,
    their values at one tab stop but the detector's box of one starting 0.75 line heights early (over
    the label's colon): the values were no column, all the labels were read before all the values."""
    lefts = (451, 449, 436, 448, 447, 418)
    rights = (364, 316, 436, 281, 245, 418)
    labels = [_box(126, 962 + 52 * r, rights[r], 1003 + 52 * r) for r in range(6)]
    values = [_box(lefts[r], 962 + 52 * r, 600 + 5 * r, 1003 + 52 * r) for r in range(6)]
    layout = PageLayout(regions=[Region(TEXT, (130, 960, 416, 1110), 0), Region(TEXT, (132, 1120, 273, 1160), 1),
                                 Region(TEXT, (133, 1170, 236, 1212), 2), Region(TEXT, (133, 1222, 381, 1262), 3),
                                 Region(TEXT, (456, 962, 616, 1262), 4)])
    order = region_order([*values[::-1], *labels], layout, 2200)
    assert _ids(order) == _ids([ln for pair in zip(labels, values, strict=True) for ln in pair])


#: Scanned form, ``bench/receipts.py`` seed 10003 (form_scan, 150 dpi): labels at the margin, their typed
#: values on underlines at a tab stop 2.2 in on, 4-8 line heights right of the labels; the analysis made
#: the labels one block (and one more) and every value a block of its own.
SEED10003_FORM = [
    ((114, 113, 386, 159), "Registration Form"),
    ((115, 190, 218, 220), "Postcode:"), ((436, 188, 518, 218), "50706"),
    ((117, 249, 241, 274), "Account no.:"), ((445, 244, 573, 273), "SL-1584638"),
    ((115, 302, 208, 330), "Address:"), ((446, 300, 592, 328), "773 Park Lane"),
    ((115, 357, 184, 387), "Email:"), ((442, 354, 731, 385), "grace.ivanova@example.com"),
    ((113, 413, 203, 442), "Amount:"), ((444, 411, 561, 440), "$95,995.84"),
    ((117, 471, 244, 496), "Date of birth:"), ((436, 466, 562, 495), "14/05/1953"),
    ((114, 525, 185, 551), "Name:"), ((444, 521, 571, 550), "Chen Novak"),
    ((115, 579, 264, 611), "Policy number:"), ((446, 577, 576, 605), "DC-4126350"),
    ((114, 632, 221, 668), "Employer:"), ((446, 634, 599, 659), "Riverton GmbH"),
    ((115, 690, 227, 719), "Reference:"), ((442, 688, 576, 717), "SN-5569419"),
    ((115, 744, 267, 776), "Signature date:"), ((444, 742, 562, 774), "02/08/1959"),
]
SEED10003_BLOCKS = [
    (122, 122, 378, 154), (120, 198, 257, 713), (121, 753, 261, 773), (451, 196, 509, 212), (451, 250, 567, 267),
    (451, 306, 587, 323), (450, 361, 726, 379), (451, 417, 556, 436), (452, 473, 557, 489), (445, 528, 565, 546),
    (452, 583, 570, 600), (451, 639, 594, 656), (445, 694, 570, 713), (451, 750, 557, 767),
]


def _read_page(page: list, blocks: list, size: tuple[int, int], gray: np.ndarray | None = None) -> list[str]:
    """Texts of ``page`` [(box, text)] in the reading order of ``blocks`` [(kind, box)] on a page of ``size``
    (width, height) pixels, blank paper or ``gray`` (uint8 [H, W])."""
    lines = [_box(*box) for box, _ in page]
    text = {id(ln): t for ln, (_, t) in zip(lines, page, strict=True)}
    layout = PageLayout(regions=[Region(kind, box, k) for k, (kind, box) in enumerate(blocks)])
    paper = np.full((size[1], size[0]), 255, dtype=np.uint8) if gray is None else gray
    return [text[id(ln)] for ln in region_order(lines[::-1], layout, size[1], paper)]


def test_scanned_form_values_far_right_of_their_labels_are_read_row_by_row():
    """Seed 10003 (issue 38): the values stand farther right than a form's tab stop near the labels
    (:data:`models.compact.page.bands.KV_GAP`), and the label block sat beside eleven value blocks:
    all the labels were read, then all the values (46.7 % CER at 0.8 % order-free)."""
    order = _read_page(SEED10003_FORM, [(TEXT, b) for b in SEED10003_BLOCKS], (1275, 1650))
    assert order == [t for _, t in SEED10003_FORM]


#: The last rows of a faxed form, ``bench/receipts.py`` seed 10001 (form_fax): three labels one block,
#: their values a block each, a fourth label and its value blocks of their own.
SEED10001_ROWS = [
    ((155, 857, 299, 903), "Employer:"), ((604, 859, 809, 892), "Lakeside Inc."),
    ((155, 934, 276, 976), "Amount:"), ((604, 931, 774, 972), "$10,559.74"),
    ((157, 1015, 356, 1052), "Policy number:"), ((599, 1005, 793, 1049), "HV-7052612"),
    ((155, 1087, 310, 1133), "Telephone:"), ((605, 1086, 850, 1122), "+1 861 225 2390"),
]
SEED10001_BLOCKS = [(164, 870, 349, 1048), (164, 1100, 300, 1126), (614, 866, 803, 888), (614, 938, 766, 966),
                    (614, 1008, 812, 1040), (614, 1094, 844, 1116)]


def test_a_label_block_beside_one_value_block_per_field_is_read_row_by_row():
    """Seed 10001: "Employer: Amount: Policy number:" were read before their three values (15.5 % CER
    on the page at 0.8 % order-free)."""
    order = _read_page(SEED10001_ROWS, [(TEXT, b) for b in SEED10001_BLOCKS], (1734, 2156))
    assert order == [t for _, t in SEED10001_ROWS]


#: Chinese invoice, ``bench/doc_pages.py --seed 300`` page 4: buyer beside consignee, their rows paired
#: one for one, all short, the right panel 8 line heights right of the left one at the page's middle.
SEED300_PANELS = [
    ((123, 451, 252, 494), "购买方："), ((120, 511, 202, 559), "张伟"), ((123, 573, 469, 615), "广州市天河区体育西路"),
    ((843, 447, 972, 492), "收货方："), ((840, 508, 923, 556), "赵敏"), ((841, 567, 1192, 613), "广州市天河区体育西路"),
]
SEED300_BLOCKS = [(TEXT, (130, 520, 193, 551)), (HEADING, (130, 578, 466, 610)), (TEXT, (849, 517, 1186, 607)),
                  (TEXT, (131, 458, 250, 490)), (TEXT, (849, 455, 970, 488))]


def test_bill_to_beside_ship_to_in_the_pages_right_half_stays_panel_by_panel():
    """The far left-aligned values of a form are joined to their labels only left of the page's
    middle: these panels, paired row by row as a form's columns are, were read row across row (7.7 %
    CER on the page, 1.5 % before) when any far column was."""
    order = _read_page(SEED300_PANELS, SEED300_BLOCKS, (1700, 2200))
    assert order == [t for _, t in SEED300_PANELS]


def test_far_values_join_left_of_the_pages_middle_and_are_read_by_rows():
    labels = [_line(130, r, 150 + 20 * (r % 3)) for r in range(4)]
    values = [_line(130 + 12 * H, r, 250 + 40 * r) for r in range(4)]  # 6.7 line heights on: past KV_GAP
    joined = join_far_values([_group(TEXT, labels), _group(TEXT, values)], H, page_width=1700)
    assert len(joined) == 1 and joined[0].rows and sorted(_ids(joined[0].lines)) == sorted(_ids(labels + values))
    assert len(join_far_values([_group(TEXT, labels), _group(TEXT, values)], H)) == 2  # page width unknown
    assert len(join_far_values([_group(TEXT, labels), _group(TEXT, values)], H, page_width=900)) == 2  # right half


def test_far_values_of_two_sections_under_a_title_are_read_row_by_row_section_by_section():
    """``bench/receipts.py`` seed 33011 (form_fax): the title stands at the labels' margin just above
    them, a block per field: the labels' column held a row without a value and no column was found
    (20.3 % CER at 5.6 % order-free). A section heading ends one column of values, and the next
    section's values are a column of their own (its heading not read after the second section)."""
    title, head = _line(130, 0, 300), _line(130, 5, 160)
    rows = [(_line(130, r, 110 + 30 * (r % 3)), _line(130 + 12 * H, r, 200 + 25 * (r % 2))) for r in (1, 2, 3, 6, 7, 8)]
    groups = [_group(TEXT, [title]), _group(TEXT, [head])] + [_group(TEXT, [ln]) for row in rows for ln in row]
    order = region_order([ln for g in groups for ln in g.lines][::-1],
                         PageLayout(regions=[Region(TEXT, g.box, k) for k, g in enumerate(groups)]), 2200,
                         np.full((2200, 1700), 255, dtype=np.uint8))
    assert _ids(order) == _ids([title, *rows[0], *rows[1], *rows[2], head, *rows[3], *rows[4], *rows[5]])


#: Section 3 of ``bench/doc_pages.py --seed 900`` page 0 (an English form): each label's detector box,
#: the x where its print ends, its value's detector box; the values are printed from x = 456. The
#: detector cut "Account number: 300-18271" and "Policy number: 969-41475" out of one line each, so those
#: boxes reach over the gap: value boxes start at 436 and 418, a label's box is 8.1 line heights wide.
SEED900_SECTION3 = [
    ((127, 964, 365, 1000), 358, "Date of birth:", (449, 965, 612, 999), "2026-08-22"),
    ((126, 1014, 316, 1052), 309, "Reference:", (449, 1016, 605, 1054), "876-22985"),
    ((127, 1069, 436, 1106), 416, "Account number:", (436, 1069, 603, 1106), "300-18271"),
    ((127, 1122, 280, 1160), 273, "Country:", (447, 1121, 582, 1159), "Lakeside"),
    ((124, 1174, 245, 1212), 236, "Name:", (448, 1176, 622, 1210), "Lena Novak"),
    ((124, 1224, 418, 1267), 381, "Policy number:", (418, 1224, 606, 1266), "969-41475"),
]
SEED900_BLOCKS = [(130, 969, 416, 1097), (132, 1128, 273, 1156), (133, 1180, 236, 1202), (133, 1232, 381, 1261),
                  (456, 971, 616, 1255)]


def test_form_values_aligned_by_their_print_not_their_detector_boxes_are_read_row_by_row():
    """Two of six value boxes start 0.5-1 line heights before their print (the detector's cut between
    a label and its value), and one label's box is wider than a label: the rows' print, not their boxes,
    says labels and values (all labels, then all values before: 18.6 % CER at 0.24 % order-free)."""
    page, truth = [], []
    gray = np.full((2200, 1700), 255, dtype=np.uint8)
    for lbox, lend, label, vbox, value in SEED900_SECTION3:
        page += [(lbox, label), (vbox, value)]
        truth += [label, value]
        gray[lbox[1] + 8:lbox[3] - 8, 133:lend] = 0
        gray[vbox[1] + 8:vbox[3] - 8, 456:vbox[2] - 6] = 0
    assert _read_page(page, [(TEXT, b) for b in SEED900_BLOCKS], (1700, 2200), gray) == truth


#: Section 1 of ``bench/doc_pages.py --seed 1200`` page 0: two key-value panels side by side, the left
#: one's labels cut into two blocks beside one block of values (detector boxes; the analysis' blocks).
SEED1200_PANELS = [
    ((129, 316, 379, 354), "Postal code:"), ((426, 316, 622, 354), "533-54793"),
    ((123, 372, 401, 422), "Department:"), ((401, 371, 602, 419), "Westfield"),
    ((124, 433, 288, 476), "Vehicle:"), ((423, 433, 644, 479), "John Carter"),
    ((857, 313, 1035, 357), "Position:"), ((1155, 316, 1406, 354), "Anna Schmidt"),
    ((856, 375, 1067, 419), "Full name:"), ((1153, 375, 1382, 421), "Maria Lopez"),
]
SEED1200_BLOCKS = [(133, 321, 362, 347), (130, 382, 371, 466), (432, 322, 636, 473), (863, 321, 1026, 347),
                   (863, 381, 1057, 407), (1159, 321, 1400, 347), (1161, 381, 1374, 414)]


def test_form_labels_beside_their_values_with_a_panel_beside_them_are_read_row_by_row():
    """A key-value panel in the page's right half, on the same rows, is a panel beside the left one's
    rows, not a third column of a table (all the left labels, then their values before: 7.2 % CER at
    0.0 % order-free)."""
    gray = np.full((2200, 1700), 255, dtype=np.uint8)
    for box, _ in SEED1200_PANELS:  # print where a line's box meets its block
        b = next(b for b in SEED1200_BLOCKS if min(b[2], box[2]) > max(b[0], box[0])
                 and min(b[3], box[3]) > max(b[1], box[1]))
        gray[box[1] + 8:box[3] - 8, max(box[0], b[0]):min(box[2], b[2])] = 0
    order = _read_page(SEED1200_PANELS, [(TEXT, b) for b in SEED1200_BLOCKS], (1700, 2200), gray)
    assert order == [t for _, t in SEED1200_PANELS]


#: Section 1 of ``bench/doc_pages.py --seed 1500`` page 6: a form's two key-value panels, two rows beside
#: four, in one table block of the analysis (with section 2 below it); the detector's box of the value
#: ``564-54852`` starts 1.35 line heights early, over its label's colon.
SEED1500_PANELS = [
    ((126, 218, 351, 250), "1. Personal details"),
    ((123, 279, 197, 322), "City:"), ((360, 278, 522, 320), "Springfield"),
    ((126, 331, 323, 365), "Policy number:"), ((316, 330, 522, 364), "564-54852"),
    ((857, 281, 1031, 315), "Date of birth:"), ((1090, 281, 1262, 315), "2015-12-26"),
    ((856, 330, 996, 369), "Employer:"), ((1088, 327, 1268, 370), "Northbridge"),
    ((856, 379, 994, 413), "Reference:"), ((1091, 378, 1252, 412), "214-28347"),
    ((854, 426, 973, 464), "Position:"), ((1091, 427, 1266, 461), "Lena Novak"),
    ((124, 511, 262, 545), "2. Contact"),
]
SEED1500_BLOCKS = [(TEXT, (132, 224, 346, 243)), (TABLE, (131, 287, 1323, 555))]


def test_panels_in_a_table_block_are_read_panel_by_panel_when_a_value_box_starts_early():
    """The left panel's values were not at one tab stop (their boxes' left edges 1.2 line heights apart)
    so the band was no panels: one four-column table, read row across row (7.5 % CER at 0.2 % order-free).
    A value's box reaching back to its label says nothing of the tab stop."""
    order = _read_page(SEED1500_PANELS, SEED1500_BLOCKS, (1700, 2200))
    assert order == [t for _, t in SEED1500_PANELS]


#: Section 3 of ``bench/doc_pages.py --seed 1200`` page 6: two key-value panels; the right one's first
#: three labels are one block, its values another, its last label ("Postal code:") a block of its own
#: under the labels, beside its value in the value block.
SEED1200_LONE_LABEL = [
    ((126, 898, 382, 926), "3. Other information"),
    ((124, 960, 241, 993), "Position:"), ((308, 955, 458, 998), "Wei Zhang"),
    ((124, 1007, 244, 1041), "Address:"), ((311, 1009, 493, 1042), "54 Elm Street"),
    ((124, 1058, 265, 1090), "Start date:"), ((311, 1056, 465, 1090), "2015-10-20"),
    ((895, 958, 1073, 995), "Department:"), ((1073, 958, 1203, 995), "Riverton"),
    ((896, 1007, 1003, 1041), "Vehicle:"), ((1087, 1007, 1249, 1041), "Lena Novak"),
    ((895, 1056, 1035, 1090), "Start date:"), ((1087, 1056, 1237, 1089), "15/05/2021"),
    ((895, 1106, 1081, 1138), "Postal code:"), ((1083, 1106, 1232, 1138), "993-63885"),
    ((124, 1189, 738, 1225), "I declare that the information given above is true."),
]
SEED1200_LONE_BLOCKS = [
    (HEADING, (131, 901, 379, 921)), (TEXT, (130, 965, 235, 1034)), (TEXT, (131, 1063, 256, 1083)),
    (TEXT, (133, 1195, 733, 1221)), (TEXT, (317, 965, 486, 1083)), (TEXT, (901, 966, 1053, 1082)),
    (TEXT, (902, 1112, 1043, 1131)), (TEXT, (1093, 965, 1242, 1132)),
]


def test_a_label_block_of_its_own_inside_its_panel_is_read_with_its_row():
    """The lone label's block lies inside the panel once its labels and values are joined, on the
    panel's last row: it was read after the panel, its value before it (3.7 % CER on the page)."""
    order = _read_page(SEED1200_LONE_LABEL, SEED1200_LONE_BLOCKS, (1700, 2200))
    assert order == [t for _, t in SEED1200_LONE_LABEL]


#: Section 1 of ``bench/doc_pages.py --seed 1800`` page 3 (Chinese form): four key-value rows beside two
#: in one table block of the analysis; the right panel's labels and values each of one length (its rows
#: end alike, 1 px apart).
SEED1800_PANELS = [
    ((127, 205, 291, 243), "一、基本信息"),
    ((126, 267, 253, 301), "所属部门："), ((294, 272, 360, 310), "李娜"),
    ((124, 310, 255, 348), "联系电话："), ((297, 322, 538, 354), "760863953852640030"),
    ((129, 357, 253, 390), "电子邮箱："), ((293, 361, 361, 403), "陈静"),
    ((124, 402, 203, 438), "性别："), ((293, 407, 361, 449), "赵敏"),
    ((875, 264, 1004, 302), "邮政编码："), ((1098, 274, 1251, 308), "76506309570"),
    ((877, 312, 1029, 346), "身份证号码："), ((1097, 320, 1252, 354), "34359759454"),
    ((129, 480, 290, 514), "二、联系方式"),
]
SEED1800_BLOCKS = [(TEXT, (131, 210, 285, 238)), (TABLE, (131, 273, 1245, 460)), (TEXT, (132, 484, 286, 510))]


def test_a_key_value_panel_whose_rows_end_alike_beside_a_longer_one_is_a_panel():
    """Two rows that end alike were no panel (not ragged): the band was one four-column table, read row
    across row (29.7 % CER at 0.0 % order-free). Beside a panel of four rows they are not a table's
    columns (a table's columns share its rows)."""
    order = _read_page(SEED1800_PANELS, SEED1800_BLOCKS, (1700, 2200))
    assert order == [t for _, t in SEED1800_PANELS]


#: Section 1's right panel of ``bench/doc_pages.py --seed 2400`` page 0: three key-value rows at one
#: pitch, the values 1.5 line heights right of the first (long) label, 4.5 right of the other two.
SEED2400_PANEL = [
    ((853, 317, 1188, 355), "Account number:"), ((1253, 315, 1428, 357), "918-61804"),
    ((850, 375, 994, 419), "Phone:"), ((1256, 375, 1430, 419), "891-44071"),
    ((850, 434, 1060, 478), "Full name:"), ((1259, 435, 1477, 473), "Omar Haddad"),
]


def test_rows_at_one_pitch_are_not_cut_into_panels_below_their_first_row():
    """The rows are no panels as a whole (the first label crosses the gap); cut at their widest row gap
    (one pitch: 0.39 line heights), the last two rows' labels and values looked like two panels: both
    labels were read before their values (4.3 % CER on the page at 0.2 % order-free)."""
    lines = [_box(*box) for box, _ in SEED2400_PANEL]
    assert _ids(reading_order(lines[::-1])) == _ids(lines)


def test_a_line_over_two_panels_at_their_rows_pitch_leaves_them_panels():
    """A sentence across the gutter, one row pitch above bill-to beside ship-to: cut off at the first
    row gap, the panels below are read panel by panel (a row of one box is no label and value)."""
    title = _line(130, -1, 1000)
    bill = [_line(130, r, w) for r, w in enumerate((140, 260, 330, 200))]
    ship = [_line(900, r, w) for r, w in enumerate((150, 230, 360))]
    lines = [title, *bill, *ship]
    assert _ids(reading_order(lines[::-1])) == _ids(lines)
