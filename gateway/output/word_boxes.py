"""Word boxes of a text line: the words of a segment's text placed on the ink of the segment's image.

A line-level model (``compact``) reports each segment's box and text; the words inside are found
on the page image the segment was read from: the segment's pixels are binarised (Otsu's threshold
over the segment, ink darker than paper), the columns holding ink form runs (a glyph or a few),
and the text's n words are matched to n consecutive groups of runs by dynamic programming that
prefers cutting at wide gaps and gives each word a width close to its share of the characters
(:func:`locate_words`). Each word's box is the bounding box of the ink in its group, so it is tight
around the word as printed (ascenders and descenders included).

The match is refused (None: the caller falls back to spacing words by character share) when the
segment has fewer ink runs than words, too little contrast to tell ink from paper, or a word whose
ink width is far from its character share (a misread line, a line box that cut off part of the
line): a wrong box is worse for search and copy than an evenly spaced one.
"""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from gateway.types import SegmentText
from inkstream.page_result import Box

#: below this spread of grey levels (0-255) over a segment there is no ink to find
MIN_CONTRAST = 48
#: a word's ink width against its character share: refused outside [1 / RATIO, RATIO]
MAX_WIDTH_RATIO = 3.0
#: weight of a word's width error (in gap widths) against the width of the gaps cut at
WIDTH_WEIGHT = 0.35


def page_gray(image: bytes) -> np.ndarray:
    """The page image (PNG/JPEG bytes, as the encoder receives it) as a uint8 H x W grey array."""
    with Image.open(io.BytesIO(image)) as im:
        return np.asarray(im.convert("L"))


def _otsu(values: np.ndarray) -> float:
    hist = np.bincount(values.ravel(), minlength=256).astype(np.float64)
    total = hist.sum()
    levels = np.arange(256, dtype=np.float64)
    w0 = np.cumsum(hist)
    m0 = np.cumsum(hist * levels)
    w1 = total - w0
    with np.errstate(divide="ignore", invalid="ignore"):
        between = (m0[-1] * w0 / total - m0) ** 2 / (w0 * w1)
    between[~np.isfinite(between)] = 0
    return float(np.argmax(between))


