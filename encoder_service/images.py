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

from inkstream.decode_errors import image_problem
from inkstream.errors import InvalidInput, PayloadTooLarge, UnsupportedMediaType
from models.images import to_rgb

ACCEPTED_FORMATS = ("PNG", "JPEG")
def _magic_format(data: bytes) -> str | None:
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "PNG"
    if data.startswith(b"\xff\xd8\xff"):
        return "JPEG"
    return None


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
            im: Image.Image = Image.open(io.BytesIO(data), formats=[fmt])
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
            raise PayloadTooLarge(
                f"page image exceeds the decompression-bomb limit of {max_image_pixels} pixels") from None
        except InvalidInput:
            raise
        except (UnidentifiedImageError, OSError, SyntaxError, ValueError, EOFError) as exc:
            raise InvalidInput(
                f"page image could not be decoded as {fmt}: {image_problem(exc, 'page image')}") from None
    return to_rgb(im)
