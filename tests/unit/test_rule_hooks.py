"""A descender whose hook lies inside a table rule keeps the rule under it (models.compact.page.rule_band
.descender_hooks, used by layout.erase_rules).

On a tightly ruled table the bottom of a ``g`` lies in the rule's own rows; painting the rule paper
cut the hook off and the line was read ``Georqia``, ``Waqes``, ``Minina`` (bench/tables.py seed 7
page 2). The rule is now left under such a hook; text sitting on a rule all along (a form's
underline) and the feet of brackets (taller than their line) are still erased.
"""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from models.compact.page.layout import erase_rules

DEJAVU = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


def _font(size: int) -> ImageFont.FreeTypeFont:
    try:
        return ImageFont.truetype(DEJAVU, size)
    except OSError:
        pytest.skip("DejaVuSans not installed (make system-packages)")


def _row(text: str, size: int, width: int, drop: int) -> tuple[Image.Image, tuple[float, float, float, float], int]:
    """A white strip with ``text`` at ``size`` px over a rule ``width`` px thick; the text's lowest
    ink row lies ``drop`` rows below the rule's first row (inside it for 0 <= drop < width).
    Returns the strip, the rule's box (as Tesseract reports it) and the rule's first row."""
    font = _font(size)
    w = int(font.getlength(text)) + 80
    probe = Image.new("L", (w, 3 * size), 255)
    ImageDraw.Draw(probe).text((40, size // 2), text, font=font, fill=0)
    low = int(np.flatnonzero((np.asarray(probe) < 128).any(axis=1)).max())
    rule_top = low - drop
    im = Image.new("RGB", (w, 3 * size), "white")
    d = ImageDraw.Draw(im)
    d.rectangle((10, rule_top, w - 10, rule_top + width - 1), fill=(0, 0, 0))
    d.text((40, size // 2), text, font=font, fill=(0, 0, 0))
    return im, (10.0, rule_top - 0.3, w - 10.0, rule_top + width - 0.3), rule_top


def _columns(text: str, size: int, part: str) -> tuple[int, int]:
    """Pixel columns [x0, x1) of ``part`` (a substring) in ``text`` drawn at x = 40."""
    font = _font(size)
    i = text.index(part)
    return 40 + int(font.getlength(text[:i])), 40 + int(np.ceil(font.getlength(text[:i + len(part)])))


@pytest.mark.parametrize("size,width", [(22, 1), (24, 2), (26, 2)])
def test_a_hook_inside_the_rule_keeps_the_rule_under_it(size: int, width: int) -> None:
    text = "Georgia 12,345"
    im, box, y = _row(text, size, width, drop=0)
    out = np.asarray(erase_rules(im, [box]).convert("L"))
    g0, g1 = _columns(text, size, "g")
    assert (out[y:y + width, g0:g1] < 128).sum(axis=1).max() >= (g1 - g0) // 2, "the g's hook was painted over"
    away = [x for x in range(15, im.width - 15) if x < 36 or x > _columns(text, size, "5")[1] + 2]
    assert (out[y:y + width][:, away] > 200).all(), "the rule away from the text must be painted paper"


def test_text_sitting_on_a_rule_is_still_erased() -> None:
    """A form's value typed on its underline touches the rule all along: nothing of the rule is kept."""
    text = "Name: Tom Hall"
    im, box, y = _row(text, 24, 2, drop=1)
    out = np.asarray(erase_rules(im, [box]).convert("L"))
    assert (out[y:y + 2, 12:im.width - 12] > 200).all()


def test_the_feet_of_brackets_are_not_kept() -> None:
    """A bracket reaches below its line's baseline, like a descender, but is taller than the digits
    beside it: the rule under it is erased (a stub there was read ``{56,823)``)."""
    text = "12,345 (56,823) 903"
    im, box, y = _row(text, 24, 1, drop=0)
    out = np.asarray(erase_rules(im, [box]).convert("L"))
    for part in ("(", ")"):
        x0, x1 = _columns(text, 24, part)
        assert (out[y, x0:x1] > 200).all(), f"the rule under {part!r} was kept"
