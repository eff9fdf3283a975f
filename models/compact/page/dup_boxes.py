"""Detections that only repeat ink another detection on their row already holds (duplicate reads).

The PP-OCR DB detector (:mod:`models.compact.page.detect`), or the row split of a tall box
(:mod:`models.compact.page.rowsplit`), sometimes returns beside a number's box a second, smaller box
over that number's first (or last) characters: a sliver of its ink. Read on its own such a box
yields a number that is not on the page, next to the number it repeats (issue 37: table cells read
``2,799.55 2`` and ``-11 -112.63%`` on ``bench/tables.py`` pages on an AVX2 CPU) -- for a financial
reader the worst failure, a wrong number that looks right.

:func:`drop_duplicates` lets the ink decide: a detection is dropped only when almost all the ink
inside its box (:data:`COVERED` of its ink pixels) lies inside the box of a *larger* detection on
the same row (boxes of one print size, overlapping over most of the smaller one's height). Two
separate numbers close together (``12  345`` in adjacent narrow columns, footnote marks ``1 2``, a
minus sign or a currency sign in its own box) each have ink the other box does not hold, so both
stay; so does a row's box inside a taller box over several rows (not one print size).
"""

from __future__ import annotations

import copy

import cv2
import numpy as np

from models.compact.line.runs import true_runs
from models.compact.page.boxes import L
from models.compact.page.rowsplit import ink_mask

#: A detection whose ink lies at least this share inside a larger detection's box repeats its ink.
COVERED = 0.9
#: The two boxes are one row of one print size: their heights differ by at most this factor and
#: they overlap over more than :data:`ROW_OVERLAP` of the smaller one's height.
SAME_HEIGHT = 1.5
ROW_OVERLAP = 0.6
#: Ink columns less than this share of the lower box's height apart are one word (a number, its sign
#: and separators); a gap as wide separates two cells' texts.
WORD_GAP = 0.35
#: A box with fewer ink pixels than this is no read at all (left to the reader's own checks).
MIN_INK = 4


def _candidates(boxes: np.ndarray) -> list[tuple[int, int]]:
    """(small, large) index pairs of ``boxes`` float [N, 4] (x0, y0, x1, y1): boxes on one row of one
    print size (:data:`SAME_HEIGHT`, :data:`ROW_OVERLAP`) that overlap horizontally, the first no
    wider than the second (on a tie, the later one is the small one).
    """
    if len(boxes) < 2:
        return []
    x0, y0, x1, y1 = (boxes[:, i][:, None] for i in range(4))
    w, h = x1 - x0, y1 - y0
    dy = np.minimum(y1, y1.T) - np.maximum(y0, y0.T)
    dx = np.minimum(x1, x1.T) - np.maximum(x0, x0.T)
    hmin, hmax = np.minimum(h, h.T), np.maximum(h, h.T)
    idx = np.arange(len(boxes))
    smaller = (w < w.T) | ((w == w.T) & (idx[:, None] > idx[None, :]))
    ok = (dx > 0) & (dy > ROW_OVERLAP * hmin) & (hmax <= SAME_HEIGHT * hmin) & smaller
    return [(int(i), int(j)) for i, j in zip(*np.nonzero(ok), strict=True)]


class _Pair:
    """The ink of two boxes ``a`` and ``b`` (x0, y0, x1, y1, page pixels) on the page ``gray`` uint8
    [H, W]: :func:`models.compact.page.rowsplit.ink_mask` of their union, widened by a stroke's
    closing width so the background is estimated from paper; ``ink`` bool [h, w] in the union's
    pixels, whose left column is page column ``x0``.
    """

    def __init__(self, gray: np.ndarray, a: np.ndarray, b: np.ndarray, stroke_px: int):
        h, w = gray.shape
        pad = 2 * stroke_px + 1
        self.x0 = max(0, int(np.floor(min(a[0], b[0]))) - pad)
        self.y0 = max(0, int(np.floor(min(a[1], b[1]))) - pad)
        x1 = min(w, int(np.ceil(max(a[2], b[2]))) + pad)
        y1 = min(h, int(np.ceil(max(a[3], b[3]))) + pad)
        crop = gray[self.y0:y1, self.x0:x1]
        self.ink = ink_mask(crop, stroke_px) if crop.shape[0] >= 2 and crop.shape[1] >= 2 else np.zeros((0, 0), bool)

    def inside(self, box: np.ndarray) -> np.ndarray:
        """The ink within ``box`` (page pixels), bool [h, w] like :attr:`ink`."""
        out = np.zeros_like(self.ink)
        r = slice(max(0, int(round(box[1])) - self.y0), max(0, int(round(box[3])) - self.y0))
        c = slice(max(0, int(round(box[0])) - self.x0), max(0, int(round(box[2])) - self.x0))
        out[r, c] = self.ink[r, c]
        return out


