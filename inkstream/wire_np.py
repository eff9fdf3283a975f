"""The torch-free side of the wire format: dtype names and numpy arrays -> ``inkstream.common.v1.Tensor``.

The wire format itself is described in :mod:`inkstream.wire` (raw little-endian row-major bytes;
float32 = 4 bytes, float16 / bfloat16 = 2 bytes per element). An encoder half that runs without
torch (the compact family's line encoder on onnxruntime) hands numpy float32 arrays to its service,
which must not import torch only to serialise them: numpy has no bfloat16, so
`ml_dtypes <https://github.com/jax-ml/ml_dtypes>`_ (the bfloat16 numpy dtype of JAX and ONNX)
rounds float32 to bfloat16 to nearest-even, as ``torch.Tensor.to(torch.bfloat16)`` does, so both
paths put the same bytes on the wire.
"""

from __future__ import annotations

import sys
from typing import Any

import ml_dtypes
import numpy as np

from inkstream.errors import InkstreamError, InvalidInput
from inkstream.pb import tensor_pb2

#: dtype name -> the wire's DType enum value.
NAME_TO_WIRE: dict[str, int] = {
    "float32": tensor_pb2.DTYPE_FLOAT32,
    "float16": tensor_pb2.DTYPE_FLOAT16,
    "bfloat16": tensor_pb2.DTYPE_BFLOAT16,
}
WIRE_TO_NAME: dict[int, str] = {v: k for k, v in NAME_TO_WIRE.items()}
_NUMPY: dict[str, Any] = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


def check_dtype_name(name: str) -> str:
    """``name`` if it is a wire dtype name; raises InvalidInput naming the accepted names."""
    if name not in NAME_TO_WIRE:
        raise InvalidInput(f"unknown dtype {name!r}; expected one of {sorted(NAME_TO_WIRE)}")
    return name


def wire_dtype_name(value: int) -> str:
    """DType enum value -> "float32" / "float16" / "bfloat16" / "DTYPE_UNSPECIFIED"; a value outside
    the enum (a newer or hostile peer: proto3 keeps unknown enum values) -> "DType 99".
    """
    name = WIRE_TO_NAME.get(value)
    if name is not None:
        return name
    try:
        return tensor_pb2.DType.Name(value)
    except ValueError:
        return f"DType {value}"


def as_float32_array(t: Any) -> np.ndarray:
    """Vision tokens as a CPU numpy float32 array: a numpy array as it is (cast if needed), a torch
    tensor of any dtype / device through ``.float().cpu().numpy()`` (torch is then loaded already).
    """
    if isinstance(t, np.ndarray):
        return t if t.dtype == np.float32 else t.astype(np.float32)
    return np.asarray(t.detach().float().cpu().numpy())


def array_to_wire(a: np.ndarray, dtype: str) -> tensor_pb2.Tensor:
    """Serialise a numpy array (float32, float16 or bfloat16) as the wire dtype named ``dtype``.

    Raises InvalidInput for a dtype name outside float32/float16/bfloat16.
    """
    c = np.ascontiguousarray(a.astype(_NUMPY[check_dtype_name(dtype)], copy=False))
    if sys.byteorder != "little":  # pragma: no cover - all supported hosts are little-endian
        c = c.byteswap()
    return tensor_pb2.Tensor(shape=list(c.shape), dtype=NAME_TO_WIRE[dtype], data=c.tobytes())


def item_error(exc: InkstreamError) -> tensor_pb2.ItemError:
    """The per-item error message for ``exc``: code name, message, its retry hint in seconds
    (``retry_after_s``, 0 when it has none) and its ``reason`` ("" when it has none).
    """
    return tensor_pb2.ItemError(code=exc.code_name, message=exc.message, retry_after_s=float(exc.retry_after_s or 0.0),
                                reason=exc.reason)
