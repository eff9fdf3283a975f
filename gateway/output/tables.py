"""Tables of a page from its segments' cell joins: plain text rows, JSON ``table`` blocks, markdown.

An encoder that finds a table (compact: models/compact/page/table.py) marks the first segment of each
cell with ``cell:T:R:C`` and the cell's further pieces with ``space`` / ``direct``
(:mod:`inkstream.segments`). Here those runs become:

* plain text: one line per table row, its cells in column order separated by two spaces (the
  pdftotext ``-layout`` convention of column padding); an empty cell is left out;
* a JSON block ``{"type": "table", "text": <the rows>, "box", "cells": [{"row", "column", "rowspan",
  "colspan", "text", "box", "confidence"}]}`` (:class:`inkstream.page_result.TableCell`) placed
  after the page's line blocks (the cells' own ``line`` blocks stay, so hOCR and the searchable PDF
  still have every line's box);
* markdown: a GitHub-flavoured pipe table (first row as header, ``|`` in cells escaped) in place of
  the rows' lines.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from gateway.output.signal import SegmentScore, cell_signal
from gateway.output.table_votes import vote_cells
from inkstream.page_result import Box, TableCell
from inkstream.segments import JOIN_DIRECT, JOIN_SPACE, join_lines, parse_cell, piece_separator

CELL_GAP = "  "  # between a row's cells in plain text
_Open = tuple[str, list[Box], list[int]]  # an open cell: its text so far, its segments' boxes and indices


@dataclass
class Table:
    """A table of a page: its ``cells`` (row-major), ``box`` (their union), ``rows`` (the text
    lines it reads as, see the module docstring) and ``voted`` (segment index -> text: the cells of
    one segment whose text the table's votes changed, :mod:`gateway.output.table_votes`, so that the
    cell's own ``line`` block can say the same).
    """

    cells: list[TableCell] = field(default_factory=list)
    box: Box = (0.0, 0.0, 0.0, 0.0)
    rows: list[str] = field(default_factory=list)
    voted: dict[int, str] = field(default_factory=dict)

    def n_columns(self) -> int:
        """Columns of the table (1 + the largest column number; 0 without cells)."""
        return 1 + max((c.column for c in self.cells), default=-1)


def _union(boxes: Sequence[Box]) -> Box:
    return (min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes))


def _finish(cells: dict[tuple[int, int], _Open], scores: Sequence[SegmentScore] | None, model_id: str) -> Table:
    table = Table()
    voted = vote_cells({key: text for key, (text, _, _) in cells.items()})
    for (r, c), (read, boxes, segs) in sorted(cells.items()):
        text = voted[(r, c)]
        if text != read and len(segs) == 1:
            table.voted[segs[0]] = text
        conf, warnings = cell_signal([scores[i] for i in segs], text, model_id) if scores is not None else (0.0, [])
        table.cells.append(TableCell(r, c, text, _union(boxes), conf, warnings=warnings))
    table.box = _union([c.box for c in table.cells])
    for r in sorted({c.row for c in table.cells}):
        texts = [c.text for c in table.cells if c.row == r and c.text]
        if texts:
            table.rows.append(CELL_GAP.join(texts))
    return table


def page_lines(texts: Sequence[str], joins: Sequence[str], boxes: Sequence[Box],
               scores: Sequence[SegmentScore] | None = None, model_id: str = "") -> tuple[list[str], list[Table]]:
    """(text lines of the page, its tables) from its segments' ``texts``, ``joins`` and ``boxes`` (page
    pixels) in reading order. Segments outside tables are joined by :func:`inkstream.segments.join_lines`;
    a table's rows take its place in the lines. With ``scores`` (one per segment) a cell's confidence
    and warnings are :func:`gateway.output.signal.cell_signal` of its segments for the encoders' model
    ``model_id`` (calibrated when it has a table; without ``scores``: 0.0 and none). Raises ValueError for
    lengths that differ or a malformed join.
    """
    if not len(texts) == len(joins) == len(boxes) or (scores is not None and len(scores) != len(texts)):
        raise ValueError(f"{len(texts)} texts, {len(joins)} joins, {len(boxes)} boxes, "
                         f"{'no' if scores is None else len(scores)} scores")
    lines: list[str] = []
    tables: list[Table] = []
    plain: tuple[list[str], list[str]] = ([], [])
    cells: dict[tuple[int, int], _Open] = {}
    current: tuple[int, int, int] | None = None  # (table, row, column) of the open cell

    def flush_plain() -> None:
        lines.extend(join_lines(*plain))
        plain[0].clear()
        plain[1].clear()

    def flush_table() -> None:
        if cells:
            table = _finish(cells, scores, model_id)
            tables.append(table)
            lines.extend(table.rows)
            cells.clear()

    for i, (text, join, box) in enumerate(zip(texts, joins, boxes, strict=True)):
        cell = parse_cell(join)
        if cell is not None:
            if current is None or current[0] != cell.table:
                flush_plain()
                flush_table()
            current = (cell.table, cell.row, cell.column)
            old = cells.get((cell.row, cell.column))
            joined = (old[0] + piece_separator(old[0], text.strip()) + text).strip() if old else text.strip()
            cells[(cell.row, cell.column)] = (joined, (old[1] if old else []) + [box], (old[2] if old else []) + [i])
        elif current is not None and join in (JOIN_SPACE, JOIN_DIRECT):
            key = current[1:]
            old_text, old_boxes, old_segs = cells[key]
            sep = piece_separator(old_text, text.strip()) if join == JOIN_SPACE and old_text and text else ""
            cells[key] = ((old_text + sep + text.strip()).strip(), old_boxes + [box], old_segs + [i])
        else:
            if current is not None:
                flush_table()
                current = None
            plain[0].append(text)
            plain[1].append(join)
    flush_plain()
    flush_table()
    return lines, tables


def _md_cell(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace("|", "\\|").strip()


def markdown_table(table: Table) -> list[str]:
    """A GitHub-flavoured pipe table of ``table``: its first row as the header, a ``---`` rule, then
    the other rows; every row has ``n_columns`` cells (empty where the table has none).
    """
    n = table.n_columns()
    rows = sorted({c.row for c in table.cells})
    grid = {(c.row, c.column): _md_cell(c.text) for c in table.cells}
    out = []
    for k, r in enumerate(rows):
        out.append("| " + " | ".join(grid.get((r, c), "") for c in range(n)) + " |")
        if k == 0:
            out.append("|" + " --- |" * n)
    return out


def markdown_body(text: str, tables: Sequence[Table], escape: Callable[[str], str]) -> str:
    """The page's ``text`` as markdown: each table's row lines (found in order) replaced by its pipe
    table between blank lines, every other line passed through ``escape``.
    """
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    pending = list(tables)
    while i < len(lines):
        t = pending[0] if pending else None
        if t is not None and t.rows and lines[i: i + len(t.rows)] == t.rows:
            if out and out[-1] != "":
                out.append("")
            out += markdown_table(t) + [""]
            i += len(t.rows)
            pending.pop(0)
            continue
        out.append(escape(lines[i]))
        i += 1
    return "\n".join(out).strip("\n")
