"""A table's lone nil dash gets a line of its own; leaders, rules and pages without one are left alone
(models/compact/page/nil_marks.py, issue 37)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from models.compact.page.boxes import LineBox
from models.compact.page.nil_marks import add_nil_dashes

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


def _line(box: tuple[float, float, float, float]) -> LineBox:
    x0, y0, x1, y1 = box
    return LineBox(np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], np.float32), box, 0.9)


def _page(rows: list[list[tuple[int, str]]], size: int = 34, seed: int = 0) -> tuple[np.ndarray, list[LineBox],
                                                                                       list[tuple[int, int, int, int]]]:
    """A page of ``rows`` ((right edge x, text) cells, right-aligned): the boxes a detector gives every
    cell but ``-`` (padded like its boxes), and the ink boxes of the dashes."""
    rng = np.random.default_rng(seed)
    im = Image.new("RGB", (1400, 120 + 60 * len(rows)), "white")
    d = ImageDraw.Draw(im)
    f = ImageFont.truetype(FONT, size)
    lines, dashes = [], []
    for i, row in enumerate(rows):
        y = 80 + i * 60 + int(rng.integers(-2, 3))
        for right, text in row:
            x = right - f.getlength(text)
            d.text((x, y), text, font=f, fill=0)
            x0, y0, x1, y1 = d.textbbox((x, y), text, font=f)
            if text.strip("-–—"):
                lines.append(_line((x0 - 8.0, y0 - 8.0, x1 + 8.0, y1 + 8.0)))
            else:
                dashes.append((x0, y0, x1, y1))
    return np.asarray(im), lines, dashes


@pytest.mark.parametrize("size,dash", [(26, "-"), (34, "-"), (44, "–"), (34, "—")])
def test_every_lone_dash_gets_a_line_over_its_ink(size: int, dash: str) -> None:
    rows = [[(500, "Trade receivables"), (900, ("1,234", dash, "(56)")[i % 3]), (1300, (dash, "789", "2,345")[i % 3])]
            for i in range(9)]
    rgb, lines, dashes = _page(rows, size)
    out = add_nil_dashes(rgb, lines)
    assert out[:len(lines)] == lines  # the detector's lines kept, in order
    new = [ln.box for ln in out[len(lines):]]
    assert len(new) == len(dashes) == 6
    for x0, y0, x1, y1 in dashes:  # each dash's ink inside exactly one new box
        assert sum(b[0] <= x0 and x1 <= b[2] and b[1] <= y0 and y1 <= b[3] for b in new) == 1


def test_a_page_without_a_lone_mark_keeps_its_lines() -> None:
    rgb, lines, _ = _page([[(500, "Cash and equivalents"), (900, "-1,234"), (1300, "2,345")]] * 6)
    assert add_nil_dashes(rgb, lines) is lines


def test_leaders_and_dashed_rules_get_no_line() -> None:
    rows = [[(500, "Total assets"), (1000, "- - - - - - - -"), (1300, "12")],
            [(500, "Other"), (1000, "— — — — — —"), (1300, "8")]] * 3
    rgb, lines, _ = _page(rows)
    assert add_nil_dashes(rgb, lines) is lines


def test_a_rule_under_a_row_is_no_dash() -> None:
    rgb, lines, _ = _page([[(500, "Inventories"), (900, "1,234"), (1300, "2,345")]] * 5)
    im = Image.fromarray(rgb)
    d = ImageDraw.Draw(im)
    for ln in lines[:3]:  # a short rule under each cell of the first row, as a subtotal is ruled
        d.line((ln.box[0] + 8, ln.box[3] - 4, ln.box[2] - 8, ln.box[3] - 4), fill=0, width=2)
    d.line((560, 144, 600, 144), fill=0, width=2)  # a short stroke at the top of a row, off its middle
    assert add_nil_dashes(np.asarray(im), lines) is lines



def test_the_edge_of_a_photo_is_no_dash() -> None:
    """``bench/layout_pages.py`` page 0, skewed: an inset photo (blurred noise) on a skewed page, text rows beside
    it. The anti-aliased rim of its slanted top and bottom edges is a one-pixel dash-shaped stroke of
    the ink mask at mid row beside no box; no paper surrounds it (:func:`models.compact.page.nil_marks.on_paper`;
    2 such dashes found there before it)."""
    from bench.layout_pages import render_page
    from models.compact.page.detect import LineDetector

    rgb = np.asarray(render_page(0).image.convert("RGB"))
    lines = LineDetector(threads=1)._detect(rgb)  # the page as given, before it is deskewed
    assert len(lines) > 80 and not [ln.box for ln in lines if ln.shape_text]
