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
  leaders, dashed rules are runs of them);
* on paper: around it (:data:`RING_X` / :data:`RING_Y` line heights beyond its ink) at most
  :data:`RING_DARK` of the pixels are darker than midway between the row's paper and the mark's ink
  (the straight edge of a photo or a shaded panel is a dash-shaped stroke of the ink mask too, with
  the picture beside it: 2 found on ``bench/layout_pages.py`` page 0 without this).

Each becomes a line, boxed at its row's height and padded like a detection, score of the row's
weakest box, read by its shape alone: ``shape_text`` ``-`` (a hyphen, en or em dash all give ``-``:
which one was printed is not told apart), ``shape_confidence`` the share of its box its ink fills.
The recogniser reads such a crop as garbage (``五``, ``a``, ``d``, ``E``, ``--`` on ``bench/statements.py``
seed 0 page 0), so :mod:`models.compact.encoder_half` passes the text on instead of reading it.
Nothing else changes: a page without such a mark keeps exactly its lines.
"""

from __future__ import annotations

import cv2
import numpy as np

from models.compact.page.boxes import LineBox
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
#: the ring around a dash's ink that must be paper: this many median line heights to each side, above and below
RING_X, RING_Y = 0.25, 0.35
#: the most of that ring that may be darker than midway between paper and the dash's ink
RING_DARK = 0.02
#: the text a nil dash is read as
DASH = "-"


def _rows(lines: list[LineBox], med_h: float) -> list[list[LineBox]]:
    """``lines`` of about one line height grouped by row: centres within half ``med_h`` px."""
    rows: list[list[LineBox]] = []
    for ln in sorted(lines, key=lambda o: (o.box[1] + o.box[3]) / 2):
        cy = (ln.box[1] + ln.box[3]) / 2
        if rows and cy - (rows[-1][0].box[1] + rows[-1][0].box[3]) / 2 <= med_h / 2:  # from its first: no chain
            rows[-1].append(ln)
        else:
            rows.append([ln])
    return rows


def on_paper(gray: np.ndarray, ink: np.ndarray, box: tuple[int, int, int, int], med_h: float) -> bool:
    """Whether the mark whose ink is ``ink`` (bool, the size of ``box``) at ``box`` (x0, y0, x1, y1, end
    exclusive) of the page ``gray`` uint8 [H, W] lies on paper: at most :data:`RING_DARK` of the ring
    :data:`RING_X` / :data:`RING_Y` median line heights (``med_h`` px) around it is darker than midway
    between the paper (the ring's brightest tenth) and the mark's ink (its median).
    """
    x0, y0, x1, y1 = box
    height, width = gray.shape
    gap = max(1, int(round(0.06 * med_h)))  # a blurred stroke's fringe is the mark's own
    ox0, ox1 = max(0, x0 - int(round(RING_X * med_h))), min(width, x1 + int(round(RING_X * med_h)))
    oy0, oy1 = max(0, y0 - int(round(RING_Y * med_h))), min(height, y1 + int(round(RING_Y * med_h)))
    area = gray[oy0:oy1, ox0:ox1]
    ring = np.ones(area.shape, bool)
    ring[max(0, y0 - gap - oy0):y1 + gap - oy0, max(0, x0 - gap - ox0):x1 + gap - ox0] = False
    if not ring.any() or not ink.any():
        return False
    paper = float(np.percentile(area[ring], 90))
    mid = (paper + float(np.median(gray[y0:y1, x0:x1][ink]))) / 2
    return float((area[ring] < mid).mean()) <= RING_DARK


def _dashes(ink: np.ndarray, covered: np.ndarray, med_h: float, mid: float, gray: np.ndarray,
            y0: int) -> list[tuple[int, int, int, int, float]]:
    """Dash-shaped components (x0, y0, x1, y1 in strip pixels, end exclusive, and the share of that box
    their ink fills) of the strip's ``ink`` bool [h, W] (rows ``y0``.. of the page ``gray`` uint8) that
    touch no ``covered`` pixel (bool [h, W], the boxes: a rule running under them is one component with
    its pieces between them), whose centre lies near row ``mid`` (strip rows) and that lie on paper
    (:func:`on_paper`), leaders left out.
    """
    n, labels, stats, _ = cv2.connectedComponentsWithStats(ink.astype(np.uint8), connectivity=8)
    boxed = set(np.unique(labels[covered & ink]).tolist())
    found = []
    for i, (x, y, w, h, area) in enumerate(stats[1:n], start=1):
        if i in boxed or not (NARROW * med_h <= w <= WIDE * med_h and h <= FLAT * med_h and w >= 2.5 * h):
            continue
        if area < SOLID * w * h or abs(y + h / 2 - mid) > ON_ROW * med_h:
            continue
        if not on_paper(gray, labels[y:y + h, x:x + w] == i, (int(x), int(y + y0), int(x + w), int(y + h + y0)),
                        med_h):
            continue
        found.append((int(x), int(y), int(x + w), int(y + h), min(1.0, float(area) / float(w * h))))
    return [d for d in found
            if not any(o is not d and abs((o[0] + o[2]) - (d[0] + d[2])) / 2 < LEADER_GAP * med_h
                       for o in found)]


def add_nil_dashes(rgb: np.ndarray, lines: list[LineBox]) -> list[LineBox]:
    """``lines`` (boxes in the page ``rgb`` [H, W, 3] uint8's pixels) and, after them, one line per lone
    dash on a row of them that no box covers (module docstring): a :class:`LineBox` (quad float32
    [4, 2], box, score) with ``shape_text`` :data:`DASH` and its ``shape_confidence``; ``lines`` itself
    when none is found (fewer than three lines: no rows to measure).
    """
    if len(lines) < 3:
        return lines
    heights = sorted(ln.box[3] - ln.box[1] for ln in lines)
    med_h = float(heights[len(heights) // 2])
    if med_h < 6:
        return lines
    gray = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2GRAY)
    height, width = gray.shape
    added: list[LineBox] = []
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
        for a, _, c, _, fill in _dashes(ink, covered, med_h, mid, gray, y0):
            box = (max(0.0, a - pad), float(y0), min(float(width), c + pad), float(y1))
            quad = np.array([[box[0], box[1]], [box[2], box[1]], [box[2], box[3]], [box[0], box[3]]],
                            np.float32)
            added.append(LineBox(quad, box, min(ln.score for ln in row), shape_text=DASH, shape_confidence=fill))
    return [*lines, *added] if added else lines
