"""gateway.output.parted: words a reader would join into one (a duplicate read over its neighbour's
ink) are laid apart in the text layer; what was read stays as it is."""

from __future__ import annotations

from gateway.output.lines import Line, Word
from gateway.output.parted import parted
from gateway.output.text_band import BREAK, reader_geometry


def _font(height: float) -> float:
    above, below, size = reader_geometry()
    return size * height / (above + below)


def test_a_duplicate_read_overlapping_its_neighbour_in_one_line_is_laid_apart():
    # the seed-0 table page of bench/table_pages.py on an AVX2 CPU: '2,799.55 2', the '2' a second
    # detection over the number's first digit; poppler read the layer as '22,799.55'
    number, dup = Word("2,799.55", (654.0, 812.0, 764.0, 849.0)), Word("2", (646.0, 816.0, 678.0, 849.0))
    line = Line("2,799.55 2", (646.0, 812.0, 764.0, 849.0), [number, dup])
    parted([line])
    assert number.box[0] - dup.box[2] >= BREAK * _font(37.0) - 1e-6
    assert dup.box[0] == 646.0 and number.box[2] == 764.0  # laid over the span the two cover
    assert dup.box[2] - dup.box[0] > 0 and number.box[2] - number.box[0] > dup.box[2] - dup.box[0]
    assert (line.box[0], line.box[2]) == (646.0, 764.0)


def test_two_lines_on_one_row_that_overlap_are_laid_apart_and_others_are_left_alone():
    a = Line("-11", (646.0, 100.0, 688.0, 130.0), [Word("-11", (646.0, 100.0, 688.0, 130.0))])
    b = Line("-112.63%", (651.0, 100.0, 762.0, 130.0), [Word("-112.63%", (651.0, 100.0, 762.0, 130.0))])
    far = Line("703", (800.0, 100.0, 850.0, 130.0), [Word("703", (800.0, 100.0, 850.0, 130.0))])
    below = Line("9", (650.0, 160.0, 680.0, 190.0), [Word("9", (650.0, 160.0, 680.0, 190.0))])
    parted([a, b, far, below])
    assert b.words[0].box[0] - a.words[0].box[2] >= BREAK * _font(30.0) - 1e-6
    assert far.words[0].box == (800.0, 100.0, 850.0, 130.0)
    assert below.words[0].box == (650.0, 160.0, 680.0, 190.0)


def test_a_duplicate_read_set_after_the_number_it_overlaps_reads_as_two_words_in_the_layer(tmp_path):
    import shutil

    import pytest

    from bench.word_boxes import pdftotext
    from gateway.output.searchable_pdf import text_layer
    from inkstream.page_result import Block, PageResult

    if shutil.which("pdftotext") is None:
        pytest.skip("poppler-utils not installed")
    pieces = [("管理费用", (117, 812, 216, 841)), ("(80,324)", (295, 815, 391, 849)), ("16,584", (428, 815, 511, 849)),
              ("-3,352", (565, 816, 646, 849)), ("2,799.55", (654, 812, 764, 849)), ("2", (646, 816, 678, 849)),
              ("-0.1599", (805, 816, 893, 846)), ("3,966.57", (916, 814, 1016, 849))]
    text = "  ".join(t for t, _ in pieces[:4]) + "  2,799.55 2  " + "  ".join(t for t, _ in pieces[6:])
    blocks = [Block(type="line", text=t, box=b, confidence=0.9) for t, b in pieces]
    page = PageResult(index=1, status="ok", width=1240, height=1754, text=text, blocks=blocks)
    text_layer([page], [(1240 * 72 / 150, 1754 * 72 / 150)], tmp_path / "layer.pdf")
    assert sorted(pdftotext(tmp_path / "layer.pdf").split()) == sorted(t for t, _ in pieces)


