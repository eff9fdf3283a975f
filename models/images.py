"""Pillow image of any page pixel mode -> 8-bit RGB, shared by the encoder service and in-process paths.

Pillow mode names: https://pillow.readthedocs.io/en/stable/handbook/concepts.html#modes

* ``1``, ``L``, ``P`` (no transparency), ``RGB``, ``CMYK``, ``YCbCr`` -> ``Image.convert("RGB")``;
* ``LA``, ``RGBA``, ``PA``, ``P`` with transparency -> composited over white (a page's paper);
* 16-bit / 32-bit grayscale (``I;16*``, ``I``, ``F``) -> rescaled to 0..255 from the mode's range.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

from inkstream.errors import InvalidInput

_DIRECT_MODES = {"1", "L", "P", "RGB", "CMYK", "YCbCr"}
_ALPHA_MODES = {"LA", "La", "RGBA", "RGBa", "PA"}
_WIDE_GRAY_MAX = {"I;16": 65535.0, "I;16L": 65535.0, "I;16B": 65535.0, "I;16N": 65535.0}


def _wide_gray_to_l(im: Image.Image) -> Image.Image:
    """16/32-bit grayscale -> 8-bit ``L``: 16-bit scaled by 255/65535, ``I``/``F`` by their max value."""
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
