"""Seeded pages that poppler's layout analysis used to read apart from our text (issue 42): a
court transcript's page and a page of spaced-out capital headings, with known word ink boxes, for
bench/word_boxes.py and tests/unit/test_transcript_pages.py.

* :func:`transcript_page`: a monospaced, double-spaced page with a column of right-aligned line
  numbers in the left margin (some rows hold only their number), lines indented by a few to many
  characters, a form-like row whose parts stand far apart ("Petitioner        :"), and a heading in
  capitals. Read as a line-level model reads it: each line number its own line, then the text of
  its row (poppler's default mode orders such a margin column apart, before indented lines beside
  it, unless a row reads as one block).
* :func:`heading_page`: headings in capitals with two to four spaces between words (the word gaps
  of a much larger font than the capitals' height suggests) between lines of ordinary text.

Both return :class:`bench.word_box_pages.TruthPage` (lines in reading order, each word's ink box,
each line's loose box as a line detector pads it).
"""

from __future__ import annotations

import random

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from bench.word_box_pages import TruthLine, TruthPage, _ink_box

_MONO = ["/usr/share/fonts/truetype/liberation/LiberationMono-Regular.ttf",
         "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"]
_SANS = ["/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
         "/usr/share/fonts/truetype/liberation/LiberationSerif-Regular.ttf"]
_WORDS = ("the of and to in on for was that with as by at from this be are or an which not it came "
          "argument before court behalf petitioner respondent counsel matter oral above entitled "
          "deputy attorney general washington tuesday january appearances states united").split()
_CAPS = ("IN THE SUPREME COURT OF UNITED STATES DISTRICT APPEAL PROCEEDINGS TRANSCRIPT ORAL "
         "ARGUMENT SUMMARY REPORT SECTION ANNUAL REVIEW NOTICE").split()


class _Writer:
    """Draws words on a page and records each drawn line's words and their ink boxes."""

    def __init__(self, size: tuple[int, int]):
        self.page = Image.new("RGB", size, "white")
        self.draw = ImageDraw.Draw(self.page)
        self.placed: list[tuple[list[str], list[tuple[int, int, int, int]]]] = []

    def line(self, x: float, y: int, words: list[str], font: ImageFont.FreeTypeFont, gaps: list[float]) -> float:
        """Draw ``words`` from (x, y), ``gaps[i]`` pixels after word i; return the x after the last."""
        spans = []
        for i, word in enumerate(words):
            self.draw.text((x, y), word, fill="black", font=font)
            left, top, right, bottom = (int(v) for v in self.draw.textbbox((x, y), word, font=font))
            spans.append((left - 2, top - 2, right + 2, bottom + 2))
            x += self.draw.textlength(word, font=font) + (gaps[i] if i < len(gaps) else 0.0)
        self.placed.append((words, spans))
        return x

    def truth(self, rng: random.Random) -> TruthPage:
        """The page and its lines in drawing order (ink boxes measured, loose boxes padded 2-6 px)."""
        gray = np.asarray(self.page.convert("L"))
        lines = []
        for words, spans in self.placed:
            kept = [(w, b) for w, s in zip(words, spans, strict=True) if (b := _ink_box(gray, *s)) is not None]
            if not kept:
                continue
            bs = [b for _, b in kept]
            pad = rng.uniform(2, 6)
            box = (min(b[0] for b in bs) - pad, min(b[1] for b in bs) - pad, max(b[2] for b in bs) + pad,
                   max(b[3] for b in bs) + pad)
            lines.append(TruthLine([w for w, _ in kept], bs, box))
        return TruthPage(self.page, lines)


def transcript_page(seed: int, size: tuple[int, int] = (1275, 1650), rows: int = 25) -> TruthPage:
    """A transcript page (see the module docstring), seeded: ``rows`` numbered rows at 150 dpi."""
    rng = random.Random(seed)
    font = ImageFont.truetype(rng.choice(_MONO), rng.randint(22, 27))
    out = _Writer(size)
    char = out.draw.textlength("M", font=font)
    asc, desc = font.getmetrics()
    pitch = int((asc + desc) * rng.uniform(1.9, 2.3))
    number_right = 150 + rng.randint(0, 40)
    margin = number_right + char * rng.randint(3, 5)
    y = 90
    for row in range(1, rows + 1):
        label = str(row)
        out.line(number_right - out.draw.textlength(label, font=font), y, [label], font, [])
        kind = rng.random() if row > 1 else 0.0
        if row == 1:  # a heading in capitals, indented, one space between its words
            words = [rng.choice(_CAPS) for _ in range(rng.randint(5, 8))]
            out.line(margin + char * rng.randint(2, 6), y, words, font, [char] * len(words))
        elif kind < 0.18:  # a row holding only its number
            pass
        elif kind < 0.30:  # a form's row: a word indented far, a colon further on
            out.line(margin + char * rng.randint(8, 16), y, [rng.choice(_WORDS).capitalize()], font, [])
            out.line(margin + char * 34, y, [":"], font, [])
        else:
            indent = rng.choice([0, 0, 0, 0, 2, 4, 10, 16])
            words, x = [], margin + char * indent
            while True:
                word = rng.choice(_WORDS)
                if x + char * (len(word) + 1) > size[0] - 120 - char * rng.randint(0, 20):
                    break
                words.append(word)
                x += char * (len(word) + 1)
            if words:
                out.line(margin + char * indent, y, words, font, [char] * len(words))
        y += pitch
        if y > size[1] - 100:
            break
    return out.truth(rng)


def heading_page(seed: int, size: tuple[int, int] = (1275, 1650)) -> TruthPage:
    """Headings in spaced-out capitals between lines of ordinary text (module docstring), seeded."""
    rng = random.Random(seed)
    out = _Writer(size)
    y = 90
    while y < size[1] - 140:
        if rng.random() < 0.4:
            font = ImageFont.truetype(rng.choice(_MONO + _SANS), rng.randint(22, 34))
            space = out.draw.textlength(" ", font=font)
            words = [rng.choice(_CAPS) for _ in range(rng.randint(2, 5))]
            out.line(90 + rng.randint(0, 200), y, words, font, [space * rng.uniform(2.0, 4.0) for _ in words])
        else:
            font = ImageFont.truetype(rng.choice(_SANS), rng.randint(18, 26))
            space = out.draw.textlength(" ", font=font)
            words = []
            x = 90.0
            while x < size[0] - 300:
                word = rng.choice(_WORDS)
                words.append(word)
                x += out.draw.textlength(word + " ", font=font)
            out.line(90, y, words, font, [space] * len(words))
        asc, desc = font.getmetrics()
        y += int((asc + desc) * rng.uniform(1.5, 2.2))
    return out.truth(rng)
