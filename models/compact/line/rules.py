"""Form rules inside a line crop: the edges of a box typed into and the underline typed on, erased
before the line is read.

A form's typed value sits in a box or on an underline; the detector's box of the value reaches the
box's left or right edge, or the rule under the text, and both towers read those strokes as
characters: ``|$36,297.44``, ``[TX-2956659``, ``J97929``, ``_Telephone:`` (generated scanned forms,
``training/compact/tower_lines.py``). :func:`erase_rules` paints them paper:

* a *box edge*: a run of at most :data:`EDGE_MAX_COLUMNS` columns in the outer :data:`EDGE_ZONE` of
  the crop's width, inked in at least :data:`EDGE_MIN_ROWS` of its rows and reaching above and below
  the rest of the crop's ink (:data:`EDGE_BEYOND`: a box is taller than the text in it, a glyph is
  not taller than its line), with a paper column between it and the text;
* a *rule*: a band of at most :data:`RULE_MAX_ROWS` of the crop's height in its top or bottom
  :data:`RULE_ZONE`, each row inked over at least :data:`RULE_MIN_SPAN` of the width; a column inked
  right above and right below the band (a descender the rule runs through) keeps its pixels there.

A crop that holds nothing but the rule (a dashed receipt separator, ``=====``) is left as it is: the
rows and columns left once the rule is gone must still hold ink.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

from models.compact.line.image import PRINT_CONTRAST, gray_percentiles
from models.compact.line.runs import true_runs

#: a box edge lies in this outer share of the crop's width, at either end ...
EDGE_ZONE = 0.15
#: ... is at most this many pixel columns wide (a scanned rule of 2-4 px at 150-300 dpi, blurred) ...
EDGE_MAX_COLUMNS = 8
#: ... and is inked in at least this share of the crop's rows.
EDGE_MIN_ROWS = 0.75
#: ... and reaches at least this many rows above the text's highest ink and below its lowest (a box
#: is taller than the text in it; a glyph -- ``|``, ``l``, ``[`` -- is not taller than its line).
EDGE_BEYOND = 2
#: columns beside it inked in at least this share of the rows are its blurred sides
EDGE_HALO = 0.3
#: a rule lies in this top or bottom share of the crop's height ...
RULE_ZONE = 0.35
#: ... is at most this share of the height thick ...
RULE_MAX_ROWS = 0.2
#: ... and each of its rows is inked over at least this share of the width.
RULE_MIN_SPAN = 0.85
#: a pixel is ink when it is darker than paper - this share of (paper - ink)
INK_LEVEL = 0.5


def _ink(gray: np.ndarray) -> tuple[np.ndarray, float]:
    """(bool ink mask [H, W], paper level) of a uint8 gray crop: paper the 90th percentile, ink the 1st."""
    paper, ink = gray_percentiles(gray, (90.0, 1.0))
    if paper - ink < PRINT_CONTRAST:  # no print to speak of
        return np.zeros(gray.shape, dtype=bool), float(paper)
    return gray < paper - INK_LEVEL * (paper - ink), float(paper)


def edge_columns(ink: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) column runs of ``ink`` [H, W] (bool) that are box edges (module docstring)."""
    h, w = ink.shape
    share = ink.mean(axis=0)
    zone = max(1, int(round(EDGE_ZONE * w)))
    out = []
    for a, b in true_runs(share >= EDGE_MIN_ROWS):
        while a > 0 and share[a - 1] >= EDGE_HALO:  # the blurred sides of the stroke
            a -= 1
        while b < w and share[b] >= EDGE_HALO:
            b += 1
        if b - a > EDGE_MAX_COLUMNS or not (b <= zone or a >= w - zone):
            continue
        text = share[b:] if b <= zone else share[:a][::-1]  # from the edge towards the text
        if text.size and text[0] < EDGE_HALO and text.max() > 0:  # paper between the edge and the text
            out.append((a, b))
    if not out:
        return out
    keep = np.ones(w, dtype=bool)
    for a, b in out:
        keep[a:b] = False
    rest = np.flatnonzero(ink[:, keep].any(axis=1))  # the rows the text inks
    if not rest.size:
        return []
    tall = []
    for a, b in out:
        bar = np.flatnonzero(ink[:, a:b].any(axis=1))
        if bar[0] <= rest[0] - EDGE_BEYOND and bar[-1] >= rest[-1] + EDGE_BEYOND:
            tall.append((a, b))
    return tall


def rule_rows(ink: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) row bands of ``ink`` [H, W] (bool) that are rules (module docstring)."""
    h, w = ink.shape
    wide = ink.mean(axis=1) >= RULE_MIN_SPAN
    zone, thick = max(1, int(round(RULE_ZONE * h))), max(1, int(round(RULE_MAX_ROWS * h)))
    return [(a, b) for a, b in true_runs(wide) if b - a <= thick and (b <= zone or a >= h - zone)]


def erase_rules(crop: Image.Image) -> Image.Image:
    """A dark-on-light line crop with its box edges and rules (module docstring) painted with the
    paper's gray level; ``crop`` itself when it has none, or when nothing but them is inked. The
    result has ``crop``'s size and mode (RGB or L).
    """
    gray = np.asarray(crop.convert("L"))
    if gray.shape[0] < 8 or gray.shape[1] < 8:
        return crop
    ink, paper = _ink(gray)
    cols, rows = edge_columns(ink), rule_rows(ink)
    if not cols and not rows:
        return crop
    erase = np.zeros(ink.shape, dtype=bool)
    for a, b in cols:
        erase[:, a:b] = True
    h = ink.shape[0]
    for a, b in rows:
        if 0 < a and b < h:  # a stroke inked on both sides of the band (a descender) keeps its pixels
            erase[a:b] |= ~(ink[a - 1] & ink[b])[None, :]
        else:
            erase[a:b] = True
    if not (ink & ~erase).any():
        return crop
    arr = np.array(crop)
    arr[erase] = round(paper)
    return Image.fromarray(arr, mode=crop.mode)
