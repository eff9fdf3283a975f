"""bench/statements.py: seeded pages with consistent ground truth, PDF round trip, loss causes."""

from __future__ import annotations

import random

import pytest

from bench.statement_render import KINDS, render_statement
from bench.statements import _kept, as_pdf_page, cause, cell_cause


@pytest.mark.parametrize("kind", KINDS)
def test_pages_are_seeded_and_truth_is_consistent(kind: str) -> None:
    a, b = render_statement(kind, random.Random(5)), render_statement(kind, random.Random(5))
    assert a.numbers == b.numbers and a.cells == b.cells and a.image.tobytes() == b.image.tobytes()
    assert a.numbers and len(a.numbers) == len(a.labels)
    assert all(any(ch.isdigit() for ch in n) for n in a.numbers)
    assert all(n in a.cells for n in a.numbers) and set(a.labels) <= set(a.cells)
    assert a.dpi in (150, 200, 240, 300) and a.image.width == int(8.5 * a.dpi)


def test_pdf_round_trip_renders_at_gateway_long_side(tmp_path) -> None:
    page = render_statement("invoice", random.Random(1))
    im = as_pdf_page(page, tmp_path, long_side_px=1100)
    assert max(im.size) == 1100 and im.mode == "RGB"


def test_kept_counts_thin_space_numbers_as_a_sequence() -> None:
    kept, lost = _kept(["1 234 567", "89", "89", "(12)"], "Rent 1 234 567 89\nTax 8 9 (12)")
    assert kept == 3 and lost == [2]


def test_causes() -> None:
    text = "Revenue 1,234*2,000 (98)\nCost 4,56 7 12.5%\nTax 7,891"
    assert cause("1,234*", "Revenue", text) == ("merged", "1,234*2,000")
    assert cause("4,567", "Cost", text) == ("split", "4,56 7")
    assert cause("12.6%", "Cost", text) == ("misread", "12.5%")
    assert cause("(99)", "Revenue", text) == ("misread", "(98)")
    assert cause("555", "Interest", text)[0] == "not_detected?"


def test_cell_causes() -> None:


    cells = ["Trade receivables 12", "Cost of", "sales", "Tax"]
    text = "Trade receivables 12\nCost of sales\nIncome tax (a) 5"
    assert cell_cause("Trade receivables", cells, text) == "merged"
    assert cell_cause("Cost of sales", cells, text) == "split"
    assert cell_cause("Income tax (a)", cells, text) == "outside"
    assert cell_cause("Goodwill", cells, text) == "not_read"
    assert cell_cause("-", cells, "Non-current assets") == "not_read"  # a nil dash is no substring hit


def test_nil_dash_cells_get_a_line_box() -> None:
    """A table's lone ``-`` (a nil value, common in statements) is detected as a line of its own."""
    from PIL import Image, ImageDraw, ImageFont

    from evaluation.engines import default_model_dir
    from models.compact.encoder_half import CompactEncoderHalf

    enc = CompactEncoderHalf.load(default_model_dir())
    im = Image.new("RGB", (1700, 2200), "white")
    d = ImageDraw.Draw(im)
    f = ImageFont.truetype("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", 34)
    for i in range(12):
        y = 200 + i * 55
        d.text((150, y), "Trade receivables", font=f, fill=0)
        for x, v in ((1000, ("1,234", "-", "(56)")[i % 3]), (1400, ("-", "789", "2,345")[i % 3])):
            d.text((x - f.getlength(v), y), v, font=f, fill=0)
    boxes = enc.preprocess(im, "lines").meta["boxes"]
    # 12 labels, 16 numbers and 8 dashes (models/compact/page/nil_marks.py)
    assert sum(b[2] - b[0] < 50 for b in boxes) == 8
