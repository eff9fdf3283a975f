"""Lines of the text layer that overlap along one visual line, parted so a reader sees two words.

A detector box that took in part of its neighbour's ink is read as a line of its own that overlaps
the neighbour's box (``2`` at x 646-678 px over the ``2`` of ``2,799.55`` at 654-764 px, both on one
table row). Each line is set on its own box (:mod:`gateway.output.lines`), so the two glyph runs
overlap in the PDF text layer, and poppler joins them into one word (``22,799.55``): the page's text
holds two numbers, the layer one. :func:`parted` lays such a pair over the span the two cover
together with a word gap of :data:`~gateway.output.text_band.BREAK` font sizes between them, each
keeping its share of their widths (as :func:`~gateway.output.text_band._opened` does for two words
of one line); what was read is left as it is, only where its words are drawn moves.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

from gateway.output.text_band import BREAK, _opened, _paged, _upright, reader_geometry

if TYPE_CHECKING:  # lines imports this module
    from gateway.output.lines import Line, Word


def _moved(word: Word, start: float, end: float, turn: int) -> None:
    """Sets ``word``'s extent along a line running at ``turn`` to the upright frame's [start, end]."""
    word.box = _paged(word.box, start, end, turn)


def _turns(lines: Sequence[Line]) -> Iterator[tuple[int, list[Line], list[Word], np.ndarray, np.ndarray]]:
    """For each angle of ``lines`` with two words or more: (the angle, degrees mod 360; its lines that
    hold words; their words, line by line; the words' upright spans across and along the line, N x 2
    each, :func:`_upright`), measured when its turn comes (after the angles before it were parted).
    """
    for turn in {ln.angle % 360 for ln in lines}:
        owners = [ln for ln in lines if ln.angle % 360 == turn and ln.words]
        words = [w for ln in owners for w in ln.words]
        if len(words) < 2:
            continue
        across, along = _upright(np.array([w.box for w in words], dtype=np.float64), turn)
        yield turn, owners, words, across, along


def _respanned(owners: list[Line], turn: int) -> None:
    """Sets the box of each line of ``owners`` (running at ``turn`` degrees) to span its words again."""
    for ln in owners:
        _, spans = _upright(np.array([w.box for w in ln.words], dtype=np.float64), turn)
        ln.box = _paged(ln.box, float(spans[:, 0].min()), float(spans[:, 1].max()), turn)


def _near_pairs(across: np.ndarray, along: np.ndarray, font: np.ndarray) -> list[tuple[int, int, float]]:
    """(i, j, font size of the pair) for the pairs i < j, sorted by i then j, of the N words whose
    upright spans ``across`` and ``along`` (N x 2, :func:`_upright`) may need parting: their boxes
    overlap across the line by at least half the shorter one's height, and along it they overlap or
    leave a gap under :data:`BREAK` font sizes (``font`` [N]: of each word's own height; a pair's is
    its taller word's). Every such pair, with the gap measured now, is there; :func:`parted` tests
    them again as it goes.

    Two boxes that overlap across the line have one's top within the other's height, so the words
    are sorted by their top and each is paired with the words whose top lies within its own height:
    O(N log N + the words of one visual line each), where every word against every other was O(N^2).
    """
    n = len(across)
    by_top = np.argsort(across[:, 0], kind="stable")  # by top, then index
    tops = across[by_top, 0]
    # each word with the words after it in that order whose top lies above its bottom: each pair once
    lo = np.arange(1, n + 1)
    counts = np.clip(np.searchsorted(tops, across[by_top, 1], side="left") - lo, 0, None)
    first = by_top[np.repeat(np.arange(n), counts)]
    other = by_top[np.repeat(lo - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))]
    code = np.sort(np.minimum(first, other) * n + np.maximum(first, other))  # by i, then j
    i, j = code // n, code % n
    height = across[:, 1] - across[:, 0]
    shorter = np.minimum(height[i], height[j])
    shared = np.minimum(across[j, 1], across[i, 1]) - np.maximum(across[j, 0], across[i, 0])
    gap = np.maximum(along[j, 0], along[i, 0]) - np.minimum(along[j, 1], along[i, 1])
    pair_font = np.maximum(font[i], font[j])
    reach = BREAK * pair_font
    keep = (shorter > 0) & (shared >= 0.5 * shorter) & (gap < reach + 1e-6 * (1.0 + np.abs(reach)))
    return list(zip(i[keep].tolist(), j[keep].tolist(), pair_font[keep].tolist(), strict=True))


def parted(lines: Sequence[Line]) -> None:
    """Parts, in place, each pair of words of ``lines`` (boxes in page pixels; of one line or of two)
    that run at one angle, share a visual line (their boxes overlap across it by at least half the
    shorter one's height) and overlap along it, or leave a gap under :data:`BREAK` font sizes (font:
    the taller box's height times :func:`reader_geometry`'s size over its height in reader units),
    one not inside the other; a line's box then spans its words again. Pairs are parted in the order
    of their first word, then their second; the pairs of a first word are those near it once the
    pairs before them were parted (parting only narrows words, so the pairs to test are found once,
    :func:`_near_pairs`): O(N log N) for N words in lines.
    """
    above, below, size = reader_geometry()
    for turn, owners, words, across, along in _turns(lines):
        pairs = _near_pairs(across, along, size * (across[:, 1] - across[:, 0]) / (above + below))
        span = along.tolist()  # [start, end] of each word along the line, as parting leaves it
        moved, k = False, 0
        while k < len(pairs):
            i, e = pairs[k][0], k
            while e < len(pairs) and pairs[e][0] == i:
                e += 1
            s0, e0 = span[i]
            near = [(j, f) for _, j, f in pairs[k:e]
                    if max(span[j][0], s0) - min(span[j][1], e0) < BREAK * f
                    and not ((span[j][0] <= s0 and span[j][1] >= e0) or (span[j][0] >= s0 and span[j][1] <= e0))]
            k = e
            for j, f in near:
                pair = (i, j) if span[i][0] <= span[j][0] else (j, i)
                if span[pair[1]][0] - span[pair[0]][1] >= BREAK * f:
                    continue  # parted already by an earlier pair
                opened = _opened(np.array([span[pair[0]], span[pair[1]]], dtype=np.float64), f).tolist()
                for w, (start, end) in zip(pair, opened, strict=True):
                    span[w] = [start, end]
                    _moved(words[w], start, end, turn)
                moved = True
        if moved:
            _respanned(owners, turn)
