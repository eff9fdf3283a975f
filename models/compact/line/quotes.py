"""Hairline double quotes in a line crop: the mark the Latin tower reads as an apostrophe.

The Latin tower was trained on faces whose straight double quote ``"`` is two strokes of ordinary
weight set well apart. A geometric sans of the Century-Gothic / Avant-Garde design (URW Gothic,
TeX Gyre Adventor: held out of training) draws it as two hairlines almost touching; at the tower's
32-px line height they read as one stroke, and the tower writes ``'`` (or ``’``) for it: 27 of the
89 edits on ``bench/font_pages.py`` seeds 0-3, 24 of 110 on seeds 100-105. The PP tower reads every
one of those quotes right, so :meth:`models.compact.encoder_half.CompactEncoderHalf.route` sends a
line holding such a mark to the PP tower (bilingual checkpoints only).

:func:`hairline_quotes` counts them, scale-free, from the line's own metrics: ``H`` is the height of
its tall glyphs (the median bottom of its ink components, the baseline, minus the 5th percentile of
their tops, the cap/ascender line). A *quote stroke* is an ink component above the middle of the
x-height band, starting above the x-line but not above the cap line (:data:`STROKE_ABOVE`), at least
1.5 x as tall as wide, at least :data:`STROKE_SHORTEST` and at most 0.6 H tall; a
*double quote* is two neighbouring quote strokes side by side (rows overlapping by >= 70 % of the
shorter, nothing between them, their boxes at most one stroke height apart). Each stroke's width is
its ink mass (gray levels scaled so paper is 0 and ink 1, so anti-aliasing counts for what it is)
over its height, and the pair's *pitch* the distance between the strokes' ink centroids. A double
quote is *hairline* when both strokes are thinner than :data:`HAIRLINE_STROKE` and the pitch is
below :data:`HAIRLINE_PITCH`.

Where the bars come from: every double quote on ``bench/font_pages.py`` pages of seeds 500-505
(not a bench seed: body 8-13 pt, H 17-28 px) in 20 faces, measured this way (5th percentile / median /
95th percentile, in H): URW Gothic stroke 0.066/0.067/0.067, pitch 0.153 (median); TeX Gyre
Adventor 0.063/0.067/0.067, pitch 0.153; the 18 others -- DejaVu Sans and Serif, Liberation Sans,
Serif and Mono, Nimbus Sans and Roman, FreeSans and FreeSerif, Carlito, C059, P052, TeX Gyre Heros,
Bonum and Cursor, URW Bookman, Noto Sans and Serif -- have strokes of 0.075 (P052's 5th percentile)
and more, and pitches of 0.161 (TeX Gyre Heros) to 0.300 (Liberation Mono). Both bars sit between the
two groups; a line of those faces is never moved (their pages are read exactly as before).
"""

from __future__ import annotations

import cv2
import numpy as np
from PIL import Image

from models.compact.line.image import paper_ink

#: a stroke is a hairline below this width, in H (see the module docstring: the held-out geometric
#: face's strokes are 0.063-0.067 H, the thinnest of 18 other faces 0.075 H)
HAIRLINE_STROKE = 0.071
#: ... and the two strokes of a hairline double quote are closer than this, centre to centre, in H
#: (the geometric face 0.153 H; the 18 other faces 0.161-0.300 H)
HAIRLINE_PITCH = 0.19
#: a quote stroke is at least this tall, in H (the faces' quote strokes are 0.30-0.47 H: a speck of
#: scan or fax noise is shorter) ...
STROKE_SHORTEST = 0.2
#: ... and starts at most this far above the cap line, in H (dots of a fax's dotted rule above the
#: line's text are no quote)
STROKE_ABOVE = 0.15
#: a pixel is ink when it is darker than paper - this share of (paper - ink)
INK_LEVEL = 0.5
#: fewest ink components (of at least 4 px) for a line's metrics to mean anything
MIN_COMPONENTS = 4


def _stroke(gray: np.ndarray, levels: tuple[float, float], box: tuple[int, int, int, int],
            rows: tuple[int, int]) -> tuple[float, float]:
    """(ink centroid x, width) of the stroke in ``box`` (x0, y0, x1, y1), over ``rows`` (y0, y1), in
    pixels: each pixel's ink amount is its gray level scaled so paper is 0 and ink 1 (``levels``), so an
    anti-aliased edge counts for what it is; a column either side of the box is included.
    """
    paper, ink = levels
    x0, x1 = max(0, box[0] - 1), min(gray.shape[1], box[2] + 1)
    patch = np.clip((paper - gray[rows[0]: rows[1], x0:x1].astype(np.float32)) / (paper - ink), 0.0, 1.0)
    mass = float(patch.sum())
    if mass <= 0:
        return float(x0), 0.0
    cx = float((patch.sum(axis=0) * np.arange(x0, x1)).sum()) / mass
    return cx, mass / max(1, box[3] - box[1])


def hairline_quotes(crop: Image.Image) -> int:
    """Number of hairline double quotes (module docstring) in a dark-on-light line crop; 0 for a crop
    without print or with fewer than :data:`MIN_COMPONENTS` ink components.
    """
    gray = np.asarray(crop.convert("L"))
    levels = paper_ink(gray) if gray.size else None
    if levels is None:
        return 0
    ink = (gray < levels[0] - INK_LEVEL * (levels[0] - levels[1])).astype(np.uint8)
    n, _, stats, _ = cv2.connectedComponentsWithStats(ink, connectivity=8)
    boxes = [(int(s[0]), int(s[1]), int(s[0] + s[2]), int(s[1] + s[3]), int(s[4])) for s in stats[1:n]]
    sized = [b for b in boxes if b[4] >= 4]
    if len(sized) < MIN_COMPONENTS:
        return 0
    base = float(np.median([b[3] for b in sized]))
    xline = float(np.median([b[1] for b in sized]))
    cap = float(np.percentile([b[1] for b in sized], 5))
    h = base - cap
    if base - xline < 3 or h < 6:
        return 0
    middle = (xline + base) / 2
    strokes = sorted((b for b in boxes if b[3] <= middle and cap - STROKE_ABOVE * h <= b[1] <= xline
                      and b[3] - b[1] >= max(1.5 * (b[2] - b[0]), STROKE_SHORTEST * h)
                      and b[3] - b[1] <= 0.6 * h), key=lambda b: b[0])
    found = 0
    for a, b in zip(strokes, strokes[1:], strict=False):
        ha, hb = a[3] - a[1], b[3] - b[1]
        if min(a[3], b[3]) - max(a[1], b[1]) < 0.7 * min(ha, hb) or b[0] - a[2] > max(ha, hb):
            continue
        if any(c[0] >= a[2] and c[2] <= b[0] for c in boxes if c is not a and c is not b):
            continue  # something stands between them: two marks, not one
        rows = (min(a[1], b[1]), max(a[3], b[3]))
        (ca, wa), (cb, wb) = _stroke(gray, levels, a[:4], rows), _stroke(gray, levels, b[:4], rows)
        if max(wa, wb) < HAIRLINE_STROKE * h and cb - ca < HAIRLINE_PITCH * h:
            found += 1
    return found