def _runs(inked: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) of each run of True values."""
    edges = np.flatnonzero(np.diff(np.concatenate(([0], inked.astype(np.int8), [0]))))
    return [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2], strict=True)]


def _merged(runs: list[tuple[int, int]], keep: int) -> list[tuple[int, int]]:
    """``runs`` with all but the ``keep`` widest gaps closed (a word gap is among the widest of its
    line; fewer runs keep :func:`_groups` fast on long lines).
    """
    if len(runs) - 1 <= keep:
        return runs
    gaps = sorted(range(len(runs) - 1), key=lambda k: runs[k + 1][0] - runs[k][1], reverse=True)[:keep]
    out, start = [], runs[0][0]
    for k in sorted(gaps):
        out.append((start, runs[k][1]))
        start = runs[k + 1][0]
    out.append((start, runs[-1][1]))
    return out


def _groups(runs: list[tuple[int, int]], shares: list[float]) -> list[tuple[int, int]] | None:
    """Split ``runs`` (ink runs, left to right) into len(shares) consecutive groups: [first, last]
    run of each, or None. Maximises the gaps cut at less :data:`WIDTH_WEIGHT` x each group's width
    error against its share of the ink's extent.
    """
    n, m = len(shares), len(runs)
    if m < n:
        return None
    extent = runs[-1][1] - runs[0][0]
    want = [s * extent for s in shares]
    gaps = [runs[k + 1][0] - runs[k][1] for k in range(m - 1)]
    neg = -1e18  # unreachable
    # best[i][k]: words 0..i placed, word i ends at run k
    best = np.full((n, m), neg)
    back = np.zeros((n, m), dtype=np.int64)
    for k in range(m - n + 1):
        best[0][k] = -WIDTH_WEIGHT * abs(runs[k][1] - runs[0][0] - want[0])
    starts = np.array([r[0] for r in runs], dtype=np.float64)
    gap = np.array(gaps, dtype=np.float64)
    for i in range(1, n):
        for k in range(i, m - (n - 1 - i)):
            ends = np.arange(i - 1, k)  # word i-1 ends at run j, word i spans runs j+1..k
            score = best[i - 1][ends] + gap[ends] - WIDTH_WEIGHT * np.abs(runs[k][1] - starts[ends + 1] - want[i])
            t = int(np.argmax(score))
            best[i][k], back[i][k] = score[t], ends[t]
    out: list[tuple[int, int]] = []
    k = m - 1
    for i in range(n - 1, -1, -1):
        prev = int(back[i][k]) if i else -1
        out.append((prev + 1, k))
        k = prev
    return out[::-1]


def locate_words(gray: np.ndarray, text: str, box: Box) -> list[tuple[str, Box]] | None:
    """The words of ``text`` (whitespace-separated) with their ink boxes in the pixels of ``gray``
    (H x W uint8, the image ``box`` is in), or None when they cannot be matched to the ink (see the
    module docstring). ``box``: the segment's (x0, y0, x1, y1) in those pixels.
    """
    words = text.split()
    if not words:
        return []
    h, w = gray.shape
    x0, y0 = max(0, int(np.floor(box[0]))), max(0, int(np.floor(box[1])))
    x1, y1 = min(w, int(np.ceil(box[2]))), min(h, int(np.ceil(box[3])))
    if x1 - x0 < len(words) or y1 <= y0:
        return None
    crop = gray[y0:y1, x0:x1]
    if int(crop.max()) - int(crop.min()) < MIN_CONTRAST:
        return None
    ink = crop <= _otsu(crop)
    if ink.mean() > 0.5:  # light text on a dark ground
        ink = ~ink
    columns = ink.sum(axis=0)
    runs = _merged(_runs(columns > 0), 3 * len(words) + 8)
    chars = [len(wd) for wd in words]
    shares = [c / (sum(chars) + len(chars) - 1) for c in chars]  # spaces count as characters
    groups = _groups(runs, shares)
    if groups is None:
        return None
    extent = runs[-1][1] - runs[0][0]
    out: list[tuple[str, Box]] = []
    for word, share, (a, b) in zip(words, shares, groups, strict=True):
        left, right = runs[a][0], runs[b][1]
        ratio = (right - left) / max(1.0, share * extent)
        if len(words) > 1 and not 1 / MAX_WIDTH_RATIO <= ratio <= MAX_WIDTH_RATIO:
            return None
        rows = np.flatnonzero(ink[:, left:right].any(axis=1))
        out.append((word, (float(x0 + left), float(y0 + rows[0]), float(x0 + right), float(y0 + rows[-1] + 1))))
    return out


def turn_box(box: Box, size: tuple[float, float], degrees: int) -> Box:
    """``box`` of an image of ``size`` (w, h) in the pixels of that image turned counter-clockwise by
    ``degrees`` (0, 90, 180 or 270; PIL ``rotate(degrees, expand=True)``, ``numpy.rot90``).
    """
    w, h = size
    x0, y0, x1, y1 = box
    turns = {0: (x0, y0, x1, y1), 90: (y0, w - x1, y1, w - x0), 180: (w - x1, h - y1, w - x0, h - y0),
             270: (h - y1, x0, h - y0, x1)}
    return turns[degrees % 360]


def locate_segment_words(image: bytes, segments: list[SegmentText], width: int, height: int) -> None:
    """Set ``words`` of each segment of a page (boxes in the encoder's ``width`` x ``height`` pixels,
    as the segments' boxes) from the page ``image`` the encoder was sent (PNG/JPEG bytes, any size:
    boxes are scaled to it and back). A segment with a ``rotation`` is matched on the page turned
    upright and its word boxes turned back. A segment whose words are not found keeps none; an image
    that cannot be decoded leaves every segment without words (the text layer then spaces them evenly).
    """
    try:
        gray = page_gray(image)
    except (OSError, ValueError):
        return
    size = (float(gray.shape[1]), float(gray.shape[0]))
    sx, sy = (size[0] / width, size[1] / height) if width and height else (1.0, 1.0)
    upright: dict[int, np.ndarray] = {}
    for seg in segments:
        turn = seg.rotation % 360
        if turn % 90:
            continue
        if turn not in upright:
            upright[turn] = np.ascontiguousarray(np.rot90(gray, k=turn // 90))
        box = turn_box((seg.box[0] * sx, seg.box[1] * sy, seg.box[2] * sx, seg.box[3] * sy), size, turn)
        found = locate_words(upright[turn], seg.text, box)
        if not found:
            continue
        shown = (float(upright[turn].shape[1]), float(upright[turn].shape[0]))
        back = [turn_box(b, shown, (360 - turn) % 360) for _, b in found]
        seg.words = [(t, (b[0] / sx, b[1] / sy, b[2] / sx, b[3] / sy)) for (t, _), b in zip(found, back, strict=True)]
