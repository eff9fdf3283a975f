"""The band across a line of located words that the text layer sets the line on (its line box).

OCRmyPDF's renderer (:class:`ocrmypdf.fpdf_renderer.Fpdf2PdfRenderer`, which draws our searchable
PDF's text layer and which OCRmyPDF users run on our hOCR) sets a line's words in Noto Sans at a font
size and baseline it derives from the line box's height ``h`` alone (no hOCR ``baseline``): font size
``a / (a + d) * h``, baseline ``d / (a + d) * h`` above the box's bottom (``a``, ``d``: the font's
ascent and descent per em). A reader such as poppler's ``pdftotext`` gives each word a box from
``a`` font sizes above the baseline to ``d`` below it (the font descriptor's Ascent / Descent) and
groups words by thresholds in font sizes (poppler's TextOutputDev: a word joins the block on its
left only within 1.0 font size, ``minColSpacing2``; lines within 1.5 font sizes of each other join
one block). :func:`reader_geometry` gives this geometry per unit of ``h``.

So the line box sets two things at once: how tall each word's box is as read (it should overlap the
word's ink, IoU >= 0.5) and the font size that the word gaps are measured against (a gap wider than
one font size splits the line into blocks, which poppler's default mode orders with Breuel's rules,
so that words of a line come out after a line below it or after a margin column beside it).
:func:`set_row` sets a row: a line alone, or lines that share one visual line in reading order
(:func:`same_row`: a transcript's line number and its line, a form's parts):

* the band (the reader's box across the line) is by default from 0.3 x-height above the x-height
  line to 0.2 of it below the baseline, placed where the row's smallest word IoU is largest; where
  that leaves a gap wider than :data:`JOIN` font sizes open or a word under :data:`MIN_IOU`, 24
  heights from 0.6 of it to what the widest gap needs are tried, and the one kept that keeps every
  word at :data:`MIN_WORD_IOU`, leaves fewest gaps open and then has the best worst IoU (a line in
  capitals or monospaced type has the word gaps of a font larger than its x-height suggests);
* a gap still too wide is closed to :data:`JOIN` font sizes by widening the words beside it along
  the line, each as far as keeps its IoU >= :data:`MIN_WORD_IOU` (:func:`_widened`), the gap between
  two lines of a row too, so a numbered row reads as one block where its words allow; a column gap
  (over :data:`MAX_CLOSE` more font sizes) is left;
* all lines of a row share the band, so a reader sees them at one height and orders them left to
  right;
* a gap narrower than :data:`BREAK` font sizes (word boxes that touch) is opened to it by trimming
  the words beside it (:func:`_opened`), so a reader does not join two words into one;
* the band is never taller than lets a reader take every word's glyphs apart
  (:mod:`gateway.output.glyph_room`: a word set in a font too large for its box has its glyphs
  under 0.1 font sizes apart, which poppler drops as duplicates); a taller one shrinks about its
  middle.

A line without located words keeps its loose box (no taller than its glyphs allow either, then
about the middle of its words); only its too-wide gaps are closed (:func:`close_gaps`).
"""

from __future__ import annotations

import functools
import pathlib
from collections.abc import Sequence

import numpy as np
import ocrmypdf
from ocrmypdf.font import FontManager

from gateway.output.glyph_room import largest_font
from inkstream.page_result import Box

#: widest word gap, in font sizes as the reader sees them, that the band aims for (poppler: < 1.0)
JOIN = 0.93
#: smallest IoU across the line of a word's box as read with its ink that growing the band may leave
MIN_IOU = 0.62
#: smallest IoU of a word's box as read with its ink that widening it along the line may leave
MIN_WORD_IOU = 0.53
#: widest gap, in font sizes beyond :data:`JOIN`, that widening closes (a wider one separates columns)
MAX_CLOSE = 3.0
#: narrowest word gap, in font sizes as the reader sees them, that the text layer leaves: poppler's
#: TextOutputDev joins two glyph runs into one word when the gap between them is under 0.1 font sizes
#: (``minWordBreakSpace``); 0.3 leaves room for the hOCR's whole-pixel boxes as OCRmyPDF's renderer
#: sets them (0.2 still joined 7 of 226 lines of a 300 dpi page there, 0.3 none)
BREAK = 0.3
#: largest share of a word's width that opening a gap to :data:`BREAK` may trim from each side of it
MAX_TRIM = 0.15
_FONT = pathlib.Path(str(ocrmypdf.__file__)).parent / "data" / "NotoSans-Regular.ttf"


