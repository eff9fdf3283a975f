"""training/compact/tower_lines.py: lines read on both towers are paired by box, a page is scored
order-free with each line on the tower asked for, and the page rules route as the served scan rule."""

from __future__ import annotations

from training.compact.tower_lines import line_choices, line_pairs, order_free, page_cer, rule_routes


def _doc(contrast: float = 200.0, doubt: float = 0.05, served: bool = False) -> dict:
    box_a, box_b = [10.0, 10.0, 110.0, 30.0], [10.0, 40.0, 110.0, 60.0]
    return {
        "seed": 1, "kind": "receipt_dotmatrix", "dpi": 150,
        "pieces": [["2 x 4.00", box_a], ["TOTAL", box_b]],
        "latin": [{"text": "2 χ 4.00", "confidence": 0.9, "tokens": 9, "box": box_a},
                  {"text": "TOTAL", "confidence": 0.99, "tokens": 6, "box": box_b}],
        "pp": [{"text": "TOTAI", "confidence": 0.8, "tokens": 6, "box": [11.0, 41.0, 109.0, 60.0]},
               {"text": "2 x 4.00", "confidence": 0.95, "tokens": 9, "box": [9.0, 10.0, 111.0, 31.0]}],
        "cjk": [False, False], "doubts": [doubt, doubt], "contrasts": [contrast, contrast], "served": [served] * 2,
    }


def test_order_free_counts_multiset_edits():
    assert order_free("ab c", "cba") == 0
    assert order_free("abd", "abc") == 1 and order_free("", "abc") == 3


def test_lines_pair_by_box_and_pages_score_per_tower():
    d = _doc()
    assert line_pairs(d) == [(0, 1), (1, 0)]
    n = len("2x4.00TOTAL")
    assert page_cer(d, False) == (1, n)  # the Latin tower's chi
    assert page_cer(d, True) == (1, n)  # the PP tower's I for L
    assert page_cer(d, [True, False]) == (0, n)  # each line on the tower that reads it right
    choices = line_choices(d)
    assert choices["oracle"] == [True, False]
    assert choices["disagree_pp"] == [True, True]
    assert choices["disagree_conf"] == [True, False]  # the higher confidence where they differ


def test_rule_routes_is_the_scan_rule():
    assert rule_routes(_doc(200.0, 0.05), 250.0, 0.03)
    assert not rule_routes(_doc(255.0, 0.05), 250.0, 0.03)  # black print
    assert not rule_routes(_doc(200.0, 0.01), 250.0, 0.03)  # read without doubt
    assert rule_routes(_doc(255.0, 0.0, served=True), 250.0, 0.03)  # already served on the PP tower
