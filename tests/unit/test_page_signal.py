"""Page / block confidence and warnings (gateway.output.signal), stitched into PageResult, rendered, and
read back by the client library; the decoder's sequence confidence."""

from __future__ import annotations

import math

import pytest

from client import ocr_cli
from client.results import Block as ClientBlock
from client.results import PageResult as ClientPage
from client.results import TableCell as ClientCell
from decoder_service.sequence import sequence_confidence
from gateway.output.signal import (
    LOW_CONFIDENCE,
    NO_TEXT_FOUND,
    UNREAD_INK,
    UNREAD_REGION,
    UNSUPPORTED_SCRIPT,
    SegmentScore,
    page_confidence,
    page_warnings,
)
from gateway.output.stitch import page_result, render_document
from gateway.types import PageOutcome, SegmentText
from inkstream.page_result import PageResult


def test_sequence_confidence_is_the_geometric_mean():
    lps = [math.log(0.9), math.log(0.5), math.log(1.0)]
    assert sequence_confidence(sum(lps), 3) == pytest.approx((0.9 * 0.5 * 1.0) ** (1 / 3))
    assert sequence_confidence(0.0, 0) == 0.0 and sequence_confidence(1e-9, 1) == 1.0


def test_page_confidence_weights_segments_by_tokens():
    segs = [SegmentScore("a", 0.9, 10), SegmentScore("b", 0.5, 30), SegmentScore("", 0.1, 0)]
    assert page_confidence(segs) == pytest.approx(math.exp((10 * math.log(0.9) + 30 * math.log(0.5)) / 40))
    assert page_confidence([]) == 0.0 and page_confidence([SegmentScore("x", 0.0, 4)]) == 0.0


@pytest.mark.parametrize("segments, text, expect", [
    ([SegmentScore("fine", 0.99, 20)] * 5, "fine", []),
    ([], "", [NO_TEXT_FOUND]),
    # every segment came back empty: ink the model could not read, never a confident empty page
    ([SegmentScore("", 0.9, 1)] * 3, " \n", [NO_TEXT_FOUND, UNREAD_REGION, LOW_CONFIDENCE]),
    ([SegmentScore("meh", 0.8, 20)] * 5, "meh", [LOW_CONFIDENCE]),
    ([SegmentScore("junk", 0.4, 20)] * 5, "junk", [UNSUPPORTED_SCRIPT, LOW_CONFIDENCE]),
    ([SegmentScore("logo", 0.4, 20)] * 2, "logo", [LOW_CONFIDENCE]),  # two lines: too few to judge the script
    # a region with ink that came back empty (a table column read as one tall "line"): flagged, never silent
    ([SegmentScore("12,345", 0.99, 7), SegmentScore("", 0.99, 1)] * 3, "12,345", [UNREAD_REGION]),
])
def test_page_warnings(segments, text, expect):
    conf, warnings = page_warnings(segments, text)
    assert warnings == expect
    assert 0.0 <= conf <= 1.0


def test_a_page_with_ink_and_no_text_is_low_confidence_a_blank_one_is_not():
    """A page without text on which the encoder saw ink -- a segment that came back empty, or text-like
    ink outside every segment (``unread_ink`` > 0) -- carries ``low_confidence`` with its reason beside
    ``no_text_found``, calibrated or not; a blank page (no segment, no unread ink) only
    ``no_text_found``. Before, every page without text was ``[no_text_found]`` alone (a faded receipt
    whose lines all came back empty looked like a blank sheet)."""
    for model_id in ("", "inkstream-compact"):
        assert page_warnings([], "", model_id) == (0.0, [NO_TEXT_FOUND])
        assert page_warnings([], "", model_id, unread_ink=0.3) == (0.0, [NO_TEXT_FOUND, UNREAD_INK, LOW_CONFIDENCE])
        assert page_warnings([SegmentScore("", 0.97, 1, "latin")], "", model_id) == \
            (0.0, [NO_TEXT_FOUND, UNREAD_REGION, LOW_CONFIDENCE])
        assert page_warnings([SegmentScore(" ", 0.9, 2)] * 2, "", model_id, 0.05) == \
            (0.0, [NO_TEXT_FOUND, UNREAD_REGION, UNREAD_INK, LOW_CONFIDENCE])


def test_a_page_whose_segments_all_came_back_empty_is_low_confidence_through_stitching():
    """The rule holds on the page the gateway returns (:func:`gateway.output.stitch.page_result`) and in
    its markdown note."""
    segs = [SegmentText(index=i, text="", box=(0.0, 20.0 * i, 100.0, 20.0 * i + 18), generated_tokens=1,
                        confidence=0.95) for i in range(2)]
    res = page_result(PageOutcome(index=0, status="ok", segments=segs, finish_reason="stop", width=100, height=200))
    assert res.text == "" and res.confidence == 0.0
    assert res.warnings == [NO_TEXT_FOUND, UNREAD_REGION, LOW_CONFIDENCE]
    assert "warnings: no_text_found, unread_region, low_confidence" in render_document([res], "markdown", "m")


def _outcome(confs: list[float]) -> PageOutcome:
    segs = [SegmentText(index=i, text=f"line {i}", box=(0.0, 20.0 * i, 100.0, 20.0 * i + 18), generated_tokens=8,
                        confidence=c) for i, c in enumerate(confs)]
    return PageOutcome(index=0, status="ok", segments=segs, finish_reason="stop", width=100, height=200)


