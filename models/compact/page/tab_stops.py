"""Tab stops: whether the edges of a column of boxes (a form's values, a column of amounts) stand at one
tab stop, upright or leaning (a photographed page), for :mod:`models.compact.page.kv_rows`.
"""

from __future__ import annotations

import numpy as np

from models.compact.line.image import ink_columns
from models.compact.page.xycut import VALUE_ALIGN

#: Values stand at one tab stop when at least this share of their edges lie within VALUE_ALIGN line heights
#: of the edges' median: the detector's box of one value in six can start 0.75 line heights early
#: (``bench/doc_pages.py --seed 900`` page 0, a box over the label's colon).
ALIGNED_SHARE = 0.8


#: A tab stop may lean by at most this many pixels across per pixel down (a photographed form's
#: columns, the page turned or seen at a slant: 0.08 on ``bench/receipts.py`` seed 33004, its value
#: column starting 730 px across at the top and 672 px at the bottom, 730 px lower).
MAX_LEAN = 0.1


def lean(edges: list[float], ys: list[float]) -> float:
    """The Theil-Sen slope (pixels across per pixel down) of ``edges`` (page x) against ``ys``
    (page y): the median of the slopes between every two points at different heights (robust to a
    stray box, :data:`ALIGNED_SHARE`); 0.0 with fewer than two such points.
    """
    x, y = np.asarray(edges, dtype=np.float64), np.asarray(ys, dtype=np.float64)
    i, j = np.triu_indices(len(x), k=1)
    dy = y[j] - y[i]
    keep = np.abs(dy) > 1e-6
    return float(np.median((x[j] - x[i])[keep] / dy[keep])) if keep.any() else 0.0


def aligned(edges: list[float], med_h: float, ys: list[float] | None = None) -> bool:
    """Whether ``edges`` (page x, pixels) stand at one tab stop (:data:`ALIGNED_SHARE`), upright or,
    given the edges' heights ``ys`` (page y, pixels), leaning by at most :data:`MAX_LEAN` (the edges
    measured from the tab stop's fitted line, :func:`lean`).
    """
    def at_one(xs: list[float]) -> bool:
        mid = sorted(xs)[len(xs) // 2]
        return sum(1 for e in xs if abs(e - mid) <= VALUE_ALIGN * med_h) >= ALIGNED_SHARE * len(xs)

    if at_one(edges) or ys is None or len(edges) < 3:
        return at_one(edges)
    slope = lean(edges, ys)
    return abs(slope) <= MAX_LEAN and at_one([e - slope * y for e, y in zip(edges, ys, strict=True)])



def ink_span(gray: np.ndarray, box: tuple[float, float, float, float]) -> tuple[float, float]:
    """Page x (pixels) of the first and past the last column of ``box`` (x0, y0, x1, y1, page pixels)
    in ``gray`` (uint8 [H, W], the page, dark ink on light paper) that hold ink
    (:func:`models.compact.line.image.ink_columns`, as :func:`models.compact.page.regions.gutter_gap`
    measures it); the box's own x0, x1 when it holds no ink or lies off the page. Where a line's print
    starts and ends (:data:`models.compact.page.kv_rows.InkSpan`): a detector box can reach a line
    height past it.
    """
    h, w = gray.shape[:2]
    x0, y0 = max(0, int(box[0])), max(0, int(box[1]))
    x1, y1 = min(w, int(np.ceil(box[2]))), min(h, int(np.ceil(box[3])))
    if x1 <= x0 or y1 <= y0:
        return float(box[0]), float(box[2])
    inked = ink_columns(gray[y0:y1, x0:x1])
    if inked is None or not inked.any():
        return float(box[0]), float(box[2])
    cols = np.flatnonzero(inked)
    return float(x0 + cols[0]), float(x0 + cols[-1] + 1)
