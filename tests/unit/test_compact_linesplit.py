"""Over-long text lines are cut into pieces at inter-word gaps (models/compact/line/split.py)."""

from __future__ import annotations

import itertools

from PIL import Image, ImageDraw

from models.compact.line.split import SPLIT_PX, split_line, split_points


def _words_line(words: int, word_px: int = 60, gap_px: int = 14,
                height: int = 32) -> tuple[Image.Image, list[tuple[int, int]]]:
    """A white line with black 'words' (solid bars); returns it and the words' x ranges."""
    width = words * (word_px + gap_px) + gap_px
    im = Image.new("L", (width, height), 255)
    d = ImageDraw.Draw(im)
    spans = []
    for i in range(words):
        x0 = gap_px + i * (word_px + gap_px)
        d.rectangle((x0, 6, x0 + word_px - 1, height - 7), fill=0)
        spans.append((x0, x0 + word_px))
    return im.convert("RGB"), spans


def test_short_line_stays_whole():
    im, _ = _words_line(5)
    assert im.width < SPLIT_PX and split_points(im) == []
    assert split_line(im, (0, 0, im.width, 32)) == [(im, (0, 0, im.width, 32), "line")]


def test_long_line_is_cut_between_words_into_short_pieces():
    im, spans = _words_line(30)  # 2,234 px at the 32-px line height
    cuts = split_points(im)
    assert len(cuts) == -(-im.width // SPLIT_PX) - 1
    for c in cuts:  # every cut lies in a gap, never inside a word
        assert not any(a <= c < b for a, b in spans)
    pieces = split_line(im, (100.0, 50.0, 100.0 + im.width, 82.0))
    assert len(pieces) == len(cuts) + 1
    assert all(p.width <= SPLIT_PX * 1.4 for p, _, _ in pieces)
    assert [j for _, _, j in pieces] == ["line"] + ["space"] * len(cuts)  # cut at word gaps
    boxes = [b for _, b, _ in pieces]  # piece boxes tile the line's box, left to right
    assert boxes[0][0] == 100.0 and boxes[-1][2] == 100.0 + im.width
    assert all(a[2] == b[0] for a, b in itertools.pairwise(boxes))


def test_line_without_gaps_is_cut_at_the_ideal_positions():
    im = Image.new("RGB", (3 * SPLIT_PX, 32), 0)
    im.paste((255, 255, 255), (0, 0, 3 * SPLIT_PX, 4))  # some paper so the ink threshold exists
    assert split_points(im) == [SPLIT_PX, 2 * SPLIT_PX]
    pieces = split_line(im, (0.0, 0.0, float(im.width), 32.0))
    assert [j for _, _, j in pieces] == ["line", "direct", "direct"]  # cut inside "words": no space


def test_an_underline_does_not_hide_the_word_gaps():
    im, spans = _words_line(30, height=40)
    d = ImageDraw.Draw(im)
    d.rectangle((0, 36, im.width - 1, 37), fill=(0, 0, 0))  # underline through every gap
    cuts = split_points(im)
    assert cuts and all(not any(a <= c < b for a, b in spans) for c in cuts)


def test_light_text_on_a_dark_background_is_cut_at_its_gaps():
    im, spans = _words_line(30)
    inverted = Image.eval(im, lambda v: 255 - v)
    cuts = split_points(inverted)
    assert cuts and all(not any(a <= c < b for a, b in spans) for c in cuts)


def test_a_short_line_is_cut_at_a_tab_gap_into_pieces_joined_by_a_space():
    """A form's label and its value found as one box (``Account number:    599-48033``, the gap 2.5
    ink heights): read whole, the recogniser filled the gap with a stray ``_``. Word gaps are kept."""
    im, spans = _words_line(2, word_px=120, gap_px=10, height=32)  # the label: two words, ink 20 px tall
    line = Image.new("RGB", (im.width + 50 + 150, 32), (255, 255, 255))
    line.paste(im, (0, 0))
    ImageDraw.Draw(line).rectangle((im.width + 50, 6, im.width + 50 + 139, 25), fill=(0, 0, 0))  # the value
    assert line.width < SPLIT_PX and split_points(line) == []
    (label, lbox, j0), (value, vbox, j1) = split_line(line, (100.0, 50.0, 100.0 + line.width, 82.0))
    assert (j0, j1) == ("line", "space")
    assert spans[-1][1] < lbox[2] - 100.0 == vbox[0] - 100.0 < im.width + 50  # cut inside the gap
    assert label.width + value.width == line.width and vbox[2] == 100.0 + line.width