def _words(ink: np.ndarray, gap: float) -> list[tuple[int, int]]:
    """[start, end) column runs of ``ink`` bool [h, w] holding ink, runs less than ``gap`` px apart
    joined: the words (a number and its sign, a cell's text) of a row's ink.
    """
    words: list[list[int]] = []
    for a, b in true_runs(np.asarray(ink.any(axis=0))):
        if words and a - words[-1][1] < gap:
            words[-1][1] = b
        else:
            words.append([a, b])
    return [(a, b) for a, b in words]


def _repeated(pair: _Pair, small: np.ndarray, large: np.ndarray, gap: float) -> tuple[bool, float | None]:
    """How box ``small`` repeats ink of box ``large`` (page pixels, ink of :class:`_Pair`): (True, None)
    when all its ink does (:data:`COVERED` of its ink pixels inside ``large``, which is wider, or
    ``small`` cuts a word that ``large`` holds whole); (False, x) when only its first or last word
    (words ``gap`` px apart) is such a cut word, ``x`` the page column between that word and the rest of
    ``small``'s ink where ``small`` should end; (False, None) otherwise.
    """
    mine, theirs = pair.inside(small), pair.inside(large)
    total = int(mine.sum())
    if total < MIN_INK:
        return False, None
    in_large = mine & theirs
    if int(in_large.sum()) >= COVERED * total and small[2] - small[0] < large[2] - large[0]:
        return True, None
    words, whole = _words(mine, gap), _words(theirs, gap)
    lo, hi = int(round(small[0])) - pair.x0, int(round(small[2])) - pair.x0  # small's columns, union pixels

    def cut(word: tuple[int, int]) -> bool:  # inside large, and large's word there runs past small's edge
        a, b = word
        if int(in_large[:, a:b].sum()) < COVERED * int(mine[:, a:b].sum()):
            return False
        return any(wa < b and a < wb and (wa < lo <= a or b <= hi < wb) for wa, wb in whole)

    if len(words) == 1:
        return cut(words[0]), None
    if cut(words[-1]):
        return False, pair.x0 + (words[-2][1] + words[-1][0]) / 2
    if cut(words[0]):
        return False, pair.x0 + (words[0][1] + words[1][0]) / 2
    return False, None


def _trimmed(line: L, x: float) -> L:
    """A copy of ``line`` whose box ends (or, for ``x`` left of its centre, begins) at page column ``x``."""
    x0, y0, x1, y1 = line.box
    x0, x1 = (x, x1) if x < (x0 + x1) / 2 else (x0, x)
    out = copy.copy(line)
    out.box = (float(x0), y0, float(x1), y1)
    out.quad = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], np.float32)
    return out


def drop_duplicates(rgb: np.ndarray, lines: list[L]) -> list[L]:
    """``lines`` (detections on the page ``rgb`` [H, W, 3] uint8, boxes in its pixels) without the
    ink another detection on the same row already holds (see the module docstring): a line whose ink
    is all such ink is dropped, a (near-horizontal) line whose first or last word only is, trimmed to
    the rest; order kept. Lines are judged widest first, each against the wider lines still kept, so
    of a chain of boxes the widest stays.
    """
    if len(lines) < 2:
        return list(lines)
    boxes = np.array([ln.box for ln in lines], dtype=np.float64)
    pairs = _candidates(boxes)
    if not pairs:
        return list(lines)
    heights = sorted(b[3] - b[1] for b in boxes)
    stroke = max(2, int(heights[len(heights) // 2] * 0.2))
    gray = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2GRAY)
    others: dict[int, list[int]] = {}
    for i, j in pairs:  # each way: a narrower box may cut the last word of a wider one
        others.setdefault(i, []).append(j)
        others.setdefault(j, []).append(i)
    out = list(lines)
    dropped: set[int] = set()
    for i in sorted(others, key=lambda k: -(boxes[k, 2] - boxes[k, 0])):
        for j in others[i]:
            if j in dropped:
                continue
            small, large = np.array(out[i].box, dtype=np.float64), np.array(out[j].box, dtype=np.float64)
            gap = WORD_GAP * min(small[3] - small[1], large[3] - large[1])
            drop, end = _repeated(_Pair(gray, small, large, stroke), small, large, gap)
            if drop:
                dropped.add(i)
                break
            if end is not None and _level(out[i].quad):
                out[i] = _trimmed(out[i], end)
    return [ln for k, ln in enumerate(out) if k not in dropped]


def _level(quad: np.ndarray) -> bool:
    """Whether a line's ``quad`` float [4, 2] is (nearly) an axis-aligned rectangle: only such a box
    is trimmed along x.
    """
    q = np.asarray(quad, dtype=np.float64)
    h = max(1.0, float(q[:, 1].max() - q[:, 1].min()))
    return abs(float(q[1, 1] - q[0, 1])) < 0.1 * h and abs(float(q[2, 1] - q[3, 1])) < 0.1 * h
