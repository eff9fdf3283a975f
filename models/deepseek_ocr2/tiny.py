"""Tiny RANDOM DeepSeek-OCR-2 checkpoint in full Hugging Face layout (``inkstream make-tiny-checkpoint``).

The directory has the file kinds of a real ``deepseek-community/DeepSeek-OCR-2`` snapshot:
``config.json`` (``model_type`` = ``deepseek_ocr2``), ``model.safetensors`` written by
``DeepseekOcr2ForConditionalGeneration.save_pretrained``, tokenizer files (a real byte-level BPE
built with the ``tokenizers`` library) and processor files, so ``AutoProcessor.from_pretrained`` and
``DeepseekOcr2ForConditionalGeneration.from_pretrained`` load it with no custom code.

What is shrunk, and why it stays faithful:

* Widths/depths are tiny (SAM 32 wide, Qwen2 vision encoder 32 wide, MoE text model 64 wide with
  4 routed experts (top-2) + 1 shared expert, first layer dense like the real model).
* The vision tower's learned queries are fixed by transformers at 144 (768 px tile, 12x12) and 256
  (1024 px global view, 16x16), so a view always yields 144 or 256 vision tokens. The real model
  reaches those counts with 16 px SAM patches (1024/16 = 64 -> two stride-2 convs -> 16). Here the
  pictures are 8x smaller (global view 128 px, tile 96 px) with 2 px SAM patches, so the SAM token
  grids (64x64 / 48x48) and the vision-token counts are exactly those of the real model while the
  pixel work is 64x smaller. The processor's ``patch_size`` is set to 2 so its placeholder count
  (``ceil(size / patch_size / downsample_ratio)**2``) agrees.
* SAM uses windowed attention only (window 8) to keep the CPU forward well under a second; the
  real model also has 4 global-attention layers (``global_attn_indexes``), available via overrides.
* Initialisation: SAM's config default ``initializer_range`` is 1e-10 (meant to be overwritten by
  trained weights), which makes every page give the same vision tokens; the tiny SAM uses 0.02 and
  the text model 0.1 (sharper attention), and parameters the init leaves at exactly zero (SAM
  ``pos_embed``, rel-pos tables) get N(0, 0.02) so the tests exercise them.
* The output head is multiplied by :data:`LM_HEAD_SCALE` (50) at creation so greedy choices are
  decisive: a different batch shape (summation order) cannot flip an argmax (DESIGN.md, "Parity on
  random weights").

``--real-dims`` (:func:`real_dims_overrides`) instead writes DeepSeek-OCR-2's REAL sizes with random
bf16 weights (~3.4 B parameters, ~6.8 GB): SAM ViT-B (768 wide, 12 layers, global attention at 2/5/8/11,
window 14, 16 px patches, 1024 px global view, 768 px tiles), the Qwen2-0.5B-sized vision encoder
(896 wide, 24 layers, 14 heads / 2 KV heads, MLP 4864), the projector 896 -> 1280 and the DeepSeek-V2
MoE text model (1280 wide, 12 layers, 10 heads, first layer dense with MLP 6848, then 64 routed experts
top-6 + 2 shared of 896, vocabulary 129,280, 8,192 positions), as in ``deepseek-community/DeepSeek-OCR-2``'s
config.json. The tokenizer stays the small trained BPE (its ids are a prefix of the model's vocabulary).
It is for measuring speed and memory at the real size (``bench/gpu_realdims.py``), not for parity tests.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shutil
import sys
from typing import Any

import torch

LM_HEAD_SCALE = 50.0
GLOBAL_SIZE_PX = 128  # real model: 1024 (base_size)
TILE_SIZE_PX = 96  # real model: 768 (image_size)
PATCH_SIZE_PX = 2  # real model: 16
REAL_GLOBAL_SIZE_PX, REAL_TILE_SIZE_PX, REAL_PATCH_SIZE_PX = 1024, 768, 16
REAL_VOCAB_SIZE = 129280

BOS, EOS, PAD = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>"
IMAGE_TOKEN = "<image>"
# Special tokens of the DeepSeek-OCR-2 vocabulary that prompts and grounded markdown use.
SPECIAL_TOKENS = [BOS, EOS, PAD, IMAGE_TOKEN, "<|grounding|>", "<|ref|>", "<|/ref|>", "<|det|>", "<|/det|>"]

_CORPUS = [
    "Free OCR. Convert the document to markdown. Locate the text in the image.",
    "# Title\n\n## Section 1.2\n\nThe quick brown fox jumps over the lazy dog. | a | b |\n|---|---|\n",
    "Invoice number 12345, total: $678.90 (tax 19%). Date 2026-11-30; page 3 of 7.",
    "<|ref|>text<|/ref|><|det|>[[12, 34, 560, 78]]<|/det|> Lorem ipsum dolor sit amet, consectetur.",
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ abcdefghijklmnopqrstuvwxyz 0123456789 .,;:!?'\"()[]{}<>/\\-_=+*&^%$#@~`",
]


def _build_tokenizer(out_dir: pathlib.Path, vocab_size: int) -> dict[str, int]:
    """Train a byte-level BPE (``vocab_size`` entries incl. specials) and save it as a HF fast tokenizer.

    The post-processor prepends BOS like DeepSeek's LlamaTokenizerFast (``add_bos_token=True``).
    Returns the ids of the special tokens.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers  # heavy: + transformers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS * 4, trainer=trainer)
    ids: dict[str, int] = {}
    for t in SPECIAL_TOKENS:
        token_id = tok.token_to_id(t)
        assert token_id is not None  # trained as special tokens, so always in the vocabulary
        ids[t] = token_id
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, ids[BOS])]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        extra_special_tokens={"image_token": IMAGE_TOKEN},
        model_max_length=8192,
    )
    fast.save_pretrained(out_dir)
    return ids


