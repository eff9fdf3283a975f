"""Detections that hold several text rows, split into their rows by the ink profile inside the box.

The PP-OCR DB detector (:mod:`models.compact.page.detect`) sometimes returns a whole stretch of a narrow
numeric table column as ONE tall box: rows 1.3-1.8 text heights apart on a coloured column band, or
between vertical rules, come back as a 105 x 1,108 px box spanning 50 rows at score 0.6-0.7 (issue
37; reproduced on ``bench/table_pages.py`` pages: boxes of 3-6 rows at score 0.52-0.62). Read as one
"line" such a box yields nothing or one number, and the column's other numbers are lost.

:func:`split_rows` looks inside every detection taller than :data:`TALL` times the page's median
detection height: the crop's background is estimated per pixel by a grey-level closing (a max then min
filter wider than a stroke, so coloured bands and shaded rows are background too), ink is what is darker
than its background by more than :func:`_ink_threshold`, rows and columns that are almost all ink are
rules (left out), and the rows holding ink form bands. Two or more bands of text height make the
detection that many lines, each box trimmed to its band's ink with a margin like the detector's, and
cut again where its row holds a gap wider than :data:`CELL_GAP` band heights (a box spanning two
columns' cells). A detection with one band (a line of display type, a normal line) is kept as it is.
"""

from __future__ import annotations

import cv2
import numpy as np

from models.compact.line.runs import true_runs
from models.compact.page.boxes import L, _same_line

#: A detection at least this many times the page's median detection height may hold several rows
#: (two rows 1.35 text heights apart in one box measured 1.2-1.5 median heights on dense pages).
TALL = 1.2
#: A row or column of the crop with ink over this share of its length is a rule, not text.
RULE_SHARE = 0.8
#: A row (column) holding one unbroken run of ink over :data:`RULE_SHARE` of the crop's inked width
#: (height) and at least this many stroke widths long (2 line heights: a line is about 5 stroke widths
#: tall; no glyph's stroke, not even a hanzi's "一" or a dash "——", is that long) is a rule too.
RULE_RUN = 10
#: A band under this share of the crop's median band height is a stroke of a neighbour (a hanzi's
#: top stroke, a dot), merged into the band nearest to it.
MIN_BAND_SHARE = 0.4
#: The rows of one detection are rows of one print size: its bands' heights differ by at most this
#: factor (a hanzi row and a digits row 1.4; a logo's swoosh above its letters, 2.5, is no table).
SAME_PRINT = 1.8
#: Within one split row, a run of blank columns this many band heights wide separates two cells.
CELL_GAP = 1.5
#: Paper kept around a split row's ink, as a share of its band height (the detector's boxes keep
#: about this much: DB's unclip ratio 1.6 on 20-45 px text).
MARGIN = 0.25
#: Pixels either side of a rule that are its anti-aliased edge (a 1-3 px rule drawn at a fractional
#: position shades one pixel beside it; one more for a scan's blur), cleared with the rule.
RULE_EDGE = 2
#: Fewer ink pixels than this in a row of the crop is noise, not text.
MIN_ROW_INK = 2
#: A run under MIN_BAND_SHARE of the median run's height at least this many median heights from the
#: runs above and below it is a mark alone on its row, not a stroke of either row (an accent or an
#: i's dot lies within ~0.3): pdfjs_tracemonkey_14p page 12, a table column's '-' cell 15 px above its
#: first number (17 px rows) joined that row, its band looked 2x the print size and SAME_PRINT refused
#: to split the 14-row box (a column of 13 numbers lost).
ALONE_GAP = 0.5


def ink_mask(gray: np.ndarray, stroke_px: int) -> np.ndarray:
    """Ink of a crop ``gray`` uint8 [H, W] (dark print): bool [H, W], True where the pixel is darker
    than its local background by more than :func:`_ink_threshold`. The background is the grey-level
    closing of the crop with a square of ``2 * stroke_px + 1`` pixels (text strokes are thinner, a
    colour band or a shaded row wider); rows and columns holding ink over :data:`RULE_SHARE` of
    their length (table rules), or one unbroken run of ink spanning most of the crop's inked extent
    (:func:`_rule_lines`), are cleared.
    """
    k = 2 * max(2, stroke_px) + 1
    background = cv2.morphologyEx(gray, cv2.MORPH_CLOSE, np.ones((k, k), np.uint8))
    diff = background.astype(np.int16) - gray.astype(np.int16)
    ink = diff > _ink_threshold(diff)
    if ink.size:
        rows = (ink.mean(axis=1) > RULE_SHARE) | _rule_lines(ink, RULE_RUN * stroke_px)
        cols = (ink.mean(axis=0) > RULE_SHARE) | _rule_lines(ink.T, RULE_RUN * stroke_px)
        ink[_with_edges(rows), :] = False
        ink[:, _with_edges(cols)] = False
    return ink


