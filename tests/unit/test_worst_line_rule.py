"""The page rule's worst-line bar (issue #38 item 3): a page is ``low_confidence`` when one line alone
is expected to make a large share of its characters wrong, though its mean expected CER is under 2 %
(gateway/output/signal.py ``worst_line_share``, training/compact/fit_worst_line.py).
"""

from __future__ import annotations

import math

import pytest

from gateway.output import signal
from gateway.output.signal import LOW_CONFIDENCE, SegmentScore, page_warnings, worst_line_share
from inkstream.confidence import expected_error, expected_wrong_chars, line_features

MODEL = "test-worst-line"
# expected CER = sigmoid(-6 + 8 * nll): a sure line (nll ~0) ~0.25 %, nll 0.5 ~12 %, nll 0.8 ~60 %
WEIGHTS = [-6.0, 8.0, 0.0, 0.0, 0.0, 0.0, 0.0]

# seed 20092 of bench/calibration.py (a photographed form, 7.41 % CER) as the embedded model read it:
# (text, raw confidence, generated tokens, tower); the e-mail "yuki.garcia@example.com" came out garbled
FORM_20092 = [
    ("Change of Address", 0.9962, 18, "pp"), ("Date of birtt:", 0.9020, 15, "pp"), ("Email:", 0.9850, 7, "pp"),
    ("Telephone:", 0.9952, 11, "pp"), ("Employer:", 0.9967, 10, "pp"), ("vuki.geráiaexese", 0.5696, 17, "pp"),
    ("-1 920 393 7620", 0.9491, 16, "pp"), ("Fairview Ltd", 0.8573, 13, "pp"), ("18/02/1975", 0.9914, 11, "pp"),
    ("City:", 0.9873, 6, "pp"), ("Name:", 0.9980, 6, "pp"), ("Postcode:", 0.9976, 10, "pp"),
    ("Amount:", 0.9634, 8, "pp"), ("SC-5321761", 0.9951, 11, "pp"), ("Kingston", 0.9890, 9, "pp"),
    ("Fatima Okafor", 0.9695, 14, "pp"), ("12456", 0.9948, 6, "pp"), ("$6,578.52", 0.9616, 10, "pp"),
    ("Account no.:", 0.9181, 14, "pp"),
]


def _page(bar: float | None):
    table: dict = {"weights": WEIGHTS, "revision": "x"}
    if bar is not None:
        table["worst_line_share"] = bar
    sure = SegmentScore("Invoice number and date", 0.999, 20)
    garbled = SegmentScore("jane.doe@exarnple.corn", math.exp(-0.5), 20)  # expected CER ~12 %: ~2.6 wrong
    # of the page's 19 x 20 + 22 = 402 characters: 0.65 % by that line, 0.89 % in all
    segs = [sure] * 19 + [garbled]
    return table, segs, "\n".join(s.text for s in segs)


def test_expected_wrong_chars_counts_the_characters_cer_counts():
    assert expected_wrong_chars(0.1, "ab c\td") == pytest.approx(0.4)
    assert expected_wrong_chars(0.5, "  ") == 0.0


def test_one_garbled_line_marks_its_page_though_the_pages_mean_is_low(monkeypatch):
    table, segs, text = _page(bar=0.005)
    monkeypatch.setitem(signal.TABLES, MODEL, table)
    e = expected_error(WEIGHTS, line_features(math.exp(-0.5), 20, segs[-1].text))
    assert worst_line_share(segs, table) == pytest.approx(e * 22 / 402)  # 22 characters, no space
    conf, warnings = page_warnings(segs, text, MODEL)
    assert 1.0 - conf < signal.PAGE_EXPECTED_CER_ABOVE  # the mean alone: ~0.8 %, under the 2 % bar
    assert warnings == [LOW_CONFIDENCE]
    # a table without the bar (fitted before it) keeps the mean rule alone; a bar above the line spares it
    monkeypatch.setitem(signal.TABLES, MODEL, _page(bar=None)[0])
    assert page_warnings(segs, text, MODEL)[1] == []
    monkeypatch.setitem(signal.TABLES, MODEL, _page(bar=0.008)[0])
    assert page_warnings(segs, text, MODEL)[1] == []


