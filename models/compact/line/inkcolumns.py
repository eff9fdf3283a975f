"""Ink per pixel column of a normalised PP line, the spacing head's view of gaps (torch-free: the
encoder half runs it beside onnxruntime). See :mod:`models.compact.decode.spacing` for why.
"""

from __future__ import annotations

import numpy as np

PROFILE_ROWS = (0, 48), (12, 36)  #: rows of the 48-px line averaged into each ink profile
#: frame channels of the head's input besides the 120 trunk features: 8 columns x 2 profiles
PROFILE_CHANNELS = 8 * len(PROFILE_ROWS)
SPACING_WIDTH = 2  #: columns a vision token carries for the head: P(space after), P(full width)


def column_ink(line: np.ndarray, frame_px: int = 8) -> np.ndarray:
    """PP trunk input [3, 48, W] or one channel of it [48, W], any float dtype in [-1, 1] (paper +1;
    W a multiple of ``frame_px``) ->
    float32 [W / frame_px, 16]: for each frame, the mean ink (0 paper .. 1 ink) of each of its 8 pixel
    columns over all 48 rows, then over the middle rows 12-36 (lines above and below that peek into a
    loose crop reach only the outer rows). Raises ValueError on another shape.
    """
    gray = line[0] if line.ndim == 3 else line
    if gray.ndim != 2 or gray.shape[0] != 48 or gray.shape[1] % frame_px:
        raise ValueError(f"expected a [3, 48, W] or [48, W] line with W a multiple of {frame_px}, got {line.shape}")
    ink = (1.0 - gray.astype(np.float32)) * 0.5
    prof = [ink[a:b].mean(axis=0) for a, b in PROFILE_ROWS]  # each [W]
    t = gray.shape[1] // frame_px
    return np.concatenate([p.reshape(t, frame_px) for p in prof], axis=1).astype(np.float32)
