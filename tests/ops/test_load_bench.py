"""Unit tests of bench/load.py's figures, loopback guard and plot (the load run itself is a benchmark)."""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("bench_load", REPO / "bench" / "load.py")
assert _spec is not None and _spec.loader is not None
load = importlib.util.module_from_spec(_spec)
sys.modules["bench_load"] = load  # dataclasses resolve their module by name
_spec.loader.exec_module(load)


def test_percentiles_nearest_rank():
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert load.percentile(values, 50) == 50 and load.percentile(values, 95) == 95
    assert load.percentile(values, 99) == 99 and load.percentile(values, 100) == 100
    assert load.percentile([3.0], 99) == 3.0 and load.percentile([], 50) is None


def test_summary_counts_and_unexpected_5xx():
    out = load.Outcome
    outcomes = [out(0, 1.0, 200, pages=1), out(0.5, 2.0, 200, pages=1), out(1, 0.1, 429, retry_after=True),
                out(1, 0.1, 503, retry_after=True), out(2, 0.2, 503), out(2, 0.3, 500),
                out(3, 30.0, 0, error="ReadTimeout")]
    s = load.summarize(outcomes, wall_s=10.0, rss={"gateway": [(0, 100.0), (1, 120.0), (2, 110.0)]})
    assert s["requests"] == 7
    assert s["by_status"] == {"200": 2, "429": 1, "500": 1, "503": 2}
    assert s["client_errors"] == {"ReadTimeout": 1}
    assert s["unexpected_5xx"] == 2  # the 500 and the 503 without a retry hint
    assert s["latency_s"]["p50"] == 1.0 and s["latency_s"]["max"] == 2.0
    assert s["throughput"] == {"requests_per_s": 0.2, "pages_per_s": 0.2}
    assert s["rss_mib"] == {"gateway": {"first": 100.0, "last": 110.0, "max": 120.0}}


def test_only_loopback_targets():
    load.ensure_loopback("http://127.0.0.1:8080")
    load.ensure_loopback("http://[::1]:8080")
    for url in ("http://10.0.0.7:8080", "http://192.168.1.2", "http://8.8.8.8"):
        with pytest.raises(SystemExit, match="not a loopback"):
            load.ensure_loopback(url)


def test_rss_of_this_process_and_plot(tmp_path):
    import os

    mib = load.RssSampler.rss_mib(os.getpid())
    assert mib is not None and 10 < mib < 100_000
    outcomes = [load.Outcome(float(i), 0.5 + i / 10, 200 if i % 3 else 429) for i in range(10)]
    path = tmp_path / "rss.png"
    load.plot_rss({"gateway": [(0.0, 100.0), (1.0, 105.0)], "encoder": [(0.0, 300.0), (1.0, 310.0)]}, outcomes, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000


def test_argument_bounds():
    with pytest.raises(SystemExit):
        load.main(["--duration", "0"])
    with pytest.raises(SystemExit):
        load.main(["--clients", "0"])
