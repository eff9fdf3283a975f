"""A page's text as lines and words with boxes in page pixels, for hOCR and the PDF text layer.

The models give a box per block (one text line for line-level models such as ``compact``; a region
of several lines for ``deepseek_ocr2`` grounding markup); a block whose words were found on the
page's ink (``Block.words``, :mod:`gateway.output.word_boxes`) has each word at its own box, and its
line's box spans them along the line and, across it, a band chosen so that a reader's box of each
word overlaps its ink and the word gaps stay under a reader's column gap (lines that share a visual
line on one band: :mod:`gateway.output.text_band`). Otherwise words are placed the way OCRmyPDF and
Tesseract's PDF renderer expect them: a block of n text lines is cut into n equal horizontal bands;
inside a line each whitespace-separated word gets a share of the line's width proportional to its
character count, spaces counted as one character each, so the words span the line box exactly
(``words spaced to the line's width``). A run of Han, kana or Hangul characters without spaces is
one word.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gateway.output.parted import parted
from gateway.output.text_band import close_gaps, same_row, set_line, set_row
from inkstream.page_result import Block, Box, PageResult

_WORD = re.compile(r"\S+")


@dataclass
class Word:
    """One word: its ``text`` and ``box`` (x0, y0, x1, y1) in page pixels; ``confidence`` in [0, 1]
    when the model gave one.
    """

    text: str
    box: Box
    confidence: float | None = None


@dataclass
class Line:
    """One text line: its ``text``, ``box`` in page pixels and its words in reading order;
    ``angle``: degrees counter-clockwise the text runs at on the page (``Block.angle``).
    """

    text: str
    box: Box
    words: list[Word] = field(default_factory=list)
    angle: int = 0


@dataclass
class Region:
    """A block of the page (``type`` as in the JSON result: line, text, title, table ...) and its lines."""

    type: str
    box: Box
    lines: list[Line] = field(default_factory=list)


def words_of(text: str, box: Box, confidence: float | None = None, angle: int = 0) -> list[Word]:
    """Words of one line laid out over ``box`` by character share (see the module docstring), along
    the direction the text runs at ``angle`` degrees counter-clockwise (0: left to right, 90: bottom
    to top, 180: right to left, 270: top to bottom).
    """
    x0, y0, x1, y1 = box
    n = len(text)
    if n == 0 or x1 <= x0 or y1 <= y0:
        return []
    out = []
    for m in _WORD.finditer(text):
        a, b = m.start() / n, m.end() / n
        if angle % 360 == 90:
            wbox = (x0, y1 - b * (y1 - y0), x1, y1 - a * (y1 - y0))
        elif angle % 360 == 180:
            wbox = (x1 - b * (x1 - x0), y0, x1 - a * (x1 - x0), y1)
        elif angle % 360 == 270:
            wbox = (x0, y0 + a * (y1 - y0), x1, y0 + b * (y1 - y0))
        else:
            wbox = (x0 + a * (x1 - x0), y0, x0 + b * (x1 - x0), y1)
        out.append(Word(m.group(), wbox, confidence))
    return out


def _valid(box: Box, width: int, height: int) -> Box | None:
    x0, y0, x1, y1 = (max(0.0, box[0]), max(0.0, box[1]), min(float(width or box[2]), box[2]),
                      min(float(height or box[3]), box[3]))
    return (x0, y0, x1, y1) if x1 > x0 and y1 > y0 else None


def _squash(text: str) -> str:
    return "".join(text.split())


def _line_groups(page: PageResult) -> list[list[int]] | None:
    """Indices of the ``line`` blocks that make up each line of the page's text, in order, or None
    when they do not line up with the text. A line-level model cuts a long line into pieces (at a
    word gap or inside a word, :data:`inkstream.segments.JOINS`), one block each; the page text has
    them joined back into one line.
    """
    # ``table`` blocks (gateway/output/tables.py) come after the line blocks and repeat their text
    blocks, groups, bi = [b for b in page.blocks if b.type != "table"], [], 0
    for line in (ln for ln in page.text.split("\n") if ln.strip()):
        want, acc, group = _squash(line), "", []
        while bi < len(blocks) and len(acc) < len(want):
            acc += _squash(blocks[bi].text)
            group.append(bi)
            bi += 1
        if acc != want:
            return None
        groups.append(group)
    return groups if bi == len(blocks) else None


@dataclass
class _Laid:
    """A text line before it is set: its ``text``, ``words`` (``located``: which have their ink box),
    the union of its pieces' boxes and its ``angle``.
    """

    text: str
    words: list[Word]
    located: list[bool]
    loose: Box
    angle: int

    def laid(self) -> list[tuple[str, Box, bool]]:
        return [(w.text, w.box, k) for w, k in zip(self.words, self.located, strict=True)]


def _joined_line(page: PageResult, group: list[int], line_text: str) -> _Laid | None:
    """One text line from its pieces: a located piece's words at their ink boxes, another's words
    laid over the piece's own box, with half a character of gap at a cut made in a word gap (so the
    words on both sides stay apart); the two parts of a word cut inside it (no space at the cut in
    ``line_text``) are one word, so hOCR and the PDF text layer do not split it in two.
    """
    pieces = [(page.blocks[i].text.strip(), _valid(page.blocks[i].box, page.width, page.height)) for i in group]
    boxes = [b for _, b in pieces if b is not None]
    if not boxes:
        return None
    words: list[Word] = []
    located: list[bool] = []
    pos, last_end = 0, -1  # last_end: where the last piece that gave words ends in line_text
    for k, (text, box) in enumerate(pieces):
        at = line_text.find(text, pos) if text else -1
        spaced_before = at > 0 and line_text[at - 1] == " "
        end = at + len(text)
        spaced_after = at >= 0 and end < len(line_text) and line_text[end] == " "
        pos = end if at >= 0 else pos
        if box is None or not text:
            continue
        found = _located(page.blocks[group[k]], page.width, page.height)
        if not found:
            padded = ((" " if spaced_before and k > 0 else "") + text
                      + (" " if spaced_after and k < len(pieces) - 1 else ""))
            found = words_of(padded, box, page.blocks[group[k]].confidence, page.blocks[group[k]].angle)
        is_located = bool(page.blocks[group[k]].words)
        if found and words and at > 0 and at == last_end:
            # a cut inside a word: its two parts are one word (a reader would put a space between two)
            words[-1], located[-1] = _merged(words[-1], found[0]), located[-1] and is_located
            found = found[1:]
        words.extend(found)
        located.extend([is_located] * len(found))
        last_end = end if at >= 0 else -1
    return _Laid(line_text, words, located, _union(boxes), page.blocks[group[0]].angle)


def _merged(first: Word, then: Word) -> Word:
    """One word of the two parts of a word cut between two pieces of a line: text joined, box the
    union, confidence the lower (None when either has none).
    """
    conf = None if first.confidence is None or then.confidence is None else min(first.confidence, then.confidence)
    return Word(first.text + then.text, _union([first.box, then.box]), conf)


def _set_rows(laid: list[_Laid]) -> list[Line]:
    """The lines set for the text layer: lines that share a visual line (:func:`same_row`) set on one
    band, each with located words by :func:`set_row`; a line without located words on its loose box.
    """
    out: list[Line] = []
    k = 0
    while k < len(laid):
        row = [laid[k]]
        while (k + len(row) < len(laid) and laid[k + len(row)].angle == row[-1].angle
               and same_row(row[-1].laid(), laid[k + len(row)].laid(), row[-1].angle)):
            row.append(laid[k + len(row)])
        k += len(row)
        if not any(any(ln.located) for ln in row):
            for ln in row:
                box, boxes = close_gaps(ln.laid(), ln.loose, ln.angle)
                out.append(Line(ln.text, box, _reboxed(ln.words, boxes), ln.angle))
            continue
        for ln, (box, boxes) in zip(row, set_row([ln.laid() for ln in row], row[0].angle), strict=True):
            out.append(Line(ln.text, box, _reboxed(ln.words, boxes), ln.angle))
    parted(out)  # two lines a reader would join into one word, e.g. a duplicate read over its neighbour
    return out


def _reboxed(words: list[Word], boxes: list[Box]) -> list[Word]:
    return [Word(w.text, b, w.confidence) for w, b in zip(words, boxes, strict=True)]


def _union(boxes: list[Box]) -> Box:
    return (min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes))


def _located(block: Block, width: int, height: int) -> list[Word]:
    """The block's words at their own boxes (``Block.words``), or [] when it has none or one of
    them has no area on the page.
    """
    words = [Word(w.text, box, w.confidence) for w in block.words
             if w.text and (box := _valid(w.box, width, height)) is not None]
    return words if words and len(words) == len(block.words) else []


def _line_regions(page: PageResult) -> list[Region] | None:
    groups = _line_groups(page)
    if groups is None:
        return None
    texts = [ln.strip() for ln in page.text.split("\n") if ln.strip()]
    laid = [line for group, text in zip(groups, texts, strict=True) if (line := _joined_line(page, group, text))]
    return [Region("line", line.box, [line]) for line in _set_rows(laid)]


def page_regions(page: PageResult) -> list[Region]:
    """The regions of an ``ok`` page in reading order, each with its lines and words; [] for an
    error page or a page without boxes. Blocks with no text or a box of no area are left out. A page
    of ``line`` blocks (a line-level model) has one region per line of its text, pieces of a cut line
    joined (see :func:`_line_groups`).
    """
    if page.status != "ok":
        return []
    if page.blocks and all(b.type in ("line", "table") for b in page.blocks):
        joined = _line_regions(page)
        if joined is not None:
            return joined
    regions: list[Region] = []
    for block in page.blocks:
        box = _valid(block.box, page.width, page.height)
        texts = [t.strip() for t in block.text.split("\n")]
        texts = [t for t in texts if t]
        if box is None or not texts:
            continue
        located = _located(block, page.width, page.height) if len(texts) == 1 else []
        if located:
            line = _set(texts[0], located, block.angle)
            regions.append(Region(block.type, box, [line]))
            continue
        band = (box[3] - box[1]) / len(texts)
        lines = []
        for i, t in enumerate(texts):
            lbox = (box[0], box[1] + i * band, box[2], box[1] + (i + 1) * band)
            lines.append(Line(t, lbox, words_of(t, lbox, block.confidence, block.angle), block.angle))
        regions.append(Region(block.type, box, lines))
    return regions


def _set(text: str, words: list[Word], angle: int) -> Line:
    """The line of located ``words`` as the text layer sets it (:func:`gateway.output.text_band.set_line`)."""
    box, boxes = set_line([(w.text, w.box, True) for w in words], angle)
    return Line(text, box, _reboxed(words, boxes), angle)
