"""Form rules in a line crop (models/compact/line/rules.py): a box's edge and an underline are painted
paper, the text and the descenders the underline runs through keep their ink, and a crop of nothing
but a rule (a receipt's dashed separator) or of plain text is left as it is."""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from models.compact.line.rules import edge_columns, erase_rules, rule_rows

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


def _text(text: str, size: int = 28) -> tuple[Image.Image, ImageDraw.ImageDraw, tuple[int, int, int, int]]:
    """A crop holding ``text`` with a few pixels of paper around it, and the text's bbox."""
    font = ImageFont.truetype(FONT, size)
    img = Image.new("L", (20 + int(font.getlength(text)) + 30, size + 16), 255)
    draw = ImageDraw.Draw(img)
    draw.text((20, 4), text, font=font, fill=0)
    return img, draw, draw.textbbox((20, 4), text, font=font)


def _ink(img: Image.Image) -> np.ndarray:
    return np.asarray(img.convert("L")) < 128


def test_box_edges_are_erased_and_the_text_kept():
    img, draw, (x0, _, x1, _) = _text("KN-6520445")
    draw.line([(6, 0), (6, img.height)], fill=0, width=3)  # the box's left edge, across the whole crop
    draw.line([(img.width - 8, 0), (img.width - 8, img.height)], fill=0, width=3)  # and its right edge
    out = erase_rules(img)
    assert out.size == img.size and out.mode == img.mode
    ink, before = _ink(out), _ink(img)
    assert not ink[:, :12].any() and not ink[:, img.width - 12:].any()  # both edges gone
    assert np.array_equal(ink[:, x0:x1], before[:, x0:x1])  # the text untouched


def test_an_underline_is_erased_but_not_the_descenders_it_runs_through():
    img, draw, (x0, y0, x1, y1) = _text("Maria Ivy 1964")
    base = y1 - 4  # through the descenders of y
    draw.line([(0, base), (img.width, base)], fill=0, width=3)
    ink = _ink(img)
    rows = rule_rows(ink)
    assert rows and all(a <= base + 1 and b >= base for a, b in rows)
    out = _ink(erase_rules(img))
    band = slice(min(a for a, _ in rows), max(b for _, b in rows))
    assert out[band].sum() < 0.2 * ink[band].sum()  # most of the rule gone ...
    assert out[band].any()  # ... but the descenders crossing it keep their pixels
    assert np.array_equal(out[: y0 + 10], ink[: y0 + 10])  # the text above untouched


def test_plain_text_and_rule_only_crops_are_left_alone():
    img, _, _ = _text("llll 1111 |abc")  # tall strokes, none a full-height box edge
    assert erase_rules(img) is img
    assert not edge_columns(_ink(img))
    sep = Image.new("L", (300, 20), 255)
    ImageDraw.Draw(sep).line([(0, 10), (300, 10)], fill=0, width=3)  # a separator and nothing else
    assert erase_rules(sep) is sep
    assert erase_rules(Image.new("RGB", (4, 4), "white")).size == (4, 4)  # too small to hold a rule
