"""The page image the encoder is given: how a document's page becomes pixels, in one place.

The gateway prepares every page with these functions (:mod:`gateway.ingest`), and so does
``inkstream eval --in-process`` (:func:`evaluation.engines.iter_pages`), so that a figure measured
in-process is the figure of the stack: an image frame is normalised to 8-bit ``L`` / ``RGB`` and
downscaled to the encoder mode's ``page_long_side_px`` (:func:`prepare_image`); a PDF page is
rendered at that long side (:func:`render_pdf_page`); both within :func:`fit_pixels` pixels.
What only the gateway does on top — the upload limits, and the PNG (or JPEG, over the encoder's
byte limit) it sends — stays in :mod:`gateway.ingest.images`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from PIL import Image, ImageOps

from inkstream.errors import InvalidInput, Unprocessable

#: the most pixels (width x height) of one page image: the gateway's default ``limits.max_page_pixels``
MAX_PAGE_PIXELS = 50_000_000
#: the most pixels of a page image the encoder service takes by default (its ``max_image_pixels``,
#: ``InfoResponse`` field 15): the gateway fits pages to it too (:func:`fit_pixels`)
ENCODER_MAX_IMAGE_PIXELS = 40_000_000


def fit_pixels(encoder_max_pixels: int = ENCODER_MAX_IMAGE_PIXELS, page_max_pixels: int = MAX_PAGE_PIXELS) -> int:
    """The most pixels a page is scaled to: the gateway's ``page_max_pixels`` or, when lower, the
    encoders' ``encoder_max_pixels`` (0 = they do not say). The defaults are the served stack's
    (40,000,000), which ``inkstream eval --in-process`` uses so that it reads the stack's pixels.
    """
    return min(page_max_pixels, encoder_max_pixels or page_max_pixels)


def _to_8bit(arr: np.ndarray) -> np.ndarray:
    """uint16/int32 samples (16-bit PNG/TIFF) -> uint8 by keeping the high byte."""
    if arr.dtype == np.uint8:
        return arr
    maxv = 65535 if arr.max(initial=0) > 255 else 255
    return (arr.astype(np.float32) * (255.0 / maxv) + 0.5).clip(0, 255).astype(np.uint8)


def normalise(im: Image.Image) -> Image.Image:
    """A decoded frame as 8-bit ``"L"`` (gray / bilevel) or ``"RGB"``.

    Applies the EXIF orientation; converts CMYK, 16-bit, 32-bit, float, palette and bilevel images;
    composites transparency (alpha channel, palette or tRNS colour key) on white.
    """
    im = ImageOps.exif_transpose(im) or im
    mode = im.mode
    trns = im.info.get("transparency")
    if mode in ("I;16", "I;16B", "I;16L", "I;16N", "I", "F"):
        arr = np.asarray(im)
        gray = _to_8bit(np.asarray(arr, dtype=np.float64).clip(0) if mode == "F" else arr)
        if isinstance(trns, int):
            alpha = np.where(arr == trns, 0, 255).astype(np.uint8)
            return _on_white(Image.merge("LA", (Image.fromarray(gray), Image.fromarray(alpha))))
        return Image.fromarray(gray, "L")
    if mode == "1":
        return im.convert("L")
    if mode == "P" or (trns is not None and mode in ("L", "RGB")):
        im = im.convert("RGBA")
        mode = "RGBA"
    if mode in ("RGBA", "LA", "RGBa", "La", "PA"):
        return _on_white(im)
    if mode == "L":
        return im
    return im.convert("RGB")  # CMYK, YCbCr, LAB, HSV, RGBX...


def _on_white(im: Image.Image) -> Image.Image:
    rgba = im.convert("RGBA")
    white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
    return Image.alpha_composite(white, rgba).convert("RGB")


def fit(im: Image.Image, long_side_px: int, max_pixels: int) -> Image.Image:
    """Downscale (never upscale) so the long side is at most ``long_side_px`` and the pixel count at
    most ``max_pixels``; Lanczos resampling (Pillow ``Image.resize``).

    A page more than twice as long as it is wide (a tall screenshot, a receipt, a panorama) is
    bounded by its short side instead, at ``long_side_px / 2``: shrinking its long side to
    ``long_side_px`` would shrink its text below what the model can read (a 1000 x 15000 px
    screenshot would become 147 px wide). The two rules agree at an aspect ratio of 2.
    """
    w, h = im.size
    scale = min(1.0, long_side_px / min(max(w, h), 2 * min(w, h))) if long_side_px > 0 else 1.0
    scale = min(scale, math.sqrt(max_pixels / (w * h)))
    if scale >= 1.0:
        return im
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    return im.resize(size, Image.Resampling.LANCZOS, reducing_gap=3.0)


def check_min_side(size: tuple[int, int], min_side: int) -> None:
    """422 for an image smaller than ``min_side`` pixels on a side (nothing readable on it)."""
    if min(size) < min_side:
        raise Unprocessable(
            f"image too small ({size[0]}x{size[1]} pixels); at least {min_side} pixels on each side are needed"
        )


def prepare_image(frame: Image.Image, long_side_px: int, max_pixels: int = MAX_PAGE_PIXELS,
                  min_side: int = 1) -> tuple[Image.Image, tuple[int, int]]:
    """A decoded image frame as the encoder's page: :func:`normalise`, then :func:`fit` to
    ``long_side_px`` (0 = no bound) and ``max_pixels``. Returns (page, (width, height) of the frame
    before the fit, in pixels: the document's own frame, which result boxes use). Raises
    Unprocessable (422) for a frame smaller than ``min_side`` pixels on a side.
    """
    frame = normalise(frame)
    check_min_side(frame.size, min_side)
    return fit(frame, long_side_px, max_pixels), frame.size


def pdf_scale(width_pt: float, height_pt: float, long_side_px: int, max_pixels: int = MAX_PAGE_PIXELS) -> float:
    """Render scale of a PDF page (pixels per PDF point, 1 pt = 1/72 inch): its long side becomes
    ``long_side_px`` pixels, lowered so that width x height stays within ``max_pixels``.
    """
    scale = long_side_px / max(width_pt, height_pt)
    area = width_pt * height_pt * scale * scale
    if area > max_pixels:
        scale *= math.sqrt(max_pixels / area)
    return scale


def render_pdf_page(page: Any, long_side_px: int, max_pixels: int = MAX_PAGE_PIXELS) -> Image.Image:
    """An opened ``pypdfium2.PdfPage`` rendered as an 8-bit RGB image at :func:`pdf_scale` (form
    fields drawn). Raises InvalidInput for a page of invalid size; PDFium's own errors
    (``pypdfium2.PdfiumError``) pass through.
    """
    w_pt, h_pt = page.get_size()
    if not (w_pt > 0 and h_pt > 0 and math.isfinite(w_pt * h_pt)):
        raise InvalidInput(f"the page has an invalid size ({w_pt:g} x {h_pt:g} points)")
    bitmap = page.render(scale=pdf_scale(w_pt, h_pt, long_side_px, max_pixels), may_draw_forms=True)
    try:
        return bitmap.to_pil().convert("RGB")
    finally:
        bitmap.close()
