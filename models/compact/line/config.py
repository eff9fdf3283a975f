"""The Latin line encoder's hyper-parameters (config.json ``"encoder"``), without torch: the encoder
service of a checkpoint with current ONNX files reads them and never imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class EncoderConfig:
    """Line encoder hyper-parameters (stored under ``"encoder"`` in config.json)."""

    stem_width: int = 8
    channels: tuple[int, int] = (32, 64)
    layers: tuple[int, int] = (1, 2)
    compressor_channels: int = 192
    line_height: int = 32
    tokens_stride_px: int = 16


def encoder_config(cfg: dict) -> EncoderConfig:
    """The Latin tower's :class:`EncoderConfig` from a config.json dict (lists become tuples)."""
    fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in cfg["encoder"].items()}
    return EncoderConfig(**fields)
