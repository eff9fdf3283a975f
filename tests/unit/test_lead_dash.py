"""models/compact/line/lead_dash.py: a leading minus found from the crop's ink and put one stride-8
frame from the left edge; every other crop left as it is (issue 37)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from bench.minus_crops import ink_span, tight_crop
from models.compact.line.lead_dash import DASH_LEFT_PX, dash_at_frame, lead_dash

SERIF = "/usr/share/fonts/truetype/liberation/LiberationSerif-Regular.ttf"
NARROW = "/usr/share/fonts/truetype/liberation/LiberationSansNarrow-Regular.ttf"
SANS = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


@pytest.mark.parametrize(("text", "path", "size", "off"), [
    ("-7", SERIF, 19, 7), ("-4,512", NARROW, 19, 1),  # this minus touches the 4's bar
    ("-4,512", NARROW, 23, 5), ("\u221217.05%", SERIF, 28, 3), ("-0.1298", SANS, 23, 1), ("-92.32% of it", SANS, 19, 3),
])
def test_a_leading_minus_is_put_one_frame_from_the_edge(text, path, size, off):
    crop = tight_crop(text, path, size, off)
    span = lead_dash(crop)
    assert span is not None and span[0] == ink_span(np.asarray(crop.convert("L")))[0]
    moved = dash_at_frame(crop)
    first = ink_span(np.asarray(moved.convert("L")))
    assert first is not None and first[0] == round(DASH_LEFT_PX * crop.height / 32)
    assert moved.height == crop.height


@pytest.mark.parametrize("text", ["4,512", "7-", "a-b", "_5", "= 5", "T 5", "tax", "\u2014", "-", "(4,512)", ".5"])
def test_a_crop_led_by_anything_else_is_left_as_it_is(text):
    crop = tight_crop(text, SANS, 23, 3)
    assert lead_dash(crop) is None
    assert dash_at_frame(crop) is crop


def test_a_blank_crop_is_left_as_it_is():
    crop = Image.new("RGB", (40, 20), "white")
    assert dash_at_frame(crop) is crop


def test_a_minus_with_a_frame_of_paper_before_it_is_left_as_it_is():
    crop = tight_crop("-4,512", SANS, 23, 12)
    assert lead_dash(crop) is not None
    assert dash_at_frame(crop) is crop