def tiny_config_dict(vocab_size: int, special_ids: dict[str, int], **overrides: Any) -> dict[str, Any]:
    """The tiny ``DeepseekOcr2Config`` as a dict; ``overrides`` update top-level keys or, for
    ``sam_config`` / ``encoder_config`` / ``text_config`` dicts, those sub-configs' keys.
    """
    sam = dict(
        hidden_size=32, output_channels=16, downsample_channels=[24, 32], num_hidden_layers=2,
        num_attention_heads=2, image_size=GLOBAL_SIZE_PX, patch_size=PATCH_SIZE_PX, window_size=8,
        global_attn_indexes=[], mlp_dim=64, initializer_range=0.02,
    )
    enc = dict(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=1024, vocab_size=vocab_size,
    )
    text = dict(
        vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=4096,
        n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1, moe_intermediate_size=32,
        mlp_layer_types=["dense", "sparse"], topk_method="greedy", routed_scaling_factor=1.0, initializer_range=0.1,
        bos_token_id=special_ids[BOS], eos_token_id=special_ids[EOS], pad_token_id=special_ids[PAD],
    )
    for key, sub in (("sam_config", sam), ("encoder_config", enc), ("text_config", text)):
        sub.update(overrides.pop(key, {}))
    cfg = dict(
        model_type="deepseek_ocr2",
        vision_config={"sam_config": sam, "encoder_config": enc},
        text_config=text,
        image_token_id=special_ids[IMAGE_TOKEN],
        bos_token_id=special_ids[BOS],
        eos_token_id=special_ids[EOS],
        pad_token_id=special_ids[PAD],
    )
    cfg.update(overrides)
    return cfg