def _parted_reference(lines) -> None:
    """The O(N^2) parted (every word tested against all the words after it), kept here as the
    reference the sorted one must equal."""
    import numpy as np

    from gateway.output.parted import _moved, _respanned, _turns
    from gateway.output.text_band import _opened

    above, below, size = reader_geometry()
    for turn, owners, words, across, along in _turns(lines):
        moved = False
        for i in range(len(words) - 1):
            a, b = across[i + 1:], along[i + 1:]
            tall = np.maximum(a[:, 1] - a[:, 0], across[i, 1] - across[i, 0])
            shorter = np.minimum(a[:, 1] - a[:, 0], across[i, 1] - across[i, 0])
            shared = np.minimum(a[:, 1], across[i, 1]) - np.maximum(a[:, 0], across[i, 0])
            font = size * tall / (above + below)
            gap = np.maximum(b[:, 0], along[i, 0]) - np.minimum(b[:, 1], along[i, 1])
            inside = ((b[:, 0] <= along[i, 0]) & (b[:, 1] >= along[i, 1])) | \
                     ((b[:, 0] >= along[i, 0]) & (b[:, 1] <= along[i, 1]))
            near = (shorter > 0) & (shared >= 0.5 * shorter) & (gap < BREAK * font) & ~inside
            for j in np.flatnonzero(near) + i + 1:
                pair = [i, int(j)] if along[i, 0] <= along[j, 0] else [int(j), i]
                spans = along[pair]
                if spans[1, 0] - spans[0, 1] >= BREAK * font[j - i - 1]:
                    continue
                along[pair] = _opened(spans, float(font[j - i - 1]))
                for k in pair:
                    _moved(words[k], float(along[k, 0]), float(along[k, 1]), turn)
                moved = True
        if moved:
            _respanned(owners, turn)


def _page_lines(seed: int, n_words: int) -> list[Line]:
    """Seeded lines of about ``n_words`` words on a page: rows of words with the gaps of print (some
    under a word break), duplicate reads over a neighbour's first or last letters, words inside
    others, lines of two print sizes on one row, rows that touch, some lines turned 90, 180 or 270."""
    import random

    rng = random.Random(seed)
    lines, y = [], 0.0
    while sum(len(ln.words) for ln in lines) < n_words:
        h = rng.choice([20.0, 24.0, 30.0, 37.0, 45.0])
        x, words = rng.uniform(0, 200), []
        for _ in range(rng.randint(1, 14)):
            w = rng.uniform(0.4, 6) * h
            dy = rng.choice([0.0, 0.0, rng.uniform(-0.6, 0.6) * h])
            words.append(Word("w", (x, y + dy, x + w, y + dy + h)))
            kind = rng.random()
            if kind < 0.15:  # a duplicate read over this word's first or last letters
                d = rng.uniform(0.2, 0.5) * w
                x0 = x - rng.uniform(0, 0.3) * h if rng.random() < 0.5 else x + w - d
                words.append(Word("d", (x0, y + dy + rng.uniform(-3, 3), x0 + d, y + dy + h)))
            elif kind < 0.2:  # a word inside this one
                words.append(Word("i", (x + 0.1 * w, y + dy, x + 0.5 * w, y + dy + h)))
            x += w + rng.choice([rng.uniform(-0.3, 0.2) * h, rng.uniform(0.05, 0.6) * h, 2 * h])
        box = (min(w.box[0] for w in words), min(w.box[1] for w in words),
               max(w.box[2] for w in words), max(w.box[3] for w in words))
        angle = rng.choice([0] * 6 + [90, 180, 270, -90, 360])
        if angle % 360:  # the same layout, as a turned page's lines hold it
            t = angle % 360

            def turned(b, t=t):
                x0, y0, x1, y1 = b
                return {90: (y0, -x1, y1, -x0), 180: (-x1, -y1, -x0, -y0), 270: (-y1, x0, -y0, x1)}[t]

            words = [Word(w.text, turned(w.box)) for w in words]
            box = turned(box)
        lines.append(Line(" ".join(w.text for w in words), box, words, angle))
        y += rng.choice([h * 1.4, h * 0.9, h * 0.5, 0.0])  # rows apart, touching, or one row of two lines
    lines.append(Line("", (0.0, 0.0, 1.0, 1.0), [], 0))
    return lines


def test_the_sorted_pairing_parts_the_words_as_the_quadratic_one_did():
    """parted tested every word against all the words after it, O(N^2) (0.11 s for 2,400 words);
    sorted by their tops it tests each against the words of its visual line: the same boxes, to the
    last bit, on seeded pages of lines."""
    import copy

    for seed, n in [(1, 40), (2, 300), (3, 1200), (4, 2400)]:
        lines = _page_lines(seed, n)
        ref = copy.deepcopy(lines)
        parted(lines)
        _parted_reference(ref)
        assert [(ln.box, [w.box for w in ln.words]) for ln in lines] == \
            [(ln.box, [w.box for w in ln.words]) for ln in ref]
        assert any(w.box != v.box for ln, rn in zip(lines, _page_lines(seed, n), strict=True)
                   for w, v in zip(ln.words, rn.words, strict=True))  # some words were parted
