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
#: Rows above a rule searched for the ink of the line over it (:func:`descender_hooks`).
HOOK_LOOK_PX = 12
#: Columns on each side of a hook whose ink is compared with it (the rest of its line).
HOOK_NEAR_PX = 30
#: The strip searched for a glyph's top is this many times :data:`HOOK_LOOK_PX` tall.
HOOK_TALL = 2


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


def descender_hooks(gray: np.ndarray, erase: np.ndarray, rule: np.ndarray, boxes: list[Box]) -> np.ndarray:
    """Pixels of ``erase`` to leave as printed: a horizontal rule's pixels under a descender that
    comes down into the rule's own rows (a ``g``'s hook), bool (H, W).

    ``gray``: the page, uint8 (H, W); ``erase``: bool (H, W), what the caller would paint paper (the
    rules' bands and their edge, less :func:`crossing_strokes`); ``rule``: bool (H, W), the rules' own
    boxes or bands; ``boxes``: the rules' boxes (page pixels; those taller than wide are skipped).

    A stroke whose bottom lies inside the rule cannot be told from the rule there: painted paper, a
    ``g`` loses its hook and is read ``q`` (``Georqia``, ``Waqes`` on generated tables). Along each
    rule, a *contact* column has ink right above the painted run through the rule, and an *inside*
    column more ink in that run than the rule's median (a hook's bottom, a tail's end). A run of
    contact and inside columns (one-column gaps joined) holding a contact is a descender when

    * of the other glyphs whose bottoms are near the rule within :data:`HOOK_NEAR_PX` columns (at
      least two), fewer than half touch it: text sitting on a rule all along (a form's underline) is
      still erased;
    * its glyph is not taller than theirs by more than 1 px: a bracket's foot reaches below the
      baseline too, and a stub under it was read ``{``.

    The painted run is left in the descender's columns, grown by one column on each side: a stub of
    rule under the hook, which the recogniser reads as the closed hook.
    """
    keep = np.zeros(gray.shape, bool)
    h_img, w_img = gray.shape
    ink = gray < INK_LEVEL
    for bx0, by0, bx1, by1 in boxes:
        if bx1 - bx0 < by1 - by0:
            continue
        x0, x1 = max(0, int(np.floor(bx0))), min(w_img, int(np.ceil(bx1)) + 1)
        y0, y1 = max(0, int(np.floor(by0)) - HOOK_LOOK_PX), min(h_img, int(np.ceil(by1)) + 4)
        if x1 - x0 < 3 or y1 - y0 < 3:
            continue
        win, own = erase[y0:y1, x0:x1], rule[y0:y1, x0:x1]
        cols = np.arange(x1 - x0)
        has = np.asarray(own.any(axis=0))
        level = np.where(own, gray[y0:y1, x0:x1].astype(np.int16), 256)
        core = np.argmin(level, axis=0)  # per column, the rule's darkest row
        top, bottom = _run(win, core, has)  # the painted run through the rule
        painted = has & win[core, cols]
        top = np.where(painted & (top > 0), top, -1)  # -1: no run, or a vertical rule's band (up to the top)
        win_ink = ink[y0:y1, x0:x1]
        rows = np.arange(y1 - y0)[:, None]
        in_run = (rows >= top) & (rows < bottom) & (top > 0)
        dark = (win_ink & in_run).sum(axis=0)  # ink pixels in the painted run
        above = win_ink & (rows < top) & (top > 0)
        low = np.where(above.any(axis=0), y1 - y0 - 1 - np.argmax(above[::-1], axis=0), -1)
        gap = np.where(low >= 0, top - 1 - low, -1)  # paper rows between the run and the ink above; -1: none
        contact = gap == 0
        plain = (top > 0) & ~contact
        if not contact.any() or plain.sum() < 3:
            continue
        # a stroke inside the run (the bottom of a hook, the tail's end) darkens more of it than the rule
        inside = (top > 0) & (dark > np.median(dark[plain]))
        glyph = None
        for a, b in _groups(contact | inside, 1):
            if not contact[a:b].any():
                continue  # a thicker stretch with no stroke coming down into it: the rule's own unevenness
            if glyph is None:
                glyph, tops = _glyphs(ink, erase, x0, x1, by0)
            near = np.r_[max(0, a - HOOK_NEAR_PX):a, b:min(cols.size, b + HOOK_NEAR_PX)]
            others = [n for n in np.unique(glyph[near]) if n >= 0 and n not in glyph[a:b]]
            touching = [gap[glyph == n].min() == 0 for n in others]
            if len(others) < 2 or np.mean(touching) >= 0.5:
                continue  # no line to compare with, or the line sits on the rule
            mine, theirs = tops[a:b][glyph[a:b] >= 0], tops[near][glyph[near] >= 0]
            if not mine.size or mine.min() < np.median(theirs) - 1:
                continue  # a glyph taller than its line (a bracket's foot)
            for c in range(max(0, a - 1), min(cols.size, b + 1)):
                if top[c] > 0:
                    keep[y0 + top[c]:y0 + bottom[c], x0 + c] = True
    return keep & erase


