"""Decoder inputs a hostile or careless gRPC client sent to a running decoder that came back wrong.

- ``vision_tokens.dtype = 99`` (outside the DType enum; proto3 keeps unknown enum values) made
  ``wire_dtype_name`` raise ValueError while building the error message -> INTERNAL instead of
  INVALID_ARGUMENT.
- ``temperature = inf`` was accepted (every token equally likely: noise instead of text).
- ``max_new_tokens = -3`` was silently treated as "server default" (only 0 means default).
"""

from __future__ import annotations

import math

import pytest
import torch

from decoder_service.config import DecoderConfig
from decoder_service.convert import sampling_from_pb, vision_tokens_from_pb
from decoder_service.sampling import SamplingParams
from inkstream.errors import InvalidInput
from inkstream.pb import decoder_pb2, tensor_pb2
from inkstream.wire import wire_dtype_name

pytestmark = pytest.mark.timeout(30)


def test_unknown_wire_dtype_is_invalid_argument_not_internal():
    data = torch.zeros(4, 8).numpy().tobytes()
    msg = tensor_pb2.Tensor(shape=[4, 8], dtype=99, data=data)
    with pytest.raises(InvalidInput, match="DType 99"):
        vision_tokens_from_pb(msg, hidden=8, max_vision_tokens=16)
    assert wire_dtype_name(99) == "DType 99"
    assert wire_dtype_name(tensor_pb2.DTYPE_UNSPECIFIED) == "DTYPE_UNSPECIFIED"
    assert wire_dtype_name(tensor_pb2.DTYPE_BFLOAT16) == "bfloat16"


@pytest.mark.parametrize("temperature", [math.inf, -math.inf, math.nan, -1.0])
def test_non_finite_or_negative_temperature_is_rejected(temperature):
    with pytest.raises(InvalidInput, match="temperature"):
        SamplingParams(max_new_tokens=4, temperature=temperature)


def test_finite_temperature_still_accepted():
    assert SamplingParams(max_new_tokens=4, temperature=0.7).temperature == pytest.approx(0.7)
    assert SamplingParams(max_new_tokens=4).greedy


def test_negative_max_new_tokens_is_rejected_zero_is_default():
    cfg = DecoderConfig()
    with pytest.raises(InvalidInput, match="max_new_tokens"):
        sampling_from_pb(decoder_pb2.SamplingParams(max_new_tokens=-3), cfg)
    assert sampling_from_pb(decoder_pb2.SamplingParams(), cfg).max_new_tokens == cfg.max_new_tokens
    huge = sampling_from_pb(decoder_pb2.SamplingParams(max_new_tokens=2**31 - 1), cfg)
    assert huge.max_new_tokens == cfg.max_new_tokens_cap
