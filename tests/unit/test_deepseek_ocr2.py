"""Unit tests of the deepseek_ocr2 family halves on a tiny random checkpoint (CPU, float32).

Ground truth is transformers' own full ``DeepseekOcr2ForConditionalGeneration`` + processor.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from PIL import Image, ImageDraw

from inkstream.errors import InvalidInput
from models import registry
from models.deepseek_ocr2 import checkpoint as ckpt
from models.deepseek_ocr2.decoder_half import DeepseekOcr2DecoderHalf
from models.deepseek_ocr2.encoder_half import DeepseekOcr2EncoderHalf
from models.deepseek_ocr2.modes import build_modes, processor_kwargs
from models.deepseek_ocr2.reference import reference_generate
from models.deepseek_ocr2.tiny import main as tiny_main
from models.deepseek_ocr2.tiny import write_tiny_checkpoint

MODES = ["gundam", "base", "small"]


def _page(seed: int, width: int = 200, height: int = 300) -> Image.Image:
    """A white page with coloured blocks ("text lines"), different per seed."""
    rng = np.random.default_rng(seed)
    img = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(img)
    for _ in range(10):
        x, y = int(rng.integers(0, width - 20)), int(rng.integers(0, height - 10))
        w, h = int(rng.integers(5, 80)), int(rng.integers(3, 20))
        draw.rectangle([x, y, x + w, y + h], fill=tuple(int(c) for c in rng.integers(0, 255, 3)))
    return img


@pytest.fixture(scope="module")
def ckpt_dir(tmp_path_factory):
    torch.set_num_threads(1)
    return write_tiny_checkpoint(tmp_path_factory.mktemp("dsocr2") / "tiny", seed=0)


@pytest.fixture(scope="module")
def enc(ckpt_dir):
    return DeepseekOcr2EncoderHalf.load(ckpt_dir)


@pytest.fixture(scope="module")
def dec(ckpt_dir):
    return DeepseekOcr2DecoderHalf.load(ckpt_dir)


@pytest.fixture(scope="module")
def full(ckpt_dir):
    from transformers import AutoProcessor, DeepseekOcr2ForConditionalGeneration

    model = DeepseekOcr2ForConditionalGeneration.from_pretrained(ckpt_dir, dtype=torch.float32).eval()
    return model, AutoProcessor.from_pretrained(ckpt_dir)


def _greedy(dec, embeds: torch.Tensor, max_new_tokens: int) -> list[int]:
    """Unbatched greedy loop on DecoderHalf.forward: prefill [1, L, H] then one token per step."""
    length = embeds.shape[0]
    cache = dec.new_cache()
    logits = dec.forward(embeds[None], torch.ones(1, length, dtype=torch.long), torch.arange(length)[None], cache)
    out: list[int] = []
    for step in range(max_new_tokens):
        tok = int(logits.argmax(-1))
        out.append(tok)
        if tok in dec.eos_token_ids:
            break
        pos = length + step
        logits = dec.forward(dec.embed_tokens(torch.tensor([[tok]])), torch.ones(1, pos + 1, dtype=torch.long),
                             torch.tensor([[pos]]), cache)
    return out


def test_registry_finds_family(ckpt_dir):
    assert registry.family_of(ckpt_dir) == "deepseek_ocr2"
    assert registry.encoder_half_class("deepseek_ocr2") is DeepseekOcr2EncoderHalf
    assert registry.decoder_half_class("deepseek_ocr2") is DeepseekOcr2DecoderHalf


def test_tiny_checkpoint_keeps_moe_and_hf_layout(ckpt_dir):
    cfg = json.loads((ckpt_dir / "config.json").read_text())
    assert cfg["model_type"] == "deepseek_ocr2"
    text = cfg["text_config"]
    assert text["n_routed_experts"] > text["num_experts_per_tok"] >= 2 and text["n_shared_experts"] >= 1
    names = ckpt.tensor_names(ckpt_dir)
    assert any(".mlp.experts.3.gate_proj." in n for n in names) and any("shared_experts" in n for n in names)
    assert sum(p.stat().st_size for p in ckpt_dir.iterdir()) < 5_000_000


def test_halves_partition_the_checkpoint(ckpt_dir, enc, dec):
    enc_names, dec_names = enc.loaded_tensor_names(), dec.loaded_tensor_names()
    assert enc_names and dec_names
    assert enc_names.isdisjoint(dec_names)
    assert enc_names | dec_names == set(ckpt.tensor_names(ckpt_dir))
    assert all(ckpt.is_vision_name(n) for n in enc_names)
    assert "lm_head.weight" in dec_names and not any("sam_model" in n for n in dec_names)


def test_half_weights_equal_full_model(enc, dec, full):
    state = full[0].state_dict()
    for name, tensor in enc._stack.state_dict().items():
        assert torch.equal(tensor, state["model." + name]), name
    for name, tensor in dec._text.state_dict().items():
        assert torch.equal(tensor, state["model.language_model." + name]), name
    assert torch.equal(dec._lm_head.weight, state["lm_head.weight"])
    # Nothing beyond the half's own parameters was materialised.
    assert not any("language_model" in n for n, _ in enc._stack.named_parameters())


@pytest.mark.parametrize("mode,size,n_local", [("gundam", (200, 300), 6), ("gundam", (80, 60), 0),
                                               ("base", (200, 300), 0), ("small", (300, 120), 0)])
def test_vision_tokens_match_processor_and_full_model(enc, full, mode, size, n_local):
    model, processor = full
    image = _page(1, *size)
    prepared = enc.preprocess(image, mode)
    assert prepared.meta["tile_cols"] * prepared.meta["tile_rows"] == n_local
    page = enc.encode_batch([prepared])[0]
    tokens = page.segments[0].vision_tokens
    assert page.segments[0].box == (0.0, 0.0, float(size[0]), float(size[1]))
    inputs = processor(images=image, text="<image>\nFree OCR. ", return_tensors="pt",
                       **processor_kwargs(processor, mode))
    n_placeholders = int((inputs["input_ids"] == processor.image_token_id).sum())
    assert tokens.shape == (n_placeholders, enc.hidden_size) == (prepared.meta["n_vision_tokens"], enc.hidden_size)
    assert tokens.shape[0] <= enc.mode(mode).max_vision_tokens
    with torch.inference_mode():
        ref = model.get_image_features(inputs["pixel_values"], inputs.get("pixel_values_local"),
                                       inputs["num_local_patches"]).pooler_output[0]
    torch.testing.assert_close(tokens, ref, rtol=1e-5, atol=1e-5)


def test_modes_follow_real_model_ratios(enc):
    modes = {m.name: m for m in enc.modes()}
    assert modes["gundam"].crop and not modes["base"].crop and not modes["small"].crop
    # 256 global + 6 x 144 tiles + 1 separator, as the real model's largest page (1,121 tokens).
    assert modes["gundam"].max_vision_tokens == 1121
    assert (modes["base"].max_vision_tokens, modes["small"].max_vision_tokens) == (257, 145)
    assert enc.default_mode in modes


def test_modes_at_real_model_processor_defaults():
    """Mode table for transformers' DeepseekOcr2 processor defaults (the real checkpoint's geometry)."""
    import inspect

    from transformers import DeepseekOcr2ImageProcessor, DeepseekOcr2Processor

    ip = DeepseekOcr2ImageProcessor()
    params = inspect.signature(DeepseekOcr2Processor.__init__).parameters
    px_per_token = params["patch_size"].default * params["downsample_ratio"].default
    modes = build_modes(ip.size.height, ip.tile_size, px_per_token, ip.max_patches)
    assert (ip.size.height, ip.tile_size, px_per_token, ip.max_patches) == (1024, 768, 64, 6)
    assert {n: (m.page_long_side_px, m.max_vision_tokens) for n, m in modes.items()} == {
        "gundam": (2304, 1121), "base": (1024, 257), "small": (768, 145)}


def test_sharded_checkpoint_loads_per_half(ckpt_dir, full, tmp_path):
    model, _ = full
    sharded = tmp_path / "sharded"
    model.save_pretrained(sharded, max_shard_size="300KB")
    for f in ckpt_dir.iterdir():
        if not (sharded / f.name).exists() and not f.name.endswith(".safetensors"):
            (sharded / f.name).write_bytes(f.read_bytes())
    assert len(ckpt.safetensors_files(sharded)) > 2
    e, d = DeepseekOcr2EncoderHalf.load(sharded), DeepseekOcr2DecoderHalf.load(sharded)
    assert e.loaded_tensor_names() | d.loaded_tensor_names() == set(ckpt.tensor_names(ckpt_dir))
    page = e.preprocess(_page(1), "base")
    assert e.encode_batch([page])[0].n_vision_tokens == 257


def test_batched_encode_equals_single(enc):
    pages = [enc.preprocess(_page(s), "gundam") for s in (2, 3)]
    assert pages[0].batch_key == pages[1].batch_key
    batched = enc.encode_batch(pages)
    for page, out in zip(pages, batched, strict=True):
        single = enc.encode_batch([page])[0]
        torch.testing.assert_close(out.segments[0].vision_tokens, single.segments[0].vision_tokens,
                                   rtol=1e-5, atol=1e-5)
    with pytest.raises(InvalidInput):
        enc.encode_batch([pages[0], enc.preprocess(_page(2), "base")])


@pytest.mark.parametrize("mode", MODES)
def test_prefill_logits_match_full_model(enc, dec, full, mode):
    model, processor = full
    image = _page(4)
    tokens = enc.encode_batch([enc.preprocess(image, mode)])[0].segments[0].vision_tokens
    embeds = dec.embed_prompt(tokens, "markdown")
    inputs = processor(images=image, text="<image>\n<|grounding|>Convert the document to markdown. ",
                       return_tensors="pt", **processor_kwargs(processor, mode))
    assert torch.equal(dec.prompt_ids(tokens.shape[0], "markdown"), inputs["input_ids"][0])
    with torch.inference_mode():
        ref = model(**inputs).logits[0, -1]
    ours = dec.forward(embeds[None], torch.ones(1, embeds.shape[0], dtype=torch.long),
                       torch.arange(embeds.shape[0])[None], dec.new_cache())[0]
    assert ours.dtype == torch.float32 and ours.shape == (dec.vocab_size,)
    torch.testing.assert_close(ours, ref, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("mode,task,seed", [("gundam", "markdown", 3), ("base", "markdown", 6), ("base", "ocr", 7)])
def test_greedy_parity_with_reference_generate(ckpt_dir, enc, dec, mode, task, seed):
    image = _page(seed)
    prepared = enc.preprocess(image, mode)
    assert (prepared.meta["tile_cols"] > 0) == (mode == "gundam")
    tokens = enc.encode_batch([prepared])[0].segments[0].vision_tokens
    ours = _greedy(dec, dec.embed_prompt(tokens, task), 12)
    assert len(set(ours)) > 2  # the page/seed choice gives a non-degenerate greedy sequence
    assert ours == reference_generate(ckpt_dir, image, mode, task, 12)


def test_left_padded_batch_matches_unbatched(enc, dec):
    def tokens(page: int, mode: str) -> torch.Tensor:
        return enc.encode_batch([enc.preprocess(_page(page), mode)])[0].segments[0].vision_tokens

    prompts = [dec.embed_prompt(tokens(8, "base"), "ocr"), dec.embed_prompt(tokens(9, "small"), "markdown")]
    steps = 8
    expected = [_greedy(dec, p, steps) for p in prompts]
    assert prompts[0].shape[0] != prompts[1].shape[0]
    longest = max(p.shape[0] for p in prompts)
    embeds = torch.zeros(2, longest, dec.hidden_size)
    mask = torch.zeros(2, longest, dtype=torch.long)
    for row, p in enumerate(prompts):
        embeds[row, longest - p.shape[0]:] = p
        mask[row, longest - p.shape[0]:] = 1
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    cache = dec.new_cache()
    logits = dec.forward(embeds, mask, positions, cache)
    got: list[list[int]] = [[], []]
    for _ in range(steps):
        toks = logits.argmax(-1)
        for row in range(2):
            got[row].append(int(toks[row]))
        mask = torch.cat([mask, torch.ones(2, 1, dtype=torch.long)], dim=1)
        positions = positions[:, -1:] + 1
        logits = dec.forward(dec.embed_tokens(toks[:, None]), mask, positions, cache)
    assert not any(t in dec.eos_token_ids for row in expected for t in row)  # no early stop to handle
    assert got == expected
    # The cache holds ordinary tensors a scheduler may edit in place (e.g. to drop a finished row).
    cache.layers[0].keys[0].zero_()


def test_unknown_task_and_mode_raise_invalid_input(ckpt_dir, enc, dec):
    tokens = torch.zeros(145, dec.hidden_size)
    with pytest.raises(InvalidInput, match="unknown mode"):
        enc.preprocess(_page(0), "huge")
    with pytest.raises(InvalidInput, match="unknown task"):
        dec.embed_prompt(tokens, "translate")
    with pytest.raises(InvalidInput, match="unknown mode"):
        reference_generate(ckpt_dir, _page(0), "huge", "ocr", 2)
    with pytest.raises(InvalidInput, match="vision tokens"):
        dec.embed_prompt(torch.zeros(10, dec.hidden_size + 1), "ocr")
    with pytest.raises(InvalidInput, match="maximum"):
        dec.embed_prompt(torch.zeros(dec.max_vision_tokens + 1, dec.hidden_size), "ocr")
    with pytest.raises(InvalidInput, match="needs a prompt"):
        dec.embed_prompt(tokens, "locate")
    with pytest.raises(InvalidInput, match="attention_mask"):
        dec.forward(torch.zeros(1, 3, dec.hidden_size), torch.ones(1, 2), torch.arange(3)[None], dec.new_cache())
    with pytest.raises(InvalidInput, match="too elongated"):
        enc.preprocess(Image.new("RGB", (2000, 1)), "base")
    with pytest.raises(InvalidInput, match="config.json"):
        DeepseekOcr2EncoderHalf.load(ckpt_dir.parent)


def test_decode_text_keeps_layout_markup(dec):
    ids = dec.tokenizer("<|ref|>text<|/ref|>")["input_ids"] + sorted(dec.eos_token_ids)
    assert dec.decode_text(ids) == "<|ref|>text<|/ref|>"


def test_make_tiny_checkpoint_cli(tmp_path, capsys):
    out = tmp_path / "cli"
    assert tiny_main([str(out), "--seed", "1"]) == 0
    assert registry.family_of(out) == "deepseek_ocr2"
    assert tiny_main([str(out)]) == 2
    seed1 = ckpt.checkpoint_identity(out)[1]
    assert tiny_main([str(out), "--force"]) == 0
    assert ckpt.checkpoint_identity(out)[1] != seed1  # seed 0 weights -> another revision


def test_revision_changes_when_any_one_tensor_changes(tmp_path):
    """A fine-tune of one tensor in the middle of a weights file (not its first or last bytes) is
    another revision: the gateway routes vision tokens by it. (Training changes a tensor's values
    throughout; the fingerprint samples each tensor's first and last 4 KiB.)"""
    from safetensors.torch import load_file, save_file

    out = tmp_path / "ck"
    assert tiny_main([str(out), "--seed", "1"]) == 0
    before = ckpt.checkpoint_identity(out)[1]
    assert ckpt.checkpoint_identity(out)[1] == before and before.startswith("fp2-")  # deterministic, tagged
    files = ckpt.safetensors_files(out)
    tensors = load_file(str(files[0]))
    names = sorted(tensors)
    middle = names[len(names) // 2]
    tensors[middle] = tensors[middle] + 0.01
    save_file(tensors, str(files[0]), metadata={"format": "pt"})
    assert ckpt.checkpoint_identity(out)[1] != before
    (files[0]).write_bytes(b"\x00" * 4)
    with pytest.raises(InvalidInput, match="not a safetensors file"):
        ckpt.checkpoint_identity(out)