def _glyphs(ink: np.ndarray, erase: np.ndarray, x0: int, x1: int, y_rule: float) -> tuple[np.ndarray, np.ndarray]:
    """Per column of [x0, x1): the glyph that comes lowest down towards the rule at ``y_rule`` (an
    8-connected ink component outside ``erase`` whose bottom is within :data:`HOOK_LOOK_PX` rows of
    the rule; its label, -1 for none) and its top row (page pixels). Components reaching the top of
    the strip searched (:data:`HOOK_TALL` x :data:`HOOK_LOOK_PX` rows: a vertical rule, display type)
    are none.
    """
    y1 = int(np.floor(y_rule))
    y0 = max(0, y1 - HOOK_TALL * HOOK_LOOK_PX)
    label, top = np.full(x1 - x0, -1), np.full(x1 - x0, -1)
    strip = (ink[y0:y1, x0:x1] & ~erase[y0:y1, x0:x1]).astype(np.uint8)
    if y1 - y0 < 3 or not strip.any():
        return label, top
    _, labels, stats, _ = cv2.connectedComponentsWithStats(strip, connectivity=8)
    lowest = np.where(strip > 0, np.arange(y1 - y0)[:, None], -1).max(axis=0)  # per column, its lowest ink
    for c in np.flatnonzero(lowest >= y1 - y0 - HOOK_LOOK_PX):
        n = labels[lowest[c], c]
        if stats[n, cv2.CC_STAT_TOP] > 0:
            label[c], top[c] = n, y0 + stats[n, cv2.CC_STAT_TOP]
    return label, top


def _run(mask: np.ndarray, start: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per column of ``mask`` (bool, rows x columns), [top, end) rows of its run of True through row
    ``start`` (int per column); (start, start) where ``valid`` is False or ``mask`` is False there.
    """
    rows, n = mask.shape
    cols = np.arange(n)
    on = valid & mask[start, cols]
    top, end = start.copy(), np.where(on, start + 1, start)
    going = on.copy()
    for k in range(1, rows):
        r = start - k
        going &= (r >= 0) & mask[np.clip(r, 0, rows - 1), cols]
        top = np.where(going, r, top)
    going = on.copy()
    for k in range(1, rows):
        r = start + k
        going &= (r < rows) & mask[np.clip(r, 0, rows - 1), cols]
        end = np.where(going, r + 1, end)
    return top, end


def _groups(flags: np.ndarray, gap: int) -> list[tuple[int, int]]:
    """[start, end) runs of True in ``flags`` (bool, 1-D), runs at most ``gap`` False apart joined."""
    idx = np.flatnonzero(flags)
    if idx.size == 0:
        return []
    cut = np.flatnonzero(np.diff(idx) > gap + 1)
    starts = np.r_[idx[0], idx[cut + 1]]
    ends = np.r_[idx[cut], idx[-1]] + 1
    return list(zip(starts.tolist(), ends.tolist(), strict=True))
