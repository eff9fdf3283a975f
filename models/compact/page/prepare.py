"""Page and line preparation of the ``compact`` encoder for print it was not trained on: light text on
a dark background, and faint marks (bleed-through from the back of the sheet) that are not text.

The recogniser was trained on dark ink on light paper (:mod:`models.compact.line.image`), so:

* :func:`positive` inverts a page whose paper is dark (white-on-black slides, terminal screenshots,
  negative scans) before detection: the page is inverted when both the median gray of the whole page
  and that of its outer frame (the margins, :data:`FRAME`) are below :data:`DARK_PAPER_BELOW` (a
  large dark photo on a page with white margins does not turn the page). Pages mixing both (a dark
  banner on a white page) are handled per line by :func:`dark_on_light`, which inverts a line crop
  whose border (its paper) is darker than its ink.
* :func:`inked_lines` drops detected lines whose ink is too faint to be print: the ink contrast of a
  line is its paper level (the 90th gray percentile of the crop: even bold display type leaves more
  than 10 % of its box blank) minus its ink level (the 1st percentile, the darkest 1 % of the crop's
  pixels), in 8-bit gray levels. Print, even light
  gray print, has a contrast of 90 levels and more; text from the back of the sheet showing through
  (mirrored, 88-95 % white) has 13-31. A line below :data:`MIN_INK_CONTRAST` is not read, unless
  the page's print is that faint too; and where contrast cannot tell faint print from show-through
  (the *faint band*, :data:`SHOW_MIN_CONTRAST`), the recogniser decides: show-through reads
  mirrored (:mod:`models.compact.line.show_through`).
* :func:`tighten` trims a large line crop (display type, whose detector box holds a wide paper
  margin) to its ink with a margin, as the recogniser's training lines were cut; body-text crops
  (under :data:`TIGHTEN_MIN_PX` tall) are left exactly as detected.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np
from PIL import Image, ImageOps

from models.compact.line.image import gray_percentiles
from models.compact.line.show_through import forward_page

#: A page whose median gray (0 black .. 255 white) is below this has dark paper and light text.
DARK_PAPER_BELOW = 110.0
#: Gray levels between a line's paper and its darkest ink below which the line is not print: between
#: bleed-through (<= 31 levels at 88 % white) and light gray print (>= 90 levels at 65 % white).
MIN_INK_CONTRAST = 56.0
#: ... unless the page's print is that faint too (a faded thermal receipt: lines at 42-72 levels on
#: generated receipts whose ink was lifted to 190 of 255; RapidOCR reads them): a line of at least
#: FADED_MIN_CONTRAST levels (above the 31 of bleed-through at 88 % white, so a page of bleed-through
#: alone stays empty) is print when it has at least FADED_SHARE of the contrast of the page's
#: strong lines (the 90th percentile of its lines' contrasts; bleed-through beside black print has a
#: fifth of it). The rule of a checkpoint without a PP tower; one with reads the faint band instead.
FADED_MIN_CONTRAST = 40.0
FADED_SHARE = 0.6
#: The faint band: a line below MIN_INK_CONTRAST but of at least SHOW_MIN_CONTRAST levels (above the
#: 13 of show-through at 95 % white; the faintest lines of the faded receipts of ``bench/receipts.py``'s
#: tune seeds 30,000-30,035 measure 27-28) and SHOW_SHARE of the page's strong lines (the faded
#: receipts' faintest lines hold 0.49-0.56 of it: blotches halve the ink; show-through beside black
#: print a fifth) is print or show-through; :func:`inked_lines` asks ``reads_forward`` which, of at
#: most SHOW_SAMPLE of them spread over the band (the page decides, not each line). The sample holds
#: a page's whole band (up to 64 lines): a sample of 12 spread over the band in reading order voted by
#: which lines the order put where -- a mirrored till roll at 45 levels, whose lines read forwards in
#: 16 of 28 cases, voted 5/12 read column by column and 9/12 read row by row.
SHOW_MIN_CONTRAST = 20.0
SHOW_SHARE = 0.4
SHOW_SAMPLE = 64
#: Pixels of ink that are print enough (a stroke of a small digit): the ink level of a crop is at most
#: the gray of its this-many-th darkest pixel (:func:`ink_contrast`).
MIN_INK_PIXELS = 24
#: Crops at least this tall (pixels) are trimmed to their ink (display type; body text is 15-60 px).
TIGHTEN_MIN_PX = 96
#: Paper kept around the ink of a trimmed crop, as a share of the ink's height (above / below, and
#: on the left / right).
TIGHTEN_MARGIN = (0.25, 0.25)
#: Share of the page's width / height on each side that makes its outer frame (margins).
FRAME = 0.05
#: Long side (pixels) of the thumbnail the page's paper level is measured on (speed).
_PROBE_PX = 256

T = TypeVar("T")


def _gray(image: Image.Image) -> np.ndarray:
    return np.asarray(image.convert("L"))  # uint8


def paper_level(image: Image.Image) -> float:
    """Paper gray (0-255) of a page: the larger of the median of the whole page and the median of its
    outer frame, measured on a thumbnail of at most 256 px long side.
    """
    probe = image.convert("L")
    if max(probe.size) > _PROBE_PX:
        probe = probe.copy()
        probe.thumbnail((_PROBE_PX, _PROBE_PX), Image.Resampling.BOX)
    a = np.asarray(probe, dtype=np.float32)
    fy, fx = max(1, round(FRAME * a.shape[0])), max(1, round(FRAME * a.shape[1]))
    frame = np.concatenate([a[:fy].ravel(), a[-fy:].ravel(), a[:, :fx].ravel(), a[:, -fx:].ravel()])
    return max(float(np.median(a)), float(np.median(frame)))


def positive(image: Image.Image) -> Image.Image:
    """``image`` as dark text on light paper: inverted (RGB) when its paper is dark
    (:func:`paper_level` < :data:`DARK_PAPER_BELOW`), else returned unchanged.
    """
    if paper_level(image) >= DARK_PAPER_BELOW:
        return image
    return ImageOps.invert(image.convert("RGB"))


def dark_on_light(crop: Image.Image) -> Image.Image:
    """A line crop with dark ink on light paper: inverted (RGB) when its border pixels (paper) are on
    the dark side of the midpoint between its ink (5th gray percentile, or the :data:`MIN_INK_PIXELS`-th
    darkest pixel where that is darker) and its 95th gray percentile, else unchanged. A small table
    cell reaching into a shaded row has less than 5 % ink: its 5th percentile was the shading, and the
    crop was inverted and dropped as faint.
    """
    a = _gray(crop)
    if a.size == 0:
        return crop
    lo, hi = gray_percentiles(a, (5.0, 95.0))
    lo = min(lo, float(np.partition(a.ravel(), min(a.size - 1, MIN_INK_PIXELS))[min(a.size - 1, MIN_INK_PIXELS)]))
    if hi - lo < 16.0:
        return crop
    border = np.concatenate([a[0], a[-1], a[:, 0], a[:, -1]])
    if float(np.median(border)) >= (lo + hi) / 2:
        return crop
    return ImageOps.invert(crop.convert("RGB"))


def ink_contrast(crop: Image.Image) -> float:
    """Gray levels (0-255) between a line crop's paper (90th percentile) and its ink (1st percentile,
    or the :data:`MIN_INK_PIXELS`-th darkest pixel where that is darker), after :func:`dark_on_light`;
    0.0 for an empty crop. Why the pixel count: in a small crop 1 % of the pixels is more than its
    print holds -- a table cell of two thin digits (``71``, 20 px serif, in a 69 x 52 px box reaching
    into a shaded row) measured 48 levels and was dropped as bleed-through (issue 37).
    """
    a = _gray(dark_on_light(crop))
    if a.size == 0:
        return 0.0
    paper, ink = gray_percentiles(a, (90.0, 1.0))
    k = min(a.size - 1, MIN_INK_PIXELS)
    return float(paper - min(ink, float(np.partition(a.ravel(), k)[k])))


def inked_lines(lines: Sequence[T], crop: Callable[[T], Image.Image],
                reads_forward: Callable[[list[Image.Image]], list[bool]] | None = None) -> list[T]:
    """The ``lines`` that are print, in their order: faint marks beside print, and show-through, are
    not read as text. A line whose crop (``crop(line)``) has an :func:`ink_contrast` of at least
    :data:`MIN_INK_CONTRAST` gray levels is print. The fainter lines of the band
    (:data:`SHOW_MIN_CONTRAST`, :data:`SHOW_SHARE` of the 90th percentile of the lines' contrasts) are
    print when ``reads_forward`` (dark-on-light crops -> per crop, whether it reads the right way
    round rather than mirrored: :func:`models.compact.line.show_through.reads_forward`), asked of at
    most :data:`SHOW_SAMPLE` of them, says so of more than half
    (:func:`models.compact.line.show_through.forward_page`). Without ``reads_forward`` (a checkpoint
    without a PP tower) contrast alone decides: a line of at least :data:`FADED_MIN_CONTRAST` and
    :data:`FADED_SHARE` of that percentile is print.
    """
    contrasts = [ink_contrast(crop(ln)) for ln in lines]
    strong = float(np.percentile(contrasts, 90)) if contrasts else 0.0
    keep = [c >= MIN_INK_CONTRAST for c in contrasts]
    if reads_forward is None:
        faded = max(FADED_MIN_CONTRAST, FADED_SHARE * strong)
        keep = [k or c >= faded for k, c in zip(keep, contrasts, strict=True)]
    else:
        band = [i for i, c in enumerate(contrasts)
                if not keep[i] and c >= SHOW_MIN_CONTRAST and c >= SHOW_SHARE * strong]
        sample = [band[round(k * (len(band) - 1) / max(1, SHOW_SAMPLE - 1))] for k in range(SHOW_SAMPLE)] \
            if len(band) > SHOW_SAMPLE else band
        if band and forward_page(reads_forward([dark_on_light(crop(lines[i])) for i in sample])):
            for i in band:
                keep[i] = True
    return [ln for ln, k in zip(lines, keep, strict=True) if k]


def tighten(crop: Image.Image, box: tuple[float, float, float, float]
            ) -> tuple[Image.Image, tuple[float, float, float, float]]:
    """(crop, box) of a line trimmed to its ink plus :data:`TIGHTEN_MARGIN`, when the crop is at least
    :data:`TIGHTEN_MIN_PX` tall and its size is the box's (an axis-aligned crop, so the box can follow);
    else both unchanged. ``box`` (x0, y0, x1, y1) is in page pixels, ``crop`` its pixels.
    """
    bw, bh = box[2] - box[0], box[3] - box[1]
    if crop.height < TIGHTEN_MIN_PX or abs(crop.width - bw) > 2 or abs(crop.height - bh) > 2:
        return crop, box
    a = _gray(dark_on_light(crop))
    lo, hi = gray_percentiles(a, (1.0, 90.0))
    if hi - lo < MIN_INK_CONTRAST:
        return crop, box
    ys, xs = np.nonzero(a < (lo + hi) / 2)
    y0, y1, x0, x1 = int(ys.min()), int(ys.max()) + 1, int(xs.min()), int(xs.max()) + 1
    mv, mh = (round(m * (y1 - y0)) for m in TIGHTEN_MARGIN)
    y0, y1 = max(0, y0 - mv), min(crop.height, y1 + mv)
    x0, x1 = max(0, x0 - mh), min(crop.width, x1 + mh)
    return crop.crop((x0, y0, x1, y1)), (box[0] + x0, box[1] + y0, box[0] + x1, box[1] + y1)


#: Paper of a line crop is flattened (:func:`flat_paper`) when its columns' paper levels differ by
#: more than this many gray levels (a cell reaching into a column band or a shaded row beside it).
PAPER_STEP = 12.0
#: Share of a column's pixels taken as its paper: its this-th gray percentile.
PAPER_PERCENTILE = 80.0


def flat_paper(crop: Image.Image) -> Image.Image:
    """A dark-on-light line crop with the paper made one colour across its width: each pixel column is
    lifted by the difference between the crop's lightest paper and the column's paper (its
    :data:`PAPER_PERCENTILE`-th percentile per channel, closed over a third of the crop's height: a
    column of a glyph's stroke keeps its ink, a white stripe or a band's edge stays where it is),
    when the paper levels differ by more than :data:`PAPER_STEP` gray levels; else ``crop`` itself.
    Why: a table cell whose crop reaches across the edge of a column band or a shaded cell had the
    edge -- a vertical step from coloured to white paper -- read as one more character
    (``bench/table_losses.py``: ``-9,297`` -> ``-9,297.``).
    """
    rgb = np.asarray(crop.convert("RGB"), dtype=np.float32)
    h, w = rgb.shape[:2]
    if h < 4 or w < 4:
        return crop
    paper = _closed(np.percentile(rgb, PAPER_PERCENTILE, axis=0), max(1, h // 6))  # [W, 3]
    gray = paper.mean(axis=1)
    if float(gray.max() - gray.min()) <= PAPER_STEP:
        return crop
    lift = paper.max(axis=0)[None, :] - paper  # [W, 3]
    return Image.fromarray(np.clip(rgb + lift[None], 0, 255).astype(np.uint8))


def _closed(profile: np.ndarray, half: int) -> np.ndarray:
    """Morphological closing (running max, then running min, windows of ``2 * half + 1``) of
    ``profile`` [W, C] along W: dark dips narrower than the window filled, steps kept in place.
    """
    def run(a: np.ndarray, op) -> np.ndarray:
        padded = np.pad(a, ((half, half), (0, 0)), mode="edge")
        return op(np.lib.stride_tricks.sliding_window_view(padded, 2 * half + 1, axis=0), axis=-1)
    return run(run(profile, np.max), np.min)
