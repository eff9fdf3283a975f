"""Tensor <-> ``inkstream.common.v1.Tensor`` conversion and boundary shape checks.

Wire format: raw little-endian row-major bytes, dtype from the DType enum (float32 = 4 bytes,
float16 / bfloat16 = 2 bytes per element). bfloat16 travels as its own 2-byte pattern (no widening).
This module converts torch tensors; :mod:`inkstream.wire_np` is the torch-free side (dtype names,
numpy arrays, item errors) that an encoder process without torch uses.
"""

from __future__ import annotations

import sys

import torch

from inkstream.errors import InvalidInput
from inkstream.pb import tensor_pb2
from inkstream.wire_np import item_error, wire_dtype_name

__all__ = ["DTYPE_NAMES", "DTYPE_TO_WIRE", "WIRE_TO_DTYPE", "dtype_from_name", "from_wire", "item_error",
           "to_wire", "wire_dtype_name", "wire_nbytes"]

DTYPE_TO_WIRE: dict[torch.dtype, int] = {
    torch.float32: tensor_pb2.DTYPE_FLOAT32,
    torch.float16: tensor_pb2.DTYPE_FLOAT16,
    torch.bfloat16: tensor_pb2.DTYPE_BFLOAT16,
}
WIRE_TO_DTYPE: dict[int, torch.dtype] = {v: k for k, v in DTYPE_TO_WIRE.items()}
DTYPE_NAMES: dict[str, torch.dtype] = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def dtype_from_name(name: str) -> torch.dtype:
    """``"bfloat16"`` -> ``torch.bfloat16``; raises InvalidInput naming the accepted names."""
    try:
        return DTYPE_NAMES[name]
    except KeyError:
        raise InvalidInput(f"unknown dtype {name!r}; expected one of {sorted(DTYPE_NAMES)}") from None


def to_wire(t: torch.Tensor, dtype: torch.dtype | None = None) -> tensor_pb2.Tensor:
    """Serialise a tensor (any device) as ``dtype`` (default: its own) into a wire Tensor.

    Raises InvalidInput for a dtype outside float32/float16/bfloat16.
    """
    dtype = dtype or t.dtype
    if dtype not in DTYPE_TO_WIRE:
        raise InvalidInput(f"cannot send dtype {dtype}; expected float32, float16 or bfloat16")
    c = t.detach().to(device="cpu", dtype=dtype).contiguous()
    # bfloat16 has no numpy dtype: view its bits as int16 to get the raw bytes.
    raw = c.view(torch.int16) if dtype == torch.bfloat16 else c
    arr = raw.numpy()
    if sys.byteorder != "little":  # pragma: no cover - all supported hosts are little-endian
        arr = arr.byteswap()
    return tensor_pb2.Tensor(shape=list(c.shape), dtype=DTYPE_TO_WIRE[dtype], data=arr.tobytes())


def from_wire(
    msg: tensor_pb2.Tensor,
    *,
    expect_last_dim: int | None = None,
    max_rows: int | None = None,
    accepted: tuple[torch.dtype, ...] = tuple(DTYPE_TO_WIRE),
    name: str = "vision_tokens",
) -> torch.Tensor:
    """Parse a wire Tensor into a CPU tensor of its wire dtype, checking it at the boundary.

    With ``expect_last_dim`` the tensor must be 2-D ``[n_tokens, expect_last_dim]`` with
    ``1 <= n_tokens <= max_rows``. Raises InvalidInput with the expected shape / dtype in the message.
    """
    dtype = WIRE_TO_DTYPE.get(msg.dtype)
    if dtype is None or dtype not in accepted:
        names = ", ".join(str(d).removeprefix("torch.") for d in accepted)
        raise InvalidInput(f"{name}: dtype {wire_dtype_name(msg.dtype)} not accepted; expected one of {names}")
    shape = tuple(int(s) for s in msg.shape)
    hidden = "hidden" if expect_last_dim is None else str(expect_last_dim)
    if expect_last_dim is not None:
        if len(shape) != 2 or shape[1] != expect_last_dim or shape[0] < 1:
            raise InvalidInput(f"{name}: got shape {list(shape)}; expected [n_tokens, {hidden}] with n_tokens >= 1")
        if max_rows is not None and shape[0] > max_rows:
            raise InvalidInput(f"{name}: {shape[0]} tokens is too many; expected [n_tokens <= {max_rows}, {hidden}]")
    if any(s < 0 for s in shape):
        raise InvalidInput(f"{name}: negative dimension in shape {list(shape)}")
    itemsize = torch.empty((), dtype=dtype).element_size()
    n = 1
    for s in shape:
        n *= s
    if len(msg.data) != n * itemsize:
        raise InvalidInput(
            f"{name}: {len(msg.data)} bytes do not match shape {list(shape)} x {itemsize} bytes "
            f"({n * itemsize} bytes expected)"
        )
    if n == 0:
        return torch.empty(shape, dtype=dtype)
    if dtype == torch.bfloat16:
        t = torch.frombuffer(bytearray(msg.data), dtype=torch.int16).view(torch.bfloat16)
    else:
        t = torch.frombuffer(bytearray(msg.data), dtype=dtype)
    return t.reshape(shape)


def wire_nbytes(n_tokens: int, hidden: int, dtype: torch.dtype) -> int:
    """Payload bytes of an ``[n_tokens, hidden]`` tensor at ``dtype``."""
    return n_tokens * hidden * torch.empty((), dtype=dtype).element_size()