@functools.cache
def reader_geometry() -> tuple[float, float, float]:
    """(above, below, size): a word that OCRmyPDF's renderer sets on a line box of height ``h`` is
    read (poppler) as a box from ``above * h`` over the line box's bottom to ``below * h`` under it,
    at a font size of ``size * h``. From Noto Sans' ascent and descent (OCRmyPDF's font); raises
    OSError when the font file is missing.
    """
    ascent, descent, upem = FontManager(_FONT).get_font_metrics()
    a, d = ascent / upem, abs(descent) / upem
    size = a / (a + d)
    base = d / (a + d)  # baseline over the box's bottom
    return base + a * size, d * size - base, size


#: a word of a line as the text layer sets it: text, box in page pixels, and whether the box is the
#: word's ink (a located word) or only its share of a loose line box
LaidWord = tuple[str, Box, bool]


def _upright(boxes: np.ndarray, turn: int) -> tuple[np.ndarray, np.ndarray]:
    """(N x 2 across-the-line spans (top, bottom), N x 2 along-the-line spans (start, end)) of N x 4
    page ``boxes`` in the upright frame of a line running at ``turn`` degrees (coordinates growing
    downwards and in reading direction).
    """
    b = boxes.reshape(-1, 4)
    across = {0: b[:, [1, 3]], 180: -b[:, [3, 1]], 90: b[:, [0, 2]], 270: -b[:, [2, 0]]}[turn]
    along = {0: b[:, [0, 2]], 180: -b[:, [2, 0]], 90: -b[:, [3, 1]], 270: b[:, [1, 3]]}[turn]
    return across, along


def _paged(box: Box, start: float, end: float, turn: int) -> Box:
    """``box`` with its extent along a line running at ``turn`` set to the upright frame's
    [start, end] (the inverse of :func:`_upright` along the line).
    """
    x0, y0, x1, y1 = box
    return {0: (start, y0, end, y1), 180: (-end, y0, -start, y1), 90: (x0, -end, x1, -start),
            270: (x0, start, x1, end)}[turn]


