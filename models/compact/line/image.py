"""Normalisation of one text-line image into the encoder's input tensor, shared by training and
inference so that both see identical pixels statistics.

A line image (any size, grayscale or RGB) is converted to 8-bit gray, resized to
``LINE_HEIGHT`` = 32 pixels keeping its aspect ratio (bilinear, PIL's ``Image.resize`` with
``reducing_gap`` for good downscaling), contrast-stretched between its 2nd and 98th gray percentile
(robust to uneven illumination and faint print), inverted so ink is 1.0 and paper 0.0, and padded on
the right with paper to a multiple of ``WIDTH_MULTIPLE`` = 16 pixels (the encoder's stride, so that
every vision token sees real columns).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image

if TYPE_CHECKING:  # the encoder service of a Latin checkpoint runs without torch (line_onnx.py)
    import torch

LINE_HEIGHT = 32  # pixels: the height every line is resized to
WIDTH_MULTIPLE = 16  # pixels per vision token (encoder stride 8 x compressor stride 2)
MIN_WIDTH = 32  # pixels after resizing
MAX_WIDTH = 2560  # pixels after resizing (=160 vision tokens, about 200 characters)
#: Vision tokens per segment at most, in both halves and both towers (the decoder's limit).
MAX_TOKENS = MAX_WIDTH // WIDTH_MULTIPLE


def normalised_width(width: int, height: int) -> int:
    """Width in pixels of a ``width`` x ``height`` line after resizing and padding (multiple of 16)."""
    w = int(round(width * LINE_HEIGHT / max(1, height)))
    w = min(MAX_WIDTH, max(MIN_WIDTH, w))
    return int(-(-w // WIDTH_MULTIPLE) * WIDTH_MULTIPLE)


def gray_percentiles(gray: np.ndarray, qs: Sequence[float]) -> list[float]:
    """``np.percentile(gray, qs)`` (linear interpolation between order statistics) of a uint8 array
    of any shape, from its 256-bin histogram: the same values without sorting the pixels (numpy
    partitions a copy per call; ~0.1 s a page over a page's line crops). Raises ValueError for an
    empty array or another dtype.
    """
    if gray.dtype != np.uint8 or gray.size == 0:
        raise ValueError(f"gray_percentiles needs a non-empty uint8 array, got {gray.dtype} of size {gray.size}")
    cum = np.cumsum(np.bincount(gray.ravel(), minlength=256))
    n = int(cum[-1])
    out = []
    for q in qs:
        pos = q / 100.0 * (n - 1)
        k = int(pos)
        lo = int(np.searchsorted(cum, k, side="right"))  # the k-th smallest value (0-based)
        hi = int(np.searchsorted(cum, min(k + 1, n - 1), side="right"))
        out.append(lo + (pos - k) * (hi - lo))
    return out


#: A crop holds print when its paper (90th gray percentile) and its ink (1st) lie at least this many gray
#: levels apart (:func:`paper_ink`).
PRINT_CONTRAST = 32


def paper_ink(gray: np.ndarray) -> tuple[float, float] | None:
    """(paper, ink) gray levels of a dark-on-light uint8 crop of any shape: its 90th and 1st gray
    percentiles (:func:`gray_percentiles`); None when it holds no print (the two under
    :data:`PRINT_CONTRAST` apart). Raises ValueError for an empty array or another dtype.
    """
    paper, ink = gray_percentiles(gray, (90.0, 1.0))
    return None if paper - ink < PRINT_CONTRAST else (paper, ink)


def ink_columns(gray: np.ndarray) -> np.ndarray | None:
    """Which columns of a dark-on-light uint8 crop [H, W] hold ink (bool [W]): a pixel darker than
    halfway from its paper to its ink (:func:`paper_ink`); None when it holds no print. Raises
    ValueError for an empty array or another dtype.
    """
    levels = paper_ink(gray)
    if levels is None:
        return None
    paper, ink = levels
    return np.asarray((gray < (paper + ink) / 2.0).any(axis=0), dtype=bool)


def normalise_line(image: Image.Image) -> torch.Tensor:
    """:func:`normalise_line_array` as a torch tensor [1, 32, W] float32 (for training and the torch tower)."""
    import torch

    return torch.from_numpy(normalise_line_array(image))


def normalise_line_array(image: Image.Image) -> np.ndarray:
    """Line image -> float32 array [1, 32, W] with ink ~1 and paper ~0, W a multiple of 16.

    Raises ValueError for an empty (zero-sized) image. Lines wider than ``MAX_WIDTH`` after
    resizing are squeezed horizontally to ``MAX_WIDTH`` pixels.
    """
    if image.width < 1 or image.height < 1:
        raise ValueError(f"empty line image {image.width}x{image.height}")
    gray = image.convert("L")
    w = int(round(gray.width * LINE_HEIGHT / gray.height))
    w = min(MAX_WIDTH, max(MIN_WIDTH, w))
    gray = gray.resize((w, LINE_HEIGHT), Image.Resampling.BILINEAR, reducing_gap=2.0)
    a8 = np.asarray(gray)
    lo, hi = gray_percentiles(a8, (2.0, 98.0))
    a = a8.astype(np.float32)
    if hi - lo < 16.0:  # nearly uniform crop: keep absolute levels instead of amplifying noise
        lo, hi = min(lo, 0.0), max(hi, 255.0)
    ink = np.clip((hi - a) / (hi - lo), 0.0, 1.0)
    full = normalised_width(w, LINE_HEIGHT)
    out = np.zeros((1, LINE_HEIGHT, full), dtype=np.float32)
    out[0, :, :w] = ink
    return out


def width_batches(lines: Sequence[np.ndarray], most: int) -> Iterator[list[int]]:
    """Indices of ``lines`` (arrays [..., W], any W) grouped by width, in chunks of at most ``most``:
    the lines that can share one forward pass (a batch needs one width), each width's in input order.
    """
    by_width: dict[int, list[int]] = {}
    for i, x in enumerate(lines):
        by_width.setdefault(int(x.shape[-1]), []).append(i)
    for idx in by_width.values():
        for s in range(0, len(idx), most):
            yield idx[s: s + most]
