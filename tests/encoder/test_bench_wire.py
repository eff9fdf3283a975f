"""Smoke test of bench/wire.py's wire measurement (real loopback gRPC, 2 pages, no tower timing)."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

pytestmark = pytest.mark.integration
BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench" / "wire.py"


def test_bench_wire_runs_and_reports(capsys):
    spec = importlib.util.spec_from_file_location("bench_wire", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--pages", "2", "--no-compute"]) == 0
    out = capsys.readouterr().out
    assert "bfloat16: 2.87 MB/page" in out and "float32 : 5.73 MB/page" in out
    assert out.strip().splitlines()[-1] == "wire_share: n/a"
