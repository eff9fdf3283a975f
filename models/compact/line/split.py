"""Splitting text lines that are longer than the recogniser was trained on, at inter-word gaps.

The compact recogniser is trained on lines of at most ``--max-chars`` = 110 characters
(training/compact/train.py), most of them 10 to 90 characters long (training/compact/corpus.py
``LineTexts.sample``). Longer lines (a full-width line of small print reaches 170 characters) are
read markedly worse: the decoder drops or garbles words everywhere in the line. Such a line is cut into
``ceil(width / SPLIT_PX)`` pieces of about equal width, each cut placed in the middle of a wide run
of blank columns (no ink) near its ideal position (:func:`split_points`), so cuts fall between
words; when no blank column exists there (no space in sight) the line is cut at the ideal position.
Each piece becomes its own segment, marked as the next piece of its line (``SegmentTokens.join``:
after a word gap, or inside a word), and the gateway joins the pieces' texts with a space or
directly (:mod:`inkstream.segments`).

A line is also cut, whatever its length, at every tab gap: a blank run inside it at least
:data:`TAB_GAP` times its ink's height wide (a form's label and its value found as one box). Read
whole, such a gap is out of what the recogniser saw in training and it fills it with a stray mark
(``Account number: _ 599-48033``, ``Policy number: :91-52040`` for ``391-52040``); each side read on
its own, the pieces are joined by a space. Lines read by the CJK tower are not cut so
(:func:`split_line`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import numpy as np
from PIL import Image

from inkstream.segments import JOIN_DIRECT, JOIN_LINE, JOIN_SPACE
from models.compact.line.image import LINE_HEIGHT, gray_percentiles
from models.compact.line.runs import true_runs

#: Longest piece, in pixels at the 32-pixel line height: 40 vision tokens, about 57 characters at
#: the model's ~1.43 characters per token, inside the lengths most seen in training. Measured on
#: the printed pages of ../shared/eval through the in-process path (weights at step 9,404): CER
#: 7.3 % unsplit, 6.6 % at 1,024 px, 6.25 % at 640 px, 6.2 % at 512 px, 6.2 % at 384 px.
SPLIT_PX = 640
_RULE_FRACTION = 0.9  # a row with more ink than this (of its width) is a rule, not text
_SEARCH = 0.15  # cut search reach: 2 x this fraction of a piece's width on each side of the ideal cut
#: A tab gap: a blank run inside a line at least this many times the height of the line's ink (top
#: of its tallest glyph to the foot of its lowest) wide. Measured on the detector's lines of
#: generated forms, invoices and reports (``bench/doc_pages.py``, seeds 300-500, 1,000+ lines): word
#: gaps and the space after a CJK full-width comma stay under 1.35; a form's label-to-value gap found
#: inside one box is 1.0-2.7, and every one the recogniser misread (a stray ``_``, a lost digit) was
#: 1.67 or wider.
TAB_GAP = 1.5


def _ink_columns(crop: Image.Image) -> np.ndarray:
    """Ink per column of ``crop``: bool [W], True where some pixel of a text row is on the ink side
    of the midpoint between the crop's 5th and 95th gray percentile. Ink is the side the crop's edges
    (paper) are not on (dark on light, or light on dark), and rows that are nearly all ink (an underline, a table
    rule, a strike-through running through the word gaps) are left out, so they do not hide the gaps.
    """
    ink = _ink_mask(crop)
    columns = ink[ink.mean(axis=1) <= _RULE_FRACTION].any(axis=0)
    return np.asarray(columns if columns.any() else ink.any(axis=0))  # nothing but rules: keep them


def _ink_mask(crop: Image.Image) -> np.ndarray:
    """The ink of ``crop``, bool [H, W]: True where a pixel is on the ink side of the midpoint between its 5th
    and 95th gray percentile (see :func:`_ink_columns`); all False for a crop of (nearly) one gray.
    """
    a = np.asarray(crop.convert("L"))
    if a.size == 0:
        return np.zeros(a.shape, dtype=bool)
    lo, hi = gray_percentiles(a, (5.0, 95.0))
    if hi - lo < 16.0:
        return np.zeros(a.shape, dtype=bool)
    mid = (lo + hi) / 2
    paper = float(np.median(np.concatenate([a[0], a[-1], a[:, 0], a[:, -1]])))  # the crop's edges
    return np.asarray(a < mid if paper >= mid else a > mid)


def tab_points(crop: Image.Image) -> list[int]:
    """Cut positions (x in ``crop`` pixels, increasing): the middles of the blank runs between the
    line's first and last ink column at least :data:`TAB_GAP` times the line's ink height wide (rows
    that are nearly all ink, rules, count neither for the height nor against the gap); [] for none.
    """
    ink = _ink_mask(crop)
    keep = ink.mean(axis=1) <= _RULE_FRACTION if ink.size else np.zeros(0, dtype=bool)
    text_rows = np.nonzero(keep & ink.any(axis=1))[0] if ink.size else np.zeros(0, dtype=int)
    if len(text_rows) == 0:
        return []
    columns = ink[keep].any(axis=0)
    xs = np.nonzero(columns)[0]
    height = int(text_rows[-1] - text_rows[0] + 1)
    return [(a + b) // 2 for a, b in _blank_runs(columns, int(xs[0]), int(xs[-1]) + 1) if b - a >= TAB_GAP * height]


def _blank_runs(ink: np.ndarray, lo: int, hi: int) -> list[tuple[int, int]]:
    """(start, end) of the runs of ink-free columns within [lo, hi)."""
    return [(lo + a, lo + b) for a, b in true_runs(~np.asarray(ink[lo:hi], dtype=bool))]


def split_points(crop: Image.Image, max_px: int = SPLIT_PX) -> list[int]:
    """Cut positions (x in ``crop`` pixels, increasing) that split the line into pieces of at most
    about ``max_px`` pixels at the line height; [] when the line is short enough.

    Cuts are placed one after the other: the ideal position divides what is left of the line evenly;
    among the blank runs within ±``_SEARCH`` x 2 of a piece's width around it, those at least half as
    wide as the widest (word gaps, not the slivers between letters) qualify and the one nearest the
    ideal position wins; with none, the cut is at the ideal position.
    """
    return [x for x, _ in _cuts(crop, max_px)]


def _cuts(crop: Image.Image, max_px: int) -> list[tuple[int, bool]]:
    """:func:`split_points` with, for each cut, whether it lies in a blank run (a word gap)."""
    scaled = crop.width * LINE_HEIGHT / max(1, crop.height)
    parts = math.ceil(scaled / max_px)
    if parts <= 1:
        return []
    ink = _ink_columns(crop)
    w = crop.width
    cuts: list[tuple[int, bool]] = []
    prev = 0
    for k in range(1, parts):
        piece = (w - prev) / (parts - k + 1)
        ideal = int(prev + piece)
        reach = int(2 * _SEARCH * piece)
        runs = _blank_runs(ink, max(prev + 1, ideal - reach), min(w - 1, ideal + reach))
        cut, at_gap = ideal, False
        if runs:
            widest = max(b - a for a, b in runs)
            cut = min(((a + b) // 2 for a, b in runs if b - a >= 0.5 * widest), key=lambda c: abs(c - ideal))
            at_gap = True
        cuts.append((cut, at_gap))
        prev = cut
    return cuts


def split_line(crop: Image.Image, box: tuple[float, float, float, float], max_px: int = SPLIT_PX,
               tabs: bool = True, lead: int = 0) -> list[tuple[Image.Image, tuple[float, float, float, float], str]]:
    """(piece image, piece box in page pixels, join) for each piece of the line ``crop`` whose page
    box is ``box`` (x0, y0, x1, y1); the piece boxes divide the box's x range in proportion to the
    cuts. The line is cut at its tab gaps (:func:`tab_points`), then each part that is too long at
    the gaps between its words (:func:`split_points`, ``max_px``). ``join``
    (:mod:`inkstream.segments`): "line" for the first piece, then "space" after a cut at a tab or a
    word gap or "direct" after a cut inside a word. A short line without a tab gap comes back whole,
    as the only piece. ``tabs``: whether to cut at tab gaps (False for a line read by the CJK tower:
    it reads such gaps right, read alone a hanzi label's ``：`` became ``:``, and the space of a
    "space" join is dropped between wide characters, :func:`inkstream.segments.piece_separator`).
    ``lead``: columns of paper added on the crop's left that are not on the page
    (:func:`models.compact.line.lead_dash.dash_at_frame`): ``box`` spans the crop's other columns.
    """
    cuts = tab_points(crop) if tabs else []
    if not cuts:
        return _split_long(crop, box, max_px, lead)
    x0, y0, x1, y1 = box
    page_x = _page_x(crop.width, x0, x1, lead)
    out: list[tuple[Image.Image, tuple[float, float, float, float], str]] = []
    for a, b in itertools.pairwise([0, *cuts, crop.width]):
        part = _split_long(crop.crop((a, 0, b, crop.height)), (page_x(a), y0, page_x(b), y1), max_px,
                           max(0, lead - a))
        out += [(im, pbox, JOIN_SPACE if out and k == 0 else join) for k, (im, pbox, join) in enumerate(part)]
    return out


def _page_x(width: int, x0: float, x1: float, lead: int) -> Callable[[int], float]:
    """Page x of a column of a crop ``width`` pixels wide whose columns after its first ``lead`` (paper
    added, not on the page) span page x ``x0`` to ``x1``; a column of the added paper maps to ``x0``.
    """
    scale = (x1 - x0) / max(1, width - lead)
    return lambda c: x0 + max(0, c - lead) * scale


def _split_long(crop: Image.Image, box: tuple[float, float, float, float], max_px: int, lead: int = 0,
                ) -> list[tuple[Image.Image, tuple[float, float, float, float], str]]:
    """:func:`split_line` without the tab gaps: cut only where the line is longer than ``max_px``."""
    cuts = _cuts(crop, max_px)
    if not cuts:
        return [(crop, box, JOIN_LINE)]
    x0, y0, x1, y1 = box
    page_x = _page_x(crop.width, x0, x1, lead)
    edges = [0, *(c for c, _ in cuts), crop.width]
    joins = [JOIN_LINE, *(JOIN_SPACE if gap else JOIN_DIRECT for _, gap in cuts)]
    out: list[tuple[Image.Image, tuple[float, float, float, float], str]] = []
    gap = False  # a dropped sliver's cut was at a word gap: the next piece keeps the space
    for (a, b), join in zip(itertools.pairwise(edges), joins, strict=True):
        gap = gap or join == JOIN_SPACE
        if b - a < 2:
            continue
        kept = JOIN_LINE if not out else JOIN_SPACE if gap else join
        out.append((crop.crop((a, 0, b, crop.height)), (page_x(a), y0, page_x(b), y1), kept))
        gap = False
    return out
