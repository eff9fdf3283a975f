"""The n-gram repetition guard as a vLLM logits processor (vLLM V1 ``LogitsProcessor`` interface).

The builtin engine stops a looping sequence with finish reason ``repetition`` on the token that
completes the loop (:class:`decoder_service.stopping.StopCriteria`). Under vLLM the same
:class:`~decoder_service.repetition.NGramLoopDetector` runs inside the engine core, over each
request's output tokens: once it fires, the request's next logits allow only its end-of-sequence
token, so vLLM spends no more steps on it. :class:`decoder_service.vllm_engine.VllmEngine` runs the
same stop rules on the streamed tokens, ends the sequence with ``repetition`` on the token that
completed the loop and drops the forced EOS, so both engines finish the same way, on the same token.

:func:`non_mla_config` is the engine's ``hf_overrides`` for the exported config (see
:mod:`models.deepseek_ocr2.vllm_export`).

A request turns the guard on with ``SamplingParams.extra_args[EXTRA_KEY] = [n, window, repeats, eos_id]``.
vLLM is imported only when this module is (by the engine core, from ``logits_processors``).
"""

from __future__ import annotations

from typing import Any

import torch
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality

from decoder_service.repetition import NGramLoopDetector

EXTRA_KEY = "inkstream_ngram_guard"


class _Row:
    __slots__ = ("detector", "output", "pushed", "eos", "tripped")

    def __init__(self, detector: NGramLoopDetector, output: list[int], eos: int):
        self.detector, self.output, self.eos = detector, output, eos
        self.pushed, self.tripped = 0, False

    def catch_up(self) -> None:
        out = self.output  # vLLM's own running list of the request's output tokens
        while not self.tripped and self.pushed < len(out):
            tok = out[self.pushed]
            if tok < 0:  # a placeholder of a step still in flight (async scheduling)
                return
            self.pushed += 1
            self.tripped = self.detector.push(int(tok))


class NGramGuardLogitsProcessor(LogitsProcessor):
    """Forces EOS for a request whose output tokens loop (see the module docstring)."""

    def __init__(self, vllm_config: Any, device: torch.device, is_pin_memory: bool) -> None:
        self._rows: dict[int, _Row] = {}

    @classmethod
    def validate_params(cls, sampling_params: Any) -> None:
        """Refuse a malformed guard argument (ValueError -> a 400 in vLLM's terms)."""
        arg = (sampling_params.extra_args or {}).get(EXTRA_KEY)
        if arg is not None:
            n, window, repeats, _eos = (int(v) for v in arg)
            NGramLoopDetector(n, window, repeats)  # raises ValueError for bad sizes

    def is_argmax_invariant(self) -> bool:
        """False: forcing EOS changes greedy choices."""
        return False

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        """Track added / removed / moved requests, then push their new output tokens."""
        if batch_update is not None:
            for index in batch_update.removed:
                self._rows.pop(index, None)
            for index, params, _prompt, output in batch_update.added:
                arg = (params.extra_args or {}).get(EXTRA_KEY) if params is not None else None
                if arg is None:
                    self._rows.pop(index, None)
                    continue
                n, window, repeats, eos = (int(v) for v in arg)
                self._rows[index] = _Row(NGramLoopDetector(n, window, repeats), output, eos)
            for a, b, direction in batch_update.moved:
                row_a, row_b = self._rows.pop(a, None), self._rows.pop(b, None)
                if row_a is not None:
                    self._rows[b] = row_a
                if direction == MoveDirectionality.SWAP and row_b is not None:
                    self._rows[a] = row_b
        for row in self._rows.values():
            row.catch_up()

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        """Rows of looping requests: every logit but EOS's becomes -inf."""
        for index, row in self._rows.items():
            if row.tripped and index < logits.shape[0]:
                keep = logits[index, row.eos].clone()
                logits[index].fill_(float("-inf"))
                logits[index, row.eos] = keep
        return logits


def non_mla_config(config: Any) -> Any:
    """The ``hf_overrides`` of vLLM for an inkstream export: ``kv_lora_rank`` None (vLLM treats a
    DeepSeek-V2 config with None as plain multi-head attention; transformers' strict config class
    refuses None in config.json, so the export writes 0). Returns ``config``, changed in place.
    """
    text = getattr(config, "text_config", config)
    if getattr(text, "kv_lora_rank", None) == 0:
        object.__setattr__(text, "kv_lora_rank", None)  # bypasses the strict dataclass's type check
    return config