def _default_band(spans: np.ndarray) -> tuple[float, float]:
    """The band (top, bottom) of the reader's box from 0.3 x-height above the x-height line to 0.2
    of it below the baseline (baseline: the lower quartile of the words' bottoms; x-height line:
    the upper quartile of their tops, dashes and dots left out; the x-height kept within 0.45-0.72
    of the tallest word's ink).
    """
    marks = _inked(spans)
    bottoms = np.sort(marks[:, 1])
    base = float(bottoms[len(bottoms) // 4])  # words with descenders end below the baseline
    tops = np.sort(marks[:, 0])
    x_top = float(tops[(3 * len(tops)) // 4])  # words with ascenders or capitals start above the x-height
    tall = float((spans[:, 1] - spans[:, 0]).max())
    xh = min(max(base - x_top, 0.45 * tall), 0.72 * tall)
    return base - 1.3 * xh, base + 0.2 * xh


def _inked(spans: np.ndarray) -> np.ndarray:
    """The spans at least 0.4 as tall as the tallest: not dashes, dots, quotes (which no band
    overlaps by half).
    """
    heights = spans[:, 1] - spans[:, 0]
    return spans[heights >= 0.4 * heights.max()]


def _fit(spans: np.ndarray, top: np.ndarray | float, height: float) -> np.ndarray:
    """IoU of each of the ``spans`` (N x 2) with a box from ``top`` (a scalar, or M x 1 for M
    boxes: M x N) ``height`` tall.
    """
    overlap = np.clip(np.minimum(top + height, spans[:, 1]) - np.maximum(top, spans[:, 0]), 0.0, None)
    return overlap / np.maximum((spans[:, 1] - spans[:, 0]) + height - overlap, 1e-9)


def _best_placement(spans: np.ndarray, height: float) -> tuple[float, float]:
    """(top, smallest IoU) of a box ``height`` tall placed across the words' ``spans`` so that
    the smallest IoU of a word's span with it is largest (searched on a grid of 97 positions).
    """
    lo, hi = float(spans[:, 1].min()) - height, float(spans[:, 0].max())
    tops = np.linspace(min(lo, hi), max(lo, hi), 97)[:, None]
    worst = _fit(spans, tops, height).min(axis=1)
    k = int(np.argmax(worst))
    return float(tops[k, 0]), float(worst[k])


def _widened(along: np.ndarray, fit: np.ndarray, font: float) -> tuple[np.ndarray, int]:
    """(the words' ``along`` spans (N x 2, in reading order along a row) with each gap still wider
    than :data:`JOIN` ``font`` sizes closed to that width by widening the two words beside it, the
    number of such gaps left open). A word gives at most what keeps its IoU with its ink >=
    :data:`MIN_WORD_IOU` (``fit``: each word's IoU across the line; a word that misses its ink anyway,
    IoU < 0.5 (a dash, a dot, a word without ink box), gives freely), shared between its two gaps
    in proportion to what each lacks; a gap that cannot be closed so is left as it is, one wider
    than :data:`MAX_CLOSE` more font sizes (a column gap) too.
    """
    out = along.copy()
    widths = along[:, 1] - along[:, 0]
    budget = np.where(fit < 0.5, np.inf, np.clip(widths * (fit / MIN_WORD_IOU - 1.0), 0.0, None))
    short = np.clip(along[1:, 0] - along[:-1, 1] - JOIN * font, 0.0, None)
    apart = int((short > MAX_CLOSE * font).sum())  # column gaps: left open
    short[short > MAX_CLOSE * font] = 0.0
    before = np.concatenate(([0.0], short))  # what the gap before each word lacks
    after = np.concatenate((short, [0.0]))
    with np.errstate(invalid="ignore", divide="ignore"):
        give_after = np.where(after > 0, budget * after / (before + after), 0.0)
        give_before = np.where(before > 0, budget * before / (before + after), 0.0)
    still_open = apart
    for k in np.flatnonzero(short > 0):
        left, right = give_after[k], give_before[k + 1]
        if left + right < short[k]:
            still_open += 1
            continue
        take = short[k] / 2 if np.isinf(left) and np.isinf(right) else (
            short[k] if np.isinf(left) else 0.0 if np.isinf(right) else short[k] * left / (left + right))
        out[k, 1] += take
        out[k + 1, 0] -= short[k] - take
    return out, still_open


def _opened(along: np.ndarray, font: float) -> np.ndarray:
    """The words' ``along`` spans (N x 2, in reading order along a row) with each gap narrower than
    :data:`BREAK` ``font`` sizes (word boxes that touch or overlap: two words whose ink nearly meets,
    or a located word that took its neighbour's first letter) opened to that width by trimming the
    two words beside it equally, each by at most :data:`MAX_TRIM` of its width, so a reader still
    sees two words where the text has two (``inputto`` otherwise). Two boxes that overlap further
    (a detector box that took in much of its neighbour's ink) are laid over the span they cover
    together instead, that gap between them, each keeping its share of their widths: a reader would
    otherwise read the two as one word (``-11-112.63%``).
    """
    out = along.copy()
    cut = MAX_TRIM * np.clip(along[:, 1] - along[:, 0], 0.0, None)
    lack = np.clip(BREAK * font - (along[1:, 0] - along[:-1, 1]), 0.0, None)
    # only words that follow each other along the line (a word set out of order is left as it is)
    lack[(along[1:, 0] <= along[:-1, 0]) | (along[1:, 1] <= along[:-1, 1])] = 0.0
    for k in np.flatnonzero(lack > 0):
        take = min(lack[k] / 2, float(cut[k]), float(cut[k + 1]))
        if take < lack[k] / 2:
            start, end = float(out[k, 0]), float(out[k + 1, 1])
            first, then = float(out[k, 1] - out[k, 0]), float(out[k + 1, 1] - out[k + 1, 0])
            room = end - start - BREAK * font
            if room > 0 and first > 0 and then > 0:
                out[k, 1] = start + room * first / (first + then)
                out[k + 1, 0] = out[k, 1] + BREAK * font
            continue
        out[k, 1] -= take
        out[k + 1, 0] += take
    return out


def _set(spans: np.ndarray, located: np.ndarray, along: np.ndarray,
         height: float) -> tuple[float, np.ndarray, int, float]:
    """(band top, widened ``along`` spans, gaps left open, smallest IoU of a located word) of a row
    set on a band ``height`` tall placed where its words' smallest IoU across the line is largest.
    """
    inked = _inked(spans[located])
    top, _ = _best_placement(inked, height)
    fit = np.where(located, _fit(spans, top, height), 0.0)
    above, below, size = reader_geometry()
    widened, still_open = _widened(along, fit, size * height / (above + below))
    grown = (widened[:, 1] - widened[:, 0]) / np.maximum(along[:, 1] - along[:, 0], 1e-9)
    heights = spans[:, 1] - spans[:, 0]
    inked_words = located & (heights >= 0.4 * heights[located].max())  # not dashes, dots, quotes
    worst = float((fit / grown)[inked_words].min())
    return top, widened, still_open, worst


def _chosen(spans: np.ndarray, located: np.ndarray, along: np.ndarray) -> tuple[float, float, np.ndarray]:
    """(band top, band height, widened along spans) of a row (see the module docstring): the
    default band where it closes every word gap and keeps every word at IoU >= :data:`MIN_IOU`;
    otherwise, of the default and 24 heights from 0.6 of it to what the widest gap needs (at most 3
    times it), one that keeps every word at IoU >= :data:`MIN_WORD_IOU` if any does, of those one
    that leaves fewest gaps open, and of those the one whose worst word IoU is largest.
    """
    above, below, size = reader_geometry()
    top, bottom = _default_band(spans[located])
    default = bottom - top
    first = _set(spans, located, along, default)
    if first[2] == 0 and first[3] >= MIN_IOU:
        return first[0], default, first[1]
    widest = float((along[1:, 0] - along[:-1, 1]).max(initial=0.0))
    need = widest / JOIN * (above + below) / size  # a box as read is (above + below) / size fonts tall
    tried = [(default, first)] + [(float(h), _set(spans, located, along, float(h)))
                                  for h in np.linspace(0.6 * default, max(default, min(need, 3.0 * default)), 24)]
    height, (top, widened, _, _) = min(tried, key=lambda t: (t[1][3] < MIN_WORD_IOU, t[1][2], -t[1][3]))
    return top, height, widened


def set_row(lines: Sequence[Sequence[LaidWord]], angle: int) -> list[tuple[Box, list[Box]]]:
    """(line box, word boxes) in page pixels of each line of a row: ``lines`` that share one visual
    line of the page (a line number and the line beside it; one line alone), in reading order, each
    a list of its words in reading order, running at ``angle`` degrees counter-clockwise (0, 90, 180,
    270). Every line box spans its words along the line and, across it, the one band of the module
    docstring set from the row's located words (one band: a reader sees the row's lines side by
    side at one height and orders them left to right); each word box is the word's own, widened
    along the line into a gap the band leaves too wide (:func:`_widened`) or trimmed from one too
    narrow to read as a word break (:func:`_opened`). Raises ValueError when
    the row has no located word.
    """
    turn = angle % 360
    laid = [(np.array([w[1] for w in ln], dtype=np.float64).reshape(-1, 4), np.array([w[2] for w in ln], dtype=bool))
            for ln in lines]
    if not any(m.any() for _, m in laid):
        raise ValueError("a row needs at least one located word")
    alongs = [_upright(b, turn)[1] for b, _ in laid]
    across = np.concatenate([_upright(b, turn)[0] for b, _ in laid])
    located = np.concatenate([m for _, m in laid])
    # the row's words in one run: a gap between two of its lines is closed as one inside a line is
    shown_top, height, along = _chosen(across, located, np.concatenate(alongs))
    above, below, size = reader_geometry()
    texts = [w[0] for ln in lines for w in ln]
    for step in range(2):  # a band so tall that it squeezes some word's glyphs together: about its middle
        legible = _legible_height(texts, along)
        if height > legible:
            shown_top, height = shown_top + (height - legible) / 2, legible
        if step == 0:  # the gaps opened at the font size of the band as it is now (trimming may tighten it)
            along = _opened(along, size * height / (above + below))
    h = height / (above + below)
    bottom = shown_top + height - below * h
    out: list[tuple[Box, list[Box]]] = []
    first = 0
    for ln in lines:
        part = along[first:first + len(ln)]
        first += len(ln)
        words = [_paged(w[1], float(a), float(b), turn) for w, (a, b) in zip(ln, part, strict=True)]
        start, end = float(part[:, 0].min()), float(part[:, 1].max())
        line = _paged((0.0, 0.0, 0.0, 0.0), start, end, turn)
        band: Box = {0: (line[0], bottom - h, line[2], bottom), 180: (line[0], -bottom, line[2], -(bottom - h)),
                     90: (bottom - h, line[1], bottom, line[3]), 270: (-bottom, line[1], -(bottom - h), line[3])}[turn]
        out.append((band, words))
    return out


def close_gaps(words: Sequence[LaidWord], box: Box, angle: int) -> tuple[Box, list[Box]]:
    """(line box, word boxes) of a line set on its own ``box`` (a line without located words: its
    words spread over the line's loose box, the union of its pieces' boxes), each gap wider than
    :data:`JOIN` font sizes closed to that width by widening the words beside it (their boxes are
    only shares of the line anyway). The line box is ``box``, but no taller than keeps each word's
    glyphs apart for a reader (:func:`_legible_height`; a piece's box that ran far across the line,
    down a table column, made it taller), then about the middle of its words (by characters).
    """
    turn = angle % 360
    boxes = np.array([w[1] for w in words], dtype=np.float64).reshape(-1, 4)
    spans, along = _upright(boxes, turn)
    across = _upright(np.array(box, dtype=np.float64), turn)[0][0]
    texts = [w[0] for w in words]
    height = min(float(across[1] - across[0]), _legible_height(texts, along))
    font = reader_geometry()[2] * height
    along, _ = _widened(along, np.zeros(len(along)), font)
    along = _opened(along, font)
    legible = min(height, _legible_height(texts, along))
    if across[1] - across[0] > legible:
        chars = np.array([len(w[0]) for w in words], dtype=np.float64)
        middles = spans.mean(axis=1)
        order = np.argsort(middles)
        mid = float(middles[order][np.searchsorted(np.cumsum(chars[order]), chars.sum() / 2)])
        top = min(max(mid - legible / 2, float(across[0])), float(across[1]) - legible)
        x0, y0, x1, y1 = box
        bottom = top + legible
        box = {0: (x0, top, x1, bottom), 180: (x0, -bottom, x1, -top), 90: (top, y0, bottom, y1),
               270: (-bottom, y0, -top, y1)}[turn]
    return box, [_paged(w[1], float(a), float(b), turn) for w, (a, b) in zip(words, along, strict=True)]


def _legible_height(texts: Sequence[str], along: np.ndarray) -> float:
    """The tallest band (line box height, page pixels) at whose font size every word of ``texts``
    set over its ``along`` span keeps its glyphs apart for a reader (:func:`glyph_room.largest_font`).
    """
    above, below, size = reader_geometry()
    font = largest_font(zip(texts, (along[:, 1] - along[:, 0]).tolist(), strict=True))
    return font * (above + below) / size


def set_line(words: Sequence[LaidWord], angle: int) -> tuple[Box, list[Box]]:
    """(line box, word boxes) of one line alone: :func:`set_row` of a row of one line."""
    return set_row([words], angle)[0]


def same_row(first: Sequence[LaidWord], then: Sequence[LaidWord], angle: int) -> bool:
    """Whether line ``then`` continues the visual line of line ``first`` (both running at ``angle``):
    their located words' ink (a line without located words: its words' boxes, shares of its loose
    box) overlaps across the line by half the shorter one's height, is at most 1.8 times as tall
    (not a heading beside a page number) and ``then`` starts after ``first`` ends along it (a line
    number and its line; the parts of a form's row).
    """
    ink = [np.array([w[1] for w in ln if w[2]] or [w[1] for w in ln], dtype=np.float64) for ln in (first, then)]
    if not all(len(b) for b in ink):
        return False
    (a_across, a_along), (b_across, b_along) = (_upright(b, angle % 360) for b in ink)
    top, bottom = max(a_across[:, 0].min(), b_across[:, 0].min()), min(a_across[:, 1].max(), b_across[:, 1].max())
    shorter, taller = sorted((float(np.ptp(a_across)), float(np.ptp(b_across))))
    return bool(bottom - top >= 0.5 * shorter and taller <= 1.8 * shorter
                and b_along[:, 0].min() >= a_along[:, 1].max())
