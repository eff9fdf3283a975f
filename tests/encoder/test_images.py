"""Unit tests of page-image decoding: formats, pixel modes, EXIF orientation, limits, bad bytes."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from encoder_service.images import decode_page, to_rgb
from inkstream.errors import InvalidInput, PayloadTooLarge, UnsupportedMediaType

LIMITS = dict(max_image_bytes=10_000_000, max_image_pixels=10_000_000)


def _encode(im: Image.Image, fmt: str = "PNG", **kw) -> bytes:
    buf = io.BytesIO()
    im.save(buf, format=fmt, **kw)
    return buf.getvalue()


def test_rgb_png_roundtrips_pixels():
    arr = np.random.default_rng(0).integers(0, 256, (30, 20, 3), dtype=np.uint8)
    out = decode_page(_encode(Image.fromarray(arr)), **LIMITS)
    assert out.mode == "RGB" and out.size == (20, 30)
    assert np.array_equal(np.asarray(out), arr)


def test_grayscale_and_bilevel_become_rgb():
    gray = Image.new("L", (8, 8), 77)
    out = decode_page(_encode(gray), **LIMITS)
    assert out.mode == "RGB" and out.getpixel((0, 0)) == (77, 77, 77)
    out1 = decode_page(_encode(Image.new("1", (8, 8), 1)), **LIMITS)
    assert out1.getpixel((3, 3)) == (255, 255, 255)


def test_alpha_is_composited_over_white():
    im = Image.new("RGBA", (4, 4), (255, 0, 0, 0))  # fully transparent red
    im.putpixel((0, 0), (0, 0, 255, 255))
    out = decode_page(_encode(im), **LIMITS)
    assert out.getpixel((1, 1)) == (255, 255, 255)
    assert out.getpixel((0, 0)) == (0, 0, 255)


def test_palette_with_transparency_is_composited_over_white():
    im = Image.new("P", (4, 4), 0)
    im.putpalette([0, 0, 0, 200, 10, 10] + [0] * 762)
    im.putpixel((0, 0), 1)
    data = _encode(im, transparency=0)
    out = decode_page(data, **LIMITS)
    assert out.getpixel((2, 2)) == (255, 255, 255)
    assert out.getpixel((0, 0)) == (200, 10, 10)


def test_16bit_grayscale_is_rescaled_to_8bit():
    arr = np.full((4, 4), 65535, dtype=np.uint16)
    arr[0, 0] = 0
    im = Image.fromarray(arr)
    assert im.mode.startswith("I;16")
    out = decode_page(_encode(im), **LIMITS)
    assert out.getpixel((1, 1)) == (255, 255, 255)
    assert out.getpixel((0, 0)) == (0, 0, 0)


def test_cmyk_jpeg_becomes_rgb():
    im = Image.new("CMYK", (16, 16), (0, 0, 0, 0))  # no ink = white paper
    out = decode_page(_encode(im, "JPEG", quality=95), **LIMITS)
    assert out.mode == "RGB"
    assert all(c > 240 for c in out.getpixel((8, 8)))


def test_exif_orientation_is_applied():
    im = Image.new("RGB", (30, 10), "white")
    exif = Image.Exif()
    exif[0x0112] = 6  # Orientation: rotate 90 CW to display
    out = decode_page(_encode(im, "JPEG", exif=exif.tobytes()), **LIMITS)
    assert out.size == (10, 30)


def test_unknown_pixel_mode_is_invalid_input():
    with pytest.raises(InvalidInput, match="unsupported pixel mode 'HSV'"):
        to_rgb(Image.new("HSV", (2, 2)))


@pytest.mark.parametrize(
    "data,exc,match",
    [
        (b"", InvalidInput, "empty"),
        (b"GIF89a" + b"\0" * 40, UnsupportedMediaType, "not a PNG or JPEG"),
        (b"\x89PNG\r\n\x1a\n" + b"\0" * 40, InvalidInput, "could not be decoded as PNG"),
    ],
)
def test_bad_bytes_give_clear_errors(data, exc, match):
    with pytest.raises(exc, match=match):
        decode_page(data, **LIMITS)


def test_truncated_png_is_invalid_input():
    data = _encode(Image.fromarray(np.random.default_rng(1).integers(0, 256, (64, 64, 3), dtype=np.uint8)))
    with pytest.raises(InvalidInput, match="it is truncated"):
        decode_page(data[: len(data) // 2], **LIMITS)


def test_byte_limit():
    data = _encode(Image.new("RGB", (8, 8)))
    with pytest.raises(PayloadTooLarge, match=f"{len(data)} bytes; the limit is 10 bytes"):
        decode_page(data, max_image_bytes=10, max_image_pixels=1000)


def test_pixel_limit_checked_before_decoding():
    # 3000 x 3000 white PNG compresses to a few KB: a small decompression bomb.
    data = _encode(Image.new("L", (3000, 3000), 255))
    assert len(data) < 100_000
    with pytest.raises(PayloadTooLarge, match="3000x3000 = 9000000 pixels; the limit is 1000000"):
        decode_page(data, max_image_bytes=10_000_000, max_image_pixels=1_000_000)
