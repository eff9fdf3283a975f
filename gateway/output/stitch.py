r"""Stitching page outcomes into a document: blocks from grounding markup, markdown / text / JSON.

Grounding markup is DeepSeek-OCR's (https://github.com/deepseek-ai/DeepSeek-OCR, "grounding" prompts):
``<|ref|>label<|/ref|><|det|>[[x0, y0, x1, y1], ...]<|/det|>`` followed by that region's text up to
the next ``<|ref|>``. Coordinates are on a 0-999 grid over the image the model saw (the segment):
``x_px = seg.x0 + x * seg_width / 999``. A segment without markup is one block: type ``"line"`` when
it covers part of the page (line-level models such as ``compact``), ``"text"`` when the whole page.

Output conventions (decided here, documented for API users):

* markdown: each page starts with ``<!-- page N -->``; pages are separated by a blank line.
* text: pages separated by a form feed ``\f`` (the pdftotext convention).
* a page with an error reads ``[page N: error CODE: message]`` (text) or an HTML comment (markdown),
  the page named once (its own number left out of the message: :meth:`PageError.detail`);
  a page cut short by ``length`` / ``repetition`` is followed by a note saying so.
* every page and block carries ``confidence`` and ``warnings`` (:mod:`gateway.output.signal`); in
  markdown a page with warnings ends with an HTML comment naming them (``no text found`` for an
  empty page); the text format stays the text only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from gateway.output.hocr import render_hocr
from gateway.output.signal import SegmentScore, block_signal, page_warnings
from gateway.output.tables import Table, markdown_body, page_lines
from gateway.types import PageOutcome, SegmentText
from inkstream.decimal_marks import page_mark, with_mark
from inkstream.page_notes import warnings_note
from inkstream.page_result import Block, Box, PageError, PageResult, Word, as_box, document_json
from inkstream.segments import JOIN_LINE, is_known_join

FORMATS = ("markdown", "text", "json", "hocr", "pdf")
#: formats rendered as text by :func:`render_document`; ``pdf`` is written by
#: :func:`gateway.output.searchable_pdf.write_searchable_pdf` from the source document.
TEXT_FORMATS = ("markdown", "text", "json", "hocr")
GRID = 999.0

_REF = re.compile(r"<\|ref\|>(.*?)<\|/ref\|>\s*<\|det\|>(.*?)<\|/det\|>", re.S)
_NUM = r"\s*(-?\d+(?:\.\d+)?)\s*"
_NUM_BOX = re.compile(r"\[" + ",".join([_NUM] * 4) + r"\]")
_LEFTOVER_TAGS = re.compile(r"<\|/?(?:ref|det|grounding)\|>")
# Markup cut off by max_new_tokens / the repetition guard: an opening tag with no closing </det> after it.
_TRUNCATED_TAIL = re.compile(r"<\|(?:ref|det)\|>(?:(?!<\|/det\|>).)*$", re.S)

_FINISH_NOTES = {
    "length": "output truncated: the page reached the token limit (max_new_tokens)",
    "repetition": "output truncated: the model started repeating itself (repetition guard)",
    "cancelled": "output incomplete: decoding was cancelled",
}



def _table_blocks(cleans: list[str], segments: list[Any], scores: list[SegmentScore], sx: float, sy: float,
                  model_id: str = "") -> tuple[list[str], list[Block], dict[int, str]]:
    """(page text lines, ``table`` blocks in page pixels scaled by ``sx``/``sy``, segment index -> voted
    text of a one-segment cell the table's votes changed) from the segments' texts, joins and scores
    (:func:`gateway.output.tables.page_lines`; cells calibrated for ``model_id``).
    """
    joins = [s.join if is_known_join(s.join) else JOIN_LINE for s in segments]
    lines, tables = page_lines(cleans, joins, [as_box(s.box) for s in segments], scores, model_id)
    blocks = [Block("table", "\n".join(t.rows), _scale_box(t.box, sx, sy),
                    cells=[replace(c, box=_scale_box(c.box, sx, sy)) for c in t.cells])
              for t in tables]
    return lines, blocks, {i: text for t in tables for i, text in t.voted.items()}


def _revote(block: Block, text: str) -> None:
    """``block`` (a table cell's one ``line`` block) made to say its cell's voted ``text``; its words
    follow one for one when the vote kept the word count (it changes marks inside a word, not words).
    """
    if block.words and len(block.words) == len(text.split()):
        block.words = [replace(w, text=t) for w, t in zip(block.words, text.split(), strict=True)]
    block.text = text


def error_page(index0: int, code: str, message: str, reason: str = "") -> PageResult:
    """A PageResult for page ``index0`` (0-based) that failed with gRPC code name ``code`` (and the
    error's finer ``reason``, "" = none).
    """
    return PageResult(index=index0 + 1, status="error", error=PageError(code, message, reason))


def parse_grounding(text: str, seg_box: Box, default_type: str) -> tuple[str, list[Block]]:
    """Split one segment's model output into (clean text, blocks).

    ``seg_box``: the segment's region in output pixels; grid coordinates (0-999) are mapped into it.
    A markup fragment cut off at the end of the output (a truncated page) is dropped.
    Text before the first ``<|ref|>`` and text without markup become a ``default_type`` block with
    ``seg_box``. Several boxes in one ``<|det|>`` are merged into their union.
    """
    x0, y0, x1, y1 = seg_box
    sw, sh = x1 - x0, y1 - y0
    text = _TRUNCATED_TAIL.sub("", text)
    blocks: list[Block] = []
    pieces: list[str] = []
    matches = list(_REF.finditer(text))
    lead = _LEFTOVER_TAGS.sub("", text[: matches[0].start()] if matches else text).strip()
    if lead:
        blocks.append(Block(default_type, lead, seg_box))
        pieces.append(lead)
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        body = _LEFTOVER_TAGS.sub("", text[m.end():end]).strip()
        boxes = [tuple(float(v) for v in b.groups()) for b in _NUM_BOX.finditer(m.group(2))]
        if boxes:
            gx0, gy0 = min(b[0] for b in boxes), min(b[1] for b in boxes)
            gx1, gy1 = max(b[2] for b in boxes), max(b[3] for b in boxes)
            box = (x0 + _clip(gx0) * sw / GRID, y0 + _clip(gy0) * sh / GRID,
                   x0 + _clip(gx1) * sw / GRID, y0 + _clip(gy1) * sh / GRID)
        else:
            box = seg_box
        blocks.append(Block(m.group(1).strip() or default_type, body, box))
        if body:
            pieces.append(body)
    return "\n\n".join(pieces) if matches else lead, blocks


def _one_mark(segments: list[SegmentText]) -> list[SegmentText]:
    """The page's segments with their prices, and their words', written with the page's decimal mark
    (:mod:`inkstream.decimal_marks`, as the in-process path does; a number with its decimal mark
    doubled is mended without a vote too); a segment with nothing to change is the same object.
    """
    mark = page_mark([s.text for s in segments])
    out = []
    for s in segments:
        text = with_mark(s.text, mark)
        out.append(s if text == s.text else replace(s, text=text, words=[(with_mark(t, mark), b) for t, b in s.words]))
    return out


def _clip(v: float) -> float:
    return min(max(v, 0.0), GRID)


def _scale_box(box: Box, sx: float, sy: float) -> Box:
    return (box[0] * sx, box[1] * sy, box[2] * sx, box[3] * sy)


def page_result(outcome: PageOutcome, doc_size: tuple[int, int] | None = None, model_id: str = "") -> PageResult:
    """PageResult of one pipeline outcome.

    ``doc_size``: the page's (width, height) in document pixels (original image size; for PDFs the
    rendered size); boxes are scaled to it from the encoder's image (``outcome.width/height``).
    Segments are taken in reading order (``SegmentText.index``); the pieces of one text line that
    the encoder cut apart are joined as it marked them (``SegmentText.join``: with a space or
    directly, :func:`inkstream.segments.join_lines`), lines by newlines; prices read with the
    other decimal mark than the page's are written with the page's (:mod:`inkstream.decimal_marks`).
    A segment read as one block gives it its words' boxes (``SegmentText.words``, when they match the
    block's words). Each block gets its segment's confidence, the page its confidence and warnings
    (:mod:`gateway.output.signal`; calibrated when ``model_id``, the encoders' model id, has a
    calibration table).
    """
    if outcome.status != "ok":
        err = outcome.error or PageError("INTERNAL", "the page failed without a reason")
        res = PageResult(index=outcome.index + 1, status="error", error=err,
                         vision_tokens=outcome.vision_tokens, generated_tokens=outcome.generated_tokens)
        if doc_size:
            res.width, res.height = doc_size
        return res
    w, h = outcome.width, outcome.height
    dw, dh = doc_size if doc_size and all(doc_size) else (w, h)
    sx, sy = (dw / w, dh / h) if w and h else (1.0, 1.0)
    page_box: Box = (0.0, 0.0, float(w), float(h))
    texts: list[str] = []
    blocks: list[Block] = []
    tables: list[Block] = []
    segments = _one_mark(sorted(outcome.segments, key=lambda s: s.index))
    scores = [SegmentScore(s.text, s.confidence, s.generated_tokens, s.tower) for s in segments]
    if segments:
        cleans: list[str] = []
        own: list[list[Block]] = []  # each segment's blocks
        for seg in segments:
            whole = w and h and (seg.box[2] - seg.box[0]) * (seg.box[3] - seg.box[1]) >= 0.9 * w * h
            seg_box = as_box(seg.box)
            clean, seg_blocks = parse_grounding(seg.text, seg_box, "text" if whole else "line")
            cleans.append(clean)
            for b in seg_blocks:
                b.confidence, b.warnings = block_signal(scores[len(cleans) - 1], b.text, model_id)
            for b in seg_blocks:
                b.angle = (360 - seg.rotation) % 360
            if len(seg_blocks) == 1 and seg.words and [t for t, _ in seg.words] == seg_blocks[0].text.split():
                seg_blocks[0].words = [Word(t, as_box(wb), seg_blocks[0].confidence) for t, wb in seg.words]
            blocks.extend(seg_blocks)
            own.append(seg_blocks)
        texts, tables, voted = _table_blocks(cleans, segments, scores, sx, sy, model_id)
        for i, text in voted.items():
            if len(own[i]) == 1 and own[i][0].text == cleans[i].strip():
                _revote(own[i][0], text)
    else:
        clean, blocks = parse_grounding(outcome.text, page_box, "text")
        if clean:
            texts.append(clean)
    blocks = [Block(b.type, b.text, _scale_box(b.box, sx, sy), b.confidence, b.warnings,
                    words=[Word(w.text, _scale_box(w.box, sx, sy), w.confidence) for w in b.words], angle=b.angle)
              for b in blocks]
    joiner = "\n" if len(segments) > 1 and all(b.type == "line" for b in blocks) else "\n\n"
    blocks += tables
    text = joiner.join(texts)
    confidence, warnings = page_warnings(scores, text, model_id, outcome.unread_ink)
    return PageResult(
        index=outcome.index + 1, status="ok", text=text, blocks=blocks,
        finish_reason=outcome.finish_reason or "stop", vision_tokens=outcome.vision_tokens,
        generated_tokens=outcome.generated_tokens, width=int(dw), height=int(dh),
        confidence=confidence, warnings=warnings,
    )


def warning_note(page: PageResult) -> str:
    """What a page's warnings say, for a person ("" without warnings): ``no text found``, or
    ``warnings: `` and :func:`inkstream.page_notes.warnings_note` (the codes; for ``low_confidence`` the
    doubtful lines named, then the page's confidence), the line ``inkstream ocr`` prints.
    """
    if not page.warnings:
        return ""
    if page.warnings == ["no_text_found"]:
        return "no text found"
    return f"warnings: {warnings_note(page)}"


def finish_note(page: PageResult) -> str:
    """Why a page's text is incomplete ("" when it finished normally)."""
    return _FINISH_NOTES.get(page.finish_reason, "")


def render_page(page: PageResult, fmt: str) -> str:
    """One page in ``fmt`` ("markdown" | "text"), with its error or truncation note."""
    if fmt == "markdown":
        head = f"<!-- page {page.index} -->"
        if page.status != "ok":
            err = page.error or PageError("INTERNAL", "unknown error")
            return f"{head}\n\n<!-- page {page.index}: error {err.code}: {_comment_safe(err.detail(page.index))} -->"
        text = page.text
        lines = [b for b in page.blocks if b.type != "table"]
        if lines and all(b.type == "line" for b in lines):
            tables = [b for b in page.blocks if b.type == "table"]
            text = markdown_body(text, [_md_table(b) for b in tables], _plain_line_markdown)
        body = text
        for note in (finish_note(page), warning_note(page)):
            body += f"\n\n<!-- page {page.index}: {_comment_safe(note)} -->" if note else ""
        return f"{head}\n\n{body}".rstrip()
    if page.status != "ok":
        err = page.error or PageError("INTERNAL", "unknown error")
        return f"[page {page.index}: error {err.code}: {err.detail(page.index)}]"
    note = finish_note(page)
    return page.text + (f"\n[page {page.index}: {note}]" if note else "")


def _md_table(block: Block) -> Table:
    """The :class:`gateway.output.tables.Table` of a ``table`` block (its rows: the block's text lines)."""
    return Table(cells=list(block.cells), box=block.box, rows=block.text.split("\n") if block.text else [])


_MD_LEAD = re.compile(r"^(\s*)([#>+*=|`~_\[-])")
_MD_ORDERED = re.compile(r"^(\s*\d+)([.)])")


def _plain_line_markdown(line: str) -> str:
    """A line of plain OCR text (a line-level model's output, not markdown) as literal markdown text:
    ``<`` and ``&`` as entities (no HTML, no comment that would hide what follows) and a leading
    heading / quote / list / rule / table / fence / link-definition marker escaped with a backslash
    (CommonMark 2.4, backslash escapes).
    """
    line = line.replace("&", "&amp;").replace("<", "&lt;")
    line = _MD_ORDERED.sub(lambda m: m.group(1) + "\\" + m.group(2), line, count=1)  # "1\." is no list
    return _MD_LEAD.sub(lambda m: m.group(1) + "\\" + m.group(2), line, count=1)


def _comment_safe(text: str) -> str:
    """``text`` inside an HTML comment: no ``--`` that could end it early (``--->`` too)."""
    return re.sub(r"-(?=-)", "- ", text)


def render_document(pages: Iterable[PageResult], fmt: str, model_id: str) -> str:
    """The stitched document: pages ordered by index, each exactly once (a later duplicate of an
    index is an error in the caller and raises ValueError). ``model_id``: the served model, named by
    the formats that carry it (JSON's ``model_id``, hOCR's ``ocr-system``); required, so no route
    renders a document without it.
    """
    ordered = sorted(pages, key=lambda p: p.index)
    seen = [p.index for p in ordered]
    if len(seen) != len(set(seen)):
        raise ValueError(f"duplicate page results: {seen}")
    if fmt == "json":
        return json.dumps(document_json(ordered, model_id), ensure_ascii=False)
    if fmt == "markdown":
        return "\n\n".join(render_page(p, fmt) for p in ordered) + "\n"
    if fmt == "text":
        return "\f".join(render_page(p, fmt) for p in ordered) + "\n"
    if fmt == "hocr":
        return render_hocr(ordered, model_id)
    raise ValueError(f"format {fmt!r} is not a text format")

