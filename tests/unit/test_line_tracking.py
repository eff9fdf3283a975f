"""Letter-spaced lines closed up before the Latin tower reads them (models/compact/line/tracking.py).

A heading set letter-spaced (``S t a t e   o f   C a l i f o r n i a`` under a logo, over a light
rule) was read letter by letter, with a stray ``_`` in its word gaps; lines of normal spacing, in
proportional and monospaced (Courier-like) faces, digits included, must come back untouched.
"""

from __future__ import annotations

import random

import pytest
from PIL import Image, ImageDraw, ImageFont

from evaluation.score import score
from models.compact.line.tracking import NORMAL_GAP, WORD_GAP, close_tracking, letter_gaps, tracking

FONTS = "/usr/share/fonts"
HEADING_FACES = [f"{FONTS}/truetype/dejavu/DejaVuSans-Bold.ttf", f"{FONTS}/truetype/liberation/LiberationSans-Bold.ttf",
                 f"{FONTS}/truetype/dejavu/DejaVuSerif.ttf", f"{FONTS}/opentype/urw-base35/URWGothic-Demi.otf"]
NORMAL_FACES = [*HEADING_FACES, f"{FONTS}/opentype/courier-prime/Courier Prime.otf",
                f"{FONTS}/opentype/courier-prime/Courier Prime Italic.otf",
                f"{FONTS}/opentype/urw-base35/NimbusMonoPS-Regular.otf", f"{FONTS}/truetype/dejavu/DejaVuSansMono.ttf",
                f"{FONTS}/truetype/liberation/LiberationSerif-Regular.ttf"]
WORDS = ["office", "county", "health", "board", "annual", "notice", "department", "labor", "public", "works",
         "summary", "city", "water", "district", "planning"]
NORMAL_LINES = ["IN THE SUPREME COURT", "OF THE UNITED STATES", "Total amount due 613.87", "Policy number 391-52040",
                "Summary by Received Date", "the quick brown fox jumps", "Washington, D.C. 20543"]


def _line(text: str, face: str, size: int, track: float, rule: int | None = None) -> Image.Image:
    """``text`` drawn glyph by glyph, ``track`` x size pixels of extra blank after each, optionally over a
    rule of gray ``rule`` (a logo's light-coloured line) under the whole line."""
    font = ImageFont.truetype(face, size)
    width = int(sum(font.getlength(c) + track * size for c in text)) + 20
    img = Image.new("L", (width, int(size * 1.5)), 255)
    draw = ImageDraw.Draw(img)
    x = 10.0
    for c in text:
        draw.text((x, 4), c, font=font, fill=30)
        x += font.getlength(c) + track * size
    if rule is not None:
        draw.line([(0, img.height - 3), (width, img.height - 3)], fill=rule, width=max(1, size // 14))
    return img


def _heading(seed: int) -> str:
    rng = random.Random(seed)
    words = [rng.choice(WORDS) for _ in range(rng.randint(2, 3))]
    return " ".join(w.upper() if rng.random() < 0.4 else w.title() for w in words)


@pytest.mark.parametrize("seed", range(8))
def test_a_letter_spaced_heading_is_closed_up_and_keeps_its_word_gaps(seed):
    rng = random.Random(seed)
    text, face, size = _heading(seed), rng.choice(HEADING_FACES), rng.choice([22, 28, 34])
    img = _line(text, face, size, rng.choice([0.35, 0.5, 0.8]))
    assert tracking(img) > 0
    out = close_tracking(img)
    assert out.height == img.height and out.mode == img.mode and out.width < img.width
    gaps, glyphs, height = letter_gaps(out)
    assert len(glyphs) == len(letter_gaps(img)[1])  # no glyph cut or merged
    widths = sorted(b - a for a, b in gaps)
    words = text.count(" ")
    letters, spaces = widths[: len(widths) - words], widths[len(widths) - words:]
    assert max(letters) <= NORMAL_GAP * height + 2, (text, widths)
    assert all(letters[-1] < s <= WORD_GAP * height + 1 for s in spaces), (text, widths)


@pytest.mark.parametrize("face", NORMAL_FACES)
def test_lines_of_normal_spacing_are_left_alone(face):
    for i, text in enumerate(NORMAL_LINES):
        img = _line(text, face, (22, 28, 34)[i % 3], 0.0)
        assert close_tracking(img) is img, (face, text)
    assert close_tracking(Image.new("L", (200, 30), 255)).size == (200, 30)  # no print at all


@pytest.fixture(scope="module")
def engine():
    from evaluation.engines import InProcessEngine

    return InProcessEngine(None, threads=1)


BODY = ["The board met on the first Monday of the month to review the annual budget.",
        "Members asked the county office to publish the notice before the end of June.",
        "Public works reported that the water district finished the planning study.",
        "The minutes of the last meeting were approved without changes."]


@pytest.mark.slow
@pytest.mark.parametrize("seed", [100, 101])
def test_letter_spaced_headings_over_a_light_rule_are_read_as_words(engine, seed):
    """A page of body text under two letter-spaced headings, each over a light rule (a logo's). Before
    close_tracking the Latin tower read them letter by letter (``S U M M A RY N o tic e``, ``H E A L T H _C i v``)."""
    from models.inprocess import ocr_page

    rng = random.Random(seed)
    page = Image.new("RGB", (1700, 1100), "white")
    body = ImageFont.truetype(f"{FONTS}/truetype/liberation/LiberationSerif-Regular.ttf", 30)
    draw = ImageDraw.Draw(page)
    truth, y = [], 100
    for k in range(2):
        text = _heading(seed * 10 + k)
        line = _line(text, rng.choice(HEADING_FACES), 30, rng.choice([0.4, 0.6]), rule=rng.choice([170, 200]))
        page.paste(line.convert("RGB"), (150, y))
        truth.append(text)
        y += 90
        for sentence in BODY[2 * k: 2 * k + 2]:
            draw.text((150, y), sentence, font=body, fill="black")
            truth.append(sentence)
            y += 60
        y += 60
    got = ocr_page(engine.enc, engine.dec, page).text
    assert "_" not in got, got
    assert score(got, "\n".join(truth)).cer <= 0.03, (got, truth)
