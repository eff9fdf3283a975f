"""The bottom of a descender's hook inside a horizontal rule: the rule is left under it.

On a tightly ruled table the bottom of a ``g`` lies in the rule's own rows: a rule 1 px thick under a
hook 2 px thick. Painted paper (:func:`models.compact.page.layout.erase_rules`), the hook keeps one
row and the ``g`` is read ``q`` (``Waqes``, ``Minina``, ``Wyominq``, ``Georqia`` on generated tables).
:func:`descender_hooks` finds such hooks and leaves the rule's painted run under them: a stub of rule
that closes the hook.

Only the *bottom of a hook* gets a stub: ink lying flat on the rule over a width of at least
:data:`FLAT_SHARE` of the line's glyph height. The stems of ``p`` / ``q`` / ``y``, a comma's tail and
a bracket's foot come down into a rule just as far, but narrow: the recogniser reads them right once
the rule is erased, and a stub under them was read as part of the glyph (``5,881`` read ``5.881``,
``(66,471)`` read ``(6,471)``; a stub under a ``y`` touching the ``l`` of the row below read
``Heaīth``).
"""

from __future__ import annotations

import cv2
import numpy as np

from models.compact.line.runs import true_runs

Box = tuple[float, float, float, float]

#: Gray level (0-255) under which a pixel is ink (as :mod:`models.compact.page.rule_band`).
INK_LEVEL = 160
#: Gray level under which a pixel is a stroke's core: a rule's anti-aliased edge (a slanted rule's
#: staircase) is lighter, so it does not read as a stroke coming down into the rule.
DARK_LEVEL = 100
#: Rows above and below a rule's box searched for its painted edge and the strokes merged into it.
EDGE_ROWS = 4
#: Rows above a rule searched for the glyphs of the line over it.
LOOK_PX = 24
#: A glyph whose bottom is within this many rows of the rule belongs to the line over it.
NEAR_ROWS = 12
#: Columns on each side of a hook whose glyphs are the rest of its line.
NEAR_PX = 30
#: A hook's bottom lies on the rule over at least this share of the line's glyph height (px / px).
FLAT_SHARE = 0.35
#: Its glyph rises above the line's baseline by at least this share of the line's glyph height (a
#: letter's body, not a comma or an underscore).
BODY_SHARE = 0.5
#: ... and reaches below that baseline by at least this many pixels (it descends).
DESCENT_PX = 2