def real_dims_overrides() -> dict[str, Any]:
    """Config overrides (for :func:`tiny_config_dict`) giving DeepSeek-OCR-2's real dimensions
    (see the module docstring); the text vocabulary is :data:`REAL_VOCAB_SIZE`.
    """
    sam = dict(hidden_size=768, output_channels=256, downsample_channels=[512, 896], num_hidden_layers=12,
               num_attention_heads=12, image_size=REAL_GLOBAL_SIZE_PX, patch_size=REAL_PATCH_SIZE_PX,
               window_size=14, global_attn_indexes=[2, 5, 8, 11], mlp_dim=3072, initializer_range=0.02)
    enc = dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
               num_key_value_heads=2, max_position_embeddings=32768)
    text = dict(vocab_size=REAL_VOCAB_SIZE, hidden_size=1280, intermediate_size=6848, num_hidden_layers=12,
                num_attention_heads=10, num_key_value_heads=10, max_position_embeddings=8192,
                n_routed_experts=64, num_experts_per_tok=6, n_shared_experts=2, moe_intermediate_size=896,
                mlp_layer_types=["dense"] + ["sparse"] * 11, initializer_range=0.02)
    return {"sam_config": sam, "encoder_config": enc, "text_config": text}


def config_for(vocab_size: int, special_ids: dict[str, int], real_dims: bool = False, **overrides: Any):
    """The ``DeepseekOcr2Config`` :func:`write_tiny_checkpoint` writes (tiny, or real sizes with
    ``real_dims``; ``overrides`` as in :func:`tiny_config_dict`, applied last).
    """
    from transformers import DeepseekOcr2Config  # heavy: transformers

    if real_dims:
        base = real_dims_overrides()
        for key in ("sam_config", "encoder_config", "text_config"):
            base[key].update(overrides.pop(key, {}))
        overrides = {**base, **overrides}
    return DeepseekOcr2Config(**tiny_config_dict(vocab_size, special_ids, **overrides))


def parameter_counts(config) -> dict[str, int]:
    """Parameters of ``DeepseekOcr2ForConditionalGeneration(config)`` built on the meta device (no memory):
    ``total``, ``vision`` (encoder half), ``text`` (decoder half incl. embeddings and head) and
    ``active_per_token`` (what one decode step reads for one sequence: attention, dense MLPs, shared
    experts + ``num_experts_per_tok`` routed experts + router per MoE layer, norms, the head; the
    embedding lookup reads one row and is not counted) and ``routed_experts`` (all routed-expert
    parameters, of which a batch of sequences reads the experts its tokens are routed to).
    """
    from transformers import DeepseekOcr2ForConditionalGeneration  # heavy: transformers

    with torch.device("meta"):
        model = DeepseekOcr2ForConditionalGeneration(config)
    from models.deepseek_ocr2.checkpoint import is_vision_name

    total = vision = active = routed = 0
    tc = config.text_config
    for name, p in model.named_parameters():
        n = p.numel()
        total += n
        if is_vision_name(name):
            vision += n
        elif "embed_tokens" in name:
            continue
        elif ".mlp.experts." in name:
            routed += n
            active += n * int(tc.num_experts_per_tok) // int(tc.n_routed_experts)
        else:
            active += n
    return {"total": total, "vision": vision, "text": total - vision, "active_per_token": active,
            "routed_experts": routed}


