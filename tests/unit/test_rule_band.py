"""Erasing a slanted rule spares the strokes beside it (models.compact.page.rule_band, layout.erase_rules).

A long horizontal rule slanted by a fraction of a degree has a bounding box several pixels taller
than the rule; painting the whole box erased the descenders and commas that reach down to it on a
tightly ruled table (generated table seed 1007: 82 of 172 cells lost, ``27,419`` read ``27.419``).
"""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw

from models.compact.page.layout import erase_rules
from models.compact.page.rule_band import rule_band

W, H = 1600, 60


def _page(slope_px: float, seed: int) -> tuple[Image.Image, tuple[float, float, float, float], list[tuple[int, int]]]:
    """A white page with a 2-px rule from (20, 30) falling ``slope_px`` pixels over its length, and
    short vertical strokes (descenders) that end 2 px above the rule; returns the page, the rule's
    bounding box and the strokes' bottom points."""
    rng = np.random.default_rng(seed)
    im = Image.new("RGB", (W, H), "white")
    d = ImageDraw.Draw(im)
    x0, x1, y0 = 20, W - 20, 30.0
    d.line([(x0, y0), (x1, y0 + slope_px)], fill=(0, 0, 0), width=2)
    strokes = []
    for x in sorted(rng.choice(np.arange(60, W - 60, 17), size=25, replace=False)):
        y_rule = y0 + slope_px * (x - x0) / (x1 - x0)
        bottom = int(y_rule - 3)
        d.line([(int(x), bottom - 12), (int(x), bottom)], fill=(0, 0, 0), width=2)
        strokes.append((int(x), bottom))
    box = (x0 - 1.0, min(y0, y0 + slope_px) - 1.0, x1 + 1.0, max(y0, y0 + slope_px) + 1.0)
    return im, box, strokes


@pytest.mark.parametrize("slope_px,seed", [(6.0, 0), (9.0, 1), (-8.0, 2)])
def test_a_slanted_rule_is_erased_and_the_strokes_beside_it_are_kept(slope_px: float, seed: int) -> None:
    im, box, strokes = _page(slope_px, seed)
    out = np.asarray(erase_rules(im, [box]).convert("L"))
    kept = sum(out[y - 6, x] < 128 for x, y in strokes)
    assert kept == len(strokes), f"{len(strokes) - kept} of {len(strokes)} strokes erased with the rule"
    x0, x1 = 20, W - 20
    on_rule = [out[int(round(30 + slope_px * (x - x0) / (x1 - x0))), x] for x in range(40, W - 40, 50)]
    assert min(on_rule) > 200, "the rule's own ink must be painted paper"


def test_the_old_box_painting_would_have_erased_the_strokes() -> None:
    """The case the band exists for: the box painted whole loses strokes (guards the test's geometry)."""
    im, box, strokes = _page(9.0, 1)
    d = ImageDraw.Draw(im)
    d.rectangle((box[0] - 1.5, box[1] - 1.5, box[2] + 1.5, box[3] + 1.5), fill=(255, 255, 255))
    out = np.asarray(im.convert("L"))
    assert sum(out[y - 1, x] < 128 for x, y in strokes) < len(strokes)


def test_thin_and_vertical_boxes_are_left_to_the_whole_box() -> None:
    gray = np.full((H, W), 255, np.uint8)
    gray[30:32, 20:W - 20] = 0
    assert rule_band(gray, (19, 29, W - 19, 32), 1.5) is None  # 3 px thick: paint the box
    gray_v = np.full((W, H), 255, np.uint8)
    assert rule_band(gray_v, (20, 20, 40, W - 20), 1.5) is None  # taller than wide


@pytest.mark.parametrize("slope_px", [0.0, 5.0])
def test_a_descender_reaching_into_a_rules_edge_keeps_its_ink(slope_px: float) -> None:
    """A tight row (issue 37, generated table seed 7 page 2: ``Georgia`` read ``Georaia``): the
    descenders end 1 px above a 2-px rule, inside its painted anti-aliased edge. Their ink there is
    kept; the rule's own ink and its edge away from the strokes are painted paper."""
    im = Image.new("RGB", (W, H), "white")
    d = ImageDraw.Draw(im)
    x0, x1, y0 = 20, W - 20, 30.0
    d.line([(x0, y0), (x1, y0 + slope_px)], fill=(0, 0, 0), width=2)

    def y_rule(x: float) -> float:
        return y0 + slope_px * (x - x0) / (x1 - x0)

    xs = list(range(100, W - 100, 97))
    for x in xs:  # 2-px strokes whose last row is 2 rows above the rule's centre
        d.rectangle((x, int(round(y_rule(x))) - 14, x + 1, int(round(y_rule(x))) - 2), fill=(0, 0, 0))
    gray = np.asarray(im.convert("L"))
    cols = np.arange(x0, x1)
    rows = [np.flatnonzero(gray[:, c] < 128) for c in cols[::50]]
    top, bottom = min(r.min() for r in rows) - 1.0, max(r.max() for r in rows) + 1.0
    out = np.asarray(erase_rules(im, [(x0 - 1.0, top, x1 + 1.0, bottom)]).convert("L"))
    for x in xs:
        yr = int(round(y_rule(x)))
        assert out[yr - 2, x] < 128 and out[yr - 2, x + 1] < 128, f"the descender at x={x} lost its end"
    on_rule = [out[int(round(y_rule(x))), x] for x in range(40, W - 40, 50) if all(abs(x - s) > 4 for s in xs)]
    assert min(on_rule) > 200, "the rule's own ink must be painted paper"
