"""Text-like ink the page's segments leave unread: the detector's misses, measured on the page.

A line's confidence says how well the recogniser read what it was given; it cannot see text the
detector never gave it (a form field printed on its underline in a photographed form: every line
read right, 5-10 % of the page's characters missing). :func:`unread_ink` measures that text from the
page itself, after its segments are known:

1. *Binarise*: ink is a pixel darker than its neighbourhood by :data:`INK_BELOW_LOCAL` gray levels
   (OpenCV's adaptive mean threshold over a window of :data:`WINDOW_EM` line heights): uneven light
   of a photographed page and a gray background do not turn into ink, strokes do.
2. *Erase rules*: horizontal and vertical runs of ink at least :data:`RULE_EM` line heights long
   (morphological opening with a 1-pixel-thick line) are removed, so underlines, form boxes, table
   rules and the page's edge in a photo are no ink, and the glyphs printed on an underline come
   apart from it.
3. *Components of text size*: 8-connected components whose height lies between
   :data:`GLYPH_MIN_EM` and :data:`GLYPH_MAX_EM`, width at most :data:`GLYPH_MAX_WIDTH_EM` line
   heights and area at least :data:`GLYPH_MIN_AREA_EM2` of a squared line height (a line height: the
   median height of the segments' boxes), and not a dash (at most :data:`DASH_ASPECT` times wider
   than tall: a dashed rule is no text), nor near a solid mass of ink (a photo or logo:
   :data:`MASS_SOLID_EM`, :data:`MASS_MARGIN_EM`; a halftone photo's dots are of text size). Stamps,
   logos and photos are larger; scan noise and photo grain smaller.
4. *Words, not specks*: a component counts only with at least :data:`ROW_NEIGHBOURS` others of text
   size on its row (vertical centres within half a line height) within :data:`ROW_GAP_EM` line
   heights, one of them at least :data:`ROW_TALL_EM` tall: text comes in words with a digit, a
   capital or an ascender in them; noise and texture come alone, a dashed rule's dashes are flat.
5. Each such component is *read* when its centre lies inside a segment's box (grown by
   :data:`BOX_MARGIN_EM` line heights: a box may clip an ascender), else *unread*, when it is
   about as dark as the page's read print (:data:`CONTRAST_SHARE`).

The result is the ratio of unread to read text ink (pixels): with about the same ink per character
on a page, it estimates the characters missed per character read, which the gateway turns into an
expected-CER term (:func:`gateway.output.signal.page_warnings`). About 20-40 ms for a 2,200 px page
on one core.
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

Box = tuple[float, float, float, float]

#: A pixel is ink when it is this many gray levels darker than the mean of its window.
INK_BELOW_LOCAL = 18
#: Side of the local-mean window, in line heights (odd pixels, at least 15).
WINDOW_EM = 1.5
#: Ink runs at least this many line heights long, horizontal or vertical, are rules, not text.
RULE_EM = 1.2
#: ... vertical runs at least this many (a capital of display type twice the page's size is 1.2).
RULE_TALL_EM = 2.0
#: The page is measured at this line height (pixels; scaled down when its lines are taller: a form
#: photographed at 2,200 px has lines of 45-55 px, and the measure costs its pixels).
MEASURE_EM = 20.0
#: Height of a text-size component, in line heights: from a lower-case letter or digit's height
#: (the line box holds the detector's margin, about 1.6x the glyphs) ...
GLYPH_MIN_EM = 0.2
#: ... to a capital of display type twice the page's usual size.
GLYPH_MAX_EM = 2.0
#: The widest text-size component (a few letters run together by blur), in line heights.
GLYPH_MAX_WIDTH_EM = 3.0
#: The smallest text-size component's pixel count, in squared line heights (a dot of an i is not counted:
#: it is too small to matter either way).
GLYPH_MIN_AREA_EM2 = 0.01
#: A *solid mass* of ink (a photo, a logo, a stamp's fill, a black scan edge) is dark over a square of
#: this many line heights (a body-text stroke is about 0.1, display type at 3x its size 0.3) ...
MASS_SOLID_EM = 0.5
#: ... and claims the text-size components within this many line heights of it: a halftone photo's
#: dots and grain in a bilevel scan are of text size and lie in rows.
MASS_MARGIN_EM = 1.0
#: A component this many times wider than tall is a dash (of a dashed rule), not counted.
DASH_ASPECT = 2.5
#: A text-size component counts only with at least this many others on its row ...
ROW_NEIGHBOURS = 2
#: ... within this many line heights, edge to edge, ...
ROW_GAP_EM = 1.5
#: ... and one of them (or itself) at least this many line heights tall: a digit, a capital or an
#: ascender (0.45-0.65 of the box on the fit pages); the dashes of a dashed rule (0.2) are never.
ROW_TALL_EM = 0.4
#: An unread component counts only when its contrast (its darkest pixel below the mean gray of
#: :data:`PAPER_EM` line heights around it) is at least this share of the median contrast of the
#: read ones: the edge of a shaded table row (20-27 gray levels beside print of 160) is no text,
#: while a faded thermal receipt's missed line (about 25, its read print 30-40) is.
CONTRAST_SHARE = 0.5
PAPER_EM = 2.0
#: A segment's box is grown by this many line heights on each side before it claims components.
BOX_MARGIN_EM = 0.25
#: Boxes lower than this (pixels) do not set the line height (a sliver of a split line).
MIN_LINE_PX = 6.0


def line_height(boxes: Sequence[Box]) -> float:
    """Median height (pixels) of the boxes at least :data:`MIN_LINE_PX` tall; 0.0 without any."""
    hs = [b[3] - b[1] for b in boxes if b[3] - b[1] >= MIN_LINE_PX]
    return float(np.median(hs)) if hs else 0.0


def text_ink(gray: np.ndarray, em: float) -> np.ndarray:
    """Binarised ink of a page ``gray`` [H, W] uint8 (0 black) with rules erased (steps 1-2 of the
    module docstring), for a line height of ``em`` pixels: [H, W] uint8, 1 on ink.
    """
    win = max(15, int(round(WINDOW_EM * em)) | 1)
    ink = cv2.adaptiveThreshold(gray, 1, cv2.ADAPTIVE_THRESH_MEAN_C, cv2.THRESH_BINARY_INV, win, INK_BELOW_LOCAL)
    run = max(8, int(round(RULE_EM * em)))
    # thickened across first, so a rule skewed by a few degrees (a photographed page) is one run
    thick = cv2.dilate(ink, np.ones((3, 1), np.uint8))
    across = cv2.morphologyEx(thick, cv2.MORPH_OPEN, np.ones((1, run), np.uint8))
    tall = max(8, int(round(RULE_TALL_EM * em)))
    down = cv2.morphologyEx(cv2.dilate(ink, np.ones((1, 3), np.uint8)), cv2.MORPH_OPEN, np.ones((tall, 1), np.uint8))
    return np.asarray(ink, dtype=np.uint8) * (1 - np.maximum(across, down)).astype(np.uint8)


def picture_mask(gray: np.ndarray, em: float) -> np.ndarray:
    """Where a page ``gray`` holds pictures: its dark pixels (below its Otsu threshold) that are dark
    over a square of :data:`MASS_SOLID_EM` line heights (a photo's or logo's mass, a black scan edge;
    strokes of text and rules are thinner), grown back and by :data:`MASS_MARGIN_EM` line heights:
    [H, W] uint8, 1 in a picture. The local threshold of :func:`text_ink` hollows a solid mass out to
    its rim, so masses are found on a global one.
    """
    _, dark = cv2.threshold(gray, 0, 1, cv2.THRESH_BINARY_INV | cv2.THRESH_OTSU)
    k = max(3, int(round(MASS_SOLID_EM * em)))
    solid = cv2.erode(dark, np.ones((k, k), np.uint8))
    grow = k + 2 * max(1, int(round(MASS_MARGIN_EM * em)))
    return np.asarray(cv2.dilate(solid, np.ones((grow, grow), np.uint8)), dtype=np.uint8)


def glyph_components(ink: np.ndarray, em: float, pics: np.ndarray | None = None) -> np.ndarray:
    """Text-size components of ``ink`` (step 3) whose centre lies outside the picture mask ``pics``
    (:func:`picture_mask`, same shape; None: no pictures): [N, 5] float64 rows of (x0, y0, x1, y1,
    pixel count), pixels of the ink map.
    """
    n, _, stats, _ = cv2.connectedComponentsWithStats(ink, connectivity=8)
    s = stats[1:n].astype(np.float64)
    w, h, area = s[:, cv2.CC_STAT_WIDTH], s[:, cv2.CC_STAT_HEIGHT], s[:, cv2.CC_STAT_AREA]
    keep = (h >= GLYPH_MIN_EM * em) & (h <= GLYPH_MAX_EM * em) & (w <= GLYPH_MAX_WIDTH_EM * em) \
        & (area >= GLYPH_MIN_AREA_EM2 * em * em) & (w <= DASH_ASPECT * h)
    s = s[keep]
    x0, y0 = s[:, cv2.CC_STAT_LEFT], s[:, cv2.CC_STAT_TOP]
    comps = np.stack([x0, y0, x0 + s[:, cv2.CC_STAT_WIDTH], y0 + s[:, cv2.CC_STAT_HEIGHT],
                      s[:, cv2.CC_STAT_AREA]], axis=1) if len(s) else np.zeros((0, 5))
    if len(comps) and pics is not None:  # grain of a picture: at a solid mass of ink
        cx = np.clip(((comps[:, 0] + comps[:, 2]) / 2).astype(int), 0, pics.shape[1] - 1)
        cy = np.clip(((comps[:, 1] + comps[:, 3]) / 2).astype(int), 0, pics.shape[0] - 1)
        comps = comps[pics[cy, cx] == 0]
    return comps


def in_rows(comps: np.ndarray, em: float) -> np.ndarray:
    """Which components ``comps`` [N, >= 4] (x0, y0, x1, y1, ...) have at least :data:`ROW_NEIGHBOURS`
    others on their row within :data:`ROW_GAP_EM` line heights, edge to edge, one of the group at
    least :data:`ROW_TALL_EM` line heights tall: [N] bool.
    """
    if not len(comps):
        return np.zeros(0, dtype=bool)
    order = np.argsort(comps[:, 0], kind="stable")
    c = comps[order]
    cy = (c[:, 1] + c[:, 3]) / 2
    tall = c[:, 3] - c[:, 1]
    reach = ROW_GAP_EM * em
    # neighbours lie within [x0 - reach - widest, x1 + reach] in x0; scan that window of the sorted list
    widest = float((c[:, 2] - c[:, 0]).max())
    lo = np.searchsorted(c[:, 0], c[:, 0] - reach - widest, side="left")
    hi = np.searchsorted(c[:, 0], c[:, 2] + reach, side="right")
    ok = np.zeros(len(c), dtype=bool)
    for i in range(len(c)):
        j = np.arange(lo[i], hi[i])
        j = j[j != i]
        gap = np.maximum(c[j, 0] - c[i, 2], c[i, 0] - c[j, 2])
        near = j[(np.abs(cy[j] - cy[i]) <= em / 2) & (gap <= reach)]
        ok[i] = len(near) >= ROW_NEIGHBOURS and max(tall[i], float(tall[near].max(initial=0.0))) >= ROW_TALL_EM * em
    out = np.zeros(len(c), dtype=bool)
    out[order] = ok
    return out


def split_components(gray: np.ndarray, boxes: Sequence[Box]) -> tuple[float, np.ndarray, np.ndarray]:
    """(scale, read, unread) of a page: the text-size components (module docstring; [N, 5] rows of
    x0, y0, x1, y1 and pixel count, in pixels of the page scaled by ``scale`` to a line height of
    :data:`MEASURE_EM`) whose centre lies inside one of ``boxes`` (x0, y0, x1, y1 in the pixels of
    ``gray`` [H, W] uint8, grown by :data:`BOX_MARGIN_EM`), and those outside every box, each kept
    only in a row of its own kind (step 4: the tail of a read word clipped by its box, or a form
    box's edge beside it, is no unread word). Scale 1.0 and no components without a box of text height.
    """
    empty = np.zeros((0, 5))
    em = line_height(boxes)
    if em <= 0.0:
        return 1.0, empty, empty
    f = min(1.0, MEASURE_EM / em)
    g = np.ascontiguousarray(gray, dtype=np.uint8)
    if f < 1.0:
        size = (max(1, round(g.shape[1] * f)), max(1, round(g.shape[0] * f)))
        g = np.asarray(cv2.resize(g, size, interpolation=cv2.INTER_AREA), dtype=np.uint8)
    em *= f
    comps = glyph_components(text_ink(g, em), em, picture_mask(g, em))
    if not len(comps):
        return f, empty, empty
    contrast = _contrasts(g, comps, em)
    b = np.asarray(boxes, dtype=np.float64).reshape(-1, 4) * f
    m = BOX_MARGIN_EM * em
    cx, cy = (comps[:, 0] + comps[:, 2]) / 2, (comps[:, 1] + comps[:, 3]) / 2
    inside = ((cx[:, None] >= b[None, :, 0] - m) & (cx[:, None] <= b[None, :, 2] + m)
              & (cy[:, None] >= b[None, :, 1] - m) & (cy[:, None] <= b[None, :, 3] + m)).any(axis=1)
    rows = in_rows(comps[inside], em)
    read = comps[inside][rows]
    if not len(read):
        return f, read, empty
    # as dark as the page's print: a shaded cell's edge or a faint band is not text
    bar = CONTRAST_SHARE * float(np.median(contrast[inside][rows]))
    unread = comps[~inside & (contrast >= bar)]
    return f, read, unread[in_rows(unread, em)]


def _contrasts(gray: np.ndarray, comps: np.ndarray, em: float) -> np.ndarray:
    """Gray levels between each component's paper (the mean of ``gray`` over :data:`PAPER_EM` line
    heights around its centre) and its darkest pixel: [N] float64.
    """
    side = max(3, int(round(PAPER_EM * em)) | 1)
    paper = cv2.blur(gray, (side, side))
    out = np.empty(len(comps))
    for k, (x0, y0, x1, y1, _) in enumerate(comps.astype(int)):
        out[k] = float(paper[(y0 + y1) // 2, (x0 + x1) // 2]) - float(gray[y0:y1, x0:x1].min())
    return out


def ink_split(gray: np.ndarray, boxes: Sequence[Box]) -> tuple[float, float]:
    """(read, unread) text ink of a page (:func:`split_components`), pixels at :data:`MEASURE_EM`."""
    _, read, unread = split_components(gray, boxes)
    return float(read[:, 4].sum()), float(unread[:, 4].sum())


def unread_ink(gray: np.ndarray, boxes: Sequence[Box]) -> float:
    """Unread / read text ink of a page (:func:`ink_split`): about the characters the segments missed
    per character they hold; 0.0 when nothing was read.
    """
    read, unread = ink_split(gray, boxes)
    return unread / read if read > 0 else 0.0
