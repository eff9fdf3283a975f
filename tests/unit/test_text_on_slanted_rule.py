"""Text typed on a slanted underline is text, not the rule (issue #38: photographed forms lost the
values typed on their underlines, 12-18 % order-free CER per page)."""

from __future__ import annotations

import numpy as np
import pytest

from models.compact.page.boxes import LineBox
from models.compact.page.rule_lines import holds_text, inside_rule


def _line(x0, y0, x1, y1) -> LineBox:
    q = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], dtype=np.float32)
    return LineBox(q, (x0, y0, x1, y1), 0.9)


def test_a_line_inside_a_rule_box_is_the_rule_only_where_no_text_is_left():
    """A slanted rule's box (34 px tall) covers the value typed on it: with the page's ink left after
    the erasure, text (glyph strokes over most columns and rows) keeps its line; a detection on the
    rule alone (nothing, or the rule's thin unerased edge) is dropped as before."""
    rule, line = (570.0, 360.0, 1450.0, 400.0), _line(568, 363, 740, 405)
    dark = np.zeros((600, 1600), bool)
    assert inside_rule(line, [rule]) and inside_rule(line, [rule], dark=dark)
    dark[398:400, 560:1460] = True  # the rule's edge the band did not paint
    assert inside_rule(line, [rule], dark=dark)
    for x in range(572, 735, 9):  # glyph stems 5 px wide, 30 px tall
        dark[370:400, x:x + 5] = True
    dark[370:373, 572:735] = True  # and their tops joined (a serif line): every column inked
    assert holds_text(dark, line.box) and not inside_rule(line, [rule], dark=dark)
    assert not holds_text(dark, (1700, 0, 1800, 50))  # off the page


@pytest.fixture(scope="module")
def detector():
    from models.compact.page.detect import LineDetector

    det = LineDetector()
    if det.layout is None or not det.layout.available:
        pytest.skip("tesserocr not installed")
    return det


def test_values_typed_on_a_photographed_forms_underlines_are_found(detector):
    """A generated photographed form (``training/compact/scan_docs`` seed 31000, a tune seed of
    bench/receipts.py): every typed value has a detected line over it. Before, the values on three
    slanted underlines were dropped as the rule itself (12.63 % order-free CER on the page)."""
    from models.compact.page.unrotate import unrotate_box
    from training.compact.scan_docs import make_document

    doc = make_document(31000)
    assert doc.kind == "form_photo"
    _, lines, rotation = detector.detect(doc.image)  # deskewed by 0.43 degrees: boxes mapped back
    boxes = [unrotate_box(ln.box, rotation, *doc.image.size) for ln in lines]
    missed = []
    for text, (x0, y0, x1, y1) in doc.pieces:
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        if not any(b[0] <= cx <= b[2] and b[1] <= cy <= b[3] for b in boxes):
            missed.append(text)
    assert missed == []
