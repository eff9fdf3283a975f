"""Display type (about 60 to 300 pt): a coarse detection pass that finds lines too big for the detector
at its working resolution.

The PP-OCR detector (:mod:`models.compact.page.detect`) sees a page at up to 1,600 px long side, where body
text is 10-60 px tall, as in its training data. A title at 300 pt (830 px tall at 200 dpi) is far
outside that range: it is missed, or cut into one box per word or per letter. :func:`with_large_lines`
runs the same detector once more on the page shrunk to :data:`COARSE_LONG_SIDE` pixels, where such
type is 50-200 px tall, and keeps the coarse lines that are large on the page (at least
:data:`MIN_LARGE_FRACTION` of its long side tall): such a line replaces the fine-pass boxes lying
mostly inside it (:data:`INSIDE_FRACTION` of their area: words, letters or letter strokes of the same
type), unless :data:`PARAGRAPH_LINES` or more of those are lines of smaller print (under
:data:`PIECE_FRACTION` of its height and at least :data:`WIDE` times as wide as tall): then the
coarse box is a paragraph seen from afar, and is dropped. The
coarse pass costs about a tenth of the fine one (a 480 px image instead of 1,600).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from PIL import Image

from models.compact.page.boxes import L

#: Long side (pixels) of the coarse pass's image.
COARSE_LONG_SIDE = 480
#: A coarse line counts as display type when it is at least this share of the page's long side tall
#: (110 px on a 2,200 px page: ~40 pt at 200 dpi; body text is 20-60 px).
MIN_LARGE_FRACTION = 0.05
#: Fine-pass boxes under this share of a coarse line's height may be lines of smaller print ...
PIECE_FRACTION = 0.5
#: ... when at least this many times as wide as tall (a fragment of a big letter is not) ...
WIDE = 3.0
#: ... and a coarse box holding this many of them is a paragraph, not display type.
PARAGRAPH_LINES = 2
#: A fine-pass box lies inside a coarse line when this share of its area does.
INSIDE_FRACTION = 0.5



def coarse_lines(rgb: np.ndarray, detect: Callable[[np.ndarray], list[L]]) -> list[L]:
    """Lines of ``rgb`` [H, W, 3] uint8 found by ``detect`` on the page shrunk to
    :data:`COARSE_LONG_SIDE` px long side (box filter), quads and boxes mapped back to page pixels;
    [] for a page already that small.
    """
    h, w = rgb.shape[:2]
    f = COARSE_LONG_SIDE / max(h, w)
    if f >= 0.5:
        return []
    small = np.asarray(Image.fromarray(rgb).resize((max(1, round(w * f)), max(1, round(h * f))),
                                                   Image.Resampling.BOX))
    out = []
    for ln in detect(small):
        ln.quad = (ln.quad / f).astype(np.float32)
        ln.quad[:, 0] = ln.quad[:, 0].clip(0, w)
        ln.quad[:, 1] = ln.quad[:, 1].clip(0, h)
        x0, y0, x1, y1 = (float(v) / f for v in ln.box)
        ln.box = (max(0.0, x0), max(0.0, y0), min(float(w), x1), min(float(h), y1))
        out.append(ln)
    return out


def _inside(inner: tuple[float, float, float, float], outer: tuple[float, float, float, float]) -> bool:
    """Whether at least INSIDE_FRACTION of box ``inner``'s area lies in box ``outer``."""
    w = min(inner[2], outer[2]) - max(inner[0], outer[0])
    h = min(inner[3], outer[3]) - max(inner[1], outer[1])
    area = max(1e-6, (inner[2] - inner[0]) * (inner[3] - inner[1]))
    return w > 0 and h > 0 and w * h >= INSIDE_FRACTION * area


def _rows_of_small_print(rgb: np.ndarray, box: tuple[float, float, float, float], inside: list) -> bool:
    """Whether the coarse line ``box`` (page pixels of ``rgb``) holds two or more text rows by its ink
    profile (:func:`models.compact.page.rowsplit.split_box`) while fine-pass lines lie in it: a stretch
    of a table's number column seen from afar (cells of one number each are not wide enough to count
    as lines of smaller print), not one line of display type (issue 37: such a box replaced the cells
    and its first row was lost).
    """
    from models.compact.page.rowsplit import split_box

    if len(inside) < PARAGRAPH_LINES:
        return False
    x0, y0, x1, y1 = (int(round(v)) for v in box)
    gray = np.asarray(Image.fromarray(np.ascontiguousarray(rgb[max(0, y0):y1, max(0, x0):x1])).convert("L"))
    heights = sorted(f.box[3] - f.box[1] for f in inside)
    rows = {(b[1], b[3]) for b in split_box(gray, max(2, int(0.2 * heights[len(heights) // 2])))}
    return len(rows) >= PARAGRAPH_LINES


def with_large_lines(rgb: np.ndarray, fine: list[L], detect: Callable[[np.ndarray], list[L]]) -> list[L]:
    """``fine`` (the detector's lines of ``rgb``) with display-type lines from the coarse pass put in
    place of their pieces (see the module docstring). Order: unchanged fine lines, then the large ones
    (reading order is decided later).
    """
    min_h = MIN_LARGE_FRACTION * max(rgb.shape[:2])
    large = [c for c in coarse_lines(rgb, detect) if c.box[3] - c.box[1] >= min_h]
    if not large:
        return fine
    keep, added = list(fine), []
    for c in large:
        ch = c.box[3] - c.box[1]
        inside = [f for f in keep if _inside(f.box, c.box)]
        smaller = [f for f in inside if f.box[3] - f.box[1] < PIECE_FRACTION * ch
                   and f.box[2] - f.box[0] >= WIDE * (f.box[3] - f.box[1])]
        if len(smaller) >= PARAGRAPH_LINES or _rows_of_small_print(rgb, c.box, inside):
            continue  # a paragraph, smaller print beside the title or a table column, seen from afar
        keep = [f for f in keep if all(f is not g for g in inside)]  # identity: quads are arrays
        added.append(c)
    return keep + added
