"""Boxes found on an upright page mapped back to the page as received (a page found sideways or
askew is turned before its lines are detected: :class:`models.compact.page.detect.LineDetector`).
"""

from __future__ import annotations

import math


def unrotate_box(box: tuple[float, float, float, float], rotation: float, w: int,
                  h: int) -> tuple[float, float, float, float]:
    """Map a box in the upright image back to the received page (PIL ``rotate(deg, expand=True)``
    turned the received ``w`` x ``h`` page counter-clockwise by ``rotation`` degrees: a quarter turn,
    plus the deskew angle). The box's corners are turned back about the images' centres; the result
    is their axis-aligned bounds (exact for quarter turns).
    """
    x0, y0, x1, y1 = box
    quarter = rotation % 90 == 0
    if quarter and rotation % 360 == 90:  # upright (u, v) <- received (x, y): u = y, v = w - x
        return (w - y1, x0, w - y0, x1)
    if quarter and rotation % 360 == 180:
        return (w - x1, h - y1, w - x0, h - y0)
    if quarter and rotation % 360 == 270:
        return (y0, h - x1, y1, h - x0)
    if quarter:
        return box
    t = math.radians(rotation)
    c, s = math.cos(t), math.sin(t)
    uw, uh = abs(w * c) + abs(h * s), abs(w * s) + abs(h * c)  # the expanded canvas
    xs, ys = [], []
    for u, v in ((x0, y0), (x1, y0), (x1, y1), (x0, y1)):
        du, dv = u - uw / 2, v - uh / 2  # u = x c + y s, v = -x s + y c (about the centres)
        xs.append(du * c - dv * s + w / 2)
        ys.append(du * s + dv * c + h / 2)
    return (max(0.0, min(xs)), max(0.0, min(ys)), min(float(w), max(xs)), min(float(h), max(ys)))
