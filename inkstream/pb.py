"""Import point for the generated protobuf / gRPC modules.

Usage: ``from inkstream.pb import encoder_pb2, encoder_pb2_grpc``. Stubs are generated from
``protos/`` on first import when missing or stale (see :mod:`inkstream._protogen`).
"""

from __future__ import annotations

from inkstream import _protogen

if _protogen.PROTO_ROOT.exists():
    _protogen.generate()

from inkstream.common.v1 import tensor_pb2
from inkstream.decoder.v1 import decoder_pb2, decoder_pb2_grpc
from inkstream.encoder.v1 import encoder_pb2, encoder_pb2_grpc
from inkstream.gateway.v1 import gateway_pb2, gateway_pb2_grpc

__all__ = [
    "tensor_pb2",
    "encoder_pb2",
    "encoder_pb2_grpc",
    "decoder_pb2",
    "decoder_pb2_grpc",
    "gateway_pb2",
    "gateway_pb2_grpc",
]
