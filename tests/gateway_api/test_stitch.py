"""Stitching: grounding markup -> blocks in page pixels, formats, ordering, explicit errors."""

from __future__ import annotations

import json

import pytest

from gateway.output.stitch import error_page, page_result, parse_grounding, render_document
from gateway.types import PageError, PageOutcome, SegmentText
from inkstream.page_result import Block, PageResult


def test_grounding_boxes_map_from_grid_to_segment_pixels():
    text = ("<|ref|>title<|/ref|><|det|>[[0, 0, 999, 99]]<|/det|>\n# Report\n"
            "<|ref|>table<|/ref|><|det|>[[100, 200, 300, 400], [500, 600, 700, 800]]<|/det|>\n| a | b |\n"
            "<|ref|>image<|/ref|><|det|>[[10, 10, 20, 20]]<|/det|>")
    clean, blocks = parse_grounding(text, (0.0, 0.0, 999.0 * 2, 999.0), "text")
    assert [b.type for b in blocks] == ["title", "table", "image"]
    assert blocks[0].box == pytest.approx((0, 0, 1998, 99))
    assert blocks[1].box == pytest.approx((200, 200, 1400, 800))  # union of both boxes
    assert blocks[1].text == "| a | b |" and blocks[2].text == ""
    assert clean == "# Report\n\n| a | b |"


def test_grounding_offset_segment_clipping_and_leading_text():
    clean, blocks = parse_grounding("intro <|ref|>text<|/ref|><|det|>[[-5, 0, 1200, 999]]<|/det|>body",
                                    (100.0, 50.0, 200.0, 150.0), "text")
    assert blocks[0] == Block("text", "intro", (100.0, 50.0, 200.0, 150.0))
    assert blocks[1].box == pytest.approx((100, 50, 200, 150))  # clipped to the grid
    assert clean == "intro\n\nbody"


def test_plain_text_is_one_block():
    clean, blocks = parse_grounding("just text\nsecond line", (0, 0, 10, 10), "line")
    assert clean == "just text\nsecond line" and blocks == [Block("line", "just text\nsecond line", (0, 0, 10, 10))]
    assert parse_grounding("", (0, 0, 1, 1), "text") == ("", [])


def test_page_result_orders_segments_and_scales_boxes():
    segs = [SegmentText(1, "second", (0, 50, 100, 100)), SegmentText(0, "first", (0, 0, 100, 50))]
    out = PageOutcome(index=4, status="ok", segments=segs, finish_reason="length", vision_tokens=30,
                      generated_tokens=7, width=100, height=100)
    res = page_result(out, doc_size=(200, 400))
    assert res.index == 5 and res.text == "first\nsecond" and res.finish_reason == "length"
    assert [b.text for b in res.blocks] == ["first", "second"]
    assert res.blocks[1].box == pytest.approx((0, 200, 200, 400))
    assert (res.width, res.height) == (200, 400)


def test_error_outcome_and_roundtrip():
    res = page_result(PageOutcome(index=0, status="error", error=PageError("UNAVAILABLE", "no replica")))
    assert res.status == "error" and res.error == PageError("UNAVAILABLE", "no replica")
    assert PageResult.from_dict(json.loads(json.dumps(res.to_dict()))) == res


def test_documents_in_order_with_notes_and_errors():
    pages = [PageResult(3, "ok", text="three", finish_reason="repetition"),
             PageResult(1, "ok", text="one", finish_reason="stop"),
             error_page(1, "INVALID_ARGUMENT", "page 2 could not be rendered")]
    md = render_document(pages, "markdown", "m")
    assert md.index("<!-- page 1 -->") < md.index("<!-- page 2 -->") < md.index("<!-- page 3 -->")
    assert "<!-- page 2: error INVALID_ARGUMENT: could not be rendered -->" in md  # the page named once
    assert "page 3: output truncated: the model started repeating itself" in md
    txt = render_document(pages, "text", "m")
    assert txt.split("\f")[0] == "one"
    assert txt.split("\f")[1] == "[page 2: error INVALID_ARGUMENT: could not be rendered]"
    doc = json.loads(render_document(pages, "json", "m"))
    assert [p["index"] for p in doc["pages"]] == [1, 2, 3] and doc["pages_error"] == 1
    with pytest.raises(ValueError, match="duplicate"):
        render_document(pages + [PageResult(1, "ok", text="again")], "text", "m")


