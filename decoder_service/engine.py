"""The decoder's engine seam: one interface the servicer talks to, and the factory that picks an engine.

Engines (``DecoderConfig.engine``):

* ``builtin`` - :class:`decoder_service.scheduler.DecodeEngine`, our own continuous batching over a
  :class:`models.base.DecoderHalf` (torch, any device; the default, and what CPU replicas run);
* ``vllm`` - :class:`decoder_service.vllm_engine.VllmEngine`, vLLM's ``AsyncLLM`` in the decoder
  process over the family's language model exported by ``inkstream export-vllm`` (GPU replicas).

Both take the same prompt (the half's ``prompt_ids`` with the vision tokens in the image
placeholder positions), apply the same stop rules in the same order
(:class:`decoder_service.stopping.StopCriteria`: EOS, n-gram loop, length) and deliver the same
:class:`~decoder_service.sequence.SequenceEvent` s, so greedy token ids agree between them
(``tests/decoder/test_engine_contract.py``). The servicer owns deadlines (the gRPC call's), cancellation
(:meth:`EngineStream.cancel` when the call ends) and the error map (:mod:`inkstream.errors`).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from decoder_service.sampling import SamplingParams
from decoder_service.sequence import SequenceEvent
from inkstream.fair import NO_KEY, WorkKey

if TYPE_CHECKING:
    import torch

    from decoder_service.config import DecoderConfig
    from inkstream.fatal import ForwardHealth
    from models.base import DecoderHalf

ENGINES = ("builtin", "vllm")


@runtime_checkable
class EngineStream(Protocol):
    """One submitted sequence: an async iterator of :class:`SequenceEvent` s that ends after the
    event with ``finish_reason`` set; raises :class:`inkstream.errors.InternalError` when the engine
    failed while running it.
    """

    @property
    def prompt_tokens(self) -> int:
        """Prompt length in tokens (vision + text)."""

    def cancel(self) -> None:
        """Abort the sequence (idempotent): it frees its slot and KV cache, and its stream ends with
        finish reason ``cancelled``.
        """

    def __aiter__(self) -> EngineStream: ...

    async def __anext__(self) -> SequenceEvent: ...


class DecoderEngine(Protocol):
    """What the decoder servicer needs of an engine (no gRPC here).

    ``half`` gives the model facts the servicer checks requests against before they reach the engine
    (``hidden_size``, ``max_vision_tokens``, ``revision``, ``tasks``) and the prompt template.
    Limits: ``max_running`` / ``max_waiting`` sequences, ``kv_cache_budget_tokens`` tokens.
    Metrics (read on scrape by :mod:`decoder_service.metrics`): ``running_count``, ``waiting_count``,
    ``kv_used_tokens``, ``kv_reserved_tokens``, ``kv_usage`` (0..1); TTFT / TPOT per sequence are
    recorded by the engine and reported in each finishing event's :class:`~decoder_service.sequence.Usage`.
    """

    name: str
    half: DecoderHalf
    max_running: int
    max_waiting: int
    kv_cache_budget_tokens: int
    forward_health: ForwardHealth | None

    async def start(self) -> None:
        """Start the engine (idempotent); events are delivered on the calling event loop."""

    async def stop(self) -> None:
        """Abort every sequence and release the engine (model thread / engine core)."""

    async def submit(self, vision_tokens: torch.Tensor, params: SamplingParams, task: str | None = None,
                     prompt: str | None = None, whole: bool = False, key: WorkKey = NO_KEY) -> EngineStream:
        """Queue one sequence: ``vision_tokens`` [n, hidden_size] (any float dtype, CPU), ``task`` /
        ``prompt`` for the half's template. ``whole``: one event at the finish. Raises InvalidInput
        (bad shape / task / too long), ResourceExhausted (full, with a retry hint), Unavailable (stopping).
        """

    def healthy(self) -> bool:
        """False once the engine cannot decode any more (its model thread or engine core died)."""

    def work_window_segments(self) -> int:
        """Segments this replica wants open at once (``InfoResponse.work_window_segments``)."""

    @property
    def running_count(self) -> int:
        """Sequences running (decoding)."""

    @property
    def waiting_count(self) -> int:
        """Sequences queued or prefilling."""

    @property
    def kv_used_tokens(self) -> int:
        """KV-cache tokens holding prompt + generated positions."""

    @property
    def kv_reserved_tokens(self) -> int:
        """KV-cache tokens reserved (prompt + max_new_tokens)."""

    @property
    def kv_usage(self) -> float:
        """``kv_used_tokens / kv_cache_budget_tokens`` (0..1)."""


async def drain(engine: DecoderEngine, grace_s: float, poll_s: float = 0.05) -> bool:
    """Wait until ``engine`` runs and queues no sequence, at most ``grace_s`` seconds; True when it
    emptied in time (the caller stops the engine either way).
    """
    end = time.monotonic() + grace_s
    while engine.running_count or engine.waiting_count:
        if time.monotonic() >= end:
            return False
        await asyncio.sleep(poll_s)
    return True


def make_engine(cfg: DecoderConfig, half: DecoderHalf, name: str) -> DecoderEngine:
    """The engine ``cfg.engine`` names over ``half`` (for ``vllm``, also ``cfg.vllm``'s exported model).

    Raises ValueError for an unknown engine name and ImportError when vLLM is not installed.
    """
    if cfg.engine == "builtin":
        from decoder_service.scheduler import DecodeEngine

        return DecodeEngine(half, max_running=cfg.max_running, max_waiting=cfg.max_waiting,
                            kv_cache_budget_tokens=cfg.kv_cache_budget_tokens, name=name)
    if cfg.engine == "vllm":
        from decoder_service.vllm_engine import VllmEngine  # imports vllm lazily, in start()

        return VllmEngine(half, cfg, name=name)
    raise ValueError(f"unknown decoder engine {cfg.engine!r}; known: {', '.join(ENGINES)}")
