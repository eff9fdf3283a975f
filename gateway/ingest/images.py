"""Raster images: safe opening (pixel limit checked on the header, before decoding), PNG encoding.
Normalisation to 8-bit RGB/grayscale and fitting to the encoder's resolution are
:mod:`inkstream.page_image`'s (shared with ``inkstream eval --in-process``), re-exported here.

Pillow reads only the header in ``Image.open``; pixels are decoded by ``load()``. We check
``width x height`` against the page pixel limit in between, and also catch Pillow's own
``DecompressionBombError`` (raised by ``open`` past 2 x ``Image.MAX_IMAGE_PIXELS``,
https://pillow.readthedocs.io/en/stable/reference/Image.html#PIL.Image.open).
"""

from __future__ import annotations

import io
import re
import warnings

from PIL import Image, UnidentifiedImageError

from inkstream.decode_errors import image_problem
from inkstream.errors import InvalidInput, PayloadTooLarge
from inkstream.page_image import check_min_side, fit, normalise, prepare_image

__all__ = ["check_min_side", "check_size", "decode", "encode_page", "encode_png", "fit", "normalise", "open_image",
           "over_pixel_limit", "prepare_image"]

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
