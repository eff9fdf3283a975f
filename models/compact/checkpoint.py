"""Hugging Face-layout checkpoint of the compact family, read-only: config, tensors by prefix (so that
each half materialises only its own tensors) and identity. It imports no stage of the family; the
writer is :mod:`models.compact.export.writer`.

Layout of a checkpoint directory::

    config.json         {"inkstream_family": "compact", "model_type": "inkstream_compact",
                         "encoder": {...EncoderConfig...}, "decoder": {...DeepseekV2Config...},
                         "revision": str, "training": {...}}
    model.safetensors   encoder tensors "encoder.*", decoder tensors "decoder.*" (fp32 or fp16)
    tokenizer.json      character-level ``tokenizers`` tokenizer (models/compact/vocab.py)
    generation_config.json  bos/eos/pad ids, max_new_tokens
    encoder.onnx        the Latin line encoder exported for onnxruntime (:mod:`models.compact.export.line_onnx`),
                        stamped with the checkpoint's revision; the encoder service then runs without torch
    pp_tokens.onnx      (bilingual checkpoints) the PP tower's compressor, with the recogniser's head
                        and the copy classes, for onnxruntime (:mod:`models.compact.export.pp_onnx`), stamped too

The training-only CTC head is not exported.
"""

from __future__ import annotations

import hashlib
import json
import pathlib
from typing import TYPE_CHECKING

from safetensors import safe_open

from inkstream.errors import InvalidInput

if TYPE_CHECKING:  # torch is imported by the functions that need it: reading configs must not load it
    import torch

ENCODER_PREFIX = "encoder."
DECODER_PREFIX = "decoder."
WEIGHTS = "model.safetensors"


def read_config(checkpoint_dir: str | pathlib.Path) -> dict:
    """config.json of a compact checkpoint; raises InvalidInput if missing or of another family."""
    path = pathlib.Path(checkpoint_dir) / "config.json"
    if not path.is_file():
        raise InvalidInput(f"{checkpoint_dir}: not a checkpoint directory (no config.json)")
    cfg = json.loads(path.read_text())
    if cfg.get("inkstream_family") != "compact":
        raise InvalidInput(f"{checkpoint_dir}: not a compact checkpoint "
                           f"(inkstream_family={cfg.get('inkstream_family')!r})")
    if not (pathlib.Path(checkpoint_dir) / WEIGHTS).is_file():
        raise InvalidInput(f"{checkpoint_dir}: {WEIGHTS} missing")
    return cfg


def load_prefixed(checkpoint_dir: str | pathlib.Path, prefix: str) -> tuple[dict[str, torch.Tensor], set[str]]:
    """Read only the tensors whose name starts with ``prefix`` (safetensors reads lazily per tensor).
    Returns (state dict with the prefix stripped, set of full checkpoint tensor names read).
    """
    state, names = {}, set()
    with safe_open(str(pathlib.Path(checkpoint_dir) / WEIGHTS), framework="pt", device="cpu") as f:
        for name in f.keys():
            if name.startswith(prefix):
                state[name[len(prefix):]] = f.get_tensor(name)
                names.add(name)
    if not state:
        raise InvalidInput(f"{checkpoint_dir}: no tensors with prefix {prefix!r} in {WEIGHTS}")
    return state, names


def tensor_names(checkpoint_dir: str | pathlib.Path, prefix: str) -> set[str]:
    """Names of the tensors of model.safetensors that start with ``prefix``, read from its header
    only (no tensor is loaded, no torch needed).
    """
    with safe_open(str(pathlib.Path(checkpoint_dir) / WEIGHTS), framework="numpy") as f:
        return {name for name in f.keys() if name.startswith(prefix)}


def checkpoint_identity(checkpoint_dir: str | pathlib.Path) -> tuple[str, str]:
    """(model_id, revision): ``"inkstream-compact"`` and the first 12 hex digits of sha256 over
    config.json + model.safetensors (the whole files: the checkpoint is a few MB).
    """
    root = pathlib.Path(checkpoint_dir)
    digest = hashlib.sha256((root / "config.json").read_bytes())
    digest.update((root / WEIGHTS).read_bytes())
    return "inkstream-compact", digest.hexdigest()[:12]


PP_TOWER_PREFIX = "pp_tower."
SCRIPT_PREFIX = "script_head."
READ_PREFIX = "read_head."  # the Latin tower's CTC head, the doubt routing signal (models/compact/line/doubt.py)
SPACING_PREFIX = "spacing."  # the PP tower's spacing head (models/compact/decode/spacing.py)
COPY_PREFIX = "copy."  # the pointer-generator output of a bilingual decoder (models/compact/decode/copy_head.py)
