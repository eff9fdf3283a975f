"""A detected text line (:class:`LineBox`) and its pixels (:func:`crop_line`): what every page step passes on."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import numpy as np
from PIL import Image

from inkstream.segments import JOIN_LINE


@dataclass
class LineBox:
    """A detected text line: ``quad`` float32 [4, 2] (x, y page pixels, clockwise from top-left),
    ``box`` (x0, y0, x1, y1) its axis-aligned bounds, ``score`` detector confidence 0..1, ``join``
    how its text goes on from the previous line's (:mod:`inkstream.segments`: ``line``, or
    ``cell:T:R:C`` / ``space`` for a table cell's lines); ``shape_text``: the line's text when a page
    step read it by its shape alone (a table's nil dash, :mod:`models.compact.page.nil_marks`: ``-``),
    so the recogniser does not read it, with ``shape_confidence`` in [0, 1]; "" (and 0.0) for a line to read.
    """

    quad: np.ndarray
    box: tuple[float, float, float, float]
    score: float
    join: str = JOIN_LINE
    shape_text: str = ""
    shape_confidence: float = 0.0


def _same_line(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    """Whether two boxes (x0, y0, x1, y1) are one line found twice: each overlaps the other by more
    than half of the smaller box's height and width.
    """
    dy = min(a[3], b[3]) - max(a[1], b[1])
    dx = min(a[2], b[2]) - max(a[0], b[0])
    return dy > 0.5 * min(a[3] - a[1], b[3] - b[1]) and dx > 0.5 * min(a[2] - a[0], b[2] - b[0])


def crop_line(image: Image.Image | None, line: LineBox, rgb: np.ndarray | None = None) -> Image.Image:
    """The line's pixels: axis-aligned crop for (nearly) horizontal boxes, else a perspective warp
    of the quad (rapidocr's ``get_rotate_crop_image``). The page is ``image``, or ``rgb`` (the page
    as an [H, W, 3] uint8 array) when the caller has it: then no page-sized copy is made (``image``
    may be None). Raises ValueError when both are None.
    """
    if image is None and rgb is None:
        raise ValueError("crop_line needs the page as an image or an array")
    q = line.quad
    dy = abs(float(q[1, 1] - q[0, 1]))
    if dy < 0.25 * max(1.0, line.box[3] - line.box[1]):
        x0, y0, x1, y1 = (int(round(v)) for v in line.box)
        x1, y1 = max(x1, x0 + 1), max(y1, y0 + 1)
        if rgb is not None:
            return Image.fromarray(np.ascontiguousarray(rgb[max(0, y0):y1, max(0, x0):x1]))
        assert image is not None
        return image.crop((x0, y0, x1, y1))
    from rapidocr.utils.process_img import get_rotate_crop_image  # heavy: rapidocr, for tilted lines only

    page = rgb if rgb is not None else np.asarray(image.convert("RGB"))  # type: ignore[union-attr]
    arr = get_rotate_crop_image(page, q.astype(np.float32))
    return Image.fromarray(arr)


class LineLike(Protocol):
    """What the page steps that keep their caller's line type read of a line: its ``quad`` float32
    [4, 2], ``box`` (x0, y0, x1, y1) and detector ``score`` (page pixels; :class:`LineBox` is one).
    """

    quad: np.ndarray
    box: tuple[float, float, float, float]
    score: float


class Boxed(Protocol):
    """Anything with an axis-aligned ``box`` (x0, y0, x1, y1) in page pixels: a line, a group, a block."""

    box: tuple[float, float, float, float]


def centre_x(item: Boxed) -> float:
    """The horizontal centre of ``item.box``, page pixels (which side of a gutter a line lies on)."""
    return (item.box[0] + item.box[2]) / 2


def centre_y(item: Boxed) -> float:
    """The vertical centre of ``item.box``, page pixels (which row or band a line belongs to)."""
    return (item.box[1] + item.box[3]) / 2


#: a line type the caller chose (:class:`LineBox`, or a detector's own record)
L = TypeVar("L", bound=LineLike)


def line_cover(lines: Sequence[LineLike]) -> tuple[int, np.ndarray]:
    """How many of ``lines`` (at least one) cover each pixel column of their span: (the first column
    ``lo``, int32 [hi - lo + 1] counts), columns in page pixels; the gutters between columns of text
    are its low runs.
    """
    lo = int(min(ln.box[0] for ln in lines))
    hi = int(max(ln.box[2] for ln in lines)) + 1
    cover = np.zeros(hi - lo + 1, dtype=np.int32)
    for ln in lines:
        cover[int(ln.box[0]) - lo: int(ln.box[2]) - lo + 1] += 1
    return lo, cover