def test_markup_cut_off_by_the_token_limit_is_dropped():
    text = "<|ref|>text<|/ref|><|det|>[[0, 0, 999, 499]]<|/det|>first\n<|ref|>title<|/ref|><|det|>[[12, 5"
    clean, blocks = parse_grounding(text, (0, 0, 999, 999), "text")
    assert clean == "first" and [b.type for b in blocks] == ["text"]
    assert parse_grounding("done <|ref|>tit", (0, 0, 1, 1), "text")[0] == "done"


def test_pieces_of_one_line_are_joined_as_the_encoder_marked_them():
    """A long line read in pieces comes back as one text line (a space after a cut at a word gap,
    nothing after a cut inside a word); each piece keeps its own block and box. Segments not marked
    as pieces are lines of their own, even side by side (two columns)."""
    segs = [SegmentText(0, "The quick brown", (10, 100, 400, 130)),
            SegmentText(1, "fox jum", (405, 102, 700, 131), join="space"),
            SegmentText(2, "ps.", (700, 102, 760, 131), join="direct"),
            SegmentText(3, "Next line", (10, 140, 300, 170)),
            SegmentText(4, "left column", (10, 200, 300, 230)), SegmentText(5, "right column", (500, 198, 800, 226))]
    res = page_result(PageOutcome(0, "ok", segments=segs, width=900, height=1000))
    assert res.text == "The quick brown fox jumps.\nNext line\nleft column\nright column"
    assert [b.text for b in res.blocks] == ["The quick brown", "fox jum", "ps.", "Next line", "left column",
                                            "right column"]
    # An upside-down page: the second piece lies left of the first in page pixels; a sideways page:
    # the pieces are taller than wide. The marks, not the geometry, decide.
    upside_down = [SegmentText(0, "first half", (600, 500, 1000, 530)),
                   SegmentText(1, "second half", (200, 500, 600, 530), join="space")]
    upside_down_page = PageOutcome(0, "ok", segments=upside_down, width=1200, height=1000)
    assert page_result(upside_down_page).text == "first half second half"
    sideways = [SegmentText(0, "line one", (149, 863, 188, 1583)), SegmentText(1, "line two a", (206, 1189, 243, 1581)),
                SegmentText(2, "line two b", (206, 832, 243, 1189), join="space")]
    res = page_result(PageOutcome(0, "ok", segments=sideways, width=1700, height=2200))
    assert res.text == "line one\nline two a line two b"


def test_plain_ocr_lines_are_literal_in_markdown():
    """A line-level model's text is not markdown: a line reading "# 3", "1. item" or "<!-- x" must
    not become a heading, a list or a comment that hides the rest of the document."""
    segs = [SegmentText(0, "# 3 items", (0, 0, 100, 10)), SegmentText(1, "1. first", (0, 20, 100, 30)),
            SegmentText(2, "<!-- hidden? & more", (0, 40, 100, 50)), SegmentText(3, "plain text", (0, 60, 100, 70))]
    page = page_result(PageOutcome(0, "ok", segments=segs, width=200, height=100))
    md = render_document([page], "markdown", "m")
    assert "\\# 3 items\n1\\. first\n&lt;!-- hidden? &amp; more\nplain text" in md
    assert render_document([page], "text", "m").startswith("# 3 items\n1. first\n<!-- hidden? & more")
    for msg in ("boom --> after", "boom ---> after", "boom ----> after"):
        err = error_page(1, "INTERNAL", msg)
        assert "-->" not in render_document([err], "markdown", "m").split("boom", 1)[1].split("after")[0], msg
    rule = page_result(PageOutcome(0, "ok", segments=[SegmentText(0, "___", (0, 0, 9, 9)),
                                                      SegmentText(1, "[1]: http://x", (0, 20, 9, 29))],
                                   width=20, height=40))
    assert "\\___\n\\[1]: http://x" in render_document([rule], "markdown", "m")
