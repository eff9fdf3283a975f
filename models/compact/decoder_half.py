"""Decoder half of the ``compact`` family: character tokenizer + DeepSeek-V2 MoE causal LM.

Prompt (one text line = one segment): ``[n vision tokens][<s>]``; the model then writes the line's
characters and ``</s>``. This is exactly the sequence the model was trained on (models/compact/model.py),
so there is one task, ``ocr``, and no free-text prompt.

Batching contract of :meth:`CompactDecoderHalf.forward` (continuous batching with left padding):
``DeepseekV2Model`` builds its causal mask from ``attention_mask`` [B, S] and its rotary embedding from
``position_ids`` only, so a left-padded row gives the same logits as the same sequence alone when
the caller passes 0 on pad slots (past and new) and per-row ``position_ids`` that count only real
tokens (``attention_mask.cumsum(-1) - 1``), as ``GenerationMixin`` does.

Attention runs with DeepSeek-V2's absorbed up-projections against the compressed (latent) KV cache
(:mod:`models.compact.decode.mla`); the cache holds exactly what transformers' own module would cache.

A checkpoint with a ``"copy"`` entry (bilingual ones) writes through a pointer-generator output
(:mod:`models.compact.decode.copy_head`): its vision tokens and inputs are ``hidden + copy_width`` wide (the
extra columns: each token's copy classes; zero for token embeddings), :meth:`forward` returns
log-probabilities of the mixture, and the cache holds two extra layers: each position's classes and
the attention the writing steps have put on it so far (coverage). A checkpoint with a ``"spacing"``
entry adds two more columns (the spacing head's probabilities, :mod:`models.compact.decode.spacing`), read
only when a segment is finished (:meth:`CompactDecoderHalf.finish_tokens`, which delegates to the
one finishing function, :func:`models.compact.decode.finish.finish_segment`).

Everything runs under ``torch.no_grad()`` so KV-cache tensors are ordinary tensors a scheduler may
slice, pad or update in place.
"""

from __future__ import annotations

import pathlib
from typing import Any

import torch
from transformers import DeepseekV2Config, DeepseekV2ForCausalLM, DynamicCache
from transformers.cache_utils import DynamicLayer

from inkstream.errors import InvalidInput
from models.base import DecoderHalf
from models.compact import checkpoint as ckpt
from models.compact.decode.copy_head import (
    PointerCopy,
    advance,
    keep_confident_spike,
    pointer_attention,
    pointer_end,
    spike_frames,
)
from models.compact.decode.finish import FinishRules, FinishState, finish_segment, finish_state
from models.compact.decode.mla import absorb_mla
from models.compact.line.columns import copy_width, pack, unpack
from models.compact.line.image import MAX_TOKENS
from models.compact.line.inkcolumns import SPACING_WIDTH
from models.compact.line.token_columns import token_columns
from models.compact.vocab import BOS_ID, CHARSET, EOS_ID, SPECIALS, load_tokenizer

ATTN_IMPLEMENTATION = "sdpa"

#: Output rows of the Latin characters: the special ids, then :data:`models.compact.vocab.CHARSET`; a
#: bilingual vocabulary keeps them first (:mod:`models.compact.vocab_zh`).
LATIN_ROWS = len(SPECIALS) + len(CHARSET)
TASKS = ["ocr"]


