"""The decoder refuses vision tokens made by other weights (DecodeRequest.vision_revision)."""

import pytest

from decoder_service.convert import check_vision_revision
from inkstream.errors import Unavailable, WeightsMismatch
from inkstream.revision import known_different


def test_matching_or_unset_revisions_pass():
    check_vision_revision("abc123", "abc123")
    check_vision_revision("", "abc123")  # an older gateway sends none
    check_vision_revision("abc123", "")


def test_other_weights_are_refused_as_unavailable():
    with pytest.raises(Unavailable, match="revision abc123.*serves revision def456"):
        check_vision_revision("abc123", "def456")


def test_refusal_carries_its_reason_and_other_fingerprint_schemes_pass():
    with pytest.raises(WeightsMismatch) as err:
        check_vision_revision("fp2-abc123", "fp2-def456")
    assert err.value.reason == "WEIGHTS_MISMATCH"
    # The same weights fingerprinted by older code (untagged) cannot be told apart: not refused.
    check_vision_revision("fp2-abc123", "0123456789ab")
    assert not known_different("fp2-abc", "1a2b3c") and known_different("fp2-abc", "fp2-abd")
    assert not known_different("", "fp2-abc")
