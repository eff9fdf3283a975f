"""Shared pytest set-up: single-threaded torch (2-core CI machines) and session-wide checkpoints.

Tiers (DESIGN.md): unit (no servers, no model), integration (in-process services with the tiny
checkpoint), system (real processes on loopback; marked ``slow``). All tiers run in CI.
"""

from __future__ import annotations

import os
import pathlib

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)

REPO = pathlib.Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> pathlib.Path:
    """``../shared`` beside the repository (eval documents, bad inputs); skips when absent."""
    if not SHARED.is_dir():
        pytest.skip("../shared is not present beside the repository")
    return SHARED


@pytest.fixture(scope="session")
def tiny_ds_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A tiny random deepseek_ocr2 checkpoint written by the project's own script (seed 0)."""
    from models.deepseek_ocr2.tiny import write_tiny_checkpoint

    return write_tiny_checkpoint(tmp_path_factory.mktemp("tiny_deepseek_ocr2"), seed=0)


@pytest.fixture(scope="session")
def compact_checkpoint() -> pathlib.Path:
    """The committed, trained compact checkpoint (the embedded default model)."""
    path = REPO / "models" / "compact" / "weights"
    if not (path / "config.json").is_file():
        pytest.fail(f"embedded default model missing: {path}/config.json")
    return path
