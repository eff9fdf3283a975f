"""Letter-spaced lines: their tracking (the extra blank added between every two letters) closed up
before the line is read.

Display type is often set letter-spaced (``S t a t e   o f   C a l i f o r n i a`` under a logo, a
report's spaced capitals). The Latin tower was trained on lines of normal spacing
(``training/compact/render.py``) and reads every letter gap of such a line as a word space
(``S t a t e N o t i c e``), misreads the lone letters (``C i γ`` for ``City``) and writes a stray
``_`` in a word gap that a rule runs under. :func:`close_tracking` finds a letter-spaced line by its
ink profile -- the median blank run between two glyphs is at least :data:`TRACKED_GAP` times the
height of the line's ink, where a line of normal spacing has glyphs touching or a pixel or two apart
-- and narrows every blank run between glyphs by the tracking less a normal letter gap
(:data:`NORMAL_GAP`), so letters come together while a word gap, a letter gap plus a space (itself
tracked), stays a visibly wider blank.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

from models.compact.line.image import PRINT_CONTRAST, gray_percentiles
from models.compact.line.runs import true_runs

#: A line is letter-spaced when the median blank run between its glyphs is at least this share of its
#: ink height (top of the tallest glyph to the foot of the lowest). Measured on generated lines
#: (``tests/unit/test_line_tracking.py``'s faces, and every Latin line of ``bench/doc_pages.py`` seeds
#: 300 and 400): lines of normal spacing 0.0-0.17 (bold capitals the widest), lines tracked by 0.3 em
#: or more 0.39 and up.
TRACKED_GAP = 0.28
#: The letter gap a closed-up line keeps, as a share of its ink height (a text face's side bearings
#: at 32 px: one or two pixels).
NORMAL_GAP = 0.06
#: A closed-up line's word gaps are at most this share of its ink height (a text face's word space
#: at 32 px, 0.25-0.35 em: the blank of a wider tracked word gap is more than the tower saw in
#: training, and it writes ``_`` or ``¸`` in it: ``County _city``, ``OF City _Quarterly``).
WORD_GAP = 0.5
#: Fewer glyphs than this: not a line to judge (a number, an initial, a short label).
MIN_GLYPHS = 8
#: Tracking adds one blank to every letter gap, so a letter-spaced line's letter gaps (those at most
#: :data:`_WORD_GAP` times the median) are nearly equal: their coefficient of variation is at most
#: this. A monospaced face's gaps are not (a cell holds an ``m`` edge to edge, an ``i`` with wide
#: margins): on generated lines in every installed Latin face, tracked lines 0.03-0.12 (75 % of them),
#: Courier-like lines of normal spacing 0.1-0.35.
MAX_GAP_CV = 0.2
#: ... and the median letter gap is at least this share of the median glyph (ink run) width: a
#: tracked glyph stands alone between blanks nearly its own width, where a monospaced digit or
#: capital fills most of its cell (generated lines: tracked by 0.3 em or more 0.6-1.5; normal
#: spacing under 0.6 but for 0.25 % of the lines, all of them digits in a monospaced face).
MIN_GAP_TO_GLYPH = 0.6
_WORD_GAP = 1.6
#: A pixel is glyph ink when it is darker than paper less this share of (paper - ink): the cores of
#: the strokes, not a light-coloured rule or flourish drawn with the heading (an orange logo swoosh
#: is read by the tower, but must not bridge the letter gaps here).
CORE_LEVEL = 0.6
#: a row inked over more than this share of the width is a rule, not text (as in line/split.py)
_RULE_FRACTION = 0.9


def _glyph_columns(gray: np.ndarray) -> tuple[np.ndarray, int] | None:
    """(bool [W]: columns holding glyph-core ink, ink height in rows) of a dark-on-light uint8 crop
    [H, W]; None for a crop without print (under PRINT_CONTRAST gray levels between paper and ink).
    """
    paper, ink = gray_percentiles(gray, (90.0, 1.0))
    if paper - ink < PRINT_CONTRAST:
        return None
    core = gray < paper - CORE_LEVEL * (paper - ink)
    text = core.mean(axis=1) <= _RULE_FRACTION
    rows = np.flatnonzero(text & core.any(axis=1))
    if rows.size == 0:
        return None
    return core[text].any(axis=0), int(rows[-1] - rows[0] + 1)


def letter_gaps(crop: Image.Image) -> tuple[list[tuple[int, int]], list[tuple[int, int]], int]:
    """(blank runs between two glyphs, glyphs (ink runs), ink height in pixels) of a dark-on-light line
    crop, runs as [start, end) columns, increasing; ([], [], 0) for a crop without print.
    """
    found = _glyph_columns(np.asarray(crop.convert("L")))
    if found is None:
        return [], [], 0
    columns, height = found
    xs = np.flatnonzero(columns)
    lo = int(xs[0])
    gaps = [(lo + a, lo + b) for a, b in true_runs(~columns[lo: int(xs[-1]) + 1])]
    return gaps, true_runs(columns), height


def tracking(crop: Image.Image) -> float:
    """The line's tracking in pixels when it is letter-spaced, else 0.0. Letter-spaced: at least
    :data:`MIN_GLYPHS` glyphs (ink runs), the median blank between two of them at least
    :data:`TRACKED_GAP` x the ink height and :data:`MIN_GAP_TO_GLYPH` x the median glyph width, and the
    letter gaps even (:data:`MAX_GAP_CV`). The tracking is that median gap.
    """
    gaps, glyphs, height = letter_gaps(crop)
    if len(glyphs) < MIN_GLYPHS:
        return 0.0
    widths = np.array([b - a for a, b in gaps], dtype=float)
    track = float(np.median(widths))
    letters = widths[widths <= _WORD_GAP * track]
    if (track < TRACKED_GAP * height or float(letters.std()) > MAX_GAP_CV * float(letters.mean())
            or track < MIN_GAP_TO_GLYPH * float(np.median([b - a for a, b in glyphs]))):
        return 0.0
    return track


def close_tracking(crop: Image.Image) -> Image.Image:
    """``crop`` (a dark-on-light line, RGB or L) with its letter spacing closed up when it is
    letter-spaced (:func:`tracking`): from the middle of each blank run between glyphs,
    ``tracking - NORMAL_GAP x height`` columns are taken out (a narrower run keeps at least
    ``NORMAL_GAP x height``, and one pixel; a wider one, a word gap, keeps at most
    :data:`WORD_GAP` x height); the crop itself otherwise. Same height and mode, narrower.
    """
    track = tracking(crop)
    if track == 0.0:
        return crop
    gaps, _, height = letter_gaps(crop)
    normal = max(1.0, NORMAL_GAP * height)
    keep = np.ones(crop.width, dtype=bool)
    for a, b in gaps:
        cut = int(round(max(min(track - normal, (b - a) - normal), (b - a) - WORD_GAP * height)))
        if cut > 0:
            start = (a + b - cut) // 2
            keep[start: start + cut] = False
    return Image.fromarray(np.asarray(crop)[:, keep], mode=crop.mode)