def test_page_result_carries_confidence_and_warnings_through_json():
    res = page_result(_outcome([0.99, 0.98, 0.5]))
    assert [b.confidence for b in res.blocks] == [0.99, 0.98, 0.5]
    assert [b.warnings for b in res.blocks] == [[], [], [LOW_CONFIDENCE]]
    assert res.confidence == pytest.approx((0.99 * 0.98 * 0.5) ** (1 / 3))
    assert res.warnings == [LOW_CONFIDENCE]
    d = res.to_dict()
    assert d["confidence"] == round(res.confidence, 4) and d["warnings"] == [LOW_CONFIDENCE]
    assert d["blocks"][2] == {"type": "line", "text": "line 2", "box": [0.0, 40.0, 100.0, 58.0],
                              "confidence": 0.5, "warnings": [LOW_CONFIDENCE], "words": [], "angle": 0}
    back = PageResult.from_dict(d)
    assert back.warnings == res.warnings and back.blocks[2].warnings == [LOW_CONFIDENCE]
    client = ClientPage.from_dict(d)
    assert client.confidence == d["confidence"] and client.blocks[2].confidence == 0.5
    assert client.to_dict() == d
    # results stored before confidences existed still load
    old = {k: v for k, v in d.items() if k not in ("confidence", "warnings")}
    assert PageResult.from_dict(old).warnings == [] and ClientPage.from_dict(old).confidence == 0.0


def test_empty_page_says_no_text_found_in_markdown_only():
    res = page_result(PageOutcome(index=1, status="ok", finish_reason="stop", width=10, height=10))
    assert res.warnings == [NO_TEXT_FOUND] and res.confidence == 0.0
    assert "<!-- page 2: no text found -->" in render_document([res], "markdown", "m")
    assert render_document([res], "text", "m") == "\n"
    bad = page_result(_outcome([0.3, 0.3, 0.3]))
    note = "warnings: unsupported_script, low_confidence: 3 of 3 lines doubtful: line 1 (0.30); line 2 (0.30); line 3"
    # the CLI's line: doubtful lines named (inkstream/page_notes.py)
    assert note in render_document([bad], "markdown", "m")
    assert "low_confidence (confidence" not in render_document([bad], "markdown", "m")
    err = page_result(PageOutcome(index=2, status="error"))
    assert err.warnings == [] and err.confidence == 0.0


def test_cli_summary_counts_pages_with_warnings(tmp_path, monkeypatch, capsys):
    doc = tmp_path / "a.png"
    doc.write_bytes(b"x")
    pages = [ClientPage(index=1, status="ok", text="hi", confidence=0.99),
             ClientPage(index=2, status="ok", warnings=[NO_TEXT_FOUND])]
    monkeypatch.setattr(ocr_cli, "stream_pages", lambda *a, **k: (pages, {"document": "hi\n", "seconds": 1.0,
                                                                          "model_id": "m"}))
    assert ocr_cli.main([str(doc), "--gateway", "http://127.0.0.1:9", "--format", "text"]) == 0
    err = capsys.readouterr().err
    assert "page 2: no_text_found\n" in err and "confidence" not in err  # an empty page has none to give
    assert "2/2 pages read, 1 with warnings in 1.0 s (m)" in err.splitlines()[-1]


def test_cli_low_confidence_names_the_doubtful_line_not_a_contradiction(tmp_path, monkeypatch, capsys):
    """A page flagged by one doubtful line while its mean confidence is 0.98: the stderr line says which
    line, not "low_confidence (confidence 0.98)"."""
    doc = tmp_path / "a.png"
    doc.write_bytes(b"x")
    lines = [ClientBlock("line", f"line {i}", (0, 10 * i, 50, 10 * i + 8), 0.99) for i in range(1, 6)]
    lines[3] = ClientBlock("line", "T0tal 1,2B4", (0, 40, 50, 48), 0.71, [LOW_CONFIDENCE])
    table = ClientBlock("table", "a b", (0, 60, 50, 80), 0.9,
                        cells=[ClientCell(0, 0, "a", (0, 60, 25, 80), 0.99),
                               ClientCell(0, 1, "8", (25, 60, 50, 80), 0.6, warnings=[LOW_CONFIDENCE])])
    pages = [ClientPage(index=1, status="ok", text="x", confidence=0.98, warnings=[LOW_CONFIDENCE],
                        blocks=[*lines, ClientBlock("line", "", (0, 90, 5, 95))]),
             ClientPage(index=2, status="ok", text="x", confidence=0.97, warnings=[LOW_CONFIDENCE],
                        blocks=[lines[0], table]),
             ClientPage(index=3, status="ok", text="x", confidence=0.90, warnings=[LOW_CONFIDENCE],
                        blocks=lines[:2])]
    monkeypatch.setattr(ocr_cli, "stream_pages", lambda *a, **k: (pages, {"document": "x\n", "seconds": 1.0,
                                                                          "model_id": "m"}))
    assert ocr_cli.main([str(doc), "--gateway", "http://127.0.0.1:9", "--format", "text"]) == 0
    err = capsys.readouterr().err
    assert "(confidence 0.98)" not in err
    assert ("page 1: low_confidence: 1 of 5 lines doubtful: line 4 (0.71) (page confidence 0.98)"
            in err), err
    assert ("page 2: low_confidence: 1 of 3 lines and table cells doubtful: table 1 row 1 column 2 (0.60) "
            "(page confidence 0.97)") in err, err
    assert "page 3: low_confidence: the page as a whole is doubtful (page confidence 0.90)" in err, err
