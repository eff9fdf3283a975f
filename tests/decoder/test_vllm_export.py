"""``inkstream export-vllm``: the vLLM export holds exactly the checkpoint's text tensors under
DeepSeek-V2 names (experts one by one), a non-MLA DeepSeek-V2 config that transformers loads, the
tokenizer, and the source revision the vllm engine checks.
"""

from __future__ import annotations

import json

import pytest
import torch
from safetensors import safe_open

from decoder_service.config import DecoderConfig
from decoder_service.vllm_engine import check_export, export_dir
from inkstream.errors import InvalidInput
from models.deepseek_ocr2 import checkpoint as ckpt
from models.deepseek_ocr2.vllm_export import export_language_model, main, text_config_for_vllm

pytestmark = pytest.mark.integration


def test_export_holds_the_text_tensors_and_a_loadable_config(tiny_ds_checkpoint, tmp_path):
    out = export_language_model(tiny_ds_checkpoint, tmp_path / "vllm", torch.float32)
    src = {n: p for n, p in ckpt.tensor_names(tiny_ds_checkpoint).items() if not ckpt.is_vision_name(n)}
    with safe_open(str(out / "model.safetensors"), framework="pt") as f:
        names = set(f.keys())
        assert "model.layers.1.mlp.experts.3.down_proj.weight" in names  # one by one, as vLLM loads them
        assert not any("vision" in n or "sam_model" in n or "qwen2_model" in n for n in names)
        assert len(names) == len(src)
        with safe_open(str(src["lm_head.weight"]), framework="pt") as g:
            assert torch.equal(f.get_tensor("lm_head.weight"), g.get_tensor("lm_head.weight"))
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["architectures"] == ["DeepseekV2ForCausalLM"] and cfg["first_k_dense_replace"] == 1
    assert cfg["qk_rope_head_dim"] == cfg["qk_nope_head_dim"] == 0 and cfg["norm_topk_prob"] is False
    from transformers import AutoConfig

    loaded = AutoConfig.from_pretrained(out)
    assert loaded.model_type == "deepseek_v2" and loaded.n_routed_experts == 4
    assert (out / "tokenizer.json").is_file()
    _, revision = ckpt.checkpoint_identity(tiny_ds_checkpoint)
    check_export(out, revision)
    with pytest.raises(InvalidInput, match="export it again"):
        check_export(out, "fp2-000000000000")


def test_export_refusals(tmp_path, tiny_ds_checkpoint):
    with pytest.raises(InvalidInput, match="no vLLM export"):
        check_export(tmp_path, "x")
    assert main(["--model", str(tmp_path)]) == 2
    with pytest.raises(InvalidInput, match="dense layers followed"):
        text_config_for_vllm({"mlp_layer_types": ["sparse", "dense"], "num_hidden_layers": 2,
                              "num_attention_heads": 2, "hidden_size": 8})
    assert export_dir(DecoderConfig(model_dir=str(tiny_ds_checkpoint))) == tiny_ds_checkpoint / "vllm"
