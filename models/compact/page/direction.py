"""The inputs of the 0/180-degree direction classifier (rapidocr's PP-OCR ``cls`` model) for one line:
windows of the classifier's own aspect, normalised as rapidocr does (:meth:`models.compact.page.detect.LineDetector`
votes with their mean).
"""

from __future__ import annotations

import numpy as np
from PIL import Image

#: Windows of a long line the 0/180 classifier votes on (:meth:`models.compact.page.detect.LineDetector._upside_down`).
CLS_WINDOWS = 3
#: The classifier's input (rapidocr ``cls_image_shape``: 3 x 48 x 192): height and width in pixels.
CLS_H, CLS_W = 48, 192


def _cls_windows(line: Image.Image) -> list[Image.Image]:
    """Up to :data:`CLS_WINDOWS` crops of ``line``, each at most CLS_W / CLS_H times as wide as the
    line is tall, spread evenly over its width (the whole line when it is that short already).
    """
    w, h = line.size
    span = max(1, int(round(h * CLS_W / CLS_H)))
    if w <= span:
        return [line]
    k = min(CLS_WINDOWS, -(-w // span))  # >= 2 here
    starts = [round(i * (w - span) / (k - 1)) for i in range(k)]
    return [line.crop((x, 0, x + span, h)) for x in starts]


def _cls_input(crop: Image.Image) -> np.ndarray:
    """A crop -> the classifier's input [3, CLS_H, CLS_W] float32: resized to CLS_H px tall keeping its
    aspect (at most CLS_W wide), BGR, (x / 255 - 0.5) / 0.5, right-padded with zeros as rapidocr's
    ``TextClassifier.resize_norm_img`` does.
    """
    w = min(CLS_W, max(8, int(round(crop.width * CLS_H / max(1, crop.height)))))
    a = np.asarray(crop.resize((w, CLS_H), Image.Resampling.BILINEAR), dtype=np.float32)[:, :, ::-1] / 255.0
    out = np.zeros((3, CLS_H, CLS_W), dtype=np.float32)
    out[:, :, :w] = ((a - 0.5) / 0.5).transpose(2, 0, 1)
    return out
