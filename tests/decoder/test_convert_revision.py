"""The decoder refuses vision tokens made by other weights (DecodeRequest.vision_revision)."""

import pytest

from decoder_service.convert import check_vision_revision
from inkstream.errors import Unavailable


def test_matching_or_unset_revisions_pass():
    check_vision_revision("abc123", "abc123")
    check_vision_revision("", "abc123")  # an older gateway sends none
    check_vision_revision("abc123", "")


def test_other_weights_are_refused_as_unavailable():
    with pytest.raises(Unavailable, match="revision abc123.*serves revision def456"):
        check_vision_revision("abc123", "def456")
