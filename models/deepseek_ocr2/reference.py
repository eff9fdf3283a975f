"""Slow, obviously-correct DeepSeek-OCR-2 path: the full HF model, the HF processor and ``generate``.

Used by parity tests and benchmarks as the ground truth for the encoder-half -> decoder-half
pipeline. It loads the whole ``DeepseekOcr2ForConditionalGeneration`` (both halves, cached for the
last checkpoint) and decodes greedily one sequence at a time; never use it to serve.

Modes map to processor keyword arguments with :func:`models.deepseek_ocr2.modes.processor_kwargs`.
"""

from __future__ import annotations

import functools
import pathlib

import torch
from PIL import Image

from inkstream.errors import InvalidInput
from models.deepseek_ocr2.checkpoint import checkpoint_identity
from models.deepseek_ocr2.decoder_half import TASK_TEMPLATES
from models.deepseek_ocr2.modes import processor_kwargs


def reference_generate(checkpoint_dir: str | pathlib.Path, image: Image.Image, mode: str, task: str,
                       max_new_tokens: int, prompt: str | None = None) -> list[int]:
    """Greedy token ids generated for one page, without the prompt (EOS included if produced).

    ``image``: PIL page (converted to RGB); ``mode``: gundam | base | small; ``task``: a key of
    ``decoder_half.TASK_TEMPLATES``; ``max_new_tokens``: upper bound on generated tokens.
    Runs in float32 on CPU. Raises InvalidInput for an unknown mode or task.
    """
    if task not in TASK_TEMPLATES:
        raise InvalidInput(f"unknown task {task!r}; known tasks: {', '.join(TASK_TEMPLATES)}")
    root = pathlib.Path(checkpoint_dir).resolve()
    model, processor = _load(str(root), checkpoint_identity(root)[1])
    kwargs = processor_kwargs(processor, mode)
    instruction = TASK_TEMPLATES[task].format(prompt=prompt) if prompt else TASK_TEMPLATES[task]
    text = "<image>\n" + instruction
    inputs = processor(images=image.convert("RGB"), text=text, return_tensors="pt", **kwargs)
    eos = _eos_ids(model, processor)
    with torch.inference_mode():
        out = model.generate(**inputs, do_sample=False, max_new_tokens=max_new_tokens, eos_token_id=sorted(eos),
                             pad_token_id=processor.tokenizer.pad_token_id)
    return out[0, inputs["input_ids"].shape[1]:].tolist()


@functools.lru_cache(maxsize=1)
def _load(checkpoint_dir: str, revision: str):
    """(full model in float32 eval mode, processor); the last checkpoint stays cached (keyed by its
    path and config revision) so a benchmark loop does not reload the weights per page.
    """
    from transformers import AutoProcessor, DeepseekOcr2ForConditionalGeneration  # heavy: transformers

    model = DeepseekOcr2ForConditionalGeneration.from_pretrained(checkpoint_dir, dtype=torch.float32).eval()
    return model, AutoProcessor.from_pretrained(checkpoint_dir)


def _eos_ids(model, processor) -> set[int]:
    """EOS ids: the text config's ``eos_token_id`` (int or list) plus the tokenizer's EOS."""
    eos = model.config.text_config.eos_token_id
    ids = {int(e) for e in (eos if isinstance(eos, list) else [eos]) if e is not None}
    if processor.tokenizer.eos_token_id is not None:
        ids.add(int(processor.tokenizer.eos_token_id))
    return ids


__all__ = ["reference_generate", "processor_kwargs"]