def _rule_lines(ink: np.ndarray, min_run: int) -> np.ndarray:
    """Rows of ``ink`` bool [H, W] that are a rule drawn across the crop's ink but not across the whole
    crop: bool [H], True where the row's longest unbroken run of ink is at least ``min_run`` pixels
    and :data:`RULE_SHARE` of the span of the crop's inked columns. The detector's box often reaches
    past a table's end into blank paper (seed 0 page 0 of ``bench/table_pages.py`` on a CPU without
    AVX-512: a box 41 px wider than the table, so its top and header rules covered 78 % of the crop;
    left in, they joined the header row into a band 36 px tall against 17-20 px, taken for a larger
    print, and a box over 7 rows of a numeric column was not split).
    """
    cols = np.flatnonzero(ink.any(axis=0))
    if cols.size == 0:
        return np.zeros(ink.shape[0], bool)
    padded = np.zeros((ink.shape[0], ink.shape[1] + 2), np.int8)
    padded[:, 1:-1] = ink
    d = np.diff(padded, axis=1)
    rows, starts = np.nonzero(d == 1)
    _, ends = np.nonzero(d == -1)  # row-major: the k-th end closes the k-th start
    longest = np.zeros(ink.shape[0], np.int64)
    np.maximum.at(longest, rows, ends - starts)
    return longest >= max(min_run, RULE_SHARE * (cols[-1] + 1 - cols[0]))


def _with_edges(rule: np.ndarray) -> np.ndarray:
    """``rule`` bool [N] (rows or columns of a crop that are rules) widened by :data:`RULE_EDGE` on
    each side: a rule's anti-aliased edge is part of it. Where a vertical rule crosses a horizontal
    one the edge pixels beside it are dark enough to be ink on a row or two, and such a 1-px speck,
    left in, is joined by :func:`row_bands` to the nearest text row however far (seed 11 page 6 of
    ``bench/tables.py``: specks at a column rule's junctions with the top and header rules made the
    header row's band 77 px tall against 15-19 px, so a 35-row box was not split, 52 cells lost).
    """
    out = rule.copy()
    for d in range(1, RULE_EDGE + 1):
        out[d:] |= rule[:-d]
        out[:-d] |= rule[d:]
    return out


def _ink_threshold(diff: np.ndarray) -> float:
    """Gray levels below the background that count as ink: 35 % of the crop's strong contrast (its
    99.5th percentile), at least 32 (scan noise of sigma 10 stays under it).
    """
    return max(32.0, 0.35 * float(np.percentile(diff, 99.5))) if diff.size else 255.0


def row_bands(ink: np.ndarray, marks: list[tuple[int, int]] | None = None) -> list[tuple[int, int]]:
    """Text rows of an ink mask [H, W]: (y0, y1) runs of rows with at least :data:`MIN_ROW_INK` ink
    pixels; a run under :data:`MIN_BAND_SHARE` of the median run's height joins its nearest neighbour
    (its gap to it the smaller), so a row is never cut through its characters' strokes -- unless it
    lies at least :data:`ALONE_GAP` median heights from every neighbour: then it is no stroke of a
    row but a mark alone on its row (a table's ``-`` for a missing value), left out of the rows and
    appended to ``marks`` when given (a row of its own, but not of the rows' print size).
    """
    bands = true_runs((ink.sum(axis=1) >= MIN_ROW_INK) if ink.size else np.zeros(0, bool))
    while len(bands) > 1:
        heights = [b - a for a, b in bands]
        med = float(np.median(heights))
        small = [i for i, h in enumerate(heights) if h < MIN_BAND_SHARE * med]
        if not small:
            break
        i = small[0]
        gap_up = bands[i][0] - bands[i - 1][1] if i > 0 else None
        gap_down = bands[i + 1][0] - bands[i][1] if i + 1 < len(bands) else None
        if min(g for g in (gap_up, gap_down) if g is not None) >= ALONE_GAP * med:
            if marks is not None:
                marks.append(bands[i])
            del bands[i]
            continue
        j = i - 1 if gap_down is None or (gap_up is not None and gap_up <= gap_down) else i + 1
        lo, hi = sorted((i, j))
        bands[lo: hi + 1] = [(bands[lo][0], bands[hi][1])]
    return bands


