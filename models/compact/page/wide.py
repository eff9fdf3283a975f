"""Line detection on a very wide, short page (a banner, a panorama scan, a strip of a long form).

The detector fits a page's long side into ``det_long_side`` pixels (:mod:`models.compact.page.detect`).
A tall page is detected in horizontal bands for that reason; a wide one (width > 2 x height) was not,
so a 60,000 x 800 px page was shrunk 37 x, to 1,600 x 21 px, and its 120 px print to 3 px: nothing
was found and the page came back empty. Here such a page is detected in overlapping vertical strips
of ``max(det_long_side, height)`` pixels (each strip then keeps its print at the page's own scale, as
a normal page of that height would), and the pieces of one line that two strips found (a line
crossing a strip's edge, or lying in the overlap) are joined into one line.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from models.compact.page.boxes import LineBox

#: fraction of the shorter of two pieces' heights their rows must share to be one line's pieces
SAME_ROW = 0.5


def strip_starts(width: int, strip: int, overlap: int) -> list[int]:
    """Left edges (pixels) of strips ``strip`` px wide, overlapping by ``overlap`` px, covering
    ``width`` px (the last one ends at the right edge). ``strip`` >= ``width`` -> ``[0]``.
    """
    if strip >= width:
        return [0]
    step = max(1, strip - overlap)
    return sorted(set(list(range(0, width - strip, step)) + [width - strip]))


def _one_line(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    """Whether boxes ``a`` and ``b`` (x0, y0, x1, y1) are pieces of one line: their rows share at
    least :data:`SAME_ROW` of the shorter one's height and their x ranges overlap or touch.
    """
    shared = min(a[3], b[3]) - max(a[1], b[1])
    if shared < SAME_ROW * min(a[3] - a[1], b[3] - b[1]):
        return False
    return a[0] <= b[2] and b[0] <= a[2]


def join_pieces(pieces: list[LineBox]) -> list[LineBox]:
    """Lines from ``pieces`` (page pixels): the pieces of one line (:func:`_one_line`, transitively)
    become one axis-aligned line over their union with the highest score of them; a piece that
    overlaps no other is kept as it is (its own quad).
    """
    groups: list[list[LineBox]] = []
    for ln in sorted(pieces, key=lambda p: p.box[0]):
        into = [g for g in groups if any(_one_line(ln.box, o.box) for o in g)]
        merged = [ln] + [p for g in into for p in g]
        groups = [g for g in groups if all(g is not i for i in into)] + [merged]
    out = []
    for g in groups:
        if len(g) == 1:
            out.append(g[0])
            continue
        x0, y0 = min(p.box[0] for p in g), min(p.box[1] for p in g)
        x1, y1 = max(p.box[2] for p in g), max(p.box[3] for p in g)
        quad = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], dtype=np.float32)
        out.append(LineBox(quad, (x0, y0, x1, y1), max(p.score for p in g)))
    out.sort(key=lambda p: (p.box[1], p.box[0]))
    return out


def detect_in_strips(rgb: np.ndarray, detect: Callable[[np.ndarray], list[LineBox]],
                     det_long_side: int) -> list[LineBox]:
    """Lines of a wide page ``rgb`` [H, W, 3] uint8 (W > 2 H), found by ``detect`` (one detector pass on
    an image, boxes in its pixels) on strips of ``max(det_long_side, H)`` px overlapping by
    ``max(256, strip / 5)`` px, moved to page pixels and joined (:func:`join_pieces`).
    """
    h, w = rgb.shape[:2]
    strip = max(det_long_side, h)
    overlap = max(256, strip // 5)
    pieces: list[LineBox] = []
    for x in strip_starts(w, strip, overlap):
        for ln in detect(rgb[:, x: x + strip]):
            q = ln.quad.copy()
            q[:, 0] += x
            x0, y0, x1, y1 = ln.box
            pieces.append(LineBox(q, (x0 + x, y0, x1 + x, y1), ln.score))
    return join_pieces(pieces)
