"""The encoder half's vision towers loaded from a checkpoint: on onnxruntime alone when the
checkpoint's ONNX files are current (:mod:`models.compact.line.onnx_runtime`), else the torch modules.
"""

from __future__ import annotations

import pathlib
from dataclasses import dataclass
from typing import Any

from models.compact import checkpoint as ckpt
from models.compact.line.config import encoder_config
from models.compact.line.onnx_runtime import OnnxLineEncoder


@dataclass
class Towers:
    """The Latin line runner (``runner``: lines [N, 1, 32, W] -> tokens), the bilingual PP tower
    (``pp``, :class:`models.compact.line.towers.PPTower`; None for a Latin checkpoint), the checkpoint
    tensor names they read (``loaded``), the vision-token width (``width``: hidden plus a copy
    checkpoint's copy columns), and where they run (``device``, ``dtype``: "cpu" / "float32" for ONNX).
    """

    runner: Any
    pp: Any
    loaded: set[str]
    width: int
    device: Any = "cpu"
    dtype: Any = "float32"


def open_onnx_towers(checkpoint_dir: str | pathlib.Path, cfg: dict, threads: int, revision: str,
                     hidden: int) -> Towers | None:
    """The towers on onnxruntime (``threads`` intra-op threads), or None when an ONNX file they need
    is missing or was exported from other weights (``revision``: the checkpoint's).
    """
    runner = OnnxLineEncoder.open(checkpoint_dir, threads, revision)
    if runner is None:
        return None
    loaded, pp = ckpt.tensor_names(checkpoint_dir, ckpt.ENCODER_PREFIX), None
    if "pp_tower" in cfg:
        from models.compact.line.towers import PPTower

        pp = PPTower.open_onnx(checkpoint_dir, cfg, runner, threads, revision)
        if pp is None:
            return None
        loaded |= pp.loaded
    width = hidden + (pp.copy_width if pp else 0)  # a copy checkpoint's tokens carry copy classes
    return Towers(runner, pp, loaded, width)


def load_torch_towers(checkpoint_dir: str | pathlib.Path, cfg: dict, device: str, dtype: Any, threads: int,
                      hidden: int) -> Towers:
    """The towers as torch modules on ``device`` in ``dtype`` (a torch dtype or its name, e.g.
    "float32"). Raises what :func:`models.compact.checkpoint.load_prefixed` raises for a bad checkpoint.
    """
    import torch

    from inkstream.wire import dtype_from_name
    from models.compact.line.encoder import LineEncoder, TorchLineRunner
    from models.compact.line.towers import PPTower

    tdtype = dtype_from_name(dtype) if isinstance(dtype, str) else dtype
    state, loaded = ckpt.load_prefixed(checkpoint_dir, ckpt.ENCODER_PREFIX)
    enc = LineEncoder(encoder_config(cfg), hidden)
    enc.load_state_dict({k: v.float() for k, v in state.items()}, strict=True)
    enc = enc.to(device=device, dtype=tdtype).eval()
    pp = PPTower.load(checkpoint_dir, cfg, hidden, enc, threads, tdtype) if "pp_tower" in cfg else None
    width = hidden + (pp.copy_width if pp else 0)  # a copy checkpoint's tokens carry copy classes
    return Towers(TorchLineRunner(enc, torch.device(device), tdtype), pp, loaded | (pp.loaded if pp else set()),
                  width, torch.device(device), tdtype)