Box = tuple[int, int, int, int]


def _pieces(ink: np.ndarray, y0: int, y1: int, top: int, bottom: int, cell_gap: float,
            own: tuple[int, int] | None = None) -> list[Box]:
    """Boxes (x0, y0, x1, y1, crop pixels) of one band's cells: its ink columns (of its ``own`` rows
    when given: a mark's, inside its band), cut at blank runs at least ``cell_gap`` pixels wide, each
    widened by the margin and kept within rows [top, bottom).
    """
    spans: list[list[int]] = []
    r0, r1 = own or (y0, y1)
    for a, b in true_runs(np.asarray(ink[r0:r1].any(axis=0))):
        if spans and a - spans[-1][1] < cell_gap:
            spans[-1][1] = b
        else:
            spans.append([a, b])
    m, w = int(round(MARGIN * (y1 - y0))) + 1, ink.shape[1]
    return [(max(0, a - m), top, min(w, b + m), bottom) for a, b in spans]


def _clear_edge_slivers(ink: np.ndarray, lo: int, hi: int) -> None:
    """Clear, in place, the ink of ``ink`` bool [H, W] that belongs to a neighbour: a run of inked rows
    wholly outside the detection's own rows [lo, hi) that touches the crop's top or bottom edge. The
    crop reaches beyond the detection, so such a run is the edge of the row above or below (a 1-px
    sliver of a header), not a row of this box; left in, :func:`row_bands` would join it to the first
    row across the gap and make that band look like a larger print (seed 7 page 6 of
    ``bench/tables.py``: four numbers of a 3.5-row box were lost so). A run that reaches into [lo, hi)
    is a row the box cut and stays whole.
    """
    runs = true_runs(ink.sum(axis=1) >= MIN_ROW_INK) if ink.size else []
    for a, b in runs:
        if (a == 0 and b <= lo) or (b == ink.shape[0] and a >= hi):
            ink[a:b] = False


def _cut_rows(found: list[tuple[int, int]], inside: list[tuple[int, int]], lo: int, hi: int, h: int,
              tallest: float) -> list[tuple[int, int]]:
    """Bands of ``found`` that a multi-row box cuts through: not in ``inside`` (the bands mostly
    inside its rows [lo, hi)), yet reaching into them, whole within the crop's ``h`` rows (not cut
    by its edge) and no taller than ``tallest`` px (the same print as the box's rows). The detector
    ran its box into such a row without holding it (seed 7 page 6 of ``bench/tables.py``: a 3.4-row
    box ended half-way through ``107``, and no other detection held that row, so it was lost);
    :func:`split_rows` drops the ones that another detection holds.
    """
    return [(a, b) for a, b in found if (a, b) not in inside and min(b, hi) > max(a, lo)
            and a > 0 and b < h and b - a <= tallest]