def test_the_form_photo_with_one_garbled_email_is_flagged_by_the_committed_table():
    # seed 20092 read at 7.41 % CER was the one page above 5 % left unflagged on bench/calibration.py's
    # 144 pages: its expected CER (1.9 %) dilutes the e-mail line's ~2.2 expected wrong characters (1.2 %
    # of the page's 182)
    model = "inkstream-compact"
    segs = [SegmentScore(t, c, n, tower) for t, c, n, tower in FORM_20092]
    conf, warnings = page_warnings(segs, "\n".join(t for t, *_ in FORM_20092), model)
    assert 1.0 - conf < signal.PAGE_EXPECTED_CER_ABOVE
    assert LOW_CONFIDENCE in warnings
    # the lines read right around it do not reach the bar: it is the garbled line that flags the page
    table = signal.calibration(model)
    assert table is not None
    # 0.73 % of the page's characters (1.2 % under the table before its recalibration on seeds 96-191, whose
    # bar was 0.98 %; the recalibrated bar is 0.51 %)
    assert worst_line_share(segs, table) == pytest.approx(0.0073, abs=0.001)
    assert worst_line_share([s for s in segs if s.text != "vuki.geráiaexese"], table) < table["worst_line_share"]


def test_the_bar_is_the_lowest_within_the_good_pages_budget():
    from training.compact.fit_worst_line import fit_worst_line

    # 100 good pages: 2 flagged by the mean rule (expected CER 3 %), 98 spared with worst lines 0.0 .. 0.97
    good = [(0.03, 0.5, 0.0)] * 2 + [(0.01, k / 100, 0.005) for k in range(98)]
    bad = [(0.01, 5.0, 0.08)]  # bad pages do not move the bar
    # a budget of 4 %: 4 good pages may be flagged, 2 already are -> the 2 highest spared (0.97, 0.96)
    assert fit_worst_line(good + bad, budget=0.04) == pytest.approx(0.955)
    assert fit_worst_line(good, budget=0.04) == pytest.approx(0.955)
    # no flag to spare: halfway between the highest good page and twice it
    assert fit_worst_line(good, budget=0.02) == pytest.approx(1.455)
    # the mean rule alone is over the budget: no bar
    assert fit_worst_line(good, budget=0.01) is None
    # tied figures are flagged or spared together: the bar never flags more than the budget
    tied = [(0.01, 1.0, 0.0)] * 3 + [(0.01, 0.5, 0.0)] * 97
    assert fit_worst_line(tied, budget=0.02) == pytest.approx(1.5)
    with pytest.raises(ValueError):
        fit_worst_line(bad)


def test_the_fit_writes_the_bar_the_gateway_reads(tmp_path):
    from training.compact.fit_confidence import write_table
    from training.compact.fit_worst_line import document_worst_line

    doc = {"lines": [{"text": "TOTAL 12.00", "confidence": 0.999, "tokens": 12, "truth": "TOTAL 12.00"},
                     {"text": "jane.doe@exarnple.corn", "confidence": math.exp(-0.5), "tokens": 20,
                      "truth": "jane.doe@example.com"},
                     {"text": "", "confidence": 0.1, "tokens": 0, "truth": ""}]}
    segs = [SegmentScore("TOTAL 12.00", 0.999, 12), SegmentScore("jane.doe@exarnple.corn", math.exp(-0.5), 20)]
    e = expected_error(WEIGHTS, line_features(math.exp(-0.5), 20, "jane.doe@exarnple.corn"))
    assert document_worst_line(doc, WEIGHTS) == pytest.approx(e * 22 / 32)  # the line without tokens not counted
    assert document_worst_line(doc, WEIGHTS) == pytest.approx(worst_line_share(segs, {"weights": WEIGHTS}))
    path = tmp_path / "tables.py"
    write_table("m", "rev", WEIGHTS, range(4), range(0), 0.01, worst_line=0.0098, path=path)
    space: dict = {}
    exec(path.read_text(), space)
    assert space["TABLES"]["m"]["worst_line_share"] == 0.0098
    write_table("m", "rev", WEIGHTS, range(4), range(0), 0.01, path=path)  # no bar fitted: none written
    space = {}
    exec(path.read_text(), space)
    assert "worst_line_share" not in space["TABLES"]["m"]
