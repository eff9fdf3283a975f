"""A descender whose hook lies inside a table rule keeps the rule under it (models.compact.page.rule_hooks
.descender_hooks, used by layout.erase_rules).

On a tightly ruled table the bottom of a ``g`` lies in the rule's own rows; painting the rule paper
cut the hook off and the line was read ``Georqia``, ``Waqes``, ``Minina`` (bench/tables.py seed 7
page 2). The rule is now left under such a hook, in the image read only (the lines are found on the
page erased whole); text sitting on a rule all along (a form's underline), the feet of brackets, commas'
tails and the stems of p / y (narrow: read right without the rule, misread with a stub) are still erased.
"""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from models.compact.page.layout import erase_rules, erase_rules_twice
from tests.unit.test_leading_minus import _read_crop

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


def test_the_lines_are_found_on_the_page_without_stubs() -> None:
    """The detector sees the rules erased whole (a stub moved its boxes all over a straightened page by a
    pixel or two, and a number elsewhere was read ``0.1.999``: bench/tables.py seed 7 page 2); only the
    image read keeps the stub."""
    text = "Georgia 12,345"
    im, box, y = _row(text, 24, 2, drop=0)
    whole, read = erase_rules_twice(im, [box])
    assert (np.asarray(whole.convert("L"))[y:y + 2, 12:im.width - 12] > 200).all()
    assert np.array_equal(np.asarray(read), np.asarray(erase_rules(im, [box])))
    assert not np.array_equal(np.asarray(read), np.asarray(whole))
    plain, _, _ = _row("Name 12,345", 24, 2, drop=-4)  # nothing reaches the rule: one image
    first, second = erase_rules_twice(plain, [box])
    assert first is second


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


def test_commas_stems_and_tails_keep_no_stub() -> None:
    """A comma's tail, the stems of ``p`` / ``y`` and a bracket's foot come down into the rule as far as a
    ``g``'s hook, but narrow: the rule under them is erased (a stub under a comma read ``5,881`` as
    ``5.881``, under the bracket of ``(66,471)`` as ``(6,471)``; branch hooks, bench/tables.py seeds 0, 11)."""
    text = "5,881 (66,471) Payables py"
    for size, width in [(22, 1), (24, 2), (26, 2)]:
        im, box, y = _row(text, size, width, drop=0)
        out = np.asarray(erase_rules(im, [box]).convert("L"))
        assert (out[y:y + width, 12:im.width - 12] > 200).all(), f"a stub was kept at {size} px"


def test_no_stub_joins_a_glyph_of_the_row_below() -> None:
    """A glyph of the row under the rule touching it from below (an ``l``'s ascender) is not joined to
    the hook above by a stub (read ``Heaīth``, branch hooks on bench/tables.py seed 0)."""
    text = "Georgia"
    im, box, y = _row(text, 24, 1, drop=0)
    g0, g1 = _columns(text, 24, "g")
    d = ImageDraw.Draw(im)
    d.rectangle(((g0 + g1) // 2 - 1, y + 1, (g0 + g1) // 2, y + 12), fill=(0, 0, 0))  # a stem under the rule
    out = np.asarray(erase_rules(im, [box]).convert("L"))
    assert (out[y, 12:im.width - 12] > 200).all()


LIBERATION = "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf"
_read = _read_crop  # a crop read as the one line of a page (test_leading_minus)


@pytest.mark.parametrize("size,width,drop", [(19, 1, 0), (19, 2, 0), (23, 1, 1), (23, 2, 1)])
def test_a_table_row_with_a_hook_in_its_rule_is_read_right(halves, size: int, width: int, drop: int) -> None:
    """A ruled table row (a rule above, one under it holding the bottom of the ``g``'s hook), its rules
    erased as a page's are, read as one line. Read ``Georqia 12,345`` before (the hook cut off)."""
    try:
        font = ImageFont.truetype(LIBERATION, size)
    except OSError:
        pytest.skip("Liberation Sans not installed (make system-packages)")
    label, number = "Georgia", "12,345"
    w, h = int(font.getlength(f"{label}   {number}")) + 60, 2 * size + 8
    probe = Image.new("L", (w, h), 255)
    ImageDraw.Draw(probe).text((20, 4), label, font=font, fill=0)
    y = int(np.flatnonzero((np.asarray(probe) < 128).any(axis=1)).max()) - drop  # the hook's lowest row - drop
    im = Image.new("RGB", (w, h), "white")
    d = ImageDraw.Draw(im)
    d.rectangle((4, y, w - 4, y + width - 1), fill=(0, 0, 0))
    d.rectangle((4, 0, w - 4, 0), fill=(0, 0, 0))
    d.text((20, 4), label, font=font, fill=(0, 0, 0))
    d.text((20 + font.getlength(f"{label}   "), 4), number, font=font, fill=(0, 0, 0))
    rules = [(4.0, float(y), w - 4.0, float(y + width - 1)), (4.0, 0.0, w - 4.0, 0.0)]
    assert _read(halves, erase_rules(im, rules)) == f"{label} {number}"
