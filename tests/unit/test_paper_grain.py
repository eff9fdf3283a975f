"""Sensor grain on a page's paper (models/compact/line/grain.py) as the doubt routing's sign of a scan of
black print: a scanned form at 175 dpi (contrast 255, like a rendered page) read with doubt goes to the
PP tower; a rendered page, anti-aliased or bilevel, has no grain and keeps its routes."""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw

from models.compact.line.doubt import SCAN_CONTRAST_BELOW, SCAN_DOUBT_ABOVE, doubt_routes
from models.compact.line.grain import GRAIN_ABOVE, paper_grain
from models.compact.line.towers import _bars


def _rendered(text: str) -> Image.Image:
    img = Image.new("L", (900, 60), 255)
    ImageDraw.Draw(img).text((12, 10), text, fill=0, font_size=32)
    return img


def _scanned(img: Image.Image, sigma: float, seed: int) -> Image.Image:
    a = np.asarray(img, dtype=np.float32) + np.random.default_rng(seed).normal(0, sigma, (img.height, img.width))
    return Image.fromarray(np.clip(a, 0, 255).round().astype(np.uint8))


TEXTS = ["Account no.: SN-5569419", "Date of birth: 02/03/1954", "Amount: $51,562.69", "Signature date:"]


def _page(lines: list[Image.Image]) -> Image.Image:
    page = Image.new("L", (900, 80 * len(lines)), 255)
    for i, c in enumerate(lines):
        page.paste(c, (0, 80 * i))
    return page


def test_rendered_and_bilevel_pages_have_no_grain_and_a_scan_has():
    rendered = _page([_rendered(t) for t in TEXTS])
    bilevel = rendered.point(lambda v: 0 if v < 140 else 255)
    shaded = rendered.point(lambda v: min(v, 230))  # a shaded band: flat paper of another level
    assert paper_grain(rendered) < 0.01 and paper_grain(bilevel) < 0.01 and paper_grain(shaded) < 0.01
    # the mildest scanner noise of training/compact/scan_degrade.rescan (sigma 1-8), clipped at white
    assert paper_grain(_scanned(rendered, 1.5, 0)) > GRAIN_ABOVE
    assert paper_grain(Image.new("L", (3, 3), 255)) == 0.0


def test_a_grainy_page_of_black_print_read_with_doubt_goes_to_the_pp_tower():
    """Black print (contrast 255: the gray-print sign is silent) on grainy paper read at a median doubt
    of 0.1 goes to the PP tower whole; without grain, or read without doubt, it keeps the script's routes;
    the grain is measured only when the doubt calls for it."""
    script = [False] * 5
    kw = {"faint_below": 120.0, "scan_below": SCAN_CONTRAST_BELOW, "scan_doubt_above": SCAN_DOUBT_ABOVE,
          "contrasts": [255.0] * 5, "grain_above": GRAIN_ABOVE}
    assert doubt_routes(script, [0.1] * 5, 0.2, 0.2, grain=0.8, **kw) == [True] * 5
    assert doubt_routes(script, [0.1] * 5, 0.2, 0.2, grain=lambda: 0.8, **kw) == [True] * 5
    assert doubt_routes(script, [0.1] * 5, 0.2, 0.2, grain=0.0, **kw) == script

    def never() -> float:
        raise AssertionError("grain measured for a page read without doubt")

    assert doubt_routes(script, [0.01] * 5, 0.2, 0.2, grain=never, **kw) == script


def test_the_served_bars_carry_the_grain_bar_by_default():
    assert _bars({"read_head": {"doubtful_above": 0.2}})[6] == GRAIN_ABOVE
    assert _bars({"read_head": {"scan_grain_above": None}})[6] == float("inf")