def descender_hooks(gray: np.ndarray, erase: np.ndarray, rule: np.ndarray, boxes: list[Box]) -> np.ndarray:
    """Pixels of ``erase`` to leave as printed: a horizontal rule's run under the bottom of a
    descender's hook, bool (H, W).

    ``gray``: the page, uint8 (H, W); ``erase``: bool (H, W), what the caller would paint paper (the
    rules' bands and their edge, less the strokes crossing into the edge); ``rule``: bool (H, W), the
    rules' own boxes or bands; ``boxes``: the rules' boxes (page pixels; those taller than wide are
    skipped).

    Along each rule, a *contact* column has dark ink (:data:`DARK_LEVEL`) merged into the rule's from
    above, higher than the rule's own top there (the median over :data:`NEAR_PX` columns each side).
    Runs of contact columns (one-column gaps joined; runs under one glyph all along joined too: the
    two arms of a hook whose bottom lies wholly inside the rule) are a hook's bottom when

    * it is at least :data:`FLAT_SHARE` of the line's glyph height wide (the median height of the
      other glyphs within :data:`NEAR_PX` columns whose bottoms lie within :data:`NEAR_ROWS` rows of
      the rule, at least two of them);
    * fewer than half of those other glyphs touch the rule (text sitting on a rule all along, a
      form's underline, is still erased);
    * its glyph descends at least :data:`DESCENT_PX` below their median bottom (the baseline), rises
      at least :data:`BODY_SHARE` of their height above it, and is not taller than them by more than
      1 px (a bracket);
    * no ink touches the run from below in its columns (a glyph of the row under the rule: the stub
      would join the two).

    The painted run is left in the hook's columns, grown by one column on each side.
    """
    keep = np.zeros(gray.shape, bool)
    h_img, w_img = gray.shape
    for bx0, by0, bx1, by1 in boxes:
        if bx1 - bx0 < by1 - by0:
            continue
        x0, x1 = max(0, int(np.floor(bx0))), min(w_img, int(np.ceil(bx1)) + 1)
        r0, y1 = max(0, int(np.floor(by0))), min(h_img, int(np.ceil(by1)) + EDGE_ROWS)
        s0 = max(0, r0 - EDGE_ROWS)  # the rule's rows and its painted edge: where a stroke merges into it
        if x1 - x0 < 3 or r0 - s0 < EDGE_ROWS:
            continue
        top, bottom, ink_top = _runs(erase[s0:y1, x0:x1], rule[s0:y1, x0:x1], gray[s0:y1, x0:x1])
        ok = top > 0
        contact = ok & (ink_top < _local_median(ink_top, ok))  # a stroke merged into the rule from above
        runs = _joined(contact)
        if not runs or max(b - a for a, b in runs) < 2:
            continue
        y0 = max(0, r0 - LOOK_PX)
        cols = np.arange(x1 - x0)
        under = gray[s0 + np.minimum(bottom, y1 - s0 - 1), x0 + cols] < INK_LEVEL
        below = ok & (bottom < y1 - s0) & under  # ink right under the painted run
        glyphs = _Glyphs((gray[y0:y1, x0:x1] < INK_LEVEL) & ~erase[y0:y1, x0:x1], np.where(ok, top + s0 - y0, 0))
        stub = np.zeros(x1 - x0, bool)
        for a, b in glyphs.hooks(runs):
            if not below[max(0, a - 1):b + 1].any():
                stub[max(0, a - 1):b + 1] = True
        if stub.any():
            r = np.arange(y1 - s0)[:, None]
            keep[s0:y1, x0:x1] |= stub & ok & (r >= top) & (r < bottom)
    return keep & erase