def write_tiny_checkpoint(directory: str | pathlib.Path, seed: int = 0, real_dims: bool = False,
                          device: str = "cpu", no_eos: bool = False, **overrides: Any) -> pathlib.Path:
    """Write a tiny random DeepSeek-OCR-2 checkpoint to ``directory`` and return its path.

    ``seed`` makes the weights reproducible; ``overrides`` patch the config (see
    :func:`tiny_config_dict`; ``vocab_size`` sets the tokenizer vocabulary, default 384).
    Size ~1 MB; takes ~1-2 s on one CPU core. ``real_dims``: DeepSeek-OCR-2's real sizes instead
    (:func:`real_dims_overrides`), weights created in bfloat16 on ``device`` (``cuda`` takes seconds,
    ``cpu`` minutes and ~7 GB of memory) and saved as ~6.8 GB of bf16 safetensors. ``no_eos``: zero
    the output head's rows of EOS / BOS / pad / ``<image>`` so greedy decoding runs to its token
    bound (benchmarks then do the same work on every path). Raises ``FileExistsError`` if
    ``directory`` already holds a ``config.json`` (use :func:`main` with ``--force`` to overwrite).
    """
    from transformers import (  # heavy: transformers
        AutoTokenizer,
        DeepseekOcr2ForConditionalGeneration,
        DeepseekOcr2ImageProcessor,
        DeepseekOcr2Processor,
    )

    out = pathlib.Path(directory)
    if (out / "config.json").exists():
        raise FileExistsError(f"{out} already holds a checkpoint (config.json)")
    out.mkdir(parents=True, exist_ok=True)
    vocab_size = int(overrides.pop("vocab_size", 384))
    special_ids = _build_tokenizer(out, vocab_size)

    config = config_for(vocab_size, special_ids, real_dims=real_dims, **overrides)
    torch.manual_seed(seed)
    if real_dims:
        with torch.device(device):
            model = DeepseekOcr2ForConditionalGeneration._from_config(config, dtype=torch.bfloat16).eval()
    else:
        model = DeepseekOcr2ForConditionalGeneration(config).eval()
    with torch.no_grad():
        # Random init leaves some parameters at exactly zero (SAM pos_embed, rel-pos tables).
        for name, p in model.named_parameters():
            if p.ndim > 0 and torch.count_nonzero(p) == 0 and "bias" not in name:
                p.normal_(0.0, 0.02)
        model.lm_head.weight.mul_(LM_HEAD_SCALE)
        if no_eos:
            model.lm_head.weight[[special_ids[t] for t in (BOS, EOS, PAD, IMAGE_TOKEN)]] = 0.0
    model.save_pretrained(out)
    del model

    global_px, tile_px, patch_px = ((REAL_GLOBAL_SIZE_PX, REAL_TILE_SIZE_PX, REAL_PATCH_SIZE_PX) if real_dims
                                    else (GLOBAL_SIZE_PX, TILE_SIZE_PX, PATCH_SIZE_PX))
    image_processor = DeepseekOcr2ImageProcessor(size={"height": global_px, "width": global_px}, tile_size=tile_px)
    tokenizer = AutoTokenizer.from_pretrained(out)
    processor = DeepseekOcr2Processor(
        image_processor=image_processor, tokenizer=tokenizer, patch_size=patch_px, downsample_ratio=4
    )
    processor.save_pretrained(out)
    return out


def main(argv: list[str] | None = None) -> int:
    """``inkstream make-tiny-checkpoint DIR [--seed N] [--force] [--real-dims [--device D]]``; returns the exit code."""
    parser = argparse.ArgumentParser(prog="inkstream make-tiny-checkpoint", description=__doc__.splitlines()[0])
    parser.add_argument("dir", help="output checkpoint directory")
    parser.add_argument("--seed", type=int, default=0, help="random seed of the weights (default 0)")
    parser.add_argument("--force", action="store_true", help="overwrite an existing checkpoint in DIR")
    parser.add_argument("--real-dims", action="store_true",
                        help="DeepSeek-OCR-2's real sizes, random bf16 weights (~3.4 B parameters, ~6.8 GB)")
    parser.add_argument("--device", default="cpu", help="where --real-dims creates the weights (cuda is fastest)")
    args = parser.parse_args(argv)
    from transformers.utils import logging as hf_logging  # heavy: transformers, after parsing the arguments

    hf_logging.disable_progress_bar()
    out = pathlib.Path(args.dir)
    if (out / "config.json").exists():
        if not args.force:
            print(f"error: {out} already holds a checkpoint; pass --force to overwrite", file=sys.stderr)
            return 2
        shutil.rmtree(out)
    path = write_tiny_checkpoint(out, seed=args.seed, real_dims=args.real_dims, device=args.device)
    size = sum(p.stat().st_size for p in path.iterdir() if p.is_file())
    print(json.dumps({"checkpoint": str(path), "bytes": size}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
