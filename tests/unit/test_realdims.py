"""``make-tiny-checkpoint --real-dims``: DeepSeek-OCR-2's real sizes (checked without writing 6.8 GB),
the parameter counts bench/gpu_realdims.py's weight-read bound is built on, and ``no_eos``.
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import pytest
import torch
from safetensors import safe_open

from models.deepseek_ocr2 import tiny

REPO = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("bench_gpu_realdims", REPO / "bench" / "gpu_realdims.py")
assert _spec is not None and _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
sys.modules["bench_gpu_realdims"] = bench
_spec.loader.exec_module(bench)

IDS = {t: i for i, t in enumerate(tiny.SPECIAL_TOKENS)}


@pytest.fixture(scope="module")
def real_config():
    return tiny.config_for(384, IDS, real_dims=True)


def test_real_dims_config_has_deepseek_ocr2_sizes(real_config):
    t = real_config.text_config
    assert (t.hidden_size, t.intermediate_size, t.moe_intermediate_size, t.num_hidden_layers) == (1280, 6848, 896, 12)
    assert (t.num_attention_heads, t.num_key_value_heads, t.vocab_size, t.max_position_embeddings) == (10, 10, 129280,
                                                                                                       8192)
    assert (t.n_routed_experts, t.num_experts_per_tok, t.n_shared_experts) == (64, 6, 2)
    assert t.mlp_layer_types == ["dense"] + ["sparse"] * 11
    sam, enc = real_config.vision_config.sam_config, real_config.vision_config.encoder_config
    assert (sam.hidden_size, sam.num_hidden_layers, sam.patch_size, sam.image_size) == (768, 12, 16, 1024)
    assert list(sam.global_attn_indexes) == [2, 5, 8, 11] and sam.window_size == 14
    assert list(sam.downsample_channels) == [512, 896]
    assert (enc.hidden_size, enc.num_hidden_layers, enc.num_attention_heads, enc.num_key_value_heads,
            enc.intermediate_size) == (896, 24, 14, 2, 4864)
    # an override still wins over the real sizes
    two = tiny.config_for(384, IDS, real_dims=True, text_config={"num_hidden_layers": 2})
    assert two.text_config.num_hidden_layers == 2


def test_real_dims_parameter_counts(real_config):
    c = tiny.parameter_counts(real_config)  # built on the meta device: no memory
    assert c["total"] == c["vision"] + c["text"]
    assert 3.35e9 < c["total"] < 3.43e9  # DeepSeek-OCR-2: 3.39 B
    assert 0.44e9 < c["vision"] < 0.47e9  # SAM ViT-B ~95 M + Qwen2-0.5B-sized encoder ~358 M + projector
    # per decode token: 12 x attention (4 x 1280^2) + dense MLP (3 x 1280 x 6848)
    # + 11 x (6 routed + 2 shared) x 3 x 1280 x 896 + routers + head (1280 x 129280) + norms
    expected = 12 * 4 * 1280**2 + 3 * 1280 * 6848 + 11 * 8 * 3 * 1280 * 896 + 11 * 64 * 1280 + 1280 * 129280
    assert abs(c["active_per_token"] - expected) < 50_000
    assert c["routed_experts"] == 11 * 64 * 3 * 1280 * 896


def test_step_bytes_grows_with_rows_to_all_experts(real_config):
    c = tiny.parameter_counts(real_config)
    tc = real_config.text_config
    one = bench.step_bytes(c, tc, 1, 0, 2)
    assert one == pytest.approx(c["active_per_token"] * 2)
    many = bench.step_bytes(c, tc, 10_000, 0, 2)
    every_expert = (c["active_per_token"] + c["routed_experts"] * (1 - 6 / 64)) * 2
    assert many == pytest.approx(every_expert, rel=1e-6)
    assert one < bench.step_bytes(c, tc, 8, 0, 2) < bench.step_bytes(c, tc, 32, 0, 2) < many
    kv = bench.step_bytes(c, tc, 1, 1000, 2) - one  # 1000 positions x 12 layers x (K + V) x 1280 x 2 bytes
    assert kv == pytest.approx(1000 * 12 * 2 * 1280 * 2)


def test_no_eos_zeroes_the_head_rows_of_control_tokens(tmp_path):
    path = tiny.write_tiny_checkpoint(tmp_path / "ck", seed=0, no_eos=True)
    with safe_open(str(path / "model.safetensors"), framework="pt") as f:
        head = f.get_tensor("lm_head.weight")
    control = [IDS[t] for t in (tiny.BOS, tiny.EOS, tiny.PAD, tiny.IMAGE_TOKEN)]
    assert torch.count_nonzero(head[control]) == 0
    assert torch.count_nonzero(head[len(tiny.SPECIAL_TOKENS):]) > 0


def test_cli_passes_real_dims(tmp_path, monkeypatch):
    seen = {}

    def fake_write(out, seed, real_dims, device):
        seen.update(real_dims=real_dims, device=device)
        pathlib.Path(out).mkdir(parents=True)
        return pathlib.Path(out)

    monkeypatch.setattr(tiny, "write_tiny_checkpoint", fake_write)
    assert tiny.main([str(tmp_path / "x"), "--real-dims", "--device", "cuda"]) == 0
    assert seen == {"real_dims": True, "device": "cuda"}


def test_missing_modules_names_what_cannot_be_imported():
    assert bench.missing_modules() == []  # this environment has every service package
    assert bench.missing_modules(("grpc", "no_such_pkg_xyz", "google.no_such_sub")) == ["no_such_pkg_xyz",
                                                                                        "google.no_such_sub"]
