"""Export DeepSeek-OCR-2's language model as a text-only ``DeepseekV2ForCausalLM`` for vLLM
(``inkstream export-vllm --model DIR [--out DIR]``).

vLLM's own DeepSeek-OCR classes take ``pixel_values`` and run their own vision tower; inkstream runs
the vision tower in its encoder service and sends the decoder vision tokens. vLLM takes those as
prompt embeddings of a plain causal LM, so the decoder's ``vllm`` engine serves this export: the same
tensors the builtin engine loads (``model.embed_tokens``, ``model.layers.*``, ``model.norm``,
``lm_head``; names as in the checkpoint, which already are DeepSeek-V2's), a DeepSeek-V2 config
without MLA (DeepSeek-OCR-2's text model uses plain multi-head attention: ``use_mla`` false, q/k/v
projections, zero MLA head dims; ``kv_lora_rank`` is written as 0 because transformers' config class
takes only an int, and the engine sets it to None, vLLM's mark of a non-MLA DeepSeek-V2, on load),
and the tokenizer. ``inkstream_export.json`` records the source checkpoint's
revision, which the engine checks against the checkpoint it serves.

Config mapping (``DeepseekOcr2TextConfig`` -> ``DeepseekV2Config``): ``mlp_layer_types`` =
k x "dense" then "sparse" -> ``first_k_dense_replace`` = k, ``moe_layer_freq`` = 1; the router is
softmax + top-k without renormalisation (``norm_topk_prob`` false), scaled by ``routed_scaling_factor``,
as ``DeepseekOcr2TextTopkRouter`` does.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shutil
import sys
from typing import Any

import torch

from inkstream.errors import InvalidInput
from models.deepseek_ocr2 import checkpoint as ckpt

EXPORT_MARKER = "inkstream_export.json"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model",
                   "generation_config.json")
_PREFIX = "model.language_model."


def text_config_for_vllm(text: dict[str, Any]) -> dict[str, Any]:
    """A ``deepseek_v2`` config dict (HF layout) from the checkpoint's ``text_config`` dict.

    Raises InvalidInput for a text model vLLM's DeepSeek-V2 cannot express (sparse layers before
    dense ones, or a grouped top-k).
    """
    types = list(text.get("mlp_layer_types") or [])
    n_layers = int(text["num_hidden_layers"])
    k = 0
    while k < len(types) and types[k] == "dense":
        k += 1
    if types and (len(types) != n_layers or any(t != "sparse" for t in types[k:])):
        raise InvalidInput(f"mlp_layer_types {types} are not k dense layers followed by sparse ones")
    if text.get("topk_method", "greedy") != "greedy":
        raise InvalidInput(f"topk_method {text.get('topk_method')!r}: only 'greedy' is exported")
    heads = int(text["num_attention_heads"])
    head_dim = int(text.get("head_dim") or int(text["hidden_size"]) // heads)
    rope = text.get("rope_parameters") or {}
    return {
        "architectures": ["DeepseekV2ForCausalLM"],
        "model_type": "deepseek_v2",
        "vocab_size": int(text["vocab_size"]),
        "hidden_size": int(text["hidden_size"]),
        "intermediate_size": int(text["intermediate_size"]),
        "moe_intermediate_size": int(text["moe_intermediate_size"]),
        "num_hidden_layers": n_layers,
        "num_attention_heads": heads,
        "num_key_value_heads": int(text.get("num_key_value_heads") or heads),
        "head_dim": head_dim,
        "n_routed_experts": int(text["n_routed_experts"]),
        "n_shared_experts": int(text.get("n_shared_experts") or 0),
        "num_experts_per_tok": int(text["num_experts_per_tok"]),
        "first_k_dense_replace": k if types else 0,
        "moe_layer_freq": 1,
        "routed_scaling_factor": float(text.get("routed_scaling_factor", 1.0)),
        "topk_method": "greedy",
        "n_group": 1,
        "topk_group": 1,
        "norm_topk_prob": False,
        "scoring_func": "softmax",
        "use_mla": False,
        # transformers' DeepseekV2Config insists on an int here; vLLM reads MHA from None, which
        # decoder_service.vllm_guard.non_mla_config sets when the engine loads the config.
        "kv_lora_rank": 0,
        "q_lora_rank": None,
        "qk_nope_head_dim": 0,
        "qk_rope_head_dim": 0,
        "v_head_dim": 0,
        "hidden_act": text.get("hidden_act", "silu"),
        "max_position_embeddings": int(text["max_position_embeddings"]),
        "rms_norm_eps": float(text.get("rms_norm_eps", 1e-6)),
        "rope_parameters": {"rope_type": "default",
                            "rope_theta": float(rope.get("rope_theta", text.get("rope_theta", 10000.0)))},
        "attention_bias": bool(text.get("attention_bias", False)),
        "tie_word_embeddings": bool(text.get("tie_word_embeddings", False)),
        "bos_token_id": text.get("bos_token_id"),
        "eos_token_id": text.get("eos_token_id"),
        "pad_token_id": text.get("pad_token_id"),
        "torch_dtype": "bfloat16",
    }


def read_text_tensors(root: pathlib.Path, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """The checkpoint's language-model tensors under DeepSeek-V2 names, routed experts one by one
    (``model.layers.N.mlp.experts.E.{gate,up,down}_proj.weight``, what vLLM's loader maps), cast to
    ``dtype``. The names go through the builtin half's renames (:func:`checkpoint.to_module_name`), so
    both engines read the same tensors from the same files.
    """
    from safetensors import safe_open

    by_file: dict[pathlib.Path, list[str]] = {}
    for name, path in ckpt.tensor_names(root).items():
        if not ckpt.is_vision_name(name):
            by_file.setdefault(path, []).append(name)
    out: dict[str, torch.Tensor] = {}
    for path, names in by_file.items():
        with safe_open(str(path), framework="pt") as f:
            for name in names:
                target = ckpt.to_module_name(name)
                if target.startswith(_PREFIX):
                    target = "model." + target[len(_PREFIX):]
                out[target] = f.get_tensor(name).to(dtype).contiguous()
    return out


def export_language_model(checkpoint_dir: str | pathlib.Path, out_dir: str | pathlib.Path,
                          dtype: torch.dtype = torch.bfloat16) -> pathlib.Path:
    """Write the vLLM export of ``checkpoint_dir`` to ``out_dir`` (created; files overwritten) and
    return it: ``config.json``, ``model.safetensors`` (text tensors in ``dtype``), tokenizer files,
    :data:`EXPORT_MARKER`. Raises InvalidInput for a directory that is not a deepseek_ocr2 checkpoint.
    """
    from safetensors.torch import save_file  # heavy-ish: safetensors (installed with transformers)

    root, out = pathlib.Path(checkpoint_dir), pathlib.Path(out_dir)
    try:
        full = json.loads((root / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise InvalidInput(f"{root} has no readable config.json: {exc}") from exc
    if full.get("model_type") != "deepseek_ocr2" or "text_config" not in full:
        raise InvalidInput(f"{root} is not a deepseek_ocr2 checkpoint (model_type {full.get('model_type')!r})")
    tensors = read_text_tensors(root, dtype)
    if "lm_head.weight" not in tensors or "model.embed_tokens.weight" not in tensors:
        raise InvalidInput(f"{root} lacks the language model's embed_tokens / lm_head tensors")
    out.mkdir(parents=True, exist_ok=True)
    config = text_config_for_vllm(full["text_config"])
    config["torch_dtype"] = str(dtype).removeprefix("torch.")
    (out / "config.json").write_text(json.dumps(config, indent=2))
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    for name in TOKENIZER_FILES:
        if (root / name).is_file():
            shutil.copyfile(root / name, out / name)
    model_id, revision = ckpt.checkpoint_identity(root)
    (out / EXPORT_MARKER).write_text(json.dumps({"source": str(root.resolve()), "model_id": model_id,
                                                 "revision": revision, "tensors": len(tensors)}, indent=2))
    return out


def export_revision(export_dir: str | pathlib.Path) -> str | None:
    """The source checkpoint revision recorded in an export, or None when the marker is missing."""
    try:
        return json.loads((pathlib.Path(export_dir) / EXPORT_MARKER).read_text()).get("revision")
    except (OSError, ValueError):
        return None


def main(argv: list[str] | None = None) -> int:
    """``inkstream export-vllm --model DIR [--out DIR] [--dtype bfloat16]``; exit 0, or 2 on bad input."""
    p = argparse.ArgumentParser(prog="inkstream export-vllm",
                                description="Export a deepseek_ocr2 checkpoint's language model for the vllm engine.")
    p.add_argument("--model", required=True, help="deepseek_ocr2 checkpoint directory")
    p.add_argument("--out", help="output directory (default: MODEL/vllm, where the decoder looks by default)")
    p.add_argument("--dtype", default="bfloat16", choices=["float32", "float16", "bfloat16"])
    args = p.parse_args(argv)
    out = args.out or str(pathlib.Path(args.model) / "vllm")
    try:
        done = export_language_model(args.model, out, getattr(torch, args.dtype))
    except InvalidInput as exc:
        print(f"inkstream export-vllm: {exc.message}", file=sys.stderr)
        return 2
    print(f"exported the language model of {args.model} to {done}")
    return 0
