"""Page image bytes -> RGB :class:`PIL.Image.Image`, with size and decompression-bomb guards.

The encoder accepts what ``EncodeRequest.image`` promises (PNG or JPEG) and normalises every pixel
mode Pillow yields for those formats to 8-bit RGB (Pillow mode names, see
https://pillow.readthedocs.io/en/stable/handbook/concepts.html#modes):

* ``1``, ``L``, ``P`` (no transparency), ``RGB``, ``CMYK``, ``YCbCr`` -> ``Image.convert("RGB")``;
* ``LA``, ``RGBA``, ``PA``, ``P`` with transparency -> composited over white (a page's paper);
* 16-bit / 32-bit grayscale (``I;16*``, ``I``, ``F``) -> rescaled to 0..255 from the mode's range.

EXIF orientation is applied (``ImageOps.exif_transpose``) so a phone photo taken sideways is upright.
The pixel count is checked from the header *before* any pixel is decoded.
"""

from __future__ import annotations

import io
import warnings

from PIL import Image, ImageOps, UnidentifiedImageError

from inkstream.errors import InvalidInput, PayloadTooLarge, UnsupportedMediaType

ACCEPTED_FORMATS = ("PNG", "JPEG")
_DIRECT_MODES = {"1", "L", "P", "RGB", "CMYK", "YCbCr"}
_ALPHA_MODES = {"LA", "La", "RGBA", "RGBa", "PA"}
_WIDE_GRAY_MAX = {"I;16": 65535.0, "I;16L": 65535.0, "I;16B": 65535.0, "I;16N": 65535.0}


def _magic_format(data: bytes) -> str | None:
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "PNG"
    if data.startswith(b"\xff\xd8\xff"):
        return "JPEG"
    return None


def _wide_gray_to_l(im: Image.Image) -> Image.Image:
    """16/32-bit grayscale -> 8-bit ``L``: 16-bit scaled by 255/65535, ``I``/``F`` by their max value."""
    import numpy as np

    arr = np.asarray(im, dtype=np.float64)
    top = _WIDE_GRAY_MAX.get(im.mode)
    if top is None:  # "I" / "F": no fixed range, use the page's own maximum
        top = float(arr.max()) if arr.size and arr.max() > 255 else 255.0
    arr = np.clip(arr * (255.0 / top), 0, 255).round().astype(np.uint8)
    return Image.fromarray(arr, mode="L")


def to_rgb(im: Image.Image) -> Image.Image:
    """Any supported Pillow mode -> 8-bit ``RGB`` (alpha composited over white).

    Raises InvalidInput naming the mode when it is not one a page image can have.
    """
    mode = im.mode
    if mode == "RGB":
        return im
    if mode == "P" and "transparency" in im.info:
        im, mode = im.convert("RGBA"), "RGBA"
    if mode in _ALPHA_MODES:
        rgba = im.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("RGB")
    if mode in _DIRECT_MODES:
        return im.convert("RGB")
    if mode in _WIDE_GRAY_MAX or mode in ("I", "F"):
        return _wide_gray_to_l(im).convert("RGB")
    raise InvalidInput(f"page image has unsupported pixel mode {mode!r}; send 8-bit RGB or grayscale PNG/JPEG")


def decode_page(data: bytes, *, max_image_bytes: int, max_image_pixels: int) -> Image.Image:
    """Decode one page image (PNG / JPEG bytes) into an upright 8-bit RGB image.

    ``max_image_bytes``: limit on ``len(data)`` (bytes); ``max_image_pixels``: limit on width x
    height (pixels), checked from the header before decoding.
    Raises PayloadTooLarge (over a limit), UnsupportedMediaType (not PNG/JPEG by magic bytes),
    InvalidInput (empty, corrupt or truncated image, unsupported pixel mode).
    """
    if not data:
        raise InvalidInput("page image is empty (0 bytes)")
    if len(data) > max_image_bytes:
        raise PayloadTooLarge(f"page image is {len(data)} bytes; the limit is {max_image_bytes} bytes")
    fmt = _magic_format(data)
    if fmt is None:
        raise UnsupportedMediaType("page image is not a PNG or JPEG file (unrecognised leading bytes)")
    with warnings.catch_warnings():
        # Pillow warns (and errors at 2x) on its own bomb threshold; our limit is checked below.
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            im = Image.open(io.BytesIO(data), formats=[fmt])
            w, h = im.size
            if w < 1 or h < 1:
                raise InvalidInput(f"page image has an empty size {w}x{h} pixels")
            if w * h > max_image_pixels:
                raise PayloadTooLarge(
                    f"page image is {w}x{h} = {w * h} pixels; the limit is {max_image_pixels} pixels"
                )
            im.load()
            im = ImageOps.exif_transpose(im) or im
        except (Image.DecompressionBombError, Image.DecompressionBombWarning):
            raise PayloadTooLarge(f"page image exceeds the decompression-bomb limit of {max_image_pixels} pixels") from None
        except InvalidInput:
            raise
        except (UnidentifiedImageError, OSError, SyntaxError, ValueError, EOFError) as exc:
            raise InvalidInput(f"page image could not be decoded as {fmt}: it is corrupt or truncated ({exc})") from None
    return to_rgb(im)
