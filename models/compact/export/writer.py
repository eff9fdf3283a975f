"""Writing a compact checkpoint directory (the layout is in :mod:`models.compact.checkpoint`): export
from training, the bilingual checkpoint's ``pp_tower`` config entry, and the training model loaded back
from a checkpoint for further training.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import tempfile
from typing import TYPE_CHECKING

from models.compact.checkpoint import (
    DECODER_PREFIX,
    ENCODER_PREFIX,
    WEIGHTS,
    load_prefixed,
    read_config,
)
from models.compact.line.config import encoder_config
from models.compact.vocab import BOS_ID, EOS_ID, PAD_ID, build_tokenizer

if TYPE_CHECKING:  # torch is imported by the functions that need it
    import torch


def export_checkpoint(model, out_dir: str | pathlib.Path, revision: str, training: dict | None = None,
                      dtype: torch.dtype | None = None, extra_parts: dict | None = None,
                      charset: list[str] | None = None, extra_config: dict | None = None,
                      onnx: bool = True) -> pathlib.Path:
    """Write ``model`` (a :class:`models.compact.model.CompactOCR`, or the bilingual trainer's model:
    anything with ``encoder``, ``lm`` and ``encoder_config_dict()``) as a checkpoint directory,
    atomically (written to a temp dir beside ``out_dir``, then renamed). ``extra_parts`` maps a
    tensor-name prefix (e.g. ``"pp_tower."``) to a module saved under it; ``charset`` is the
    tokenizer's character set (default the Latin one); ``extra_config`` is merged into config.json;
    ``dtype`` of the stored floating tensors (default float32). The encoder half's ONNX files are
    also exported, from the tensors as stored (:func:`models.compact.export.line_onnx.export_onnx`:
    ``encoder.onnx``, with a script head's output when ``extra_parts`` has ``"script_head."``, and a
    bilingual checkpoint's ``pp_tokens.onnx``) unless ``onnx`` is False (weights trained elsewhere, the
    ONNX files exported where the checkpoint is served; a service runs the torch modules until then).
    Returns ``out_dir``.
    """
    import torch
    from safetensors.torch import save_file

    from models.compact.export.onnx import export_onnx

    dtype = dtype or torch.float32
    out_dir = pathlib.Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = pathlib.Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=".export-"))
    tensors = {}
    for prefix, part in ((ENCODER_PREFIX, model.encoder), (DECODER_PREFIX, model.lm), *(extra_parts or {}).items()):
        for k, v in part.state_dict().items():
            tensors[prefix + k] = v.detach().cpu().to(dtype if v.is_floating_point() else v.dtype).contiguous().clone()
    save_file(tensors, str(tmp / WEIGHTS), metadata={"format": "pt"})
    cfg = {
        "inkstream_family": "compact",
        "model_type": "inkstream_compact",
        "architectures": ["CompactEncoderHalf", "CompactDecoderHalf"],
        "revision": revision,
        "torch_dtype": str(dtype).removeprefix("torch."),
        "encoder": model.encoder_config_dict(),
        "decoder": model.lm.config.to_dict(),
        "training": training or {},
        **(extra_config or {}),
    }
    (tmp / "config.json").write_text(json.dumps(cfg, indent=2, default=str))
    (tmp / "generation_config.json").write_text(json.dumps(
        {"bos_token_id": BOS_ID, "eos_token_id": EOS_ID, "pad_token_id": PAD_ID, "max_new_tokens": 256}, indent=2))
    build_tokenizer(charset).save(str(tmp / "tokenizer.json"))
    if onnx:
        export_onnx(tmp)  # training.compact.script_head writes them again when it adds a script head
    tmp.chmod(0o755)  # mkdtemp makes it private; a checkpoint directory is meant to be shared / committed
    for f in tmp.iterdir():
        f.chmod(0o644)
    if out_dir.exists():
        old = out_dir.with_name(out_dir.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        out_dir.rename(old)
        tmp.rename(out_dir)
        shutil.rmtree(old, ignore_errors=True)
    else:
        tmp.rename(out_dir)
    return out_dir


def pp_tower_config(compressor) -> dict:
    """config.json ``"pp_tower"`` entry of a bilingual checkpoint: which frozen trunk (rapidocr's
    PP-OCRv6 recogniser, by file name and sha256), the compressor's width, token stride (pixels) and
    ``posterior_topk`` (0: trunk features only; k: also the recogniser's top-k posterior per frame).
    """
    from models.compact.line import pptower

    return {"trunk": pptower.REC_MODEL_FILE, "trunk_sha256": pptower.REC_MODEL_SHA256,
            "feature_output": pptower.FEATURE_OUTPUT, "channels": int(compressor.compress[0].out_channels),
            "line_height": pptower.PP_LINE_HEIGHT, "tokens_stride_px": pptower.PP_FRAME_PX * compressor.stride,
            "posterior_topk": int(compressor.posterior_topk)}


def load_training_model(checkpoint_dir: str | pathlib.Path, cfg: dict | None = None):
    """A :class:`models.compact.model.CompactOCR` with the checkpoint's encoder and decoder weights
    (the training-only CTC head starts random), for further training. Raises InvalidInput as
    :func:`read_config`.
    """
    from transformers import DeepseekV2Config

    from models.compact.model import CompactOCR

    cfg = cfg or read_config(checkpoint_dir)
    enc_cfg = encoder_config(cfg)
    model = CompactOCR(enc_cfg, DeepseekV2Config.from_dict(cfg["decoder"], attn_implementation="eager"))
    enc, _ = load_prefixed(checkpoint_dir, ENCODER_PREFIX)
    dec, _ = load_prefixed(checkpoint_dir, DECODER_PREFIX)
    model.encoder.load_state_dict({k: v.float() for k, v in enc.items()}, strict=True)
    model.lm.load_state_dict({k: v.float() for k, v in dec.items()}, strict=True)
    return model
