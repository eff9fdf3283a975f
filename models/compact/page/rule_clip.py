"""Line boxes cut back to a table's vertical rule they reach just past (issue 37, grid tables).

The detector's box of a cell's text sometimes reaches a few pixels past the cell's vertical rule
into the next cell. Once the rule is erased (:func:`models.compact.page.layout.erase_rules`, painted
with the page's paper colour), the crop ends in a sliver of the next cell's paper: a column band's
or a shaded row's colour, a step from the erased rule's white. The recogniser reads that step as a
bar in place of the cell's last digit (``bench/tables.py`` seed 7 page 5: ``-0.1014`` read
``-0.101│``, ``17,266`` read ``17,26│``; the bar then dropped as a rule remnant, the digit lost).
Cut two pixels shorter, the same crops read right.

:func:`clip_at_rules` cuts a box's end back to the outer edge of the painted strip of a vertical rule that crosses the
box's rows when the part of the box beyond the rule is narrower than :data:`SLIVER` of the box's
height: no character fits there, so it holds only the neighbour's paper (or the rule's own edge).
A box with text on both sides of a rule (wider than the sliver) is left whole.
"""

from __future__ import annotations

import copy

import numpy as np

from models.compact.page.boxes import LineBox
from models.compact.page.layout import RULE_PAD_PX

#: The part of a box beyond a vertical rule is cut off when narrower than this share of the box's
#: height (a digit is about 0.5 of a line box's height wide; a sliver of a third holds none).
SLIVER = 0.35
#: A rule is vertical when at least this many times as tall as wide ...
VERTICAL_ASPECT = 3.0
#: ... and crosses the box's rows when it covers at least this share of the box's height.
ROW_COVER = 0.8
#: ... and is a rule, not a frame: at most this share of the box's height wide.
THIN = 0.5

#: A cut lands this far inside the strip's outer edge: the painted strip (paper) stays in the box as the
#: margin beside the text (a minus sign right beside a rule was dropped from a crop starting at it).
EDGE_KEEP = 0.5

Box = tuple[float, float, float, float]


def _clipped(box: Box, rules: list[Box]) -> Box:
    """``box`` (x0, y0, x1, y1, page pixels) with each end cut back to a vertical rule of ``rules``
    it reaches just past (module docstring); ``box`` itself when none.
    """
    x0, y0, x1, y1 = box
    h = y1 - y0
    if h <= 0:
        return box
    for rx0, ry0, rx1, ry1 in rules:
        if ry1 - ry0 < VERTICAL_ASPECT * max(1.0, rx1 - rx0) or rx1 - rx0 > THIN * h:
            continue
        if min(y1, ry1) - max(y0, ry0) < ROW_COVER * h:
            continue
        left, right = rx0 - RULE_PAD_PX, rx1 + RULE_PAD_PX  # the painted strip (erase_rules)
        to_right, to_left = right - EDGE_KEEP, left + EDGE_KEEP  # a cut keeps the strip (paper beside the text)
        if left <= x0 or right >= x1:  # a rule past either end cuts nothing; one inside is judged below
            if x0 < left < x1 <= right + SLIVER * h:  # reaching into the rule from the left
                x1 = min(x1, to_right)
            elif left - SLIVER * h <= x0 < right < x1:  # reaching into it from the right
                x0 = max(x0, to_left)
            continue
        if x1 - right < SLIVER * h and right - x0 > SLIVER * h:  # a sliver beyond it on the right
            x1 = to_right
        elif left - x0 < SLIVER * h and x1 - left > SLIVER * h:  # a sliver beyond it on the left
            x0 = to_left
    return (x0, y0, x1, y1)


def clip_at_rules(lines: list[LineBox], rules: list[Box]) -> list[LineBox]:
    """``lines`` with each box that reaches just past a vertical rule of ``rules`` (page pixels, the
    boxes painted out of the page) cut back to the outer edge of the rule's painted strip (module docstring); a cut
    line is a copy with ``box`` and ``quad`` (float32 [4, 2], its x clamped to the new box) cut, the
    others are returned as given. Same length and order as ``lines``.
    """
    vertical = [r for r in rules if r[3] - r[1] >= VERTICAL_ASPECT * max(1.0, r[2] - r[0])]
    if not vertical:
        return lines
    out = []
    for ln in lines:
        box = _clipped(ln.box, vertical)
        if box == ln.box or box[2] - box[0] < 1:
            out.append(ln)
            continue
        cut = copy.copy(ln)
        cut.box = box
        quad = np.array(ln.quad, dtype=np.float32, copy=True)
        quad[:, 0] = np.clip(quad[:, 0], box[0], box[2])
        cut.quad = quad
        out.append(cut)
    return out
