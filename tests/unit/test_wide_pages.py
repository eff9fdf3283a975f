"""A very wide, short page (width > 2 x height: a banner, a panorama scan) is detected in vertical
strips (``models/compact/page/wide.py``), not shrunk as a whole into the detector's 1,600 px: a
60,000 x 800 px page of 120 px print read nothing (its print became 3 px tall)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from models.compact.page.boxes import LineBox
from models.compact.page.wide import join_pieces, strip_starts

WORDS = ("invoice total amount river stone garden window paper letter market station silver morning "
         "number yellow travel summer winter").split()


def _box(x0: float, y0: float, x1: float, y1: float) -> LineBox:
    q = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], dtype=np.float32)
    return LineBox(q, (x0, y0, x1, y1), 0.9)


def test_strips_cover_the_page_and_overlap():
    starts = strip_starts(10_000, 1600, 320)
    assert starts[0] == 0 and starts[-1] == 10_000 - 1600
    assert all(b - a == 1280 for a, b in zip(starts[:-2], starts[1:-1], strict=True))
    assert strip_starts(1200, 1600, 320) == [0]


def test_the_pieces_of_one_line_are_joined_and_other_lines_are_not():
    left, right = _box(100, 40, 1600, 90), _box(1280, 42, 2500, 92)  # one line over a strip's edge
    below = _box(1300, 200, 2000, 250)  # another row
    apart = _box(3000, 40, 3500, 90)  # the same row, further right: another line
    lines = join_pieces([right, below, apart, left])
    assert [ln.box for ln in lines] == [(100, 40, 2500, 92), (3000, 40, 3500, 90), (1300, 200, 2000, 250)]
    assert lines[1] is apart and lines[2] is below


def _wide_page(seed: int, width: int, height: int, size: int) -> tuple[object, list[str]]:
    """A white ``width`` x ``height`` page with 3 seeded phrases of ``size`` px DejaVu Sans on one row,
    the middle one over the first strips' edges (x 1,280-1,600); returns (page, phrases left to right)."""
    from PIL import Image, ImageDraw, ImageFont

    rng = random.Random(seed)
    font = ImageFont.truetype("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", size)
    page = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(page)
    phrases = [" ".join(rng.choice(WORDS) for _ in range(3)) + f" {rng.randint(100, 99999)}" for _ in range(3)]
    xs = [40 + rng.randint(0, 200), 1000 + rng.randint(0, 200), width - 200 - int(font.getlength(phrases[2]))]
    for x, phrase in zip(xs, phrases, strict=True):
        draw.text((x, height // 3 + rng.randint(-20, 20)), phrase, fill="black", font=font)
    return page, phrases


@pytest.mark.parametrize("seed", [1, 2])
def test_a_wide_short_page_is_read(seed):
    """Seeded 14,000 x 360 px pages of 54 px print (seeds other than the 60,000 x 800 page the strips were
    made on): the phrases are read in order, at most 5 % of the characters wrong (seed 1 reads a 15555
    as 1555); before, fitting the whole width into 1,600 px left 6 px print: one phrase of the three was
    read, CER about 65 %."""
    from evaluation.engines import InProcessEngine
    from evaluation.score import score

    page, phrases = _wide_page(seed, 14_000, 360, 54)
    engine = InProcessEngine(threads=1)
    text = engine._ocr_page(engine.enc, engine.dec, page).text
    s = score(text, "\n".join(phrases))
    assert s.char_edits <= 0.05 * s.ref_chars, (text, phrases)
