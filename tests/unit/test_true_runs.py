"""models/compact/runs.true_runs: the one run finder behind the ink-profile cuts (rows, rules, gaps)."""

from __future__ import annotations

import numpy as np

from models.compact.line.runs import true_runs
from models.compact.line.split import _blank_runs


def test_runs_of_true_with_exclusive_ends():
    assert true_runs(np.array([1, 1, 0, 1, 0, 0, 1], dtype=bool)) == [(0, 2), (3, 4), (6, 7)]
    assert true_runs(np.zeros(0, dtype=bool)) == [] and true_runs(np.zeros(5, dtype=bool)) == []
    assert true_runs(np.array([0, 3, 3, 0])) == [(1, 3)]  # any dtype, read as bool


def test_blank_column_runs_within_a_window_match_a_column_by_column_scan():
    rng = np.random.default_rng(0)
    for _ in range(200):
        ink = rng.random(int(rng.integers(0, 40))) < 0.4
        lo, hi = sorted(int(v) for v in rng.integers(0, len(ink) + 1, size=2))
        want, start = [], None
        for x in range(lo, hi + 1):  # the scan _blank_runs did before it used true_runs
            blank = x < hi and not ink[x]
            if blank and start is None:
                start = x
            elif not blank and start is not None:
                want.append((start, x))
                start = None
        assert _blank_runs(ink, lo, hi) == want
