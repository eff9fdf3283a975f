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

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from gateway.output.text_band import BREAK, _opened, _paged, _upright, reader_geometry

if TYPE_CHECKING:  # lines imports this module
    from gateway.output.lines import Line, Word


def _moved(word: Word, start: float, end: float, turn: int) -> None:
    """Sets ``word``'s extent along a line running at ``turn`` to the upright frame's [start, end]."""
    word.box = _paged(word.box, start, end, turn)


def parted(lines: Sequence[Line]) -> None:
    """Parts, in place, each pair of words of ``lines`` (boxes in page pixels; of one line or of two)
    that run at one angle, share a visual line (their boxes overlap across it by at least half the
    shorter one's height) and overlap along it, or leave a gap under :data:`BREAK` font sizes (font:
    the taller box's height times :func:`reader_geometry`'s size over its height in reader units),
    one not inside the other; a line's box then spans its words again. Vectorised per word:
    O(N^2) box tests for N words, a few ms for a page of 3,000.
    """
    above, below, size = reader_geometry()
    for turn in {ln.angle % 360 for ln in lines}:
        owners = [ln for ln in lines if ln.angle % 360 == turn and ln.words]
        words = [w for ln in owners for w in ln.words]
        if len(words) < 2:
            continue
        across, along = _upright(np.array([w.box for w in words], dtype=np.float64), turn)
        moved = False
        for i in range(len(words) - 1):
            a, b = across[i + 1:], along[i + 1:]
            tall = np.maximum(a[:, 1] - a[:, 0], across[i, 1] - across[i, 0])
            shorter = np.minimum(a[:, 1] - a[:, 0], across[i, 1] - across[i, 0])
            shared = np.minimum(a[:, 1], across[i, 1]) - np.maximum(a[:, 0], across[i, 0])
            font = size * tall / (above + below)
            gap = np.maximum(b[:, 0], along[i, 0]) - np.minimum(b[:, 1], along[i, 1])
            inside = ((b[:, 0] <= along[i, 0]) & (b[:, 1] >= along[i, 1])) | \
                     ((b[:, 0] >= along[i, 0]) & (b[:, 1] <= along[i, 1]))
            near = (shorter > 0) & (shared >= 0.5 * shorter) & (gap < BREAK * font) & ~inside
            for j in np.flatnonzero(near) + i + 1:
                pair = [i, int(j)] if along[i, 0] <= along[j, 0] else [int(j), i]
                spans = along[pair]
                if spans[1, 0] - spans[0, 1] >= BREAK * font[j - i - 1]:
                    continue  # parted already by an earlier pair
                along[pair] = _opened(spans, float(font[j - i - 1]))
                for k in pair:
                    _moved(words[k], float(along[k, 0]), float(along[k, 1]), turn)
                moved = True
        if moved:
            for ln in owners:
                _, spans = _upright(np.array([w.box for w in ln.words], dtype=np.float64), turn)
                ln.box = _paged(ln.box, float(spans[:, 0].min()), float(spans[:, 1].max()), turn)
