"""Assembling a page's text from its segments' texts, shared by the gateway's stitcher and the
in-process reference path.

A model family that cuts a long text line into pieces (compact: models/compact/line/split.py) marks
every piece after the first with how it goes on from the one before: after a word gap (joined with
a space) or inside a word (joined directly). The mark travels with the segment (encoder
``Segment.join``), so joining does not depend on the pieces' geometry (which a rotated page turns
around) or on every piece having text.

Table cells (compact: models/compact/page/table.py) travel the same way: the first segment of a cell has
the join ``cell:T:R:C`` (:func:`cell_join`; table ``T`` >= 1 on the page, row ``R`` and column ``C``
from 0); a cell's further lines follow it with ``space``. On the wire that is
``SEGMENT_JOIN_CELL`` plus ``Segment.cell`` {table, row, column} (:func:`join_to_wire`,
:func:`join_from_wire`); the gateway builds the table from them (gateway/output/tables.py).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from typing import NamedTuple

JOIN_LINE, JOIN_SPACE, JOIN_DIRECT, JOIN_CELL = "line", "space", "direct", "cell"
JOINS = (JOIN_LINE, JOIN_SPACE, JOIN_DIRECT, JOIN_CELL)  # index = encoder.v1.SegmentJoin enum value


class Cell(NamedTuple):
    """A table cell's place: ``table`` (1-based on its page), ``row`` and ``column`` (0-based)."""

    table: int
    row: int
    column: int


def cell_join(cell: Cell) -> str:
    """The join string of a cell's first segment: ``cell:T:R:C``."""
    return f"{JOIN_CELL}:{cell.table}:{cell.row}:{cell.column}"


def parse_cell(join: str) -> Cell | None:
    """The :class:`Cell` of a ``cell:T:R:C`` join, None for any other join. Raises ValueError for a
    ``cell:`` join that is malformed (not three integers, table < 1 or a negative row / column).
    """
    if not join.startswith(JOIN_CELL + ":"):
        return None
    parts = join.split(":")
    if len(parts) != 4:
        raise ValueError(f"malformed cell join {join!r} (want cell:TABLE:ROW:COLUMN)")
    t, r, c = (int(v) for v in parts[1:])
    if t < 1 or r < 0 or c < 0:
        raise ValueError(f"cell join {join!r} out of range (table >= 1, row and column >= 0)")
    return Cell(t, r, c)


def join_to_wire(join: str) -> tuple[int, Cell | None]:
    """(encoder.v1.SegmentJoin value, cell or None) of a join string. Raises ValueError if unknown."""
    cell = parse_cell(join)
    if cell is not None:
        return JOINS.index(JOIN_CELL), cell
    if join not in JOINS or join == JOIN_CELL:
        raise ValueError(f"unknown segment join {join!r} (known: line, space, direct, cell:T:R:C)")
    return JOINS.index(join), None


def join_from_wire(value: int, table: int = 0, row: int = 0, column: int = 0) -> str:
    """Inverse of :func:`join_to_wire`: the join string of an enum value and ``Segment.cell``'s
    fields; an unknown value, or a cell without a table (>= 1), reads as ``line``.
    """
    if not 0 <= value < len(JOINS):
        return JOIN_LINE
    if JOINS[value] == JOIN_CELL:
        return cell_join(Cell(table, max(0, row), max(0, column))) if table >= 1 else JOIN_LINE
    return JOINS[value]


def is_known_join(join: str) -> bool:
    """Whether ``join`` is ``line`` / ``space`` / ``direct`` or a well-formed ``cell:T:R:C``."""
    try:
        join_to_wire(join)
    except ValueError:
        return False
    return True


def is_wide(ch: str) -> bool:
    """Whether ``ch`` is a wide East Asian character (hanzi, kana, hangul, full-width punctuation and
    forms: Unicode East_Asian_Width W or F, UAX #11), which Chinese and Japanese write without spaces.
    """
    return unicodedata.east_asian_width(ch) in ("W", "F")


def piece_separator(before: str, after: str) -> str:
    """What goes between two pieces of one text line that were cut at a gap: a space, except between
    two wide characters (:func:`is_wide`: a Chinese line cut between two hanzi stays unspaced,
    while Latin words keep their space).
    """
    return "" if before and after and is_wide(before[-1]) and is_wide(after[0]) else " "


def join_lines(texts: Sequence[str], joins: Sequence[str]) -> list[str]:
    """Text lines of a page from its segments' ``texts`` in reading order and their ``joins``.

    A ``line`` (or ``cell:T:R:C``) segment starts a new line; a ``space`` / ``direct`` one is appended to the line its
    first piece started (with a space / nothing), even when a piece between them read as nothing
    (then with a space if any cut since the last text was at a word gap; never a space between two
    wide characters, :func:`piece_separator`).
    Empty texts make no line. Raises ValueError for an unknown join or lengths that differ.
    """
    if len(texts) != len(joins):
        raise ValueError(f"{len(texts)} texts but {len(joins)} joins")
    lines: list[str] = []
    open_line = False  # whether lines[-1] holds text of the text line being pieced together
    space = False  # a piece since the last text was cut at a word gap: the next text gets a space
    for text, join in zip(texts, joins, strict=True):
        if not is_known_join(join):
            raise ValueError(f"unknown segment join {join!r} (known: line, space, direct, cell:T:R:C)")
        if join == JOIN_LINE or join.startswith(JOIN_CELL + ":"):
            open_line = space = False
        space = space or join == JOIN_SPACE
        if not text:
            continue
        if open_line:
            lines[-1] += (piece_separator(lines[-1], text) if space else "") + text
        else:
            lines.append(text)
            open_line = True
        space = False
    return lines
