"""The encoder's declaration of its vision tokens' extra columns, as the gateway reads and checks it."""

from __future__ import annotations

import pytest

from gateway.clients.encoder import encoder_info_from_pb
from gateway.types import TokenColumnsInfo
from inkstream.errors import InternalError
from inkstream.pb import encoder_pb2


def _info(hidden: int, features: int, *runs: tuple[str, int, str]) -> encoder_pb2.InfoResponse:
    return encoder_pb2.InfoResponse(
        model_id="compact/test", hidden_size=hidden, feature_columns=features, default_mode="lines",
        modes=[encoder_pb2.ModeInfo(name="lines", page_long_side_px=2200)],
        extra_columns=[encoder_pb2.TokenColumns(name=n, count=c, unit=u) for n, c, u in runs])


def test_declared_columns_are_read():
    info = encoder_info_from_pb(_info(142, 128, ("copy_class_id_high", 4, "integer"),
                                      ("copy_class_id_low", 4, "integer"),
                                      ("copy_class_probability", 4, "probability"),
                                      ("spacing_probability", 2, "probability")))
    assert (info.hidden_size, info.feature_columns) == (142, 128)
    assert info.extra_columns[0] == TokenColumnsInfo("copy_class_id_high", 4, "integer")
    assert sum(c.count for c in info.extra_columns) == 14


def test_an_encoder_that_declares_nothing_has_only_features():
    info = encoder_info_from_pb(_info(1280, 0))
    assert (info.feature_columns, info.extra_columns) == (1280, ())


@pytest.mark.parametrize("features, runs", [(128, [("copy_class_probability", 4, "probability")]),
                                            (142, [("copy_class_probability", 4, "probability")]),
                                            (142, [("copy_class_probability", 0, "probability")])])
def test_columns_that_do_not_add_up_are_refused(features, runs):
    with pytest.raises(InternalError, match="142 wide"):
        encoder_info_from_pb(_info(142, features, *runs))


def test_the_encoders_pixel_limit_is_read():
    msg = _info(1280, 0)
    assert encoder_info_from_pb(msg).max_image_pixels == 0  # not said: an older encoder
    msg.max_image_pixels = 40_000_000
    assert encoder_info_from_pb(msg).max_image_pixels == 40_000_000
