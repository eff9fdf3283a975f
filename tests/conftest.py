"""Shared pytest set-up: single-threaded torch (2-core CI machines) and session-wide checkpoints.

Tiers (DESIGN.md): unit (no servers, no model), integration (in-process services with the tiny
checkpoint), system (real processes on loopback; marked ``slow``). All tiers run in CI.
"""

from __future__ import annotations

import os
import pathlib
import socket
from collections.abc import Iterator

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest
import torch

torch.set_num_threads(1)

REPO = pathlib.Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"

#: The services' default ports: gateway REST 8080 and gRPC 50050 (gateway/config.py), encoder 50051,
#: decoder 50052 (their config.py), and the metrics ports of k8s/ (9464, 9465).
DEFAULT_PORTS = (8080, 50050, 50051, 50052, 9464, 9465)


@pytest.fixture(scope="session", autouse=True)
def default_ports_held() -> Iterator[dict[int, socket.socket]]:
    """Listen on every default port that is free on 127.0.0.1 for the whole session, so that each
    test proves it does not depend on them (every test picks free ports; a developer's own
    ``inkstream up`` on 8080 must not break the suite). Yields {port: listening socket} of the ports
    held here (those already taken by another process are left alone: they are taken anyway)."""
    held: dict[int, socket.socket] = {}
    for port in DEFAULT_PORTS:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind(("127.0.0.1", port))
            s.listen()
        except OSError:
            s.close()
            continue
        held[port] = s
    try:
        yield held
    finally:
        for s in held.values():
            s.close()


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
    """The committed, trained compact checkpoint that is the embedded default model (bilingual)."""
    from models.compact import default_checkpoint_dir

    path = default_checkpoint_dir()
    if not (path / "config.json").is_file():
        pytest.fail(f"embedded default model missing: {path}/config.json")
    return path
