"""The page-result contract (inkstream.page_result): JSON and proto round trips, the REST schema it
is documented by, and a table cell's confidence from its segments."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from gateway.apis import rest_bodies
from gateway.output.signal import SegmentScore
from gateway.output.stitch import page_result
from gateway.output.tables import page_lines
from gateway.types import PageOutcome, SegmentText
from inkstream.page_result import Block, PageError, PageResult, TableCell, Word, document_json
from inkstream.page_result_pb import page_from_pb, page_to_pb
from inkstream.pb import gateway_pb2
from inkstream.segments import Cell, cell_join


def _table_page() -> PageResult:
    """A page with a line, a table (one spanning cell) and exact binary fractions everywhere, so that
    both the JSON rounding (0.1 px, 4 decimals) and float32 on the wire keep every value.
    """
    cells = [TableCell(0, 0, "Name", (10.5, 40.0, 250.0, 62.5), 0.75),
             TableCell(0, 1, "City", (310.0, 40.0, 550.5, 62.0), 0.5),
             TableCell(1, 0, "Leidos | Inc", (10.0, 70.0, 550.0, 92.0), 0.875, rowspan=1, colspan=2)]
    return PageResult(
        index=3, status="ok", text="Report\nName  City\nLeidos | Inc",
        blocks=[Block("line", "Report", (10.0, 5.0, 200.0, 25.0), 0.9375, []),
                Block("line", "Name", (10.5, 40.0, 250.0, 62.5), 0.75, ["low_confidence"],
                      words=[Word("Name", (12.5, 41.0, 60.0, 61.5), 0.75)], angle=90),
                Block("table", "Name  City\nLeidos | Inc", (10.0, 40.0, 550.5, 92.0), 0.0, [], cells)],
        finish_reason="stop", vision_tokens=256, generated_tokens=40, width=1000, height=500,
        confidence=0.8125, warnings=["low_confidence"])


def test_json_round_trip_keeps_cells_spans_and_confidences():
    page = _table_page()
    d = json.loads(json.dumps(page.to_dict()))
    assert d["blocks"][-1]["cells"][2] == {"row": 1, "column": 0, "rowspan": 1, "colspan": 2, "text": "Leidos | Inc",
                                           "box": [10.0, 70.0, 550.0, 92.0], "confidence": 0.875,
                                           "warnings": []}
    assert "cells" not in d["blocks"][0]  # only a table block has cells
    assert d["blocks"][1]["words"] == [{"text": "Name", "box": [12.5, 41.0, 60.0, 61.5], "confidence": 0.75}]
    assert d["blocks"][1]["angle"] == 90 and d["blocks"][0]["words"] == [] and d["blocks"][0]["angle"] == 0
    assert PageResult.from_dict(d) == page
    err = PageResult(index=1, status="error", error=PageError("INVALID_ARGUMENT", "bad page"))
    assert PageResult.from_dict(json.loads(json.dumps(err.to_dict()))) == err


def test_json_of_an_older_answer_and_malformed_cells():
    old = {"row": 2, "column": 1, "text": "x", "box": [0, 0, 1, 1]}  # before spans and cell confidence
    assert TableCell.from_dict(old) == TableCell(2, 1, "x", (0.0, 0.0, 1.0, 1.0), 0.0, 1, 1)
    with pytest.raises(ValueError):
        TableCell.from_dict({**old, "row": -1})
    with pytest.raises(ValueError):
        TableCell.from_dict({**old, "colspan": 0})
    with pytest.raises(ValueError):
        TableCell.from_dict({**old, "box": [0, 0, 1]})
    with pytest.raises(KeyError):
        Block.from_dict({"type": "table", "text": ""})


def test_proto_round_trip_keeps_every_field():
    page = _table_page()
    wire = gateway_pb2.PageResult.FromString(page_to_pb(page).SerializeToString())
    assert len(wire.blocks[-1].cells) == 3 and wire.blocks[-1].cells[2].colspan == 2
    assert page_from_pb(wire) == page
    err = PageResult(index=2, status="error", error=PageError("UNAVAILABLE", "no replica"))
    assert page_from_pb(page_to_pb(err)) == err
    assert page_from_pb(gateway_pb2.PageResult(index=1, status="ok")).error is None


def test_every_contract_field_is_on_the_wire():
    for cls, msg in [(PageResult, gateway_pb2.PageResult), (Block, gateway_pb2.Block),
                     (TableCell, gateway_pb2.TableCell), (PageError, gateway_pb2.PageError),
                     (Word, gateway_pb2.Word)]:
        wire = set(msg.DESCRIPTOR.fields_by_name)
        names = {f.name for f in dataclasses.fields(cls)}
        assert names - {"box"} <= wire and ("box" not in names or {"x0", "y0", "x1", "y1"} <= wire), cls


def test_a_cell_without_spans_on_the_wire_spans_one():
    msg = gateway_pb2.PageResult(index=1, status="ok", blocks=[gateway_pb2.Block(
        type="table", cells=[gateway_pb2.TableCell(row=1, column=2, text="t", x1=4.0, y1=2.0)])])
    [cell] = page_from_pb(msg).blocks[0].cells
    assert (cell.row, cell.column, cell.rowspan, cell.colspan, cell.box) == (1, 2, 1, 1, (0.0, 0.0, 4.0, 2.0))


def test_the_rest_schema_documents_exactly_the_contract():
    d = _table_page().to_dict()
    assert set(d) == set(rest_bodies.Page.model_fields)
    assert set(d["blocks"][-1]) == set(rest_bodies.Block.model_fields)
    assert set(d["blocks"][-1]["cells"][0]) == set(rest_bodies.TableCell.model_fields)
    assert set(d["blocks"][1]["words"][0]) == set(rest_bodies.Word.model_fields)
    rest_bodies.Page.model_validate(d)
    doc = document_json([_table_page()], "m", seconds=1.23456, cached=False)
    assert set(doc) == set(rest_bodies.DocumentResult.model_fields) and doc["seconds"] == 1.235
    rest_bodies.DocumentResult.model_validate(doc)


def test_a_cells_confidence_is_the_token_weighted_mean_of_its_segments():
    texts = ["Title", "Maxim", "Integrated", "150"]
    joins = ["line", cell_join(Cell(1, 0, 0)), "space", cell_join(Cell(1, 0, 1))]
    boxes = [(0.0, 0.0, 100.0, 20.0), (0.0, 30.0, 60.0, 50.0), (62.0, 30.0, 150.0, 50.0), (200.0, 30.0, 240.0, 50.0)]
    scores = [SegmentScore(t, c, n) for t, c, n in zip(texts, [0.99, 0.9, 0.5, 0.8], [6, 4, 12, 3], strict=True)]
    _, [table] = page_lines(texts, joins, boxes, scores)
    first, second = table.cells
    assert first.text == "Maxim Integrated" and first.box == (0.0, 30.0, 150.0, 50.0)
    assert first.confidence == pytest.approx(math.exp((4 * math.log(0.9) + 12 * math.log(0.5)) / 16))
    assert second.confidence == pytest.approx(0.8)
    _, [unscored] = page_lines(texts, joins, boxes)
    assert unscored.cells[0].confidence == 0.0
    with pytest.raises(ValueError):
        page_lines(texts, joins, boxes, scores[:2])


def test_stitched_table_cells_carry_confidence_and_scaled_boxes():
    segs = [SegmentText(0, "A", (0, 0, 50, 10), join=cell_join(Cell(1, 0, 0)), generated_tokens=2, confidence=0.6),
            SegmentText(1, "B", (60, 0, 100, 10), join=cell_join(Cell(1, 0, 1)), generated_tokens=2, confidence=0.7)]
    page = page_result(PageOutcome(0, "ok", segments=segs, width=100, height=10), doc_size=(200, 20))
    table = page.blocks[-1]
    assert table.type == "table" and [c.confidence for c in table.cells] == pytest.approx([0.6, 0.7])
    assert table.cells[1].box == pytest.approx((120, 0, 200, 20))


def test_a_cell_the_tables_vote_changed_says_the_same_in_its_line_block():
    """A table's decimal-mark vote (gateway/output/table_votes.py) reaches the cell's own ``line`` block,
    words included, so hOCR and the searchable PDF say what the cell and the page text say."""
    rows = [["Iowa", "-0.0153"], ["Ohio", "-0,0153"], ["Utah", "0.1406"], ["Chad", "0.0871"], ["Fiji", "-0.1102"]]
    segs = [SegmentText(2 * r + c, text, (100.0 * c, 30.0 * r, 100.0 * c + 80, 30.0 * r + 20),
                        join=cell_join(Cell(1, r, c)), generated_tokens=4, confidence=0.9,
                        words=[(text, (100.0 * c, 30.0 * r, 100.0 * c + 80, 30.0 * r + 20))])
            for r, row in enumerate(rows) for c, text in enumerate(row)]
    page = page_result(PageOutcome(0, "ok", segments=segs, width=200, height=150))
    lines = [b for b in page.blocks if b.type == "line"]
    assert len(lines) == 10 and lines[3].text == "-0.0153" and [w.text for w in lines[3].words] == ["-0.0153"]
    assert "Ohio  -0.0153" in page.text and page.blocks[-1].cells[3].text == "-0.0153"
    assert "-0,0153" not in json.dumps(dataclasses.asdict(page))


def test_a_page_errors_reason_crosses_the_wire_and_the_json():
    """A page over a replica's limit keeps its reason (PAYLOAD_TOO_LARGE) through gRPC and REST JSON,
    where a client tells it from a page unreadable in itself."""
    over = PageError("INVALID_ARGUMENT", "over the limit", "PAYLOAD_TOO_LARGE")
    err = PageResult(index=2, status="error", error=over)
    assert page_from_pb(page_to_pb(err)).error == err.error
    assert PageResult.from_dict(err.to_dict()).error == err.error
    assert err.to_dict()["error"] == {"code": "INVALID_ARGUMENT", "message": "over the limit",
                                      "reason": "PAYLOAD_TOO_LARGE"}
    plain = PageResult(index=1, status="error", error=PageError("INVALID_ARGUMENT", "unreadable"))
    assert plain.to_dict()["error"] == {"code": "INVALID_ARGUMENT", "message": "unreadable"}  # as before
