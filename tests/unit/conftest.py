"""Fixtures shared by the unit tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def halves():
    """(CompactEncoderHalf, CompactDecoderHalf) of the embedded default checkpoint
    (:func:`models.compact.default_checkpoint_dir`), loaded once per test module. A module that
    reads another checkpoint defines its own ``halves``.
    """
    from models.compact import default_checkpoint_dir
    from models.compact.decoder_half import CompactDecoderHalf
    from models.compact.encoder_half import CompactEncoderHalf

    d = default_checkpoint_dir()
    return CompactEncoderHalf.load(d), CompactDecoderHalf.load(d)
