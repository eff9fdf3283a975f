"""Faint print shown to the line detector at full contrast (auto-levels of the detector's input only).

The DB detector (:mod:`models.compact.page.detect`) thresholds a probability map learnt on print of
ordinary contrast; on a faded thermal or Chinese receipt (``training.compact.scan_degrade.thermal``:
ink lifted to 70-190 of 255, faded by up to a further 35 % and halved in blotches) the lines of thin
print come out below its threshold and are never read: ``bench/receipts.py`` tune seed 30,015 (a
faded Chinese receipt in a thin monospace face, paper 242, its print 44 levels darker) lost five
of its quantity and amount lines (27.75 % order-free CER).

:func:`for_detection` stretches such a page's gray levels linearly so its paper goes white and its
ink darkens -- the levels a scanner's auto-exposure would have given -- after a light
Gaussian blur (:data:`BLUR_PX`): the gain of faint print is up to 8x, and unblurred it turned the
scan noise (sigma 2-8 levels) into speckle the detector found as dozens of false lines (seed 30,003:
39 boxes holding no printed piece; with the blur none). The gain is capped at :data:`MAX_GAIN` for the
same reason. Only the detector's input changes: the crops the recognisers read, their ink contrast
and so the routing of faint pages (:mod:`models.compact.line.doubt`) stay those of the page as received.

A page is faint when its paper (median gray) minus its ink (the :data:`INK_PERCENTILE`-th gray
percentile of the pixels darker than the paper by more than :data:`DARK_MARGIN`: the print alone, so a
sparse page -- a few lines on a white sheet, under 0.5 % of its pixels inked -- still measures its
black; print fainter than that margin -- a receipt faded to 10-20 levels under its paper -- is
measured above the paper's own noise instead, :data:`NOISE_K` times it, so it is seen as faint
rather than as no print) is below :data:`FAINT_RANGE_BELOW` gray levels (under a third of the 8-bit range): the faintest
of the bench's faded receipts (39-76 on its tune seeds); dot-matrix receipts (ink 20-90) measure 170-230, photographed
forms 122-185, scanned forms 204-254, the rendered pages of ``bench/doc_pages.py`` 240-255 (a page
percentile of all pixels put one of them, a sparse page, at 88).
"""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageFilter

#: A page whose paper-to-ink range (gray levels) is below this is stretched for detection. Faded
#: receipts of the bench's tune seeds (30,000-30,034, 31,000-31,010) measure 39-114: those under 77 held
#: 104 of their 110 order-free edits (lines missed), those of 83 and more at most 3 each, and stretching
#: them only moved their boxes (30,021 1 -> 5 edits, 31,008 3 -> 6); dot-matrix receipts 170 and up,
#: photographed forms 122 and up, black print 240-255.
FAINT_RANGE_BELOW = 80.0
#: Gray levels below the paper that a pixel of print is darker by at least: three times the largest
#: scan noise of ``training.compact.scan_degrade`` (sigma 8), so the paper's noise is not taken for ink.
DARK_MARGIN = 24.0
#: Print fainter than :data:`DARK_MARGIN` (fewer than :data:`MIN_DARK_PIXELS` pixels that dark): its
#: pixels are those darker than the paper by more than this many times the paper's noise (its robust
#: sigma, 1.4826 x the median absolute deviation of the sample from its median: the print is a few
#: per cent of a page's pixels, so the deviation is the paper's) ...
NOISE_K = 4.0
#: ... and by at least this many gray levels (a clean page's noise rounds to 0-1 levels).
MIN_NOISE_MARGIN = 8.0
#: Percentile of those darker pixels taken as the page's ink level (the darker part of the strokes;
#: a scan's black speckle is a few per cent of them at most).
INK_PERCENTILE = 10.0
#: Fewer darker pixels than this in the sample: no print to measure, the page is left as it is.
MIN_DARK_PIXELS = 20
#: Largest gain of the stretch: 255 / 39 would be 6.5 on the faintest tune page (every page under the
#: bar gets this gain: 255 / 80 is 3.2).
MAX_GAIN = 3.0
#: Gaussian blur (sigma, pixels of the page) before the stretch: scan noise averaged out, a 1-2 px
#: stroke kept (the detector's input is the page downscaled to at most 1,600 px anyway).
BLUR_PX = 1.0
#: Stride of the pixel sample the levels are measured on (speed: a letter page at 200 dpi is 3.7 M
#: pixels; one in 16 is plenty for a median and a percentile of the print).
_SAMPLE_STRIDE = 4


def noise_margin(g: np.ndarray, paper: float) -> float:
    """Gray levels under ``paper`` that a pixel of the sample ``g`` (any shape, gray levels) must be to
    be print rather than the paper's noise: :data:`NOISE_K` x the paper's robust sigma (1.4826 x the
    median absolute deviation of ``g`` from ``paper``), at least :data:`MIN_NOISE_MARGIN`.
    """
    sigma = 1.4826 * float(np.median(np.abs(g.astype(np.float32) - paper)))
    return max(MIN_NOISE_MARGIN, NOISE_K * sigma)


def page_range(rgb: np.ndarray) -> tuple[float, float]:
    """(paper, ink) gray levels (0-255) of ``rgb`` [H, W, 3] uint8, on its green channel sampled every
    :data:`_SAMPLE_STRIDE` pixels in both directions: the median, and the :data:`INK_PERCENTILE`-th
    percentile of the samples darker than it by more than :data:`DARK_MARGIN` -- or, when fewer than
    :data:`MIN_DARK_PIXELS` are (print fainter than that), by more than the paper's noise margin
    (:func:`noise_margin`); ink = paper when fewer than :data:`MIN_DARK_PIXELS` are even so (no
    print), (255.0, 255.0) for an empty image.
    """
    g = rgb[::_SAMPLE_STRIDE, ::_SAMPLE_STRIDE, 1]
    if g.size == 0:
        return 255.0, 255.0
    paper = float(np.median(g))
    dark = g[g < paper - DARK_MARGIN]
    if dark.size < MIN_DARK_PIXELS:  # print fainter than the margin: above the paper's noise
        margin = noise_margin(g, paper)
        dark = g[g < paper - margin] if margin < DARK_MARGIN else dark
    if dark.size < MIN_DARK_PIXELS:
        return paper, paper
    return paper, float(np.percentile(dark, INK_PERCENTILE))


def for_detection(rgb: np.ndarray) -> np.ndarray:
    """``rgb`` [H, W, 3] uint8 as the detector should see it: unchanged (the same array) unless its
    print is faint (:func:`page_range` spans under :data:`FAINT_RANGE_BELOW` levels); then blurred by
    :data:`BLUR_PX` and stretched by ``min(MAX_GAIN, 255 / range)`` with its paper level mapped to white
    (paper lighter than the median clipped there; a new array, same shape and dtype).
    """
    paper, ink = page_range(rgb)
    span = paper - ink
    if span >= FAINT_RANGE_BELOW or span <= 0:
        return rgb
    gain = min(MAX_GAIN, 255.0 / span)
    soft = np.asarray(Image.fromarray(rgb).filter(ImageFilter.GaussianBlur(BLUR_PX)), dtype=np.float32)
    return np.clip(255.0 - (paper - soft) * gain, 0, 255).astype(np.uint8)