def _runs(erase: np.ndarray, own: np.ndarray, gray: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per column of a window (rows x columns): [top, bottom) rows of the painted run (``erase``)
    through the rule's darkest row inside ``own``, top 0 where there is none or it reaches the
    window's top (a vertical rule's band); and the first row of the run of dark ink
    (:data:`DARK_LEVEL`) through that row (the rule's ink with any stroke merged into it).
    """
    rows, n = erase.shape
    cols = np.arange(n)
    core = np.argmin(np.where(own, gray.astype(np.int16), 256), axis=0)
    on = own.any(axis=0) & erase[core, cols]
    r = np.arange(rows)[:, None]
    out = []
    for mask in (erase, gray < DARK_LEVEL):
        gap_above = ~mask & (r < core)  # rows above the core outside the run
        out.append(np.where(gap_above.any(axis=0), rows - np.argmax(gap_above[::-1], axis=0), 0))
    gap_below = ~erase & (r > core)
    bottom = np.where(gap_below.any(axis=0), np.argmax(gap_below, axis=0), rows)
    top, ink_top = out
    return np.where(on, top, 0), np.where(on, bottom, 0), ink_top


def _local_median(values: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Per column, the median of ``values`` (1-D, non-negative int rows) over the ``valid`` columns
    within :data:`NEAR_PX` of it (the rule's own edge there, strokes merged into it being few):
    float, NaN where none is valid. Counted by value (one cumulative sum per row value), not sorted.
    """
    n = values.size
    if not valid.any():
        return np.full(n, np.nan)
    levels = np.arange(int(values[valid].max()) + 1)[:, None]
    at_most = np.cumsum((values[None, :] <= levels) & valid[None, :], axis=1)  # (levels, n)
    at_most = np.concatenate([np.zeros((levels.size, 1), at_most.dtype), at_most], axis=1)
    c = np.arange(n)
    counts = at_most[:, np.minimum(c + NEAR_PX + 1, n)] - at_most[:, np.maximum(c - NEAR_PX, 0)]
    total = counts[-1]
    med = np.argmax(2 * counts > total, axis=0)  # the smallest value more than half are at most
    return np.where(total > 0, med, np.nan)


def _joined(flags: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) runs of True in ``flags`` (bool, 1-D), runs one False apart joined."""
    runs = true_runs(flags)
    out: list[tuple[int, int]] = []
    for a, b in runs:
        if out and a - out[-1][1] <= 1:
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


class _Glyphs:
    """The 8-connected ink components of a window's rows above the rule (``ink``: bool, rows x
    columns, the window's ink outside the painted area; ``top``: per column, the painted run's first
    row, 0 for none): per column, the component that comes lowest towards the rule, with its top and
    bottom rows; components reaching the window's top (a vertical rule, display type) are none.
    """

    def __init__(self, ink: np.ndarray, top: np.ndarray) -> None:
        rows = int(top[top > 0].max()) if (top > 0).any() else 0
        r = np.arange(rows)[:, None]
        strip = (ink[:rows] & (r < top[None, :])).astype(np.uint8)  # above the rule in each column
        n = strip.shape[1]
        self.label, self.top, self.bottom = np.full(n, -1), np.zeros(n, int), np.zeros(n, int)
        self.rule_top = top
        if rows < 3 or not strip.any():
            return
        _, labels, stats, _ = cv2.connectedComponentsWithStats(strip, connectivity=8)
        lowest = np.where(strip > 0, r, -1).max(axis=0)  # per column, its lowest ink row
        cols = np.flatnonzero(lowest >= 0)
        lab = labels[lowest[cols], cols]
        ctop = stats[lab, cv2.CC_STAT_TOP]
        real = ctop > 0
        cols, lab = cols[real], lab[real]
        self.label[cols] = lab
        self.top[cols] = stats[lab, cv2.CC_STAT_TOP]
        self.bottom[cols] = stats[lab, cv2.CC_STAT_TOP] + stats[lab, cv2.CC_STAT_HEIGHT] - 1

    def hooks(self, runs: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """The [start, end) column runs, among contact ``runs`` (increasing), that are the bottom of a
        descender's hook; neighbouring runs under one glyph (the two arms of a hook whose bottom lies
        inside the rule, paper between them above it) are taken together.
        """
        merged: list[tuple[int, int]] = []
        for a, b in runs:
            if merged and self._one_glyph(merged[-1][0], b):
                merged[-1] = (merged[-1][0], b)
            else:
                merged.append((a, b))
        return [(a, b) for a, b in merged if b - a >= 3 and self.is_hook(a, b)]

    def _one_glyph(self, a: int, b: int) -> bool:
        """Whether columns [a, b) lie under one glyph all along."""
        lab = self.label[a:b]
        return bool(lab[0] >= 0 and (lab == lab[0]).all())

    def is_hook(self, a: int, b: int) -> bool:
        """Whether contact columns [a, b) are the bottom of a descender's hook (:func:`descender_hooks`)."""
        mine = self.label[a:b][self.label[a:b] >= 0]
        if not mine.size:
            return False
        g = np.bincount(mine).argmax()
        n = self.label.size
        near = np.r_[max(0, a - NEAR_PX):a, b:min(n, b + NEAR_PX)]
        near = near[(self.label[near] >= 0) & (self.label[near] != g)]
        rule_top = self.rule_top[near]
        near = near[(rule_top > 0) & (rule_top - 1 - self.bottom[near] <= NEAR_ROWS)]
        if not near.size:
            return False
        others, first = np.unique(self.label[near], return_index=True)
        if others.size < 2:
            return False
        at = near[first]
        tops, bottoms = self.top[at], self.bottom[at]
        on = (self.rule_top > 0) & (self.bottom >= self.rule_top - 1)  # columns whose glyph touches the rule
        touching = np.isin(others, self.label[on])
        if touching.mean() >= 0.5:
            return False  # the line sits on the rule
        height = float(np.median(bottoms - tops + 1))
        base = float(np.median(bottoms))
        gcol = a + int(np.flatnonzero(self.label[a:b] == g)[0])
        g_top, g_bottom = self.top[gcol], self.bottom[gcol]
        return bool(b - a >= FLAT_SHARE * height and g_bottom >= base + DESCENT_PX
                    and g_top <= base - BODY_SHARE * height and g_top >= np.median(tops) - 1)
