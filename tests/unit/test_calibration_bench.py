"""bench/calibration.py: a cached page record is scored as the gateway scores it, and the summary counts
bad (CER > 5 %) and good (CER <= 1 %) pages and the shares of them flagged."""

from __future__ import annotations

import importlib.util
import math
import pathlib

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "calibration_bench", pathlib.Path(__file__).resolve().parents[2] / "bench" / "calibration.py")
assert _SPEC and _SPEC.loader
bench = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(bench)


def test_score_record_is_the_gateways_page_signal():
    rec = {"name": "p", "truth": "TOTAL 24.00", "missed": [],
           "lines": [{"text": "TOTAL", "confidence": 0.999, "tokens": 6, "tower": "pp", "box": [0, 0, 1, 1],
                      "truth": "TOTAL"},
                     {"text": "24.0.", "confidence": math.exp(-0.8), "tokens": 6, "tower": "pp", "box": [0, 2, 1, 3],
                      "truth": "24.00"}]}
    conf, raw, cer, warnings = bench.score_record(rec, "inkstream-compact")
    assert cer == pytest.approx(1 / 10)  # "24.0." vs "24.00": one of ten characters
    assert raw == pytest.approx(math.exp((6 * math.log(0.999) - 0.8 * 6) / 12))
    assert 0.0 < conf < 1.0 and "low_confidence" in warnings


def test_summary_counts_bad_and_good_pages():
    rows = [(0.99, 0.99, 0.0, False), (0.97, 0.97, 0.005, True), (0.9, 0.9, 0.2, True), (0.95, 0.95, 0.03, True)]
    s = bench.summary(rows)
    assert (s["bad"], s["good"]) == (1, 2)
    assert (s["bad_flagged"], s["good_flagged"]) == (1, 1)  # the counts beside the shares (issue #38)
    assert s["flagged_above_5pct"] == 1.0 and s["flagged_at_most_1pct"] == 0.5
    assert math.isnan(bench.summary([(0.99, 0.99, 0.0, False)])["flagged_above_5pct"])


def test_the_pages_without_text_are_counted_with_those_flagged():
    """The bench says how many pages came back without text and how many of them carry
    ``low_confidence`` (issue #38: a page of ink the model could not read must not pass as a blank one)."""
    warned = [[], ["low_confidence"], ["no_text_found"], ["no_text_found", "unread_region", "low_confidence"]]
    assert bench.no_text_line(warned) == "no_text_found pages: 2, low_confidence on them: 1/2"
    assert bench.no_text_line([[]]) == "no_text_found pages: 0, low_confidence on them: 0/0"