class CompactDecoderHalf(DecoderHalf):
    """Tokenizer + DeepSeek-V2 MoE LM of ``compact``; see the module docstring for prompt and batching."""

    family = "compact"

    def __init__(self, lm: DeepseekV2ForCausalLM, tokenizer, loaded: set[str], model_id: str, revision: str,
                 device: torch.device, dtype: torch.dtype, copy: PointerCopy | None = None,
                 spacing_confidence: float | None = None) -> None:
        self._lm, self.tokenizer, self._loaded, self._copy = lm, tokenizer, loaded, copy
        self.model_id, self.revision = model_id, revision
        cfg = lm.config
        self.model_width, self.vocab_size = int(cfg.hidden_size), int(cfg.vocab_size)
        #: columns of copy classes after the decoder's own (0 without a copy head)
        self.copy_columns = copy_width(copy.topk) if copy is not None else 0
        #: the spacing head's override confidence (config ``spacing``; None: the checkpoint has none)
        self.spacing_confidence = spacing_confidence if copy is not None else None
        spacing = SPACING_WIDTH if self.spacing_confidence is not None else 0
        #: width of vision tokens and inputs: the decoder's, plus the copy columns of a copy checkpoint
        #: and the spacing head's two probabilities (models/compact/decode/spacing.py)
        self.hidden_size = self.model_width + self.copy_columns + spacing
        #: those extra columns as the encoder half declares them (models/compact/line/token_columns.py)
        self.extra_columns = token_columns(copy.topk if copy is not None else 0, spacing > 0)
        self.device, self.dtype = device, dtype
        self.eos_token_ids = {EOS_ID}
        #: the finishing chain's settings (models/compact/decode/finish.py)
        self.finish_rules = FinishRules.from_vocab(tokenizer.get_vocab(), self.eos_token_ids, self.spacing_confidence)
        self.max_vision_tokens = MAX_TOKENS
        self.max_positions = int(cfg.max_position_embeddings)
        self.tasks, self.default_task = list(TASKS), "ocr"

    @classmethod
    def load(cls, checkpoint_dir: str | pathlib.Path, device: str = "cpu",
             dtype: torch.dtype = torch.float32) -> CompactDecoderHalf:
        """Read config.json, tokenizer.json and ONLY the ``decoder.*`` tensors. Raises InvalidInput for
        a directory that is not a compact checkpoint.
        """
        cfg = ckpt.read_config(checkpoint_dir)
        dcfg = DeepseekV2Config.from_dict(cfg["decoder"])
        dcfg._attn_implementation = ATTN_IMPLEMENTATION
        state, loaded = ckpt.load_prefixed(checkpoint_dir, ckpt.DECODER_PREFIX)
        lm = DeepseekV2ForCausalLM(dcfg)  # a few MB: initialising it first costs nothing worth avoiding
        lm.load_state_dict({k: v.float() for k, v in state.items()}, strict=True)
        # PreTrainedModel.to is @functools.wraps(nn.Module.to): the _Wrapped type loses the bound self.
        lm = lm.to(device=device, dtype=dtype).eval()  # type: ignore[call-arg]
        absorb_mla(lm)  # inference-only attention against the latent KV cache (models/compact/decode/mla.py)
        copy = None
        if "copy" in cfg:
            copy_state, names = ckpt.load_prefixed(checkpoint_dir, ckpt.COPY_PREFIX)
            copy = PointerCopy(dcfg.hidden_size, int(cfg["copy"]["topk"]), tuple(cfg["copy"]["heads"]),
                               cfg["copy"].get("pointer") == "monotonic")
            copy.load_state_dict({k: v.float() for k, v in copy_state.items()}, strict=True)
            copy = copy.to(device=device, dtype=dtype).eval()
            lm.model.layers[-1].self_attn.keep_attention_heads = copy.heads  # read by mla.py
            loaded = loaded | names
        try:
            tok = load_tokenizer(checkpoint_dir)
        except FileNotFoundError as e:
            raise InvalidInput(f"{checkpoint_dir}: {e}") from None
        model_id, revision = ckpt.checkpoint_identity(checkpoint_dir)
        confidence = float(cfg["spacing"]["confidence"]) if "spacing" in cfg and copy is not None else None
        return cls(lm, tok, loaded, model_id, revision, torch.device(device), dtype, copy, confidence)

    def embed_prompt(self, vision_tokens: torch.Tensor, task: str, prompt: str | None = None) -> torch.Tensor:
        """``[vision_tokens; emb(<s>)]`` -> [n_tokens + 1, H] (``dtype``, on ``device``). Raises
        InvalidInput for an unknown task, a prompt (none is taken), a bad shape or too many tokens.
        """
        vision_tokens = torch.as_tensor(vision_tokens)  # also a numpy array from a torch-free encoder half
        if task not in TASKS:
            raise InvalidInput(f"unknown task {task!r}; known tasks: {', '.join(TASKS)}")
        if prompt:
            raise InvalidInput(f"task {task!r} takes no prompt")
        if vision_tokens.ndim != 2 or vision_tokens.shape[1] != self.hidden_size or vision_tokens.shape[0] < 1:
            raise InvalidInput(f"vision tokens must be [n_tokens, {self.hidden_size}], got {list(vision_tokens.shape)}")
        if vision_tokens.shape[0] > self.max_vision_tokens:
            raise InvalidInput(f"{vision_tokens.shape[0]} vision tokens exceed this model's maximum of "
                               f"{self.max_vision_tokens}")
        bos = self.embed_tokens(torch.tensor([[BOS_ID]]))[0]
        return torch.cat([vision_tokens.to(self.device, self.dtype), bos], 0)

    def embed_tokens(self, input_ids: torch.Tensor) -> torch.Tensor:
        """LongTensor [B, T] -> embeddings [B, T, H] (``dtype``; H = :attr:`hidden_size`). The copy
        columns of a copy checkpoint carry the token's own id with weight 0 (:func:`pack`): never a
        class to copy, but how the monotonic pointer learns what the last step wrote, whatever the
        scheduler sampled.
        """
        with torch.no_grad():
            ids = input_ids.to(self.device)
            emb = self._lm.model.embed_tokens(ids)
            if self._copy is None:
                return emb
            k = self._copy.topk
            slots = torch.nn.functional.pad(ids[..., None], (0, k - 1))  # [B, T, k]: the id, then zeros
            cols = pack(torch.zeros(slots.shape), slots).to(emb.dtype)
            extra = self.hidden_size - self.model_width - self.copy_columns  # a text position has no spacing
            return torch.cat([emb, torch.nn.functional.pad(cols, (0, extra))], -1)

    def new_cache(self) -> Any:
        """An empty ``transformers.DynamicCache`` (one layer per decoder layer, plus the copy-class and
        coverage layers of a pointer-generator checkpoint).
        """
        cache = DynamicCache(config=self._lm.config)
        if self._copy is not None:  # copy classes, then coverage (copy_head.py)
            cache.layers += [DynamicLayer(), DynamicLayer()]
        return cache

    def forward(self, inputs_embeds: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor,
                past_key_values: Any) -> torch.Tensor:
        """Prefill or decode step: ``inputs_embeds`` [B, T, H], ``attention_mask`` [B, S] with
        S = cached + T (1 = real, 0 = pad), ``position_ids`` [B, T]. Appends T positions to
        ``past_key_values`` and returns the last position's logits [B, V] float32 (log-probabilities
        of the pointer-generator mixture for a checkpoint with a copy head). Raises InvalidInput on
        shape mismatches or a sequence beyond ``max_positions``.
        """
        self.check_step_inputs(inputs_embeds, attention_mask, position_ids, past_key_values)
        x = inputs_embeds.to(self.device, self.dtype)
        with torch.no_grad():
            out = self._lm.model(inputs_embeds=x[..., : self.model_width],
                                 attention_mask=attention_mask.to(self.device),
                                 position_ids=position_ids.to(self.device),
                                 past_key_values=past_key_values, use_cache=True)
            h = out.last_hidden_state[:, -1]
            if self._copy is None:
                return self._lm.lm_head(h).float()
            return self._mix(x, h, past_key_values)

    def _latin_alone(self, h: torch.Tensor) -> torch.Tensor:
        """Final hidden states [B, H] -> log-probabilities float32 [B, V] over the Latin characters
        alone (ids below :data:`LATIN_ROWS`; -inf elsewhere): how a bilingual checkpoint writes a
        Latin-tower line. The script head sent the line there because it holds no CJK script, and
        these are exactly the characters the Latin checkpoint writes; computing 256 of the 7,698 rows
        of the output layer is most of a decode step's cost saved on an English page (the output
        layer, 160 x 7,698, is ~4x the MACs of the rest of the 2-layer decoder per token).
        """
        w, b = self._lm.lm_head.weight[:LATIN_ROWS], self._lm.lm_head.bias
        lsm = torch.nn.functional.linear(h, w, None if b is None else b[:LATIN_ROWS]).float().log_softmax(-1)
        out = lsm.new_full((h.shape[0], self.vocab_size), float("-inf"))
        out[:, :LATIN_ROWS] = lsm
        return out

    def _mix(self, x: torch.Tensor, h: torch.Tensor, cache: Any) -> torch.Tensor:
        """Pointer-generator output: store this call's positions' copy classes (the input's extra
        columns) and zero coverage in the cache's two extra layers, mix, then update the coverage
        (by this step's attention; for a monotonic pointer by the token this call was given). With a
        monotonic pointer a row without any copy class (a Latin-tower line) gets the decoder's own
        log-softmax over the Latin characters (:meth:`_latin_alone`), as training reads those lines
        (plain cross-entropy): its confidences are not scaled by a gate that never saw such rows, and
        only the PP-tower rows of a batch go through the full output layer and the mixture.
        """
        assert self._copy is not None
        q, ids = unpack(x[..., self.model_width: self.model_width + self.copy_columns], self.vocab_size)
        n_layers = len(cache.layers)
        all_ids, all_q = cache.update(ids.float()[:, None], q[:, None], n_layers - 2)
        zeros = q.new_zeros(*q.shape[:2], 1)[:, None]  # [B, 1, T, 1]: new positions are not covered yet
        covered, _ = cache.update(zeros, zeros, n_layers - 1)  # the cache's own tensor: updated in place below
        cq, cids, cov = all_q[:, 0], all_ids[:, 0].long(), covered[:, 0, :, 0]
        if not self._copy.pointer:
            attention = self._lm.model.layers[-1].self_attn.last_attention.mean(1)  # [B, S]
            out = self._copy.mix(self._lm.lm_head(h).float(), h, attention, cq, cids, cov)
            cov += attention.float()
            return out
        read = spike_frames(cq).any(-1)  # [B]: rows with the recogniser's reading (PP-tower lines)
        if not bool(read.any()):  # Latin-tower lines only: the decoder alone, as it was trained on them
            return self._latin_alone(h)
        if x.shape[1] == 1:  # a decode step: the token fed (its id in the copy columns) is what was written
            cov.copy_(advance(pointer_attention(cq, cov), cq, cids, cov, ids[:, 0, 0]))
        at = pointer_attention(cq, cov)
        pp = read.nonzero()[:, 0]
        mixed = self._copy.mix(self._lm.lm_head(h[pp]).float(), h[pp], at[pp], cq[pp], cids[pp],
                               end=pointer_end(cq[pp], at[pp]))
        mixed = keep_confident_spike(mixed, cq[pp], cids[pp], at[pp], cov[pp])
        if len(pp) == len(read):
            return mixed
        out = self._latin_alone(h)
        out[pp] = mixed
        return out

    def finish_state(self, prompt_embeds: torch.Tensor) -> FinishState | None:
        """The :class:`~models.compact.decode.finish.FinishState` of a prompt (``prompt_embeds`` [L, H] as
        :meth:`embed_prompt` made it): its copy classes and, with a spacing head, the head's
        probabilities at its character spikes, moved to the host
        (:func:`models.compact.decode.finish.finish_state`). None without a monotonic-pointer copy head
        or for a prompt without spikes (a Latin-tower line).
        """
        if self._copy is None or not self._copy.pointer or prompt_embeds.shape[-1] <= self.model_width:
            return None
        extra = prompt_embeds[..., self.model_width:].detach().float().cpu()
        q, ids = unpack(extra[..., : self.copy_columns], self.vocab_size)
        spacing = None
        if self.spacing_confidence is not None:
            spacing = extra[..., self.copy_columns: self.copy_columns + SPACING_WIDTH]
        return finish_state(q, ids, self.finish_rules.space_id, spacing)

    def finish_tokens(self, state: FinishState | None, token_ids: list[int]) -> list[int]:
        """``token_ids`` (EOS last when it ended the segment) after the finishing chain: overrun trim,
        unread repeats, spacing head (:func:`models.compact.decode.finish.finish_segment`). Returns
        ``token_ids`` itself when nothing changes; a change may keep the length or grow it.
        """
        return finish_segment(state, token_ids, self.finish_rules)

    def decode_text(self, token_ids: list[int]) -> str:
        """Token ids -> text; special tokens (ids 0-4) are dropped."""
        return self.tokenizer.decode([int(i) for i in token_ids if int(i) >= len(SPECIALS)], skip_special_tokens=True)

    def loaded_tensor_names(self) -> set[str]:
        """Checkpoint names of the ``decoder.*`` tensors read at load time."""
        return set(self._loaded)
