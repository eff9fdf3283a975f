"""One piece of a page's text line on its way to a vision tower (:class:`Piece`).

The compact encoder half cuts each detected line into pieces (:func:`models.compact.line.split.split_line`),
routes each to the Latin or the PP tower and, for a Latin line read whole, keeps the routing forward's
vision tokens and read-head reading (:meth:`models.compact.encoder_half.CompactEncoderHalf.preprocess`,
:func:`models.compact.line.number_reads.number_routes`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from PIL import Image


class Piece(NamedTuple):
    """A piece of a text line.

    ``crop``: the piece's image (upright page, dark on light, as it will be encoded); ``box``: its box
    (x0, y0, x1, y1) in pixels of the upright page; ``join``: how it goes on from the previous piece
    ("line", "space" or "direct", :mod:`inkstream.segments`); ``pp``: True to read it on the PP tower,
    False on the Latin tower; ``tokens``: its Latin-tower vision tokens [T, hidden] float32 when the
    routing forward already gave them (a Latin line read whole), else None (encode it); ``read``: the
    Latin read head's greedy reading of the same forward (:func:`models.compact.line.number_reads.read_text`),
    None without one.
    """

    crop: Image.Image
    box: tuple[float, float, float, float]
    join: str
    pp: bool
    tokens: np.ndarray | None
    read: str | None
