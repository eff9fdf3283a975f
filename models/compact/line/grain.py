"""Sensor grain on the paper of a page: the sign of a scanned page whose print is black.

A scanner or camera adds noise to every pixel, so the paper of a scan is never one flat level; a page
rendered from a PDF or drawn by a program has paper of one level (0 difference between a paper pixel and
its neighbours), anti-aliased or not. The doubt routing's scan rule
(:func:`models.compact.line.doubt.doubt_routes`) took gray print (median line contrast below 250 gray
levels) as its sign of a scan; a scan of black print on white paper at 150-200 dpi (``form_scan``
documents of :mod:`training.compact.scan_docs` whose noise is clipped at white) has a contrast of 255
like a rendered page, stayed on the Latin tower and read worse there (``bench/receipts.py`` seed 10,009:
Latin tower 3.43 %, PP tower 1.47 % order-free).

:func:`paper_grain`: over the flat paper of the page (pixels lighter than :data:`PAPER_ABOVE` whose
5 x 5 neighbourhood spans fewer than :data:`FLAT_SPAN` gray levels: no glyph edge nearby), the mean
absolute difference between a pixel and the mean of its 3 x 3 neighbourhood (gray levels). Measured on
pages as the gateway feeds them (long side 2,200 px): every rendered page of ../shared/eval/pages,
``bench/font_pages.py`` and ``bench/doc_pages.py`` 0.00, the 300-dpi bilevel UNLV scan 0.04-0.06 and the
Chinese report page 0.03; generated scans 0.3-6 (form scans 0.3-3.3, photos 0.1-0.9, receipts 0.3-6),
bilevel faxes 0.0-0.06. The bar :data:`GRAIN_ABOVE` sits between them.
It is measured on the page, not on the line crops: a crop's paper is lifted column by column where its
paper levels differ (:func:`models.compact.page.prepare.flat_paper`) and resampled when deskewed, which
gave rendered pages grain (pdfplumber_warn_p01: 0.47 on its crops, 0.00 on the page).
"""

from __future__ import annotations

import numpy as np
from PIL import Image

#: a paper pixel is lighter than this (gray levels, dark-on-light crops)
PAPER_ABOVE = 128.0
#: ... and its 5 x 5 neighbourhood spans fewer gray levels than this (away from every glyph edge)
FLAT_SPAN = 40.0
#: a page whose paper grain is above this (gray levels) is a scan or a photo (module docstring: rendered
#: pages 0.00-0.04, generated scans 0.3 and up)
GRAIN_ABOVE = 0.15
#: rows of each band of the page measured, and the rows from one band to the next: a quarter of the page,
#: whose grain is the scanner's, alike all over it
BAND_PX, BAND_EVERY_PX = 32, 128


def _shifts(a: np.ndarray, r: int) -> list[np.ndarray]:
    """The (2r+1)^2 views of ``a`` [H, W] shifted by -r..r in both axes, each [H-2r, W-2r]."""
    h, w = a.shape
    return [a[dy:h - 2 * r + dy, dx:w - 2 * r + dx] for dy in range(2 * r + 1) for dx in range(2 * r + 1)]


def crop_grain(crop: Image.Image) -> tuple[float, int]:
    """(sum of |pixel - its 3 x 3 mean| over the crop's flat paper pixels, their count) of one
    dark-on-light line crop (any PIL mode); (0.0, 0) for a crop under 5 x 5 px or without flat paper.
    """
    g = np.asarray(crop.convert("L"), dtype=np.float32)
    if g.shape[0] < 5 or g.shape[1] < 5:
        return 0.0, 0
    rows = _shifts(g, 2)  # 25 views [H-4, W-4]
    hi, lo = rows[0].copy(), rows[0].copy()
    for v in rows[1:]:
        np.maximum(hi, v, out=hi)
        np.minimum(lo, v, out=lo)
    span = hi - lo
    mean3 = np.zeros_like(g[1:-1, 1:-1])
    for v in _shifts(g, 1):
        mean3 += v
    mean3 = mean3[1:-1, 1:-1] / 9.0  # [H-4, W-4]
    core = g[2:-2, 2:-2]
    flat = (span < FLAT_SPAN) & (core > PAPER_ABOVE)
    n = int(flat.sum())
    return (float(np.abs(core - mean3)[flat].sum()), n) if n else (0.0, 0)


def paper_grain(page: Image.Image, band: int = BAND_PX, every: int = BAND_EVERY_PX) -> float:
    """Mean |pixel - its 3 x 3 mean| over the flat paper of ``page`` (any PIL mode, dark print on light
    paper), measured on bands of ``band`` rows every ``every`` rows (gray levels, >= 0; 0.0 when no band
    has flat paper): the page's sensor grain (module docstring).
    """
    total, n = 0.0, 0
    for y in range(0, max(1, page.height - band + 1), max(1, every)):
        s, k = crop_grain(page.crop((0, y, page.width, min(page.height, y + band))))
        total, n = total + s, n + k
    return total / n if n else 0.0
