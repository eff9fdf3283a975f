"""How large a font the text layer may set a word in so that a reader still reads all its glyphs.

OCRmyPDF's renderer draws each word in the line's font size (from the line box's height) scaled
horizontally (``Tz``) to its own box, so a glyph's advance on the page is its share of the word's
natural width times the box's width, whatever the font size. Poppler's ``pdftotext``
(TextOutputDev) takes a glyph that starts within ``dupMaxPriDelta`` = 0.1 font sizes of the previous
glyph's start for a duplicate (fake bold, a drop shadow): it starts a word of its own, and an equal
glyph there is dropped. A word squeezed into a box narrow for the font size so loses characters or
falls apart (``25,100`` read ``25,10``, ``10,055`` read ``10,`` ``5``, on a line whose box was made
300 px tall by a detector box running down a table column). :func:`largest_font` bounds the font
size (so the line box's height) by the narrowest glyph of the line's words.
"""

from __future__ import annotations

import functools
import pathlib
import threading
from collections.abc import Iterable

import ocrmypdf
from ocrmypdf.font import MultiFontManager

#: smallest advance of a glyph, in font sizes, that the text layer leaves (poppler drops or splits
#: off a glyph under 0.1; the rest is room for the renderer's rounding of Td and Tz to 2 decimals)
MIN_ADVANCE = 0.15
#: OCRmyPDF's own fonts (glyphless Occulta, Noto Sans), as its hocrtransform CLI uses them.
FONT_DIR = pathlib.Path(str(ocrmypdf.__file__)).parent / "data"
_LOCK = threading.Lock()


@functools.cache
def fonts() -> MultiFontManager:
    """OCRmyPDF's font manager over its own fonts (and the system's Noto CJK), loaded once, for
    measuring only (under the module's lock; each text layer renders with its own).
    """
    return MultiFontManager(FONT_DIR)


@functools.lru_cache(maxsize=4096)
def advances(text: str) -> tuple[float, ...]:
    """Advance width in ems of each character of ``text`` in the font the renderer picks for the
    word (harfbuzz, unshaped; 0.0 for a character the font has no glyph for).
    """
    with _LOCK:
        font = fonts().select_font_for_word(text, None)
        upem = float(font.hb_face.upem)
        glyphs = [font.hb_font.get_nominal_glyph(ord(c)) for c in text]
        return tuple(font.hb_font.get_glyph_h_advance(g) / upem if g is not None else 0.0 for g in glyphs)


def largest_font(words: Iterable[tuple[str, float]]) -> float:
    """The largest font size (in the unit of the widths, page pixels) at which each of ``words``
    ((text, width of its box along the line)) set to its width keeps every glyph's advance at least
    :data:`MIN_ADVANCE` font sizes (inf when no word has two glyphs). Only the advance from a glyph
    to the next one of the word counts (the next word starts a word gap further on, the renderer's
    trailing space is no glyph to a reader); a glyph of no advance (a combining mark) is left out,
    and so is a word of no width (the renderer does not scale it).
    """
    out = float("inf")
    for text, width in words:
        adv = [a for a in advances(text) if a > 0]
        if len(adv) < 2 or width <= 0:
            continue
        out = min(out, width * min(adv[:-1]) / sum(adv) / MIN_ADVANCE)
    return out
