"""Seeded test pages with known word boxes, for the word-box checks of the searchable PDF and hOCR
(tests/unit/test_word_boxes.py, bench/word_boxes.py).

:func:`make_page` renders lines of words with PIL (DejaVu / Liberation fonts, mixed sizes) on a
white page and records each word's ink box (the bounding box of its dark pixels) and each line's
loose box (the ink box padded as a line detector gives it); :func:`turned` turns such a page by a
quarter turn, boxes with it, as a scan fed in sideways.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from gateway.output.word_boxes import turn_box

Box = tuple[float, float, float, float]

_FONTS = ["/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf",
          "/usr/share/fonts/truetype/liberation/LiberationSerif-Regular.ttf",
          "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf"]
_VOCAB = ("the of and to in is was for on that with as by at from this be are or an which have not it "
          "invoice total amount payment received order number address customer account balance date "
          "statement report section figure table results method analysis system value data process "
          "Quarterly revenue increased 12.5% compared with 2023; shipping (domestic) costs $4,310.99 "
          "Zürich café naïve résumé").split()


@dataclass
class TruthLine:
    """One rendered line: its words, each word's ink box, and the line's loose box (page pixels)."""

    words: list[str]
    word_boxes: list[Box]
    box: Box

    @property
    def text(self) -> str:
        """The line's text, words joined by single spaces."""
        return " ".join(self.words)


@dataclass
class TruthPage:
    """A rendered page (RGB) and its lines in reading order; ``rotation``: degrees counter-clockwise
    that turn it upright (what the encoder reports for a page it found turned).
    """

    image: Image.Image
    lines: list[TruthLine]
    rotation: int = 0

    @property
    def text(self) -> str:
        """The page's text: lines joined by newlines."""
        return "\n".join(ln.text for ln in self.lines)


def _ink_box(gray: np.ndarray, x0: int, y0: int, x1: int, y1: int) -> Box | None:
    ys, xs = np.nonzero(gray[y0:y1, x0:x1] < 128)
    if not len(xs):
        return None
    return (float(x0 + xs.min()), float(y0 + ys.min()), float(x0 + xs.max() + 1), float(y0 + ys.max() + 1))


def make_page(seed: int, size: tuple[int, int] = (1275, 1650), n_lines: int = 18) -> TruthPage:
    """A page of ``n_lines`` lines of random words (seeded), 8-16 pt at 150 dpi, with the ink box of
    every word and a loose box per line (ink box + 2-6 px each side, as a line detector pads).
    """
    rng = random.Random(seed)
    page = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(page)
    placed: list[tuple[list[str], list[tuple[int, int, int, int]]]] = []
    y = 80
    for _ in range(n_lines):
        font = ImageFont.truetype(rng.choice(_FONTS), rng.randint(17, 34))
        x, words, spans = 90 + rng.randint(0, 60), [], []
        space = draw.textlength(" ", font=font)
        while True:
            word = rng.choice(_VOCAB)
            wlen = draw.textlength(word, font=font)
            if x + wlen > size[0] - 90:
                break
            draw.text((x, y), word, fill="black", font=font)
            left, top, right, bottom = (int(v) for v in draw.textbbox((x, y), word, font=font))
            words.append(word)
            spans.append((left - 2, top - 2, right + 2, bottom + 2))
            x += wlen + space * rng.uniform(1.0, 1.6)
        placed.append((words, spans))
        asc, desc = font.getmetrics()
        y += int((asc + desc) * rng.uniform(1.3, 1.9))
        if y > size[1] - 120:
            break
    gray = np.asarray(page.convert("L"))
    lines = []
    for words, spans in placed:
        boxes = [_ink_box(gray, *s) for s in spans]
        kept = [(w, b) for w, b in zip(words, boxes, strict=True) if b is not None]
        if not kept:
            continue
        ws, bs = [w for w, _ in kept], [b for _, b in kept]
        pad = rng.uniform(2, 6)
        lb = (min(b[0] for b in bs) - pad, min(b[1] for b in bs) - pad, max(b[2] for b in bs) + pad,
              max(b[3] for b in bs) + pad)
        lines.append(TruthLine(ws, bs, lb))
    return TruthPage(page, lines)


def turned(page: TruthPage, degrees: int) -> TruthPage:
    """``page`` turned counter-clockwise by ``degrees`` (a quarter-turn multiple), boxes with it."""
    size = page.image.size
    image = page.image.rotate(degrees, expand=True)
    lines = [TruthLine(ln.words, [turn_box(b, size, degrees) for b in ln.word_boxes], turn_box(ln.box, size, degrees))
             for ln in page.lines]
    return TruthPage(image, lines, (page.rotation - degrees) % 360)
