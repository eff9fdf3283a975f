"""bench/gpu_realdims.py: ``--tiny`` runs every phase on CPU and prints sane figures; without a GPU
the real-dims run refuses with a clear message.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import subprocess
import sys

import pytest
import torch

REPO = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "gpu_realdims.py"


def _run(*args: str, timeout: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.slow
def test_tiny_run_prints_sane_figures():
    p = _run("--tiny", "--pages-per-day", "5000000", timeout=240)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    out = p.stdout
    for c in (1, 8, 32):
        assert f"in-process c={c}:" in out and f"grpc c={c}:" in out
    assert "generate (transformers, one page at a time):" in out and "sizing:" in out
    r = json.loads(out.splitlines()[-1].removeprefix("RESULT "))
    assert r["copy_bandwidth_Bps"] > 1e8
    assert r["generate"]["tokens_per_page"] == r["max_new_tokens"] == 8
    for path in ("inprocess", "grpc"):
        for c in ("1", "8", "32"):
            m = r[path][c]
            # EOS can never win (no_eos): every page decodes to its bound, the same work on every path
            assert m["tokens_per_page"] == 8 and m["pages"] >= int(c)
            assert 0 < m["pages_per_s"] < 1e4
            assert m["tpot_s"] > r["bound_tpot_s"][c] > 0  # nothing decodes faster than it can read the weights
    best = r[r["best_path"].replace("-", "")][str(r["best_concurrency"])]["pages_per_s"]
    assert r["pages_per_gpu_hour"] == pytest.approx(best * 3600)
    assert r["gpus_needed"] == max(1, math.ceil(5e6 * 1.5 / (best * 86400)))
    assert r["ratio_vs_generate"] == pytest.approx(best / r["generate"]["pages_per_s"])
    assert r["wall_s"] < 120


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown where no GPU is")
def test_without_gpu_real_dims_refuses_clearly():
    p = _run(timeout=120)
    assert p.returncode == 2
    assert "no CUDA GPU" in p.stderr and "--tiny" in p.stderr
