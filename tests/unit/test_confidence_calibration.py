"""Calibrated confidence (inkstream/confidence.py, gateway/output/signal.py, training/compact/fit_confidence.py):
the features, the fit recovers a known model, a model with a table gets 1 - expected CER per block
and page and the issue-#38 warnings (page above 2 %, a doubtful digit), a model without one keeps the
raw geometric mean; the scan-document generator is seeded and its pieces lie on the page."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gateway.output import signal
from gateway.output.signal import LOW_CONFIDENCE, SegmentScore, block_signal, page_warnings
from gateway.output.stitch import page_result
from gateway.types import PageOutcome, SegmentText
from inkstream.confidence import FEATURES, expected_error, line_features
from training.compact.fit_confidence import (
    fit_lines,
    fit_logistic,
    fit_towers,
    line_groups,
    line_targets,
    page_ece,
    page_figures,
    write_table,
)

MODEL = "test-model"
# expected CER = sigmoid(-6 + 8 * nll): a sure line (nll ~0) ~0.25 %, nll 0.5 ~12 %, nll 0.8 ~60 %
TABLE = {"weights": [-6.0, 8.0, 0.0, 0.0, 0.0, 0.0, 0.0], "revision": "x"}


@pytest.fixture
def table(monkeypatch):
    monkeypatch.setitem(signal.TABLES, MODEL, TABLE)
    return TABLE


def test_line_features():
    f = line_features(math.exp(-0.5), 9, "总计 12.50")
    assert len(f) == len(FEATURES) and f[0] == 1.0
    assert f[1] == pytest.approx(0.5) and f[2] == pytest.approx(math.sqrt(0.5))
    assert f[3] == pytest.approx(math.log(10))
    assert f[4] == pytest.approx(2 / 7) and f[5] == pytest.approx(4 / 7) and f[6] == pytest.approx(0.5 * 2 / 7)
    assert line_features(0.0, 0, "")[1] == pytest.approx(-math.log(1e-6))
    with pytest.raises(ValueError):
        expected_error([1.0, 2.0], f)


def test_fit_recovers_a_known_logistic_model():
    rng = np.random.default_rng(0)
    x = np.column_stack([np.ones(4000), rng.uniform(0, 1, 4000)])
    p = 1 / (1 + np.exp(-(-4 + 5 * x[:, 1])))
    w = rng.integers(5, 40, 4000).astype(float)
    y = rng.binomial(w.astype(int), p) / w  # a line's share of wrong characters
    b = fit_logistic(x, y, w)
    assert b[0] == pytest.approx(-4, abs=0.3) and b[1] == pytest.approx(5, abs=0.4)


def test_page_ece():
    assert page_ece([(0.95, 0.05), (0.99, 0.01)]) == pytest.approx(0.0, abs=1e-12)
    assert page_ece([(0.99, 0.2), (0.99, 0.0)]) == pytest.approx(abs(0.99 - 0.9))


def _line(text, truth, box):
    return {"text": text, "truth": truth, "confidence": 0.99, "tokens": len(text) + 1, "box": list(box)}


def test_a_number_the_detector_split_is_scored_against_its_printed_piece():
    # "29.82" printed once, read as two lines "29." and "82": together right, each alone wrong
    doc = {"pieces": [["29.82", [100, 0, 150, 10]], ["TOTAL", [0, 0, 50, 10]], ["CASH", [0, 20, 40, 30]]],
           "lines": [_line("TOTAL", "TOTAL", (0, 0, 52, 10)), _line("29.", "29.82", (99, 0, 132, 10)),
                     _line("82", "", (133, 0, 151, 10)), _line("CASH", "CASH", (0, 20, 40, 30)),
                     _line("~~", "", (300, 0, 320, 10))],
           "missed": []}
    assert line_groups(doc) == ([0, 1, 1, 3, 4], ["TOTAL", "29.82", "", "CASH", ""])
    targets = line_targets(doc)
    assert targets[1][0] == 0.0 and targets[2][0] == 0.0  # the group reads "29.82": right
    assert targets[1][1] + targets[2][1] == pytest.approx(5)  # the group weighs its printed characters
    assert targets[4] == (1.0, 2.0)  # a line over no printed text: all wrong, weighted by its own
    doc["lines"][2]["text"] = "62"
    assert line_targets(doc)[2][0] == pytest.approx(1 / 5)  # one wrong digit of five
    # the page's CER is order-free and counts the stray line: 2 + 1 edits over 14 printed characters
    assert page_figures(doc, [0.0] * len(FEATURES))[1] == pytest.approx(3 / 14)
    no_boxes = {"lines": [{k: v for k, v in ln.items() if k != "box"} for ln in doc["lines"]], "missed": []}
    assert line_groups(no_boxes)[0] == [0, 1, 2, 3, 4]  # a cache without boxes: every line alone
    # a piece no line covers half of, read as two lines: they are scored together against it
    cut = {"pieces": [["LOW FAT JAM", [0, 0, 110, 10]]], "missed": ["LOW FAT JAM"],
           "lines": [_line("LOW", "", (0, 0, 30, 10)), _line("EAT", "", (40, 0, 70, 10)),
                     _line("JAM", "", (80, 0, 110, 10))]}
    assert line_groups(cut) == ([0, 0, 0], ["LOW FAT JAM", "", ""])
    assert [t for t, _ in line_targets(cut)] == [pytest.approx(1 / 9)] * 3  # "LOWEATJAM": one wrong of nine


def test_calibrated_page_and_block_signal(table):
    sure = SegmentScore("TOTAL", 0.999, 6)
    unsure = SegmentScore("CASH", math.exp(-0.8), 5)  # expected CER ~60 %
    conf, warnings = page_warnings([sure] * 9, "TOTAL", MODEL)
    assert conf == pytest.approx(1 - expected_error(TABLE["weights"], line_features(0.999, 6, "TOTAL")))
    assert warnings == []  # expected CER ~0.3 %
    conf, warnings = page_warnings([sure] * 9 + [unsure], "TOTAL\nCASH", MODEL)
    e_unsure = expected_error(TABLE["weights"], line_features(unsure.confidence, 5, "CASH"))
    assert conf == pytest.approx(1 - (9 * 5 * (1 - page_warnings([sure], "x", MODEL)[0]) + 4 * e_unsure) / 49)
    assert warnings == [LOW_CONFIDENCE]  # one short line of ten at ~60 %: the page's expected CER ~5 %
    # the same page without a table: the raw geometric mean, above the raw bar, no warning
    raw, raw_warnings = page_warnings([sure] * 9 + [unsure], "TOTAL\nCASH", "other-model")
    assert raw == pytest.approx(math.exp((9 * 6 * math.log(0.999) - 0.8 * 5) / 59)) and raw_warnings == []


def test_a_doubtful_digit_marks_its_block(table):
    # nll 0.25: expected CER ~1.8 % -- a word passes, a number of nine digits (0.16 wrong digits) does not
    seg = SegmentScore("", math.exp(-0.25), 8)
    word = block_signal(SegmentScore("Invoices", seg.confidence, 8), "Invoices", MODEL)
    number = block_signal(SegmentScore("1,234,567.89", seg.confidence, 8), "1,234,567.89", MODEL)
    assert word[1] == [] and number[1] == [LOW_CONFIDENCE]
    assert word[0] == pytest.approx(1 - expected_error(TABLE["weights"], line_features(seg.confidence, 8,
                                                                                        "Invoices")))
    assert block_signal(SegmentScore("12", 0.9, 3), "12", "other-model") == (0.9, [])  # raw: above 0.8


def test_page_result_is_calibrated_for_a_known_model(table):
    segs = [SegmentText(index=i, text=t, box=(0.0, 20.0 * i, 100.0, 20.0 * i + 18), generated_tokens=6,
                        confidence=c) for i, (t, c) in enumerate([("TOTAL", 0.999), ("24.00", math.exp(-0.5))])]
    outcome = PageOutcome(index=0, status="ok", segments=segs, finish_reason="stop", width=100, height=60)
    res = page_result(outcome, model_id=MODEL)
    assert res.warnings == [LOW_CONFIDENCE] and res.confidence < 0.98
    assert res.blocks[0].warnings == [] and res.blocks[1].warnings == [LOW_CONFIDENCE]
    assert res.blocks[0].confidence == pytest.approx(1 - expected_error(TABLE["weights"],
                                                                        line_features(0.999, 6, "TOTAL")))
    plain = page_result(outcome)  # no model id: raw confidences, as before
    assert plain.blocks[0].confidence == 0.999


def test_scan_documents_are_seeded_and_their_pieces_lie_on_the_page():
    from training.compact.scan_docs import KINDS, make_document

    a, b = make_document(3), make_document(3)
    assert a.kind == KINDS[3 % len(KINDS)] and a.truth == b.truth and a.pieces == b.pieces
    assert np.array_equal(np.asarray(a.image), np.asarray(b.image))
    for seed in range(len(KINDS)):
        d = make_document(seed)
        assert d.kind == KINDS[seed] and d.truth and d.pieces
        for text, (x0, y0, x1, y1) in d.pieces:
            assert text and -2 <= x0 < x1 <= d.image.width + 2 and -2 <= y0 < y1 <= d.image.height + 2
        # every printed piece's characters are in the rows' truth
        joined = "".join(d.truth).replace(" ", "")
        assert all(t.replace(" ", "") in joined for t, _ in d.pieces)


def test_a_clean_print_of_a_document_has_its_text_and_layout():
    from training.compact.scan_docs import make_document

    scanned, clean = make_document(4), make_document(4, degrade=False)
    assert clean.kind == f"clean_{scanned.kind}" and clean.truth == scanned.truth
    assert [t for t, _ in clean.pieces] == [t for t, _ in scanned.pieces]
    gray = np.asarray(clean.image.convert("L"))
    assert gray.min() < 60 and np.median(gray) == 255  # black ink on white paper, no noise


def test_a_doubtful_digit_marks_its_table_cell(table):
    # issue #38: "a number with a doubtful digit marks its cell" -- the cell carries the calibrated confidence
    # of its segments and low_confidence, through JSON and gRPC; a word cell at the same doubt does not
    from inkstream.page_result import PageResult
    from inkstream.page_result_pb import page_from_pb, page_to_pb
    from inkstream.segments import Cell, cell_join

    nll = 0.25  # expected CER ~1.8 %: a word passes, nine digits (0.16 expected wrong digits) do not
    texts = ["Invoices", "1,234,567.89", "Total"]
    segs = [SegmentText(i, t, (60.0 * i, 0.0, 60.0 * i + 50, 10.0), join=cell_join(Cell(1, 0, i)), generated_tokens=8,
                        confidence=math.exp(-nll if i < 2 else -0.001)) for i, t in enumerate(texts)]
    res = page_result(PageOutcome(0, "ok", segments=segs, width=200, height=10), model_id=MODEL)
    word, number, sure = res.blocks[-1].cells
    assert number.warnings == [LOW_CONFIDENCE] and word.warnings == [] and sure.warnings == []
    assert number.confidence == pytest.approx(1 - expected_error(TABLE["weights"], line_features(
        math.exp(-nll), 8, "1,234,567.89")))
    assert word.confidence < sure.confidence < 1.0
    for back in (PageResult.from_dict(res.to_dict()), page_from_pb(page_to_pb(res))):
        assert [c.warnings for c in back.blocks[-1].cells] == [[], [LOW_CONFIDENCE], []]
    # a model without a table: the raw geometric mean and the raw block bar (0.8)
    raw = page_result(PageOutcome(0, "ok", segments=segs, width=200, height=10)).blocks[-1].cells
    assert raw[1].confidence == pytest.approx(math.exp(-nll))
    assert [c.warnings for c in raw] == [[LOW_CONFIDENCE], [LOW_CONFIDENCE], []]


def test_each_tower_is_calibrated_with_its_own_weights(monkeypatch):
    # issue #38: the PP tower's short receipt lines read right at raw confidences where the Latin tower's
    # are wrong, so a table carries weights per tower; a segment whose tower is not said (or has none)
    # gets the pooled weights
    pooled = [-6.0, 8.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    table = {"weights": pooled, "revision": "x",
             "towers": {"latin": [-4.0, 8.0, 0.0, 0.0, 0.0, 0.0, 0.0], "pp": [-8.0, 8.0, 0.0, 0.0, 0.0, 0.0, 0.0]}}
    monkeypatch.setitem(signal.TABLES, MODEL, table)
    conf = math.exp(-0.3)
    feats = line_features(conf, 6, "CEREAL")
    for tower, w in [("latin", table["towers"]["latin"]), ("pp", table["towers"]["pp"]), ("", pooled),
                     ("other", pooled)]:
        got, _ = block_signal(SegmentScore("CEREAL", conf, 6, tower), "CEREAL", MODEL)
        assert got == pytest.approx(1 - expected_error(w, feats)), tower
    # the page: its lines' expected CERs, each under its tower's weights, weighted by their characters
    segs = [SegmentScore("CEREAL", conf, 6, "pp"), SegmentScore("MILK", conf, 4, "latin")]
    e_pp, e_latin = (expected_error(table["towers"][t], line_features(conf, n, s))
                     for t, n, s in [("pp", 6, "CEREAL"), ("latin", 4, "MILK")])
    assert page_warnings(segs, "CEREAL\nMILK", MODEL)[0] == pytest.approx(1 - (6 * e_pp + 4 * e_latin) / 10)
    assert page_warnings(segs[:1], "CEREAL", MODEL)[1] == []  # the PP tower: ~0.6 % expected, not flagged
    assert page_warnings(segs[1:], "MILK", MODEL)[1] == [LOW_CONFIDENCE]  # the Latin tower: ~15 %
    # page_result takes each segment's tower from the decoder client's SegmentText
    texts = [SegmentText(index=i, text=t, box=(0.0, 20.0 * i, 100.0, 20.0 * i + 18), generated_tokens=n,
                         confidence=conf, tower=tw) for i, (t, n, tw) in enumerate([("CEREAL", 6, "pp"),
                                                                                     ("MILK", 4, "latin")])]
    res = page_result(PageOutcome(index=0, status="ok", segments=texts, width=100, height=40), model_id=MODEL)
    assert [b.confidence for b in res.blocks] == [pytest.approx(1 - e_pp), pytest.approx(1 - e_latin)]
    assert res.confidence == pytest.approx(1 - (6 * e_pp + 4 * e_latin) / 10)


def test_the_fit_gives_each_tower_its_own_weights(tmp_path):
    # two towers whose lines are wrong at different rates for the same raw confidence: the per-tower fit
    # tells them apart, the pooled weights lie between; the table written holds both
    rng = np.random.default_rng(1)
    docs = []
    for k in range(40):
        lines, pieces = [], []
        for i in range(20):
            tower = "pp" if i % 2 else "latin"
            nll = float(rng.uniform(0.0, 0.4))
            truth = "ABCDEFGHIJ"
            wrong = rng.binomial(10, 1 / (1 + math.exp(-((-7.0 if tower == "pp" else -3.0) + 8 * nll))))
            text = "Z" * wrong + truth[wrong:]
            lines.append({"text": text, "truth": truth, "confidence": math.exp(-nll), "tokens": 11, "tower": tower})
        docs.append({"seed": k, "lines": lines, "missed": [], "pieces": pieces})
    towers = fit_towers(docs, min_lines=100)
    assert set(towers) == {"latin", "pp"}
    assert towers["latin"][0] == pytest.approx(-3.0, abs=0.6) and towers["pp"][0] == pytest.approx(-7.0, abs=1.5)
    assert fit_towers(docs, min_lines=1000) == {}  # too few lines: the pooled weights serve every tower
    pooled = fit_lines(docs)
    assert towers["pp"][0] < pooled[0] < towers["latin"][0]
    path = tmp_path / "tables.py"
    write_table("m", "rev", pooled, range(40), range(0), 0.01, towers, path=path)
    space: dict = {}
    exec(path.read_text(), space)
    entry = space["TABLES"]["m"]
    assert entry["weights"] == [round(v, 5) for v in pooled]
    assert entry["towers"]["pp"] == [round(v, 5) for v in towers["pp"]]
