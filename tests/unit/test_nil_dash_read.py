"""A table's lone nil dash reaches the output as ``-``, read by its shape and not by the recogniser
(issue 37: models/compact/page/nil_marks.py found it; the recogniser read its crop as ``五``, ``a``, ``d``,
``E`` or ``--``), through the in-process engine, the table's cells and markdown, and the gateway's wire."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from evaluation.engines import default_model_dir
from gateway.clients.decoder import pre_read_text
from gateway.clients.encoder import encoded_from_pb
from models.base import EncodedPage, SegmentTokens

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
VALUES = (("1,234", "-", "(56)"), ("-", "789", "2,345"))


def _statement() -> Image.Image:
    """Twelve rows of a statement: a label and two year columns, a nil ``-`` in a third of each column."""
    im = Image.new("RGB", (1700, 2200), "white")
    d = ImageDraw.Draw(im)
    f = ImageFont.truetype(FONT, 34)
    labels = ("Trade receivables", "Other payables", "Deferred tax")
    for i in range(12):
        y = 200 + i * 55
        d.text((150, y), labels[i % 3], font=f, fill=0)
        for x, col in ((1000, VALUES[0]), (1400, VALUES[1])):
            v = col[i % 3]
            d.text((x - f.getlength(v), y), v, font=f, fill=0)
    return im


@pytest.fixture(scope="module")
def halves():
    from models.compact.decoder_half import CompactDecoderHalf
    from models.compact.encoder_half import CompactEncoderHalf

    d = default_model_dir()
    return CompactEncoderHalf.load(d), CompactDecoderHalf.load(d)


def test_a_lone_dash_cell_is_read_as_a_dash_end_to_end(halves) -> None:
    """Every nil cell of the page is ``-`` in the in-process text, the table's cells, its markdown and hOCR;
    every number is read too (fails before: the dashes got no line)."""
    from gateway.output.stitch import page_result, render_page
    from gateway.types import PageOutcome, SegmentText
    from models.inprocess import ocr_page, segment_texts

    enc, dec = halves
    image = _statement()
    encoded = enc.encode_batch([enc.preprocess(image, "lines")])[0]
    shaped = [s for s in encoded.segments if s.pre_read]
    assert len(shaped) == 8 and {s.pre_read for s in shaped} == {"-"} and {s.tower for s in shaped} == {"shape"}
    assert all(0.6 <= s.pre_read_confidence <= 1.0 for s in shaped)
    segs = [SegmentText(index=i, text=text, box=s.box, join=s.join, generated_tokens=n, confidence=0.99,
                        tower=s.tower)
            for i, ((text, n), s) in enumerate(zip(segment_texts(dec, encoded.segments), encoded.segments,
                                                   strict=True))]
    res = page_result(PageOutcome(index=0, status="ok", segments=segs, width=image.width, height=image.height))
    cells = [c.text for b in res.blocks if b.type == "table" for c in b.cells]
    assert cells.count("-") == 8
    assert all(cells.count(v) == 4 for v in ("1,234", "(56)", "789", "2,345"))
    markdown = render_page(res, "markdown")
    assert markdown.count("| Trade receivables | 1,234 | - |") == 4
    assert markdown.count("| Other payables | - | 789 |") == 4
    from gateway.output.hocr import render_hocr

    assert render_hocr([res]).count(">-<") == 8
    page = ocr_page(enc, dec, image)
    assert sum(t == "-" for t in page.segments) == 8 and "五" not in page.text


def test_a_pre_read_segment_crosses_the_wire_and_is_answered_without_a_decoder() -> None:
    """The encoder service's response carries ``pre_read`` and its confidence; the gateway makes the
    segment's text of them (:func:`gateway.clients.decoder.pre_read_text`)."""
    from encoder_service.convert import encode_response

    page = EncodedPage(segments=[SegmentTokens(np.zeros((1, 8), np.float32), (10.0, 20.0, 30.0, 40.0),
                                               join="cell:1:2:3", tower="shape", pre_read="-",
                                               pre_read_confidence=0.93),
                                 SegmentTokens(np.ones((3, 8), np.float32), (50.0, 20.0, 90.0, 40.0))],
                       width=100, height=60)
    got = encoded_from_pb(encode_response(0, page, wire_dtype="float32", model_id="m", seconds=0.1, revision="r"))
    dash, other = got.segments
    assert (dash.pre_read, round(dash.pre_read_confidence, 4), dash.tower) == ("-", 0.93, "shape")
    assert other.pre_read == "" and other.pre_read_confidence == 0.0
    text = pre_read_text(dash)
    assert (text.text, text.join, text.finish_reason, round(text.confidence, 4)) == ("-", "cell:1:2:3", "stop", 0.93)
    assert text.box == (10.0, 20.0, 30.0, 40.0) and text.generated_tokens == 2
