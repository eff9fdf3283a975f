"""Fixtures of the encoder service tests (doubles live in :mod:`tests.encoder.doubles`)."""

from __future__ import annotations

import pytest
import torch

from tests.encoder.doubles import PatchHalf

torch.set_num_threads(1)


@pytest.fixture
def patch_half() -> PatchHalf:
    """A fresh seeded PatchHalf (seed 0) per test."""
    return PatchHalf(seed=0)
