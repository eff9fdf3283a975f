"""DeepSeek-OCR-2 decoder half: tokenizer + prompt template + DeepSeek-V2 MoE text model + lm_head.

Built on transformers' ``DeepseekOcr2TextModel`` (the ``model.language_model`` of
``DeepseekOcr2ForConditionalGeneration``); only text-side tensors are read from the checkpoint.

Prompt templates are the DeepSeek-OCR-2 model card / README prompts (plain format, BOS prepended by
the tokenizer, one ``<image>`` expanded to ``n_tokens`` placeholders exactly as
``DeepseekOcr2Processor`` does). ``embed_prompt`` then replaces the placeholder embeddings with the
vision tokens in order, like ``DeepseekOcr2Model.forward``'s ``masked_scatter``.

Batching contract of :meth:`DeepseekOcr2DecoderHalf.forward` (continuous batching with left padding):
the text model builds its 4-D mask with ``create_causal_mask(attention_mask=[B, S], position_ids)``
and its rotary embedding from ``position_ids`` only, so a left-padded row gives the same logits as
the same sequence alone iff the caller passes ``attention_mask`` with 0 on pad slots (past and new)
and per-row ``position_ids`` counting only real tokens (``attention_mask.cumsum(-1) - 1``, which is
what ``GenerationMixin`` does). Pad slots' ``inputs_embeds`` may hold anything finite (e.g. zeros).

All computation runs under ``torch.no_grad()`` rather than ``inference_mode`` so the returned
embeddings and the KV-cache tensors are ordinary tensors a scheduler may slice, pad or update in
place (inference tensors refuse in-place updates outside inference mode).
"""

from __future__ import annotations

import pathlib
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from inkstream.errors import InvalidInput
from models.base import DecoderHalf
from models.deepseek_ocr2 import checkpoint as ckpt
from models.deepseek_ocr2.decode_step import install_sorted_experts, lean_step_for
from models.deepseek_ocr2.modes import modes_from_processor
from models.deepseek_ocr2.prefill_step import LeanPrefill

if TYPE_CHECKING:
    from transformers.models.deepseek_ocr2.modeling_deepseek_ocr2 import DeepseekOcr2TextModel

ATTN_IMPLEMENTATION = "sdpa"
IMAGE_TOKEN = "<image>"
# task -> instruction after "<image>\n" (DeepSeek-OCR-2 README prompts; "{prompt}" = caller's text).
TASK_TEMPLATES: dict[str, str] = {
    "markdown": "<|grounding|>Convert the document to markdown. ",
    "ocr": "Free OCR. ",
    "figure": "Parse the figure. ",
    "describe": "Describe this image in detail. ",
    "locate": "Locate <|ref|>{prompt}<|/ref|> in the image. ",
}


