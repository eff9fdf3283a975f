"""One decimal mark per page (issue 38, receipts; inkstream/decimal_marks.py): a price read with a
comma among prices written with a point takes the point (seed 30,006: ``2 x 1,87`` among twenty
prices with a point), in the gateway's stitched page and in the in-process path alike."""

from __future__ import annotations

from gateway.output.stitch import page_result
from gateway.types import PageOutcome, SegmentText
from inkstream.decimal_marks import one_mark, page_mark, with_mark

RECEIPT = ["SML COLA", "2 x 1,87", "3.74", "FLOUR", "3 x 14.76", "44.28", "SUBTOTAL", "154.95", "TAX 8%", "12.40"]


def test_a_price_read_with_the_other_mark_takes_the_pages():
    assert page_mark(RECEIPT) == "."
    assert one_mark(RECEIPT)[1] == "2 x 1.87" and one_mark(RECEIPT)[2:] == RECEIPT[2:]
    euro = ["BROT 2,49", "MILCH 1,19", "KAFFEE 7.99", "SUMME 11,67", "BAR 20,00"]
    assert one_mark(euro)[2] == "KAFFEE 7,99"
    assert with_mark("$74.580.27", ".") == "$74,580.27"  # a group separator read as the decimal mark
    assert with_mark("1.234.567,89", ",") == "1.234.567,89"  # European grouping: left as written


def test_pages_without_a_clear_mark_and_other_numbers_are_left_alone():
    assert page_mark(["1,50", "2.50", "3.50"]) is None  # too few prices to vote
    assert page_mark(["1,50", "2,50", "3.50", "4.50"]) is None  # both marks: no convention
    texts = ["12,500 units", "1,234.56", "v1.2.3", "10.30 h", "12.05.2024", "2.5", "3,14159", *RECEIPT]
    assert one_mark(texts)[:7] == ["12,500 units", "1,234.56", "v1.2.3", "10.30 h", "12.05.2024", "2.5", "3,14159"]
    assert with_mark("2 x 1,87", None) == "2 x 1,87"


def test_the_gateway_stitches_the_same_text_and_words():
    segs = [SegmentText(index=i, text=t, box=(0.0, 10.0 * i, 100.0, 10.0 * i + 9)) for i, t in enumerate(RECEIPT)]
    segs[1].words = [("2", (0.0, 10.0, 5.0, 19.0)), ("x", (7.0, 10.0, 9.0, 19.0)), ("1,87", (11.0, 10.0, 30.0, 19.0))]
    page = page_result(PageOutcome(index=0, status="ok", segments=segs, width=100, height=100))
    assert page.text.splitlines() == one_mark(RECEIPT)
    words = [w.text for b in page.blocks for w in b.words]
    assert words == ["2", "x", "1.87"]
