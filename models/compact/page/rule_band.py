"""Where a rule's ink lies inside its bounding box, so that erasing it spares the characters beside it.

Tesseract reports a rule line as an axis-aligned box (:mod:`models.compact.page.layout`). On a page
turned by less than the deskew threshold a long rule is slanted, and its box is far taller than the
rule: 1,600 px at 0.3 degrees spans 8 px, which on a tightly ruled table holds the descenders and
commas of the row above. Painting the whole box paper erased them (``27,419`` read ``27.419``,
``Operating`` read ``Oneratina`` on generated ruled tables). :func:`rule_band` fits the rule's centre
line through the columns the rule crosses alone (a robust least-squares line, refitted without the
columns a stroke touches) and returns the slanted band of the rule's own thickness to paint instead.

The band is still grown by the rule's anti-aliased edge, and on a tight row a descender reaches into
that edge (``Georgia`` read ``Georaia``, ``Wages`` read ``Waqes`` on generated tables with rows 1.35
text heights apart: the bowl of the ``g`` ends 1-2 px above the rule). :func:`crossing_strokes` finds
the painted pixels that are a stroke's, not the rule's: ink outside the rule's own band joined to ink
beyond the painted area, so that the caller paints only the rest.
"""

from __future__ import annotations

import cv2
import numpy as np

Box = tuple[float, float, float, float]

#: A box at most this many pixels thick (across the rule) is painted whole: no slant worth fitting.
THIN_PX = 4.0
#: Gray level (0-255) under which a pixel is ink.
INK_LEVEL = 160
#: Columns sampled along the rule (at most); a fit needs a quarter of them crossed by the rule alone.
SAMPLES = 160
#: Pixels from the fitted line beyond which a column's centre is an outlier (a stroke touching the rule).
OUTLIER_PX = 1.5
#: Pixels a stroke's ink is followed into the painted edge of a rule from the ink beyond it (the edge
#: is ``pad_px`` = 1.5 px of :func:`models.compact.page.layout.erase_rules`, rounded out, plus one).
REACH_PX = 3


def rule_band(gray: np.ndarray, box: Box, pad_px: float) -> list[tuple[float, float]] | None:
    """The polygon (4 page-pixel (x, y) points) covering the rule's ink in ``box``, grown by ``pad_px``.

    ``gray``: the page, uint8 (H, W). Horizontal rules only (a box wider than tall). None when the box
    is thin (paint it whole), vertical, lies off the page, or no straight rule is found in it (the
    caller then paints the whole box, as before).
    """
    h_img, w_img = gray.shape
    x0, y0 = max(0, int(np.floor(box[0]))), max(0, int(np.floor(box[1])))
    x1, y1 = min(w_img - 1, int(np.ceil(box[2]))), min(h_img - 1, int(np.ceil(box[3])))
    if x1 <= x0 or y1 <= y0:
        return None
    ink = gray[y0:y1 + 1, x0:x1 + 1] < INK_LEVEL
    across, along = ink.shape
    if along < across or across <= THIN_PX:
        return None  # vertical rules keep their box (no descender below them; measured worse fitted)
    fit = _centre_line(ink)
    if fit is None:
        return None
    a, b, thick = fit
    half = thick / 2.0 + pad_px
    ends = [(-pad_px, a - b * pad_px), (along - 1 + pad_px, a + b * (along - 1 + pad_px))]
    pts = [(s, c - half) for s, c in ends] + [(s, c + half) for s, c in reversed(ends)]
    return [(x0 + s, y0 + c) for s, c in pts]


def _centre_line(ink: np.ndarray) -> tuple[float, float, float] | None:
    """(intercept, slope, thickness) in pixels of the rule's centre line across ``ink`` (bool,
    (across, along): rows x columns); None when fewer than a quarter of the sampled columns hold one run of ink.
    """
    across, along = ink.shape
    cols = np.unique(np.linspace(0, along - 1, min(SAMPLES, along)).astype(int))
    xs, ys, ts = [], [], []
    for c in cols:
        idx = np.flatnonzero(ink[:, c])
        if idx.size == 0 or (idx.size > 1 and np.any(np.diff(idx) > 1)):
            continue  # empty (a break in the rule) or two runs (a stroke beside it)
        xs.append(float(c))
        ys.append((idx[0] + idx[-1]) / 2.0)
        ts.append(float(idx[-1] - idx[0] + 1))
    if len(xs) < max(3, len(cols) // 4):
        return None
    x, y, t = np.asarray(xs), np.asarray(ys), np.asarray(ts)
    thick = float(np.median(t))
    keep = t <= thick + 1.0  # a run thicker than the rule has a stroke merged into it
    if keep.sum() < 3:
        return None
    slope, intercept = np.polyfit(x[keep], y[keep], 1)
    near = keep & (np.abs(y - (intercept + slope * x)) <= OUTLIER_PX)
    if near.sum() >= 3:
        slope, intercept = np.polyfit(x[near], y[near], 1)
    return float(intercept), float(slope), thick


def crossing_strokes(gray: np.ndarray, painted: np.ndarray, rule: np.ndarray) -> np.ndarray:
    """Pixels of ``painted`` that belong to strokes crossing into it, not to the rules: bool (H, W).

    ``gray``: the page, uint8 (H, W); ``painted``: bool (H, W), the rules' boxes or bands grown by
    their anti-aliased edge (what the caller would paint paper); ``rule``: bool (H, W), the rules'
    own boxes or bands (never kept). A pixel is kept when it is ink (under :data:`INK_LEVEL`), in
    ``painted`` but not in ``rule``, and joined (8-connected, through such pixels, at most
    :data:`REACH_PX` steps) to ink outside ``painted``: a descender or a comma that reaches the rule's
    edge from the row above, a cap that reaches it from below. The rule's own edge is not joined to
    ink outside (paper lies beyond it), so it is still painted.
    """
    ink = gray < INK_LEVEL
    free = (ink & painted & ~rule).astype(np.uint8)
    if not free.any():
        return np.zeros(gray.shape, bool)
    kept = (ink & ~painted).astype(np.uint8)
    seeds = kept.copy()
    kernel = np.ones((3, 3), np.uint8)
    for _ in range(REACH_PX):
        grown = cv2.dilate(kept, kernel) & free
        if not (grown & ~kept.astype(bool)).any():
            break
        kept |= grown
    return kept.astype(bool) & ~seeds.astype(bool)