class DeepseekOcr2DecoderHalf(DecoderHalf):
    """Decoder half of ``deepseek_ocr2``: see the module docstring for the prompt and batching contract."""

    family = "deepseek_ocr2"

    def __init__(self, text_model: DeepseekOcr2TextModel, lm_head: nn.Linear, processor, config, loaded: set[str],
                 checkpoint_dir: pathlib.Path, device: torch.device, dtype: torch.dtype) -> None:
        self._text, self._lm_head, self._loaded = text_model, lm_head, loaded
        self._text_config = config.text_config
        self.tokenizer = processor.tokenizer
        self.image_token_id = int(config.image_token_id)
        self.model_id, self.revision = ckpt.checkpoint_identity(checkpoint_dir)
        self.hidden_size = int(config.text_config.hidden_size)
        self.vocab_size = int(config.text_config.vocab_size)
        self.device, self.dtype = device, dtype
        eos = config.text_config.eos_token_id
        self.eos_token_ids = {int(e) for e in (eos if isinstance(eos, list) else [eos]) if e is not None}
        if self.tokenizer.eos_token_id is not None:
            self.eos_token_ids.add(int(self.tokenizer.eos_token_id))
        # Largest page over all modes (gundam: global view + max tiles + view separator).
        self.max_vision_tokens = max(m.max_vision_tokens for m in modes_from_processor(processor).values())
        self.max_positions = int(config.text_config.max_position_embeddings)
        self.tasks = list(TASK_TEMPLATES)
        self.default_task = "markdown"
        self._control_ids = {self.image_token_id, *self.eos_token_ids} | {
            i for i in (self.tokenizer.bos_token_id, self.tokenizer.pad_token_id) if i is not None}
        # Decode steps (one new position per row) skip transformers' per-call glue when that gives
        # bit-identical results (models/deepseek_ocr2/decode_step.py); None: the text model's forward.
        self._lean_step = lean_step_for(text_model, lm_head)
        if self._lean_step is not None:  # prefill's routed experts too: same numbers, less bookkeeping
            install_sorted_experts(text_model)
        # Several prompts' prefill packed into one forward (models/deepseek_ocr2/prefill_step.py).
        self._lean_prefill = None if self._lean_step is None else LeanPrefill(self._lean_step, self.new_cache)

    @classmethod
    def load(cls, checkpoint_dir: str | pathlib.Path, device: str = "cpu",
             dtype: torch.dtype = torch.float32) -> DeepseekOcr2DecoderHalf:
        """Load tokenizer/processor config and ONLY the text tensors (embeddings, MoE layers, norm,
        lm_head). Raises InvalidInput for a directory that is not such a checkpoint.
        """
        from transformers import AutoProcessor, DeepseekOcr2Config, DeepseekOcr2TextConfig  # heavy: transformers
        from transformers.models.deepseek_ocr2.modeling_deepseek_ocr2 import DeepseekOcr2TextModel

        root = pathlib.Path(checkpoint_dir)
        state, loaded = ckpt.read_state_dict(root, lambda n: not ckpt.is_vision_name(n), dtype)
        config = DeepseekOcr2Config.from_pretrained(root)
        text_config = config.text_config
        assert isinstance(text_config, DeepseekOcr2TextConfig)  # sub-config dicts are built into configs on load
        text_config._attn_implementation = ATTN_IMPLEMENTATION
        text_model = ckpt.materialize(lambda: DeepseekOcr2TextModel(text_config),
                                      ckpt.strip_prefix(state, "model.language_model."), device)
        lm_head = ckpt.materialize(
            lambda: nn.Linear(text_config.hidden_size, text_config.vocab_size, bias=False),
            ckpt.strip_prefix(state, "lm_head."), device)
        processor = AutoProcessor.from_pretrained(root)
        return cls(text_model, lm_head, processor, config, loaded, root, torch.device(device), dtype)

    def prompt_text(self, n_tokens: int, task: str, prompt: str | None = None) -> str:
        """Prompt string with ``n_tokens`` ``<image>`` placeholders (BOS is added by the tokenizer).

        Raises InvalidInput for an unknown task, a missing/unexpected ``prompt`` (only ``locate``
        takes one: the text to find) or a prompt containing ``<image>``.
        """
        if task not in TASK_TEMPLATES:
            raise InvalidInput(f"unknown task {task!r}; known tasks: {', '.join(TASK_TEMPLATES)}")
        template = TASK_TEMPLATES[task]
        takes_prompt = "{prompt}" in template
        if takes_prompt and not prompt:
            raise InvalidInput(f"task {task!r} needs a prompt (the text to locate)")
        if not takes_prompt and prompt:
            raise InvalidInput(f"task {task!r} takes no prompt")
        if prompt and IMAGE_TOKEN in prompt:
            raise InvalidInput(f"prompt must not contain {IMAGE_TOKEN}")
        instruction = template.format(prompt=prompt) if takes_prompt else template
        return IMAGE_TOKEN * n_tokens + "\n" + instruction

    def prompt_ids(self, n_tokens: int, task: str, prompt: str | None = None) -> torch.Tensor:
        """Prompt token ids, LongTensor [L] (BOS, ``n_tokens`` image placeholders, instruction)."""
        ids = torch.tensor(self.tokenizer(self.prompt_text(n_tokens, task, prompt))["input_ids"], dtype=torch.long)
        found = int((ids == self.image_token_id).sum())
        if found != n_tokens:
            raise InvalidInput(f"prompt holds {found} image placeholders, expected {n_tokens}")
        return ids

    def embed_prompt(self, vision_tokens: torch.Tensor, task: str, prompt: str | None = None) -> torch.Tensor:
        """Prompt embeddings [L, H] (``self.dtype``, on ``device``) with the ``n_tokens`` placeholders
        replaced, in order, by ``vision_tokens`` [n_tokens, H]. Raises InvalidInput for an unknown
        task, a bad shape, more than ``max_vision_tokens`` tokens or a prompt longer than ``max_positions``.
        """
        vision_tokens = torch.as_tensor(vision_tokens)  # also a numpy array from a torch-free encoder half
        if vision_tokens.ndim != 2 or vision_tokens.shape[1] != self.hidden_size or vision_tokens.shape[0] < 1:
            raise InvalidInput(f"vision tokens must be [n_tokens, {self.hidden_size}], got {list(vision_tokens.shape)}")
        n = int(vision_tokens.shape[0])
        if n > self.max_vision_tokens:
            raise InvalidInput(f"{n} vision tokens exceed this model's maximum of {self.max_vision_tokens}")
        ids = self.prompt_ids(n, task, prompt)
        if ids.numel() >= self.max_positions:
            raise InvalidInput(f"prompt of {ids.numel()} tokens leaves no room in {self.max_positions} positions")
        with torch.no_grad():
            embeds = self.embed_tokens(ids.unsqueeze(0))[0]
            mask = (ids == self.image_token_id).to(self.device)
            embeds[mask] = vision_tokens.to(self.device, self.dtype)
        return embeds

    def embed_tokens(self, input_ids: torch.Tensor) -> torch.Tensor:
        """LongTensor [B, T] -> embeddings [B, T, H] (``self.dtype``)."""
        with torch.no_grad():
            return self._text.embed_tokens(input_ids.to(self.device))

    def new_cache(self) -> Any:
        """An empty ``transformers.DynamicCache`` for the text model (one layer entry per decoder layer)."""
        from transformers import DynamicCache  # heavy: transformers (loaded with the model)

        return DynamicCache(config=self._text_config)

    def forward(self, inputs_embeds: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor,
                past_key_values: Any) -> torch.Tensor:
        """Prefill or decode step: ``inputs_embeds`` [B, T, H], ``attention_mask`` [B, S] with
        S = cached + T (1 = real token, 0 = pad), ``position_ids`` [B, T] (real-token positions, see
        module docstring). Appends T positions to ``past_key_values`` (from :meth:`new_cache`) and
        returns the last position's logits [B, V] float32. Raises InvalidInput on shape mismatches.
        """
        self.check_step_inputs(inputs_embeds, attention_mask, position_ids, past_key_values)
        dev = self.device
        attention_mask = attention_mask.to(dev)
        if inputs_embeds.shape[1] == 1:
            # One new position sees every cached real position: the 4-D boolean mask [B, 1, 1, S] is
            # the padding mask itself, which transformers' create_causal_mask passes through as is
            # (it would build the same mask with per-element index arithmetic that grows with B x S:
            # 0.6-2 ms of a 19 ms decode step at 8 rows, hidden 512, 4 layers; same logits).
            attention_mask = attention_mask.bool()[:, None, None, :]
            if self._lean_step is not None:
                return self._lean_step(inputs_embeds.to(dev, self.dtype), attention_mask, position_ids.to(dev),
                                       past_key_values)
        with torch.no_grad():
            out = self._text(inputs_embeds=inputs_embeds.to(dev, self.dtype), attention_mask=attention_mask,
                             position_ids=position_ids.to(dev), past_key_values=past_key_values, use_cache=True)
            return self._lm_head(out.last_hidden_state[:, -1]).float()

    def prefill_packed(self, embeds: list[torch.Tensor]) -> tuple[torch.Tensor, Any, torch.Tensor] | None:
        """Packed prefill (:class:`~models.deepseek_ocr2.prefill_step.LeanPrefill`) where the lean
        decode step applies, else None (the caller runs the left-padded forward); see
        :meth:`DecoderHalf.prefill_packed`. Raises InvalidInput for a bad shape or a prompt longer
        than ``max_positions``.
        """
        if self._lean_step is None or self._lean_prefill is None or not embeds:
            return None
        for e in embeds:
            if e.ndim != 2 or e.shape[-1] != self.hidden_size or e.shape[0] < 1:
                raise InvalidInput(f"prompt embeddings must be [L, {self.hidden_size}], got {list(e.shape)}")
            if e.shape[0] > self.max_positions:
                raise InvalidInput(f"sequence of {e.shape[0]} positions exceeds the model's {self.max_positions}")
        return self._lean_prefill([e.to(self.device, self.dtype) for e in embeds])

    def decode_text(self, token_ids: list[int]) -> str:
        """Token ids -> text. Control tokens (BOS, EOS, pad, image) are dropped; the layout markup
        tokens (``<|ref|>``, ``<|det|>``, ...) are KEPT, as DeepSeek-OCR-2's own decoding does
        (``skip_special_tokens=False``), so the gateway can parse grounding boxes.
        """
        return self.tokenizer.decode([i for i in token_ids if i not in self._control_ids], skip_special_tokens=False)

    def loaded_tensor_names(self) -> set[str]:
        """Checkpoint names of the text tensors read at load time."""
        return set(self._loaded)
