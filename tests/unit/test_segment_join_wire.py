"""The encoder's piece marks (SegmentTokens.join), quarter turns and towers reach the gateway's segments over
the wire."""

from __future__ import annotations

import torch

from encoder_service.convert import encode_response
from gateway.clients.encoder import encoded_from_pb
from inkstream.pb import encoder_pb2
from models.base import EncodedPage, SegmentTokens


def test_joins_and_revision_survive_the_encode_response():
    segs = [SegmentTokens(torch.zeros(3, 4), (0, 0, 10, 5)),
            SegmentTokens(torch.zeros(2, 4), (10, 0, 20, 5), join="space"),
            SegmentTokens(torch.zeros(2, 4), (20, 0, 25, 5), join="direct")]
    resp = encode_response(0, EncodedPage(segments=segs, width=30, height=10), wire_dtype="float32",
                           model_id="m", seconds=0.1, revision="abc123")
    wire = encoder_pb2.EncodeResponse.FromString(resp.SerializeToString())
    got = encoded_from_pb(wire)
    assert [s.join for s in got.segments] == ["line", "space", "direct"]
    assert got.revision == "abc123"


def test_a_segments_quarter_turn_survives_the_encode_response():
    segs = [SegmentTokens(torch.zeros(3, 4), (0, 0, 5, 30), rotation=90),
            SegmentTokens(torch.zeros(3, 4), (5, 0, 10, 30))]
    resp = encode_response(0, EncodedPage(segments=segs, width=10, height=30), wire_dtype="float32",
                           model_id="m", seconds=0.1)
    got = encoded_from_pb(encoder_pb2.EncodeResponse.FromString(resp.SerializeToString()))
    assert [s.rotation for s in got.segments] == [90, 0]


def test_the_tower_that_read_a_segment_survives_the_encode_response():
    # issue #38: the gateway calibrates each tower's confidence on its own, so it must know the tower
    segs = [SegmentTokens(torch.zeros(3, 4), (0, 0, 10, 5), tower="latin"),
            SegmentTokens(torch.zeros(2, 4), (0, 5, 10, 10), tower="pp"),
            SegmentTokens(torch.zeros(2, 4), (0, 10, 10, 15))]  # a family with one tower says none
    resp = encode_response(0, EncodedPage(segments=segs, width=10, height=15), wire_dtype="float32",
                           model_id="m", seconds=0.1)
    got = encoded_from_pb(encoder_pb2.EncodeResponse.FromString(resp.SerializeToString()))
    assert [s.tower for s in got.segments] == ["latin", "pp", ""]
