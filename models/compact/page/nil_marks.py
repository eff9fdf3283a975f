"""A table's nil dash given a line of its own: the ``-`` the detector finds no box for (issue 37).

What goes wrong. Financial statements print a nil value as a lone dash (``-``, ``–``, ``—``) in its
column. PP-OCRv6's detector returns no box for it: the mark is a few pixels tall, below the text
region its segmentation map keeps (a generated statement, DejaVu Sans at 26-44 px: 0 of 8 dashes
boxed; ``bench/statements.py`` seeds 0 and 1: 22 and 20 nil cells lost). The cell then vanishes
from every output format, and the row's numbers slide left under the wrong year in a reader's eye.
:func:`models.compact.page.rowsplit.split_box` already keeps such marks inside a tall box it splits
into rows; this is the same mark beside the boxes of its row.

What it does. :func:`add_nil_dashes` looks along each row of the detector's boxes (boxes whose
centres lie within half a median line height) for ink (:func:`rowsplit.ink_mask`, the row split's own
local-background ink) whose connected component touches no box (a rule under the row runs on under
its boxes) and is dash-shaped:

* as wide as 0.12-1.6 median line heights and at most :data:`FLAT` of one tall, at least 2.5 x as
  wide as tall and filling :data:`SOLID` of its box (a stroke, not a speck of noise or a rule:
  a table rule runs further than 1.6 line heights);
* its centre within :data:`ON_ROW` line heights of the row's centre (mid x-height: where a dash
  is printed between figures), so an underline under a row is no dash;
* alone: no other such mark within :data:`LEADER_GAP` line heights on the row (dot and dash
  leaders, dashed rules are runs of them).

Each becomes a line, boxed at its row's height and padded like a detection, score of the row's
weakest box. Nothing else changes: a page without such a mark keeps exactly its lines.
"""

from __future__ import annotations

import cv2
import numpy as np

from models.compact.page.boxes import L
from models.compact.page.rowsplit import ink_mask

#: widest and narrowest dash, in median line heights (a hyphen at 26 px print in a 36 px box: 0.19; an em
#: dash about 0.8; a rule runs on)
WIDE, NARROW = 1.6, 0.12
#: tallest dash, in median line heights (a hyphen's stroke is under a tenth of one)
FLAT = 0.22
#: the least share of its bounding box a dash's ink fills (a stroke, not a curve or a speck)
SOLID = 0.6
#: farthest a dash's centre lies from its row's centre, in median line heights
ON_ROW = 0.3
#: two marks closer than this many median line heights on one row are a leader or dashed rule
LEADER_GAP = 2.0
#: paper kept around a dash's ink in its box, in median line heights (the detector's own margin)
PAD = 0.3


def _rows(lines: list[L], med_h: float) -> list[list[L]]:
    """``lines`` of about one line height grouped by row: centres within half ``med_h`` px."""
    rows: list[list[L]] = []
    for ln in sorted(lines, key=lambda o: (o.box[1] + o.box[3]) / 2):
        cy = (ln.box[1] + ln.box[3]) / 2
        if rows and cy - (rows[-1][0].box[1] + rows[-1][0].box[3]) / 2 <= med_h / 2:  # from its first: no chain
            rows[-1].append(ln)
        else:
            rows.append([ln])
    return rows


def _dashes(ink: np.ndarray, covered: np.ndarray, med_h: float, mid: float) -> list[tuple[int, int, int, int]]:
    """Dash-shaped components (x0, y0, x1, y1, strip pixels, end exclusive) of the strip's ``ink``
    bool [h, W] that touch no ``covered`` pixel (bool [h, W], the boxes: a rule running under them is
    one component with its pieces between them) and whose centre lies near row ``mid`` (strip rows),
    leaders left out.
    """
    n, labels, stats, _ = cv2.connectedComponentsWithStats(ink.astype(np.uint8), connectivity=8)
    boxed = set(np.unique(labels[covered & ink]).tolist())
    found = []
    for i, (x, y, w, h, area) in enumerate(stats[1:n], start=1):
        if i in boxed or not (NARROW * med_h <= w <= WIDE * med_h and h <= FLAT * med_h and w >= 2.5 * h):
            continue
        if area < SOLID * w * h or abs(y + h / 2 - mid) > ON_ROW * med_h:
            continue
        found.append((int(x), int(y), int(x + w), int(y + h)))
    return [d for d in found
            if not any(o is not d and abs((o[0] + o[2]) - (d[0] + d[2])) / 2 < LEADER_GAP * med_h
                       for o in found)]


def add_nil_dashes(rgb: np.ndarray, lines: list[L]) -> list[L]:
    """``lines`` (boxes in the page ``rgb`` [H, W, 3] uint8's pixels) and, after them, one line per lone
    dash on a row of them that no box covers (module docstring), built like the row split's lines:
    ``type(line)(quad float32 [4, 2], box, score)``; ``lines`` itself when none is found (fewer than
    three lines: no rows to measure).
    """
    if len(lines) < 3:
        return lines
    heights = sorted(ln.box[3] - ln.box[1] for ln in lines)
    med_h = float(heights[len(heights) // 2])
    if med_h < 6:
        return lines
    gray = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2GRAY)
    height, width = gray.shape
    added: list[L] = []
    for row in _rows([ln for ln in lines if ln.box[3] - ln.box[1] <= 1.5 * med_h], med_h):
        y0 = max(0, int(np.median([ln.box[1] for ln in row])))
        y1 = min(height, int(np.ceil(np.median([ln.box[3] for ln in row]))))
        if y1 - y0 < 4:
            continue
        ink = ink_mask(gray[y0:y1], max(2, int(med_h * 0.2)))
        covered = np.zeros_like(ink)
        for ln in lines:  # every box's ink is its own line's
            bx0, by0, bx1, by1 = ln.box
            if by1 > y0 and by0 < y1:
                covered[max(0, int(by0) - y0 - 1):max(0, int(np.ceil(by1)) - y0 + 1),
                    max(0, int(bx0) - 1):min(width, int(np.ceil(bx1)) + 1)] = True
        mid = sum((ln.box[1] + ln.box[3]) / 2 for ln in row) / len(row) - y0
        pad = PAD * med_h
        for a, _, c, _ in _dashes(ink, covered, med_h, mid):
            box = (max(0.0, a - pad), float(y0), min(float(width), c + pad), float(y1))
            quad = np.array([[box[0], box[1]], [box[2], box[1]], [box[2], box[3]], [box[0], box[3]]],
                            np.float32)
            added.append(type(row[0])(quad, box, min(ln.score for ln in row)))
    return [*lines, *added] if added else lines
