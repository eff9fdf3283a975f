"""Reading order of photographed, scanned and faxed forms and of till-roll receipts (issue 38), on line
boxes and page layouts alone (no model): a photo's paper as a backdrop, a till roll row by row, the
skew of a page of short lines, a leaning tab stop, a title over one block of key-value rows.
"""

from __future__ import annotations

import numpy as np
import pytest

from models.compact.page.boxes import LineBox
from models.compact.page.kv_rows import join_far_values
from models.compact.page.layout import CAPTION, IMAGE, TABLE, TEXT, PageLayout, Region
from models.compact.page.order import Group, lines_box
from models.compact.page.regions import line_skew_deg, region_order

H = 36  # line height, pixels
PAGE = (1700, 2200)  # a letter page at 200 dpi, pixels


def _box(x0: float, y0: float, x1: float, y1: float) -> LineBox:
    q = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], dtype=np.float32)
    return LineBox(q, (x0, y0, x1, y1), 0.9)


def _line(x: float, row: int, width: float, top: float = 300, height: float = H) -> LineBox:
    y = top + row * 60
    return _box(x, y, x + width, y + height)


def _ids(lines: list[LineBox]) -> list[int]:
    return [id(ln) for ln in lines]


def _read(lines: list[LineBox], regions: list[tuple[str, tuple]], size: tuple[int, int] = PAGE) -> list[int]:
    layout = PageLayout(regions=[Region(kind, box, k) for k, (kind, box) in enumerate(regions)])
    paper = np.full((size[1], size[0]), 255, dtype=np.uint8)
    return _ids(region_order(lines[::-1], layout, size[1], paper, size[0]))


def _form(n: int, top: float = 300) -> list[tuple[LineBox, LineBox]]:
    """``n`` rows of a form: a label at the margin, its value at a tab stop 12 line heights on."""
    return [(_line(200, r, 140 + 25 * (r % 3), top), _line(200 + 12 * H, r, 180 + 30 * (r % 2), top)) for r in range(n)]


def test_lines_on_a_photographed_pages_backdrop_are_its_text():
    """``bench/receipts.py`` seeds 32008, 33004 (form_photo): the analysis found the photo's paper one
    image block over the whole page, the labels text and caption blocks on it and the values in no
    block: the values were read as a figure's labels, after all the labels (66-69 % CER)."""
    rows = _form(6)
    labels = [lb for lb, _ in rows]
    regions = [(IMAGE, (0, 0, *PAGE)), (CAPTION, lines_box(labels[:2])), (TEXT, lines_box(labels[2:]))]
    assert _read([ln for row in rows for ln in row], regions) == _ids([ln for row in rows for ln in row])


def test_a_figure_beside_text_still_reads_its_labels_after_the_block_above():
    para = [_line(200, r, 1200) for r in range(3)]
    labels = [_line(400, r, 80, top=600) for r in range(2)]
    regions = [(TEXT, lines_box(para)), (IMAGE, (300, 560, 1300, 900))]
    assert _read([*para, *labels], regions) == _ids([*para, *labels])


