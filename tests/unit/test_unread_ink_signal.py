"""The page's unread ink (text no segment holds) reaches the gateway and counts in the page's confidence:
the encoder's measure goes over the wire, the calibrated page confidence is 1 - the expected CER with
the missed characters in it, ``unread_ink`` names the cause, and the term's two numbers are fitted
back from pages (issue #38 item 3: photographed forms whose missed fields no line confidence sees)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from encoder_service.convert import encode_response
from gateway.clients.encoder import encoded_from_pb
from gateway.output import signal
from gateway.output.signal import LOW_CONFIDENCE, UNREAD_INK, SegmentScore, missed_share, page_warnings
from gateway.output.stitch import page_result
from gateway.types import PageOutcome, SegmentText
from inkstream.page_result import WARNING_CODES
from inkstream.pb import encoder_pb2
from models.base import EncodedPage, SegmentTokens
from training.compact.fit_unread import fit_unread, missed

MODEL = "test-model"
# lines read right: expected CER sigmoid(-6) ~0.25 % at nll 0; missed text: 1 character per unit of ink above 0.01
TABLE = {"weights": [-6.0, 8.0, 0.0, 0.0, 0.0, 0.0, 0.0], "revision": "x",
         "unread_ink": {"slope": 1.0, "floor": 0.01}}
SURE = [SegmentScore("Account no.: BQ-4196597", 1.0, 12), SegmentScore("City: Springfield", 1.0, 9)]


@pytest.fixture
def table(monkeypatch):
    monkeypatch.setitem(signal.TABLES, MODEL, TABLE)
    return TABLE


def test_a_page_whose_lines_are_sure_but_whose_fields_were_missed_is_flagged(table):
    text = "\n".join(s.text for s in SURE)
    conf0, warn0 = page_warnings(SURE, text, MODEL)
    assert warn0 == []  # what the line confidences alone say: nothing
    conf, warn = page_warnings(SURE, text, MODEL, unread_ink=0.11)  # a tenth of the text left unread
    assert warn == [UNREAD_INK, LOW_CONFIDENCE]
    assert conf == pytest.approx(conf0 * (1 - 0.1 / 1.1))  # 1 - ((1 - s) * lines' CER + s)


def test_a_trace_of_unread_ink_below_the_floor_changes_nothing(table):
    text = "\n".join(s.text for s in SURE)
    assert page_warnings(SURE, text, MODEL, unread_ink=0.008) == page_warnings(SURE, text, MODEL)
    assert missed_share(0.008, table) == 0.0


def test_without_a_fitted_term_or_a_table_unread_ink_is_not_used(monkeypatch):
    text = "\n".join(s.text for s in SURE)
    monkeypatch.setitem(signal.TABLES, MODEL, {k: v for k, v in TABLE.items() if k != "unread_ink"})
    assert page_warnings(SURE, text, MODEL, unread_ink=0.5) == page_warnings(SURE, text, MODEL)
    assert page_warnings(SURE, text, "", unread_ink=0.5) == page_warnings(SURE, text, "")


def test_unread_ink_is_a_listed_warning_code():
    assert UNREAD_INK in WARNING_CODES


def test_the_encoders_measure_reaches_the_page_result(table):
    page = EncodedPage(segments=[SegmentTokens(torch.zeros(3, 4), (0, 0, 10, 5))], width=10, height=5,
                       unread_ink=0.11)
    resp = encode_response(0, page, wire_dtype="float32", model_id="m", seconds=0.1)
    got = encoded_from_pb(encoder_pb2.EncodeResponse.FromString(resp.SerializeToString()))
    assert got.unread_ink == pytest.approx(0.11)
    segs = [SegmentText(i, s.text, (0.0, 10.0 * i, 200.0, 10.0 * i + 9), generated_tokens=s.generated_tokens,
                        confidence=1.0) for i, s in enumerate(SURE)]
    res = page_result(PageOutcome(0, "ok", segments=segs, width=200, height=20, unread_ink=got.unread_ink),
                      model_id=MODEL)
    assert UNREAD_INK in res.warnings and LOW_CONFIDENCE in res.warnings


def test_the_fit_recovers_a_known_slope_and_floor():
    rng = np.random.default_rng(0)
    pages = []
    for _ in range(300):
        e, u = float(rng.uniform(0.0, 0.03)), float(rng.choice([0.0, rng.uniform(0.0, 0.2)]))
        s = missed(u, 0.8, 0.01)
        pages.append((e, u, (1 - s) * e + s + float(rng.normal(0, 0.002))))
    fit = fit_unread(pages)
    assert fit is not None
    assert fit["slope"] == pytest.approx(0.8, abs=0.1)
    assert fit["floor"] == pytest.approx(0.01, abs=0.006)
    with pytest.raises(ValueError):
        fit_unread([])


def test_pages_without_unread_ink_fit_no_term():
    """Fit pages whose text the detector found whole (unread_ink 0 on every page, as after the
    underline fix of issue 38) say nothing about the slope: no term is fitted (the grid's first slope
    was written before, switching the warning off for good)."""
    pages = [(0.01, 0.0, 0.012), (0.02, 0.0, 0.018), (0.0, 0.0, 0.0), (0.03, 0.05, 0.2)]
    assert fit_unread(pages) is None
