"""training/compact/scan_degrade.py: a degraded page keeps its print."""

from __future__ import annotations

import random

import numpy as np
from PIL import Image, ImageDraw

from training.compact import scan_degrade as deg


def _printed() -> Image.Image:
    img = Image.new("L", (240, 60), 255)
    ImageDraw.Draw(img).rectangle((20, 20, 200, 40), fill=0)
    return img


def test_dot_matrix_prints_dots_at_every_radius():
    """The smallest radius drawn (0.35 pitch) reaches no pixel centre of a 2-px cell: it printed nothing,
    a blank page (scan_docs.make_document(31010))."""
    for seed in range(40):
        rng = random.Random(seed)
        a = np.asarray(deg.dot_matrix(_printed(), rng), dtype=np.float32)
        assert a[20:41, 20:201].mean() < 160, seed  # the bar is printed
        assert a[45:, :].mean() > 250  # the paper stays paper


def test_scan_document_31010_is_not_blank():
    from training.compact.scan_docs import make_document

    a = np.asarray(make_document(31010).image.convert("L"))
    assert float(np.percentile(a, 1)) < 150