#: ``bench/receipts.py`` seed 33000 (receipt_thermal, 472 x 989 px): its lines in reading order, and the
#: blocks the analysis found: the names one block, the amounts a few blocks at the right margin.
SEED33000_ROLL = [
    ((131, 26, 340, 49), "KINGSTON FRESH MART"), ((168, 53, 304, 77), "534 Elm Street"),
    ((155, 81, 317, 104), "TEL 909-102-6898"), ((25, 120, 130, 147), "05/11/2026"), ((390, 122, 447, 146), "06:29"),
    ((25, 149, 134, 173), "CASHIER 57"), ((372, 149, 446, 173), "#39432"), ((25, 191, 126, 213), "GF BUTTER"),
    ((35, 218, 112, 242), "2 x 2.21"), ((401, 217, 447, 243), "4.42"), ((25, 246, 178, 269), "LOW FAT BUTTER"),
    ((35, 273, 123, 297), "2 x 15.41"), ((391, 273, 447, 298), "30.82"), ((25, 301, 141, 324), "2% VINEGAR"),
    ((35, 327, 125, 353), "2 x 15.75"), ((391, 328, 446, 353), "31.50"), ((26, 356, 152, 379), "ORG COOKIES"),
    ((391, 355, 446, 380), "14.27"), ((25, 383, 143, 407), "LOW FAT TEA"), ((35, 410, 123, 434), "3 x 11.25"),
    ((391, 410, 447, 435), "33.75"), ((25, 438, 114, 462), "CARROTS"), ((35, 466, 113, 490), "3 x 8.13"),
    ((391, 465, 447, 490), "24.39"), ((25, 492, 100, 516), "GF RICE"), ((391, 492, 447, 518), "22.53"),
    ((25, 521, 130, 545), "LRG WATER"), ((35, 548, 124, 572), "2 x 13.18"), ((391, 547, 447, 573), "26.36"),
    ((24, 575, 81, 600), "EGGS"), ((35, 603, 124, 627), "4 x 24.38"), ((391, 602, 447, 628), "97.52"),
    ((25, 630, 117, 654), "OLIVE OIL"), ((35, 658, 124, 682), "4 x 15.73"), ((391, 657, 447, 683), "62.92"),
    ((25, 685, 123, 709), "BATTERIES"), ((391, 686, 446, 709), "11.91"), ((25, 712, 163, 736), "WHOLE PEPPER"),
    ((36, 740, 112, 765), "3 x 1.93"), ((402, 740, 446, 764), "5.79"), ((25, 783, 120, 804), "SUBTOTAL"),
    ((381, 783, 446, 805), "366.18"), ((25, 809, 96, 833), "TAX 6%"), ((391, 809, 447, 833), "21.97"),
    ((25, 836, 87, 861), "TOTAL"), ((381, 836, 446, 861), "388.15"), ((24, 863, 79, 888), "CASH"),
    ((380, 864, 446, 888), "389.00"), ((25, 891, 105, 916), "CHANGE"), ((403, 892, 446, 915), "0.85"),
    ((184, 933, 289, 957), "THANK YOU"),
]
SEED33000_BLOCKS = [(136, 31, 338, 101), (29, 127, 129, 169), (29, 196, 174, 760), (28, 787, 118, 912),
                    (187, 938, 284, 952), (396, 278, 442, 293), (396, 333, 442, 375), (396, 416, 442, 431),
                    (395, 471, 442, 513), (396, 553, 442, 568)]


def _read_page(page: list, blocks: list, size: tuple[int, int]) -> list[str]:
    lines = [_box(*box) for box, _ in page]
    text = {id(ln): t for ln, (_, t) in zip(lines, page, strict=True)}
    return [text[i] for i in _read(lines, blocks, size)]


def test_a_till_roll_is_read_row_by_row():
    """``bench/receipts.py`` seed 33000 (receipt_thermal, 20-25 px lines): the analysis made the item
    names one block and a few amounts at a time at the right margin others; the names were read, then
    the amounts (35 % CER at 0.9 % order-free)."""
    order = _read_page(SEED33000_ROLL, [(TEXT, b) for b in SEED33000_BLOCKS], (472, 989))
    assert order == [t for _, t in SEED33000_ROLL]


def test_skew_is_measured_on_short_lines_when_no_line_is_long():
    """``bench/receipts.py`` seed 33004: a photographed form's labels and values (2-7 line heights
    long) tilted by 4 degrees were not straightened (no line 6 times as long as tall) and its values
    were read a row off their labels."""
    lines = []
    for i in range(10):  # short lines rising to the right by 4 degrees
        x0, y0, length = 200.0 + 420 * (i % 2), 300.0 + 60 * i, 120.0 + 20 * (i % 3)
        dy = -length * np.tan(np.radians(4))
        q = np.array([[x0, y0], [x0 + length, y0 + dy], [x0 + length, y0 + dy + 36], [x0, y0 + 36]], np.float32)
        lines.append(LineBox(q, (x0, y0 + dy, x0 + length, y0 + 36), 0.9))
    assert line_skew_deg(lines) == pytest.approx(4.0, abs=0.01)
    assert line_skew_deg(lines[:5]) is None  # too few to say