def _mark_rows(marks: list[tuple[int, int]], lo: int, hi: int, height: int, h: int,
               own: dict[tuple[int, int], tuple[int, int]]) -> list[tuple[int, int]]:
    """Rows (y0, y1) for the marks alone on their rows (:func:`row_bands`) that lie within the box's
    rows [lo, hi): each a band of the rows' median ``height`` px centred on its mark (clipped to the
    crop's ``h`` rows), so a table's ``-`` cell is read at the print size of its column, not lost;
    ``own`` maps each such band to its mark's own rows (where its ink columns are looked for).
    """
    out = []
    for a, b in marks:
        if lo <= (a + b) / 2 < hi:
            c = (a + b) // 2
            band = (max(0, c - height // 2), min(h, c - height // 2 + height))
            own[band] = (a, b)
            out.append(band)
    return out


def split_box(gray: np.ndarray, stroke_px: int, inner: tuple[int, int] | None = None) -> list[Box]:
    """The rows (and cells) of one detection's crop ``gray`` uint8 [H, W]: boxes (x0, y0, x1, y1) in
    crop pixels, top to bottom, left to right; [] when the crop holds fewer than two text rows, or
    rows of print sizes further apart than :data:`SAME_PRINT`.
    ``inner`` (y0, y1): the detection's own rows when the crop reaches beyond it (the detector's box
    often cuts its first or last row through the characters): only bands mostly inside it count,
    each with its whole height; once they make two rows or more, a row the box cuts through
    (:func:`_cut_rows`) is a row of it too. Default: the whole crop.
    """
    ink = ink_mask(gray, stroke_px)
    lo, hi = inner or (0, gray.shape[0])
    if inner is not None:
        _clear_edge_slivers(ink, lo, hi)
    marks: list[tuple[int, int]] = []
    found = row_bands(ink, marks)
    own: dict[tuple[int, int], tuple[int, int]] = {}
    bands = [(a, b) for a, b in found if min(b, hi) - max(a, lo) > (b - a) / 2]
    heights = [b - a for a, b in bands]
    if len(bands) < 2 or max(heights) > SAME_PRINT * min(heights):
        return []
    bands = sorted(bands + _cut_rows(found, bands, lo, hi, gray.shape[0], SAME_PRINT * min(heights))
                   + _mark_rows(marks, lo, hi, int(np.median(heights)), gray.shape[0], own))
    out = []
    for i, (y0, y1) in enumerate(bands):
        m = MARGIN * (y1 - y0) + 1
        top = max(0, int((bands[i - 1][1] + y0) / 2)) if i > 0 else 0
        bottom = int((y1 + bands[i + 1][0]) / 2 + 1) if i + 1 < len(bands) else gray.shape[0]
        top, bottom = max(top, int(y0 - m)), min(bottom, int(y1 + m + 1))
        out += _pieces(ink, y0, y1, top, bottom, CELL_GAP * (y1 - y0), own.get((y0, y1)))
    return out


def split_rows(rgb: np.ndarray, lines: list[L], make: type | None = None) -> list[L]:
    """``lines`` (detections on the page ``rgb`` [H, W, 3] uint8, boxes in its pixels) with every tall
    detection holding several text rows replaced by one axis-aligned line per row (and cell), in
    place, same score; other lines unchanged, same order. A row that another detection already holds
    (the detector found it both alone and inside the tall box) is not added twice. The crop analysed
    reaches half a median line height above and below the box, so a row the box cuts is whole.
    ``make(quad, box, score)`` builds a line (default: the type of the line split).
    """
    if len(lines) < 2:
        return list(lines)
    heights = sorted(ln.box[3] - ln.box[1] for ln in lines)
    med_h = heights[len(heights) // 2]
    reach = int(round(med_h / 2))
    gray: np.ndarray | None = None
    out: list[L] = []
    added: list[tuple[float, float, float, float]] = []  # boxes of the rows split off so far
    for ln in lines:
        x0, y0, x1, y1 = (int(round(v)) for v in ln.box)
        if y1 - y0 < TALL * med_h or x1 - x0 < 2:
            out.append(ln)
            continue
        if gray is None:
            gray = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2GRAY)
        top = max(0, y0 - reach)
        crop = gray[top: min(gray.shape[0], y1 + reach), max(0, x0):x1]
        pieces = split_box(crop, max(2, int(med_h * 0.2)), (y0 - top, y1 - top))
        if not pieces:
            out.append(ln)
            continue
        build = make or type(ln)
        others = [o.box for o in lines if o is not ln and o.box[3] - o.box[1] < TALL * med_h]
        others += added  # rows of an overlapping tall box split before
        for a, b, c, d in pieces:
            box = (float(max(0, x0) + a), float(top + b), float(max(0, x0) + c), float(top + d))
            if any(_same_line(box, o) for o in others):
                continue
            quad = np.array([[box[0], box[1]], [box[2], box[1]], [box[2], box[3]], [box[0], box[3]]], np.float32)
            out.append(build(quad, box, ln.score))
            added.append(box)
    return out
