"""Raster images: safe opening (pixel limit checked on the header, before decoding), normalisation to
8-bit RGB/grayscale, fitting to the encoder's resolution, PNG encoding.

Pillow reads only the header in ``Image.open``; pixels are decoded by ``load()``. We check
``width x height`` against the page pixel limit in between, and also catch Pillow's own
``DecompressionBombError`` (raised by ``open`` past 2 x ``Image.MAX_IMAGE_PIXELS``,
https://pillow.readthedocs.io/en/stable/reference/Image.html#PIL.Image.open).
"""

from __future__ import annotations

import io
import math
import re
import warnings

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from inkstream.decode_errors import image_problem
from inkstream.errors import InvalidInput, PayloadTooLarge, Unprocessable

_BOMB_PIXELS = re.compile(r"\((\d+) pixels\)")


def over_pixel_limit(pixels: int, limit: int, what: str = "the image") -> PayloadTooLarge:
    """413 for an image of ``pixels`` pixels over ``limit`` pixels per page."""
    return PayloadTooLarge(
        f"{what} has {pixels:,} pixels, over the limit of {limit:,} pixels per page "
        "(possible decompression bomb); it was refused before decoding"
    )


def open_image(path: str, max_pixels: int) -> Image.Image:
    """Open ``path`` lazily (header only) and check its size; the caller decodes with ``load()``.

    Raises PayloadTooLarge (413) over ``max_pixels``, InvalidInput (400) for an unreadable,
    zero-sized or damaged header.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            im = Image.open(path)
    except Image.DecompressionBombError as exc:
        m = _BOMB_PIXELS.search(str(exc))
        raise over_pixel_limit(int(m.group(1)) if m else max_pixels + 1, max_pixels) from None
    except UnidentifiedImageError:
        raise InvalidInput(
            "the image cannot be read: its header is invalid or damaged (for example a zero width or height)"
        ) from None
    except (OSError, ValueError, SyntaxError) as exc:
        raise InvalidInput(f"the image cannot be read: {image_problem(exc)}") from None
    check_size(im.size, max_pixels)
    return im


def check_size(size: tuple[int, int], max_pixels: int) -> None:
    """Raise InvalidInput for a non-positive side, PayloadTooLarge past ``max_pixels``."""
    w, h = size
    if w <= 0 or h <= 0:
        raise InvalidInput(f"the image has an invalid size {w}x{h} pixels")
    if w * h > max_pixels:
        raise over_pixel_limit(w * h, max_pixels, f"the image ({w}x{h})")


def decode(im: Image.Image) -> Image.Image:
    """Decode the pixels of the current frame; a truncated or corrupt file -> InvalidInput (400)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            im.load()
    except OSError as exc:
        if "truncated" in str(exc):
            raise InvalidInput("the image is truncated: the file ends before the image data does") from None
        raise InvalidInput(f"the image cannot be decoded: {image_problem(exc)}") from None
    except (ValueError, SyntaxError, EOFError, Image.DecompressionBombError) as exc:
        raise InvalidInput(f"the image cannot be decoded: {image_problem(exc)}") from None
    return im


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


def encode_png(im: Image.Image) -> bytes:
    """PNG bytes of an ``L``/``RGB`` image (zlib level 3: ~3x faster than the default 6, a few % larger)."""
    buf = io.BytesIO()
    im.save(buf, format="PNG", compress_level=3)
    return buf.getvalue()


def encode_page(im: Image.Image, max_bytes: int = 0) -> bytes:
    """Page image bytes for the encoder: lossless PNG, or JPEG (quality 90, then 75) when the PNG is
    over ``max_bytes`` (the encoder's ``max_image_bytes``; 0 = no limit). Photos and dithered scans
    compress far better as JPEG. Raises PayloadTooLarge when even the JPEG is over the limit.
    """
    data = encode_png(im)
    if not max_bytes or len(data) <= max_bytes:
        return data
    for quality in (90, 75):
        buf = io.BytesIO()
        im.save(buf, format="JPEG", quality=quality)
        if buf.tell() <= max_bytes:
            return buf.getvalue()
    raise PayloadTooLarge(
        f"the page image is {len(data):,} bytes as PNG and still over the encoder's limit of "
        f"{max_bytes:,} bytes as JPEG; use a lower-resolution mode"
    )