def test_values_at_a_leaning_tab_stop_are_one_column_of_values():
    """``bench/receipts.py`` seed 33004, straightened: the value column leans by 0.08 px/px (730 px
    across at its top, 672 px 730 px lower), its left edges over 1.5 line heights apart: no tab stop,
    and the labels were read before their values."""
    labels = [_line(200 - 0.08 * 60 * r, r, 140 + 25 * (r % 3)) for r in range(7)]
    values = [_line(640 - 0.08 * 60 * r, r, 180 + 30 * (r % 2)) for r in range(7)]
    joined = join_far_values([Group(TEXT, lines_box(labels), labels), Group(TEXT, lines_box(values), values)], H,
                             page_width=PAGE[0])
    assert len(joined) == 1 and joined[0].rows
    slanted = [_line(640 + 0.3 * 60 * r, r, 180) for r in range(7)]  # 0.3 px/px: no tab stop
    assert len(join_far_values([Group(TEXT, lines_box(labels), labels), Group(TEXT, lines_box(slanted), slanted)],
                               H, page_width=PAGE[0])) == 2


#: ``bench/receipts.py`` seed 10009 (form_scan, 1488 x 1925 px): the title, then ten fields that the
#: analysis found as one table block, the last field a block of its own.
SEED10009_FORM = [
    ((136, 131, 479, 181), "Change of Address"), ((136, 225, 286, 255), "Account no.:"),
    ((517, 216, 658, 252), "TB-4094073"), ((134, 288, 218, 323), "Name:"), ((518, 286, 666, 315), "Yuki Johnson"),
    ((125, 352, 255, 385), "Postcode:"), ((516, 348, 591, 379), "99321"), ((134, 417, 238, 451), "Amount:"),
    ((516, 411, 643, 446), "$51,562.69"), ((132, 480, 200, 521), "City:"), ((516, 474, 643, 511), "Springfield"),
    ((135, 544, 257, 583), "Employer:"), ((521, 544, 691, 573), "Riverton GmbH"),
    ((135, 612, 307, 646), "Policy number:"), ((518, 609, 659, 638), "NL-5797365"),
    ((136, 678, 285, 707), "Date of birth:"), ((517, 670, 646, 706), "23/12/2016"), ((134, 742, 204, 773), "Date:"),
    ((518, 733, 643, 766), "17/02/1971"), ((136, 807, 312, 840), "Signature date:"),
    ((520, 802, 644, 832), "02/03/1954"),
]


def test_one_block_of_labels_and_their_values_is_read_row_by_row():
    """``bench/receipts.py`` seed 10009 (form_scan): the fields' one table block, made a text block by
    the steps before, was read as two panels: all labels, then all values (55 % CER at 0.4 %
    order-free)."""
    order = _read_page(SEED10009_FORM, [(TEXT, (142, 139, 472, 178)), (TABLE, (140, 226, 685, 837))], (1488, 1925))
    assert order == [t for _, t in SEED10009_FORM]


