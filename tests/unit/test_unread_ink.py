"""Text the detector missed is measured on the page (models/compact/page/unread_ink.py): a field printed
on its underline and left out of every segment counts as unread ink in proportion to its characters,
while rules, underlines, form boxes, a dashed separator, a logo, shaded table rows, scan noise, photo
grain and a halftone photo's dots outside the segments count as none (issue #38 item 3)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from models.compact.page.unread_ink import ink_split, unread_ink

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
SIZE = 30
LINES = ["Account no.: BQ-4196597", "Postcode: 19013 Milton", "Date of birth: 19/06/1975",
         "Invoice no.: AL-6521322", "City: Springfield East", "Amount: $26,758.56 paid"]


Box = tuple[float, float, float, float]


def _form(missed: tuple[int, ...] = ()) -> tuple[Image.Image, ImageDraw.ImageDraw, list[Box]]:
    """A letter-size page of :data:`LINES`, each on an underline; returns the page, a drawer and the
    boxes of the lines not in ``missed`` (the segments read), as the detector gives them (a margin
    around the ink).
    """
    font = ImageFont.truetype(FONT, SIZE)
    img = Image.new("L", (1700, 2200), 245)
    draw = ImageDraw.Draw(img)
    boxes = []
    for i, text in enumerate(LINES):
        x, y = 150, 200 + 90 * i
        x0, y0, x1, y1 = draw.textbbox((x, y), text, font=font)
        draw.text((x, y), text, font=font, fill=20)
        draw.line([(x - 10, y1 + 2), (1500, y1 + 2)], fill=30, width=3)  # the underline it is printed on
        if i not in missed:
            pad = 0.3 * (y1 - y0)
            boxes.append((x0 - pad, y0 - pad, x1 + pad, y1 + pad))
    return img, draw, boxes


def _gray(img: Image.Image) -> np.ndarray:
    return np.asarray(img.convert("L"))


def test_a_page_read_whole_has_no_unread_ink():
    img, _, boxes = _form()
    read, unread = ink_split(_gray(img), boxes)
    assert read > 0
    assert unread == 0.0


@pytest.mark.parametrize("missed", [(1,), (2, 4)])
def test_a_field_the_detector_missed_is_unread_ink_in_proportion_to_its_characters(missed):
    img, _, boxes = _form(missed)
    ratio = unread_ink(_gray(img), boxes)
    chars = [len(t.replace(" ", "")) for t in LINES]
    want = sum(chars[i] for i in missed) / sum(c for i, c in enumerate(chars) if i not in missed)
    assert want * 0.6 <= ratio <= want * 1.6, (ratio, want)


def test_rules_boxes_dashes_logos_noise_and_grain_outside_the_segments_are_no_text():
    img, draw, boxes = _form()
    rng = np.random.default_rng(0)
    draw.rectangle((150, 900, 900, 960), outline=30, width=3)  # an empty form box
    draw.rectangle((1000, 900, 1040, 940), outline=30, width=2)  # a tick box
    for x in range(150, 1500, 36):  # a receipt's dashed separator
        draw.line([(x, 1050), (x + 18, 1050)], fill=30, width=5)
    draw.line([(150, 1120), (1500, 1120)], fill=30, width=2)  # a plain rule
    draw.line([(1600, 150), (1600, 1500)], fill=30, width=3)  # a vertical rule in the margin
    draw.ellipse((1200, 1250, 1450, 1500), fill=60)  # a logo
    draw.rectangle((150, 1250, 600, 1300), fill=90)  # a dark band
    for k in range(4):  # light shaded table rows, one line tall, cut by white cell gutters
        for x in range(150, 1500, 220):
            draw.rectangle((x, 1330 + 80 * k, x + 200, 1370 + 80 * k), fill=205)
    a = np.array(img, dtype=np.int16)
    ys, xs = rng.integers(1660, 2150, 400), rng.integers(0, 1700, 400)
    a[ys, xs] = 40  # scan noise: lone dark pixels
    a[1600:2100, 700:1100] += rng.normal(0, 25, (500, 400)).astype(np.int16)  # photo grain
    out = Image.fromarray(np.clip(a, 0, 255).astype(np.uint8))
    read, unread = ink_split(_gray(out), boxes)
    assert read > 0
    assert unread / read < 0.01, unread / read


def test_a_page_without_segments_measures_nothing():
    img, _, _ = _form()
    assert ink_split(_gray(img), []) == (0.0, 0.0)
    assert unread_ink(_gray(img), []) == 0.0


def test_the_dots_of_a_halftone_photo_in_a_bilevel_scan_are_no_text():
    # a photo dithered to black and white: a solid dark mass fraying into dots of text size in rows
    img, draw, boxes = _form()
    rng = np.random.default_rng(1)
    draw.ellipse((300, 1000, 900, 1700), fill=0)
    for _ in range(600):  # over the mass and out to its rim, as a photo's lighter edge dithers
        t, rad = rng.uniform(0, 2 * np.pi), np.sqrt(rng.uniform(0, 1)) * 1.05
        x, y = int(600 + 300 * rad * np.cos(t)), int(1350 + 350 * rad * np.sin(t))
        r = int(rng.integers(5, 12))
        draw.rectangle((x, y, x + r, y + 2 * r), fill=0)
    read, unread = ink_split(_gray(img.convert("1").convert("L")), boxes)
    assert read > 0
    assert unread / read < 0.01, unread / read
