"""Continuous-batching decode engine over a :class:`~models.base.DecoderHalf` (no gRPC here).

Scheduling (iteration-level, as in Orca, Yu et al., OSDI 2022, and vLLM):

* ``submit`` puts a sequence in a bounded waiting queue, ordered by :mod:`inkstream.fair` (priority
  class, then round-robin over requests, FIFO within one); beyond ``max_waiting`` queued sequences
  (plus the running rows still free, which the next step admits) it raises
  ResourceExhausted with a retry hint (seconds until the earliest running sequence is expected to
  finish, from the measured time per decode step).
* Between two decode steps the engine drops cancelled rows, admits waiting sequences while
  ``max_running`` and the KV-cache token budget allow, prefills the newcomers together in left-padded
  groups (:mod:`decoder_service.prefill`) and merges their KV cache into the running batch
  (:class:`~decoder_service.running_batch.RunningBatch`), then runs one batched decode step for
  every running sequence. Finished rows leave right after the step.
* KV budget: each sequence reserves ``prompt + max_new_tokens`` tokens. A sequence is admitted when
  the sum of reservations fits ``kv_cache_budget_tokens`` *and* so does the left-padded batch's worst
  case, ``rows x longest reservation`` (the padded cache is ``rows x longest length``). Admission
  takes sequences in fair order and stops at the first that does not fit, so a long sequence whose
  turn it is is not starved by shorter ones behind it. The cache buffers
  keep up to 25 % + 64 spare positions per row (:class:`~decoder_service.kv.GrowableLayer`); size
  the budget with that headroom in mind.
* Model steps run back to back on one dedicated model thread, which hands each step's tokens to the
  event loop with ``call_soon_threadsafe``; the asyncio side only queues, cancels and delivers
  per-sequence events, so decoding never waits for the loop (e.g. while it parses a large request).
  The waiting queue and cancel flags are shared under one lock; the batch (KV cache, row list) is
  written only by the model thread (the row list is replaced, never mutated in place, so the loop and
  metric callbacks always read a consistent snapshot). Prompt embedding runs on a second small
  thread so a new request does not wait for the decode step in flight.

The slow one-sequence reference is :func:`decoder_service.reference.generate_one`; for greedy
decoding and seeded sampling the engine returns exactly its tokens.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import logging
import threading
import time

import torch

from decoder_service import metrics
from decoder_service.delivery import deliver, publish
from decoder_service.detok import IncrementalDetokenizer
from decoder_service.reference import effective_max_new_tokens
from decoder_service.running_batch import RunningBatch, StepResult
from decoder_service.sampling import SamplingParams, make_generator
from decoder_service.sequence import Seq, SequenceEvent, SequenceStream, Usage
from decoder_service.step_pace import StepPace
from decoder_service.stopping import FinishReason, StopCriteria
from inkstream.errors import PayloadTooLarge, ResourceExhausted, Unavailable
from inkstream.fair import NO_KEY, FairQueue, WorkKey
from inkstream.fatal import ForwardHealth
from models.base import DecoderHalf

log = logging.getLogger("inkstream.decoder.engine")

__all__ = ["DecodeEngine", "SequenceEvent", "SequenceStream", "Usage", "FinishReason"]


class DecodeEngine:
    """Continuous-batching scheduler (see module docstring).

    ``max_running``: sequences in the running batch at most; ``max_waiting``: queued sequences before
    ResourceExhausted; ``kv_cache_budget_tokens``: KV-cache admission budget over all running
    sequences (tokens). Use as ``await engine.start()`` ... ``await engine.stop()`` inside one loop.
    """

    def __init__(self, half: DecoderHalf, *, max_running: int = 64, max_waiting: int = 64,
                 kv_cache_budget_tokens: int = 65536, name: str = "decoder"):
        if max_running < 1 or max_waiting < 0 or kv_cache_budget_tokens < 1:
            raise ValueError("max_running >= 1, max_waiting >= 0 and kv_cache_budget_tokens >= 1 are required")
        self.half = half
        self.max_running = max_running
        self.max_waiting = max_waiting
        self.kv_cache_budget_tokens = kv_cache_budget_tokens
        self.name = name
        self._ids = itertools.count(1)
        self._waiting: FairQueue[Seq] = FairQueue()
        self._batch = RunningBatch(half, max_running, kv_cache_budget_tokens)  # written by the model thread only
        # Trip wire over forward passes (inkstream.fatal); set by the server, None in bare tests.
        self.forward_health: ForwardHealth | None = None
        self._admitting: list[Seq] = []  # popped from the queue, being prefilled in the current step
        self._work = threading.Condition()  # guards _waiting and _closed; wakes the model thread
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._embedder: concurrent.futures.ThreadPoolExecutor | None = None
        self._closed = False
        self.pace = StepPace()  # measured seconds per iteration, sequences finishing per iteration
        self.steps = 0  # engine iterations run (each: optional prefills + one decode step)

    # ----------------------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        """Start the model thread (idempotent); events are delivered on the calling event loop."""
        if self._thread is None:
            self._loop = asyncio.get_running_loop()
            self._embedder = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=f"{self.name}-embed")
            self._thread = threading.Thread(target=self._run, name=f"{self.name}-model", daemon=True)
            self._thread.start()
            metrics.register(self)

    async def stop(self) -> None:
        """Cancel every sequence, then stop the model thread (after its step in flight)."""
        with self._work:  # the waiting queue is shared with the model thread
            waiting = list(self._waiting)
        for s in waiting + list(self._batch.rows):
            self.cancel_sequence(s)
        with self._work:
            self._closed = True
            self._work.notify_all()
        if self._thread is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._thread.join)
        for s in list(self._batch.rows) + list(self._admitting):  # joined the batch during the last step
            self.cancel_sequence(s)
        if self._embedder is not None:
            self._embedder.shutdown(wait=False, cancel_futures=True)
        self._batch.reset()
        metrics.unregister(self)

    # ----------------------------------------------------------------------------- observability
    def healthy(self) -> bool:
        """False once the model thread has ended (stopped, or died) after :meth:`start`."""
        return self._thread is None or (self._thread.is_alive() and not self._closed)

    @property
    def running_count(self) -> int:
        """Sequences in the running batch or being prefilled (cancelled rows excluded: they are freed
        before the next step).
        """
        running = self._batch.rows
        return sum(1 for s in running if not s.cancelled) + sum(
            1 for s in self._admitting if not s.cancelled and s not in running)

    @property
    def waiting_count(self) -> int:
        """Sequences in the waiting queue."""
        with self._work:
            return len(self._waiting)

    @property
    def kv_reserved_tokens(self) -> int:
        """Reserved KV tokens (prompt + max_new_tokens) of the running sequences."""
        return sum(s.reserve for s in self._batch.rows if not s.cancelled)

    @property
    def kv_used_tokens(self) -> int:
        """KV positions holding real tokens (prompt + generated) of the running sequences."""
        return sum(s.prompt_len + len(s.generated) for s in self._batch.rows if not s.cancelled)

    @property
    def kv_usage(self) -> float:
        """``kv_used_tokens / kv_cache_budget_tokens`` (0..1)."""
        return self.kv_used_tokens / self.kv_cache_budget_tokens

    # ----------------------------------------------------------------------------- submit / cancel
    def limit_max_new_tokens(self, prompt_len: int, params: SamplingParams) -> int:
        """Effective max_new_tokens for a prompt; raises InvalidInput when the sequence can never run."""
        max_new = effective_max_new_tokens(self.half, prompt_len, params)
        if max_new < 1:
            raise PayloadTooLarge(
                f"prompt of {prompt_len} tokens leaves no room to generate within the model's context "
                f"of {self.half.max_positions} tokens"
            )
        if prompt_len + max_new > self.kv_cache_budget_tokens:
            raise PayloadTooLarge(
                f"prompt ({prompt_len} tokens) + max_new_tokens ({max_new}) exceeds this decoder's KV-cache "
                f"budget of {self.kv_cache_budget_tokens} tokens; ask for fewer new tokens"
            )
        return max_new

    def check_capacity(self) -> None:
        """Raise ResourceExhausted (with a retry hint) when the waiting queue is full, Unavailable when stopped."""
        if self._closed:
            raise Unavailable("the decode engine is shutting down")
        # Queue room: max_waiting plus the running rows still free (those are admitted at the next step).
        waiting = self.waiting_count
        if waiting >= self.max_waiting + max(0, self.max_running - self.running_count):
            raise ResourceExhausted(
                f"decoder full: {self.running_count} running and {waiting} waiting sequences "
                f"(max_running={self.max_running}, max_waiting={self.max_waiting}); retry later or on another replica",
                retry_after_s=self.retry_after_s(),
            )

    def work_window_segments(self) -> int:
        """Segments this replica wants open at once (``InfoResponse.work_window_segments``,
        :meth:`StepPace.work_window`): a freed row is filled at the next step, nothing else waits.
        """
        return self.pace.work_window(self.max_running, self.max_waiting)

    def retry_after_s(self) -> float:
        """Seconds until the earliest running sequence is expected to finish (0.5..30 s)."""
        remaining = [s.max_new - len(s.generated) for s in self._batch.rows if not s.cancelled]
        return self.pace.retry_after_s(min(remaining) if remaining else 1)

    async def embed(self, vision_tokens: torch.Tensor, task: str | None = None,
                    prompt: str | None = None) -> torch.Tensor:
        """Prompt embeddings [L, H] for vision tokens [n, H] (cast to the model dtype / device), on the
        embedding thread. On a CUDA device the tokens go through pinned (page-locked) host memory, so
        the copy to the GPU is one DMA that does not block the model thread's stream. Raises
        InvalidInput for an unknown task (from the half).
        """
        vt = torch.as_tensor(vision_tokens)  # or numpy
        if self.half.device.type == "cuda":
            vt = vt.pin_memory().to(device=self.half.device, dtype=self.half.dtype, non_blocking=True)
        else:
            vt = vt.to(device=self.half.device, dtype=self.half.dtype)
        assert self._embedder is not None, "engine not started"
        return await asyncio.get_running_loop().run_in_executor(self._embedder, self._embed_sync, vt, task, prompt)

    def _embed_sync(self, vt: torch.Tensor, task: str | None, prompt: str | None) -> torch.Tensor:
        with torch.inference_mode():
            return self.half.embed_prompt(vt, task or self.half.default_task, prompt or None)

    async def submit(self, vision_tokens: torch.Tensor, params: SamplingParams, task: str | None = None,
                     prompt: str | None = None, whole: bool = False, key: WorkKey = NO_KEY) -> SequenceStream:
        """Embed the prompt and queue the sequence. ``whole``: its stream yields one event, when it
        finishes, with all its tokens and text (see :attr:`Seq.whole`); ``key``: its request and
        priority class, its turn in the waiting queue (:mod:`inkstream.fair`). Raises InvalidInput (bad
        task / too long), ResourceExhausted (queue full, with retry hint), Unavailable (stopping).
        """
        self.check_capacity()
        embeds = await self.embed(vision_tokens, task, prompt)
        return self.submit_embeds(embeds, params, n_vision=int(vision_tokens.shape[0]), whole=whole, key=key)

    def submit_embeds(self, embeds: torch.Tensor, params: SamplingParams, n_vision: int = 0,
                      whole: bool = False, key: WorkKey = NO_KEY) -> SequenceStream:
        """Queue a sequence from prompt embeddings [L, H] (model dtype, on the model device).

        Raises the same errors as :meth:`submit`.
        """
        self.check_capacity()
        L = int(embeds.shape[0])
        max_new = self.limit_max_new_tokens(L, params)
        seq = Seq(
            id=next(self._ids), embeds=embeds, prompt_len=L, n_vision=n_vision, params=params, max_new=max_new,
            stop=StopCriteria(params, self.half.eos_token_ids, max_new),
            detok=IncrementalDetokenizer(self.half.decode_text), generator=make_generator(params),
            arrival=time.perf_counter(), whole=whole, key=key,
        )
        with self._work:
            self._waiting.push(key, seq)
            self._work.notify()
        return SequenceStream(self, seq)

    def cancel_sequence(self, seq: Seq) -> None:
        """Cancel ``seq`` (idempotent; a no-op once it finished): it leaves the waiting queue or the
        running batch at the next step and its stream ends with finish reason ``cancelled``.
        """
        if seq.closed:
            return
        with self._work:
            seq.cancelled = True
            self._waiting.remove(seq)
            self._work.notify()
        deliver(seq, [], "", FinishReason.CANCELLED)
        metrics.finished(self, FinishReason.CANCELLED)

    # ----------------------------------------------------------------------------- scheduling loop
    def _run(self) -> None:
        """Model thread: plan, step, hand the results to the loop; sleep while there is no work."""
        assert self._loop is not None
        while True:
            with self._work:
                # Rows stay in the batch until freed, so a cancelled row also wakes the thread.
                while not self._closed and not self._waiting and not self._batch.rows:
                    self._work.wait()
                if self._closed:
                    break
                admits = self._batch.plan(self._waiting)
                self._admitting = admits
            result = self._finish_step(self._batch.step(admits))
            self._admitting = []
            try:
                self._loop.call_soon_threadsafe(publish, self, result)
            except RuntimeError:  # the event loop is closed: nobody is listening any more
                break

    def _finish_step(self, result: StepResult) -> StepResult:
        self.steps += 1
        if self.forward_health is not None:  # a step where rows failed and none advanced is a failed forward
            if result.failed and not result.events:
                self.forward_health.failure()
            elif result.events:
                self.forward_health.success()
        self.pace.observe(result.step_s, sum(1 for ev in result.events if ev[3] is not None))
        return result