#: ``bench/receipts.py`` seed 10000 (form_photo, 1700 x 2200 px): the title and the first two fields
#: one block, then a block per field.
SEED10000_FORM = [
    ((210, 213, 611, 263), "APPLICATION FORM"), ((205, 302, 352, 349), "Employer:"),
    ((609, 305, 865, 343), "Springfield GmbH"), ((207, 379, 407, 417), "Policy number:"),
    ((609, 375, 774, 413), "LU-9835992"), ((206, 451, 356, 490), "Telephone:"),
    ((608, 448, 839, 486), "+1 366 833 2922"),
    ((202, 524, 325, 562), "Address:"), ((609, 523, 857, 559), "423 Station Road"),
    ((204, 598, 385, 632), "Date of birth:"), ((609, 594, 773, 632), "12/08/2002"),
    ((199, 670, 323, 708), "Amount:"),
    ((605, 667, 765, 705), "$65,318.74"), ((199, 743, 293, 782), "Email:"),
    ((608, 742, 1008, 781), "chen.okafor@example.com"), ((196, 818, 295, 857), "Name:"),
    ((605, 815, 840, 851), "Fatima Kowalski"), ((197, 893, 410, 931), "Signature date:"),
    ((605, 885, 772, 927), "16/02/1979"), ((193, 963, 347, 1006), "Reference:"), ((599, 961, 773, 1003), "TU-1089729"),
]
SEED10000_BLOCKS = [(214, 223, 858, 412), (211, 457, 868, 484), (209, 529, 869, 554), (207, 602, 766, 702),
                    (207, 749, 1001, 777), (205, 823, 831, 849), (204, 888, 973, 934), (203, 970, 765, 997)]


def test_a_title_over_one_block_of_key_value_rows_is_read_first_then_the_rows():
    """``bench/receipts.py`` seed 10000 (form_photo): the title and the first two fields were one block,
    read as a title over two panels: "Employer: Policy number:" before their values (11 % CER at 0.2 %
    order-free)."""
    order = _read_page(SEED10000_FORM, [(TEXT, b) for b in SEED10000_BLOCKS], (1700, 2200))
    assert order == [t for _, t in SEED10000_FORM]


#: ``bench/receipts.py`` seed 35011 (form_scan, 1700 x 2200 px): the title and the first three labels one
#: block, the next three labels a block each, the values a block each; the last two fields below.
SEED35011_FORM = [
    ((151, 157, 351, 209), "INVOICE"), ((148, 246, 231, 302), "City:"), ((588, 246, 741, 294), "Kingston"),
    ((152, 333, 308, 380), "Employer:"), ((591, 328, 765, 375), "Milton Inc."),
    ((154, 419, 287, 458), "Address:"), ((591, 410, 819, 457), "578 Park Lane"),
    ((151, 496, 304, 543), "Postcode:"), ((589, 493, 698, 541), "90580"),
    ((154, 583, 384, 625), "Signature date:"), ((589, 579, 780, 621), "05/07/1975"),
    ((151, 664, 259, 707), "Name:"), ((589, 662, 787, 704), "Quentin Wu"),
    ((151, 750, 340, 788), "Account no.:"), ((589, 746, 793, 784), "QH-8191809"),
    ((150, 833, 284, 871), "Amount:"), ((587, 823, 769, 871), "$40,382.53"),
]
SEED35011_BLOCKS = [(160, 169, 342, 449), (162, 510, 292, 532), (162, 593, 373, 621), (162, 676, 249, 697),
                    (160, 759, 331, 780), (160, 842, 276, 863), (593, 258, 729, 289), (602, 341, 757, 365),
                    (600, 423, 813, 448), (600, 506, 689, 531), (593, 588, 771, 617), (593, 671, 777, 699),
                    (593, 754, 786, 781), (593, 833, 760, 864)]


def test_a_title_in_the_block_of_the_first_labels_is_read_before_the_rows():
    """``bench/receipts.py`` seed 35011 (form_scan): the analysis made the title and the first three
    labels one block; with the title in it no block of labels sat wholly on the values' rows, and six
    labels were read before their six values (48 % CER at 1.4 % order-free)."""
    order = _read_page(SEED35011_FORM, [(TEXT, b) for b in SEED35011_BLOCKS], (1700, 2200))
    assert order == [t for _, t in SEED35011_FORM]
