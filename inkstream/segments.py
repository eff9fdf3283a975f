"""Assembling a page's text from its segments' texts, shared by the gateway's stitcher and the
in-process reference path.

A model family that cuts a long text line into pieces (compact: models/compact/linesplit.py) marks
every piece after the first with how it goes on from the one before: after a word gap (joined with
a space) or inside a word (joined directly). The mark travels with the segment (encoder
``Segment.join``), so joining does not depend on the pieces' geometry (which a rotated page turns
around) or on every piece having text.
"""

from __future__ import annotations

from collections.abc import Sequence

JOIN_LINE, JOIN_SPACE, JOIN_DIRECT = "line", "space", "direct"
JOINS = (JOIN_LINE, JOIN_SPACE, JOIN_DIRECT)  # index = encoder.v1.SegmentJoin enum value


def join_lines(texts: Sequence[str], joins: Sequence[str]) -> list[str]:
    """Text lines of a page from its segments' ``texts`` in reading order and their ``joins``.

    A ``line`` segment starts a new line; a ``space`` / ``direct`` one is appended to the line its
    first piece started (with a space / nothing), even when a piece between them read as nothing
    (then with a space if any cut since the last text was at a word gap).
    Empty texts make no line. Raises ValueError for an unknown join or lengths that differ.
    """
    if len(texts) != len(joins):
        raise ValueError(f"{len(texts)} texts but {len(joins)} joins")
    lines: list[str] = []
    open_line = False  # whether lines[-1] holds text of the text line being pieced together
    space = False  # a piece since the last text was cut at a word gap: the next text gets a space
    for text, join in zip(texts, joins, strict=True):
        if join not in JOINS:
            raise ValueError(f"unknown segment join {join!r} (known: {', '.join(JOINS)})")
        if join == JOIN_LINE:
            open_line = space = False
        space = space or join == JOIN_SPACE
        if not text:
            continue
        if open_line:
            lines[-1] += (" " if space else "") + text
        else:
            lines.append(text)
            open_line = True
        space = False
    return lines
