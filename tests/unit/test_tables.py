"""Tables: cell joins on the wire, the gateway's table building (text rows, JSON cells, markdown) and
the compact model's table grid from detected lines (no model needed)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gateway.output.lines import page_regions
from gateway.output.stitch import page_result, render_page
from gateway.output.tables import markdown_table, page_lines
from gateway.types import PageOutcome, SegmentText
from inkstream.page_result import PageResult
from inkstream.segments import Cell, cell_join, join_from_wire, join_lines, join_to_wire, parse_cell
from models.compact.page.boxes import LineBox
from models.compact.page.regions import line_piece
from models.compact.page.table import table_lines


def _seg(i: int, text: str, box, join: str) -> SegmentText:
    return SegmentText(index=i, text=text, box=box, join=join, generated_tokens=len(text), confidence=0.9)


def _table_outcome() -> PageOutcome:
    segs = [_seg(0, "Report", (10, 5, 200, 25), "line")]
    cells = [["Name", "City", "No."], ["Maxim Integrated", "San Jose", "150"], ["Leidos", "El Segundo", "72"]]
    for r, row in enumerate(cells):
        for c, text in enumerate(row):
            segs.append(_seg(len(segs), text, (10 + 300 * c, 40 + 30 * r, 250 + 300 * c, 62 + 30 * r),
                             cell_join(Cell(1, r, c))))
    segs.insert(5, _seg(0, "Product", (10 + 250, 70, 330, 92), "space"))  # a cell's second piece
    for i, s in enumerate(segs):
        s.index = i
    segs.append(_seg(len(segs), "Page 1", (10, 400, 100, 420), "line"))
    return PageOutcome(index=0, status="ok", segments=segs, width=1000, height=500)


def test_cell_join_roundtrip_and_errors():
    assert join_to_wire(cell_join(Cell(2, 3, 4))) == (3, Cell(2, 3, 4))
    assert join_from_wire(3, 2, 3, 4) == "cell:2:3:4" and join_from_wire(3) == "line"
    assert join_to_wire("space") == (1, None) and join_from_wire(99) == "line"
    assert parse_cell("line") is None
    for bad in ("cell:1:2", "cell:0:0:0", "cell:a:1:1", "cell"):
        with pytest.raises(ValueError):
            join_to_wire(bad)
    assert join_lines(["a", "b", "c"], ["line", "cell:1:0:0", "space"]) == ["a", "b c"]


def test_page_lines_rows_and_cells():
    out = _table_outcome()
    lines, tables = page_lines([s.text for s in out.segments], [s.join for s in out.segments],
                               [s.box for s in out.segments])
    assert lines == ["Report", "Name  City  No.", "Maxim Integrated Product  San Jose  150",
                     "Leidos  El Segundo  72", "Page 1"]
    [t] = tables
    assert t.n_columns() == 3 and len(t.cells) == 9
    cell = next(c for c in t.cells if (c.row, c.column) == (1, 0))
    assert cell.text == "Maxim Integrated Product" and cell.box == (10, 70, 330, 92)
    with pytest.raises(ValueError):
        page_lines(["a"], ["line", "line"], [(0, 0, 1, 1)])


def test_stitched_table_in_json_markdown_text_and_hocr_lines():
    page = page_result(_table_outcome())
    table = [b for b in page.blocks if b.type == "table"]
    assert len(table) == 1 and page.blocks[-1].type == "table"
    d = page.to_dict()
    cells = d["blocks"][-1]["cells"]
    assert {"row", "column", "text", "box"} <= set(cells[0]) and len(cells) == 9
    again = PageResult.from_dict(json.loads(json.dumps(d)))
    assert again.blocks[-1].cells == page.blocks[-1].cells
    md = render_page(page, "markdown")
    assert "| Name | City | No. |\n| --- | --- | --- |\n| Maxim Integrated Product | San Jose | 150 |" in md
    assert md.rstrip().endswith("Page 1")
    text = render_page(page, "text")
    assert "Leidos  El Segundo  72" in text and "|" not in text
    assert [r.lines[0].text for r in page_regions(page)][1] == "Name  City  No."


def test_markdown_table_escapes_pipes_and_fills_empty_cells():
    from gateway.output.tables import Table, TableCell

    t = Table(cells=[TableCell(0, 0, "a|b", (0, 0, 1, 1)), TableCell(0, 2, "c", (0, 0, 1, 1)),
                     TableCell(1, 1, "<x>", (0, 0, 1, 1))])
    assert markdown_table(t) == ["| a\\|b |  | c |", "| --- | --- | --- |", "|  | &lt;x> |  |"]


def _line(x0, y0, x1, y1) -> LineBox:
    q = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], dtype=np.float32)
    return LineBox(q, (x0, y0, x1, y1), 0.9)


def test_table_grid_from_whitespace_and_from_rules():
    rows = [[_line(100, 100 + 40 * r, 220, 125 + 40 * r), _line(400, 100 + 40 * r, 520, 125 + 40 * r),
             _line(800, 100 + 40 * r, 860, 125 + 40 * r)] for r in range(5)]
    flat = [ln for row in rows for ln in row][::-1]
    out = table_lines(flat, [], 1, 25.0, line_piece)
    assert [j for _, j in out] == [cell_join(Cell(1, r, c)) for r in range(5) for c in range(3)]
    # a line the detector ran across a vertical rule is cut at the rule
    merged = [_line(100, 100 + 40 * r, 520, 125 + 40 * r) for r in range(4)]
    rules = [(300.0, 90.0, 302.0, 270.0)]
    out = table_lines(merged, rules, 2, 25.0, line_piece)
    assert len(out) == 8 and out[1][1] == cell_join(Cell(2, 0, 1)) and out[1][0].box[0] == pytest.approx(301.0)
    with pytest.raises(ValueError):
        table_lines(flat, [], 0, 25.0, line_piece)


def test_a_rule_cuts_only_the_lines_it_runs_beside():
    # One layout region holding two tables: the upper one's column rule (x = 300, rows 0-5) must not cut
    # the lower table's wide cells (rows 6-7), which it does not reach.
    upper = [_line(100, 100 + 40 * r, 520, 125 + 40 * r) for r in range(6)]
    lower = [_line(100, 100 + 40 * r, 520, 125 + 40 * r) for r in (6, 7)]
    rules = [(300.0, 90.0, 302.0, 335.0)]
    out = table_lines(upper + lower, rules, 1, 25.0, line_piece)
    assert len(out) == 6 * 2 + 2
    assert [ln.box[2] - ln.box[0] for ln, _ in out[-2:]] == [pytest.approx(420.0)] * 2


def test_cell_joins_survive_the_encode_response():
    import torch

    from encoder_service.convert import encode_response
    from gateway.clients.encoder import encoded_from_pb
    from inkstream.pb import encoder_pb2
    from models.base import EncodedPage, SegmentTokens

    joins = ["line", "cell:1:0:0", "space", "cell:1:0:3", "cell:2:4:1", "line"]
    segs = [SegmentTokens(torch.zeros(2, 4), (i, 0, i + 1, 5), join=j) for i, j in enumerate(joins)]
    resp = encode_response(0, EncodedPage(segments=segs, width=30, height=10), wire_dtype="float32",
                           model_id="m", seconds=0.1, revision="r")
    wire = encoder_pb2.EncodeResponse.FromString(resp.SerializeToString())
    assert wire.segments[1].join == encoder_pb2.SEGMENT_JOIN_CELL and wire.segments[4].cell.row == 4
    assert not wire.segments[0].HasField("cell")
    assert [s.join for s in encoded_from_pb(wire).segments] == joins
