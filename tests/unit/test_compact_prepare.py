"""The compact encoder's page / line preparation: polarity, faint ink, tight crops, display type."""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw, ImageOps

from models.compact.page import large_print, prepare
from models.compact.page.boxes import LineBox


def _text(fg: int, bg: int, size: tuple[int, int] = (400, 60), font_size: int = 30) -> Image.Image:
    img = Image.new("L", size, bg)
    ImageDraw.Draw(img).text((10, 10), "Sample text", fill=fg, font_size=font_size)
    return img.convert("RGB")


def test_positive_inverts_dark_pages_only():
    dark = Image.new("RGB", (300, 200), (20, 20, 20))
    ImageDraw.Draw(dark).text((20, 80), "white text", fill="white", font_size=30)
    assert prepare.paper_level(prepare.positive(dark)) > 200
    light = _text(0, 250)
    assert prepare.positive(light) is light
    # a large dark photo on a page with white margins does not turn the page
    photo = Image.new("RGB", (300, 400), "white")
    ImageDraw.Draw(photo).rectangle((20, 20, 280, 380), fill=(10, 10, 10))
    assert prepare.positive(photo) is photo


def test_dark_on_light_and_ink_contrast():
    inverted = _text(255, 0)
    fixed = np.asarray(prepare.dark_on_light(inverted).convert("L"))
    assert np.median(fixed) > 200  # paper is light now
    normal = _text(0, 255)
    assert prepare.dark_on_light(normal) is normal
    assert prepare.ink_contrast(normal) > 200 and prepare.ink_contrast(inverted) > 200
    assert prepare.ink_contrast(_text(120, 255)) >= prepare.MIN_INK_CONTRAST  # light gray print is print
    for bleed in (225, 242):  # 88 % and 95 % white, mirrored: not print
        assert prepare.ink_contrast(ImageOps.mirror(_text(bleed, 255))) < prepare.MIN_INK_CONTRAST
    crops = {"print": _text(0, 255), "bleed": _text(235, 255)}
    assert prepare.inked_lines(["print", "bleed"], crops.__getitem__) == ["print"]
    # a faded thermal receipt: every line at ~45 levels is print; beside black print it would not be
    faded = {"a": _text(195, 240), "b": _text(190, 238), "bleed": _text(225, 255)}
    assert prepare.ink_contrast(faded["a"]) < prepare.MIN_INK_CONTRAST
    assert prepare.inked_lines(["a", "b", "bleed"], faded.__getitem__) == ["a", "b"]
    assert prepare.inked_lines(["print", "a"], {**crops, **faded}.__getitem__) == ["print"]


def test_tighten_trims_display_type_and_keeps_body_text():
    big = Image.new("RGB", (1600, 500), "white")
    ImageDraw.Draw(big).rectangle((300, 150, 900, 350), fill="black")  # ink 200 px tall
    crop, box = prepare.tighten(big, (100.0, 1000.0, 1700.0, 1500.0))
    assert box == (100.0 + 250, 1000.0 + 100, 100.0 + 951, 1000.0 + 401)
    assert crop.size == (701, 301)
    small = _text(0, 255)
    assert prepare.tighten(small, (0.0, 0.0, 400.0, 60.0)) == (small, (0.0, 0.0, 400.0, 60.0))
    assert prepare.tighten(big, (0.0, 0.0, 800.0, 250.0))[0] is big  # crop is not the box's: left alone


def _line(x0: float, y0: float, x1: float, y1: float) -> LineBox:
    q = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], dtype=np.float32)
    return LineBox(q, (x0, y0, x1, y1), 0.9)


def test_large_lines_replace_their_pieces_but_not_paragraphs():
    rgb = np.full((2200, 1700, 3), 255, dtype=np.uint8)
    f = large_print.COARSE_LONG_SIDE / 2200

    def coarse(boxes):  # what the detector finds on the shrunk page (boxes in its pixels)
        return lambda small: [_line(*(v * f for v in b)) for b in boxes]

    title = (100, 100, 1500, 900)
    pieces = [_line(120, 150, 600, 880), _line(700, 140, 1450, 890)]  # one box per word
    body = [_line(100, 1000 + 40 * i, 1500, 1030 + 40 * i) for i in range(5)]
    out = large_print.with_large_lines(rgb, pieces + body, coarse([title]))
    assert [ln.box for ln in out[:5]] == [b.box for b in body]
    assert len(out) == 6 and np.allclose(out[5].box, title, atol=1)
    # a coarse box over body text lines is a paragraph seen from afar: dropped
    para = (100, 1000, 1500, 1200)
    assert large_print.with_large_lines(rgb, body, coarse([para])) == body
    # small pages have no coarse pass
    assert large_print.coarse_lines(rgb[:600, :500], coarse([title])) == []


def test_gray_percentiles_are_numpys():
    """The histogram percentiles equal np.percentile (linear interpolation) on uint8 arrays of any
    shape and spread: flat, two-level, random; and refuse what they cannot measure."""
    import numpy as np
    import pytest

    from models.compact.line.image import gray_percentiles

    rng = np.random.default_rng(0)
    qs = (0.0, 1.0, 2.0, 5.0, 50.0, 90.0, 95.0, 98.0, 100.0)
    arrays = [np.full((3, 7), 200, np.uint8), np.array([[0, 255]], np.uint8),
              np.where(rng.random((32, 300)) < 0.08, 20, 235).astype(np.uint8),
              rng.integers(0, 256, (48, 1001)).astype(np.uint8), np.array([7], np.uint8)]
    for a in arrays:
        np.testing.assert_allclose(gray_percentiles(a, qs), np.percentile(a, qs), atol=1e-9)
    for bad in (np.zeros((0, 4), np.uint8), np.zeros((2, 2), np.float32)):
        with pytest.raises(ValueError):
            gray_percentiles(bad, (50.0,))
