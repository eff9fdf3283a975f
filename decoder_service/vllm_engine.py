"""The ``vllm`` decoder engine: vLLM's ``AsyncLLM`` in the decoder process (paged attention, CUDA
graphs, fused MoE kernels on a GPU), behind :class:`decoder_service.engine.DecoderEngine`.

vLLM serves the family's language model as exported by ``inkstream export-vllm``
(:mod:`models.deepseek_ocr2.vllm_export`; default ``<model_dir>/vllm``). Each sequence goes in as a
mixed ``EmbedsPrompt`` (vLLM >= 0.32): ``prompt_token_ids`` = the half's prompt ids,
``prompt_is_token_ids`` False at the image placeholders, whose rows of ``prompt_embeds`` [L, H] are
the vision tokens (the other rows are the token embeddings, which vLLM recomputes). The half
(loaded on CPU) gives the prompt template, the tokenizer and the model facts; shapes are checked
here before anything reaches vLLM.

Sampling maps to ``vllm.SamplingParams(output_kind=DELTA, logprobs=0, max_tokens, temperature,
top_p, top_k, seed, stop_token_ids=EOS)`` with ``logprobs_mode="raw_logprobs"`` set on the engine
(the log-probability of the chosen token before any processing, as the builtin engine reports it).
The stop rules are the builtin engine's (:class:`decoder_service.stopping.StopCriteria`, applied to
the streamed tokens; the n-gram guard also runs in vLLM as a logits processor,
:mod:`decoder_service.vllm_guard`, so a looping request stops there too). Seeded sampling draws
differ from the builtin engine's (another RNG); greedy decoding gives the same token ids.

A dead engine core (``EngineDeadError``, ``AsyncLLM.errored``) trips ``forward_health`` at once, so
the replica reports NOT_SERVING and exits (:mod:`inkstream.fatal`). vLLM is imported in
:meth:`VllmEngine.start` only.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import pathlib
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from decoder_service import metrics
from decoder_service.detok import IncrementalDetokenizer
from decoder_service.reference import effective_max_new_tokens
from decoder_service.sampling import SamplingParams
from decoder_service.sequence import SequenceEvent, Usage, sequence_confidence
from decoder_service.stopping import FinishReason, StopCriteria
from inkstream.errors import InternalError, InvalidInput, PayloadTooLarge, ResourceExhausted, Unavailable
from inkstream.fair import NO_KEY, WorkKey
from inkstream.fatal import DeviceLost, ForwardHealth
from models.base import DecoderHalf

if TYPE_CHECKING:
    from decoder_service.config import DecoderConfig

log = logging.getLogger("inkstream.decoder.vllm")
EXPORT_MARKER = "inkstream_export.json"  # written by inkstream export-vllm (models.*.vllm_export)


def export_dir(cfg: DecoderConfig) -> pathlib.Path:
    """The exported language model the engine serves: ``cfg.vllm.model_dir`` or ``<model_dir>/vllm``."""
    return pathlib.Path(cfg.vllm.model_dir or pathlib.Path(cfg.model_dir) / "vllm")


def check_export(path: pathlib.Path, revision: str) -> None:
    """Raise InvalidInput when ``path`` holds no export, or one of another checkpoint than ``revision``."""
    if not (path / "config.json").is_file():
        raise InvalidInput(f"no vLLM export in {path}: run `inkstream export-vllm --model CHECKPOINT --out {path}`")
    try:
        made_from = json.loads((path / EXPORT_MARKER).read_text()).get("revision")
    except (OSError, ValueError):
        made_from = None
    if made_from is not None and made_from != revision:
        raise InvalidInput(f"the vLLM export in {path} was made from checkpoint revision {made_from}, "
                           f"but the decoder serves {revision}; export it again")


@dataclass(eq=False)
class _Req:
    """One sequence in vLLM (event-loop state only)."""

    rid: str
    prompt_len: int
    n_vision: int
    stop: StopCriteria
    detok: IncrementalDetokenizer
    whole: bool
    arrival: float
    finish_state: Any = None
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)
    generated: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    held_text: list[str] = field(default_factory=list)
    first_t: float = 0.0
    last_t: float = 0.0
    closed: bool = False
    task: asyncio.Task | None = None

    def usage(self) -> Usage:
        n = len(self.generated)
        ttft = (self.first_t - self.arrival) if self.first_t else 0.0
        tpot = (self.last_t - self.first_t) / (n - 1) if n > 1 else 0.0
        return Usage(self.prompt_len, self.n_vision, n, ttft, tpot, sequence_confidence(sum(self.logprobs), n))


class VllmStream:
    """One sequence's events (:class:`decoder_service.engine.EngineStream`)."""

    def __init__(self, engine: VllmEngine, req: _Req):
        self._engine, self._req = engine, req

    @property
    def prompt_tokens(self) -> int:
        """Prompt length in tokens (vision + text)."""
        return self._req.prompt_len

    def cancel(self) -> None:
        """Abort in vLLM (frees its KV blocks) and end the stream with ``cancelled`` (idempotent)."""
        self._engine.cancel(self._req)

    def __aiter__(self) -> VllmStream:
        return self

    async def __anext__(self) -> SequenceEvent:
        item = await self._req.queue.get()
        if item is None:
            raise StopAsyncIteration
        if isinstance(item, BaseException):
            raise item
        return item


class VllmEngine:
    """vLLM ``AsyncLLM`` behind the decoder engine interface (see the module docstring).

    ``half``: the family's decoder half (prompt template, tokenizer, model facts; load it on CPU);
    ``cfg``: limits (``max_running`` -> vLLM ``max_num_seqs``, ``max_waiting``), ``dtype``, ``vllm.*``.
    """

    def __init__(self, half: DecoderHalf, cfg: DecoderConfig, name: str = "decoder"):
        self.half, self.cfg, self.name = half, cfg, name
        self.max_running, self.max_waiting = cfg.max_running, cfg.max_waiting
        self.kv_cache_budget_tokens = cfg.kv_cache_budget_tokens
        self.forward_health: ForwardHealth | None = None
        self.llm: Any = None
        self._dead_error: type[BaseException] | None = None
        self._reqs: dict[str, _Req] = {}
        self._aborts: set[asyncio.Future] = set()
        self._ids = itertools.count(1)
        self._closed = False
        self._image_token_id = getattr(half, "image_token_id", None)

    # ----------------------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        """Create the ``AsyncLLM`` (idempotent; spawns vLLM's engine core process). Raises
        InvalidInput for a missing or stale export, ImportError when vLLM is not installed.
        """
        if self.llm is not None:
            return
        path = export_dir(self.cfg)
        check_export(path, self.half.revision)
        from vllm.engine.arg_utils import AsyncEngineArgs  # heavy, optional: the vllm extra / image
        from vllm.v1.engine.async_llm import AsyncLLM
        from vllm.v1.engine.exceptions import EngineDeadError

        from decoder_service.vllm_guard import NGramGuardLogitsProcessor, non_mla_config

        v = self.cfg.vllm
        if v.kv_cache_space_gib:
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(v.kv_cache_space_gib))
        # The decoder process runs gRPC threads: the engine core must not be forked from it.
        os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")
        args = AsyncEngineArgs(
            model=str(path), tokenizer=str(path), dtype=self.cfg.dtype, enable_prompt_embeds=True,
            max_model_len=v.max_model_len or None, max_num_seqs=self.max_running,
            gpu_memory_utilization=v.gpu_memory_utilization, enforce_eager=v.enforce_eager,
            max_logprobs=max(1, v.max_logprobs), logprobs_mode="raw_logprobs",
            logits_processors=[NGramGuardLogitsProcessor], hf_overrides=non_mla_config, disable_log_stats=True,
        )
        self._dead_error = EngineDeadError
        self.llm = await asyncio.to_thread(AsyncLLM.from_engine_args, args)
        metrics.register(self)
        log.info("vllm engine started", extra={"export": str(path), "max_num_seqs": self.max_running})

    async def stop(self) -> None:
        """Abort every sequence and shut the engine core down."""
        self._closed = True
        for req in list(self._reqs.values()):
            self.cancel(req)
        if self.llm is not None:
            llm, self.llm = self.llm, None
            await asyncio.to_thread(llm.shutdown)
        metrics.unregister(self)

    def healthy(self) -> bool:
        """False once vLLM's engine core died (or the engine stopped)."""
        return not self._closed and (self.llm is None or not self.llm.errored)

    # ----------------------------------------------------------------------------- observability
    @property
    def running_count(self) -> int:
        """Sequences in vLLM that have their first token."""
        return sum(1 for r in self._reqs.values() if r.first_t)

    @property
    def waiting_count(self) -> int:
        """Sequences in vLLM still waiting for their first token (queued or prefilling)."""
        return sum(1 for r in self._reqs.values() if not r.first_t)

    @property
    def kv_used_tokens(self) -> int:
        """Prompt + generated tokens of the open sequences (vLLM allocates their KV blocks)."""
        return sum(r.prompt_len + len(r.generated) for r in self._reqs.values())

    @property
    def kv_reserved_tokens(self) -> int:
        """Prompt + max_new_tokens of the open sequences."""
        return sum(r.prompt_len + r.stop.max_new_tokens for r in self._reqs.values())

    @property
    def kv_usage(self) -> float:
        """``kv_used_tokens / kv_cache_budget_tokens`` (0..1)."""
        return min(1.0, self.kv_used_tokens / self.kv_cache_budget_tokens)

    def work_window_segments(self) -> int:
        """The engine batches up to ``max_running`` sequences; keep that many open."""
        return self.max_running

    # ----------------------------------------------------------------------------- submit / cancel
    def check_vision_tokens(self, vision_tokens: torch.Tensor) -> torch.Tensor:
        """``vision_tokens`` as float32 [n, hidden_size]; InvalidInput for another shape, more than
        ``max_vision_tokens`` rows, or NaN / inf values.
        """
        vt = torch.as_tensor(vision_tokens)
        h = self.half
        if vt.ndim != 2 or vt.shape[1] != h.hidden_size or not 1 <= vt.shape[0] <= h.max_vision_tokens:
            raise InvalidInput(f"vision tokens must be [n_tokens <= {h.max_vision_tokens}, {h.hidden_size}], "
                               f"got {list(vt.shape)}")
        vt = vt.float()
        if not bool(torch.isfinite(vt).all()):
            raise InvalidInput("vision tokens contain NaN or infinite values")
        return vt

    async def submit(self, vision_tokens: torch.Tensor, params: SamplingParams, task: str | None = None,
                     prompt: str | None = None, whole: bool = False, key: WorkKey = NO_KEY) -> VllmStream:
        """Check, build the prompt and add the request to vLLM (see :class:`DecoderEngine.submit`)."""
        if self._closed or self.llm is None:
            raise Unavailable("the vllm engine is not running")
        if not self.healthy():
            raise Unavailable("the vllm engine core died; this replica is going away")
        if len(self._reqs) >= self.max_running + self.max_waiting:
            raise ResourceExhausted(f"decoder full: {len(self._reqs)} sequences in vLLM (max_running="
                                    f"{self.max_running}, max_waiting={self.max_waiting})", retry_after_s=1.0)
        vt = self.check_vision_tokens(vision_tokens)
        h = self.half
        task = task or h.default_task
        embeds, ids = await asyncio.to_thread(self._prompt, vt, task, prompt)
        L = int(ids.numel())
        max_new = effective_max_new_tokens(h, L, params)
        if max_new < 1:
            raise PayloadTooLarge(f"prompt of {L} tokens leaves no room to generate within the model's context "
                                  f"of {h.max_positions} tokens")
        if L + max_new > self.kv_cache_budget_tokens:
            raise PayloadTooLarge(f"prompt ({L} tokens) + max_new_tokens ({max_new}) exceeds this decoder's KV-cache "
                                  f"budget of {self.kv_cache_budget_tokens} tokens; ask for fewer new tokens")
        req = _Req(f"{self.name}-{next(self._ids)}", L, int(vt.shape[0]),
                   StopCriteria(params, h.eos_token_ids, max_new), IncrementalDetokenizer(h.decode_text), whole,
                   time.perf_counter(), finish_state=h.finish_state(embeds) if whole else None)
        self._reqs[req.rid] = req
        req.task = asyncio.create_task(
            self._pump(req, self._vllm_prompt(embeds, ids), self._vllm_params(params, max_new)))
        return VllmStream(self, req)

    def _prompt(self, vt: torch.Tensor, task: str, prompt: str | None) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.half
        with torch.inference_mode():
            embeds = h.embed_prompt(vt.to(h.dtype), task, prompt).float().cpu()
        ids = h.prompt_ids(int(vt.shape[0]), task, prompt) if hasattr(h, "prompt_ids") else None
        if ids is None:
            ids = torch.zeros(embeds.shape[0], dtype=torch.long)
        return embeds, ids

    def _vllm_prompt(self, embeds: torch.Tensor, ids: torch.Tensor) -> dict[str, Any]:
        dtype = getattr(torch, self.cfg.dtype)
        if self._image_token_id is None:  # a half without placeholder ids: a pure embeddings prompt
            return {"prompt_embeds": embeds.to(dtype)}
        return {"prompt_embeds": embeds.to(dtype), "prompt_token_ids": ids.tolist(),
                "prompt_is_token_ids": (ids != self._image_token_id).tolist()}

    def _vllm_params(self, params: SamplingParams, max_new: int) -> Any:
        from vllm import SamplingParams as VSamplingParams
        from vllm.sampling_params import RequestOutputKind

        from decoder_service.vllm_guard import EXTRA_KEY

        eos = sorted(self.half.eos_token_ids)
        extra = ({EXTRA_KEY: [params.repetition_ngram, params.repetition_window, params.repetition_repeats, eos[0]]}
                 if params.repetition_guard and eos else None)
        return VSamplingParams(
            n=1, max_tokens=max_new, temperature=params.temperature, top_p=params.top_p or 1.0,
            top_k=params.top_k or 0, seed=params.seed or None, stop_token_ids=eos, logprobs=0,
            detokenize=False, output_kind=RequestOutputKind.DELTA, extra_args=extra,
        )

    def cancel(self, req: _Req) -> None:
        """End ``req`` with ``cancelled`` and abort it in vLLM (idempotent; a no-op once finished)."""
        if req.closed:
            return
        self._finish(req, [], [], "", FinishReason.CANCELLED)

    # ----------------------------------------------------------------------------- streaming
    async def _pump(self, req: _Req, prompt: dict[str, Any], sp: Any) -> None:
        try:
            async for out in self.llm.generate(prompt, sp, req.rid):
                if req.closed:
                    break
                o = out.outputs[0]
                self._accept(req, list(o.token_ids), o.logprobs)
                if req.closed:
                    break
                if out.finished:  # vLLM stopped without one of our rules firing (e.g. its own abort)
                    self._finish(req, [], [], req.detok.flush(), FinishReason.LENGTH)
                    break
            if not req.closed:
                raise RuntimeError("vLLM ended the request without finishing it")
        except asyncio.CancelledError:
            self.cancel(req)
            raise
        except Exception as exc:
            dead = (self._dead_error is not None and isinstance(exc, self._dead_error)) or (
                self.llm is not None and self.llm.errored)
            if dead and self.forward_health is not None:
                self.forward_health.failure(DeviceLost(f"vLLM engine core died: {exc}"))
            if not req.closed:
                log.exception("vllm request %s failed", req.rid)
                req.closed = True
                self._reqs.pop(req.rid, None)
                req.queue.put_nowait(InternalError("the decoder failed while running this sequence; "
                                                   "retry on another replica"))
                req.queue.put_nowait(None)
                metrics.finished(self, "error")
        finally:
            if self._reqs.pop(req.rid, None) is not None and self.llm is not None:
                await self.llm.abort(req.rid)

    def _accept(self, req: _Req, toks: list[int], logprobs: Any) -> None:
        now = time.perf_counter()
        lps = [float(d[t].logprob) if d and t in d else 0.0
               for t, d in zip(toks, logprobs or [None] * len(toks), strict=True)]
        new, new_lps = [], []
        for tok, lp in zip(toks, lps, strict=True):
            if not req.first_t:
                req.first_t = now
                metrics.ttft(self, now - req.arrival)
            req.last_t = now
            req.generated.append(tok)
            req.logprobs.append(lp)
            new.append(tok)
            new_lps.append(lp)
            fin = req.stop.check(tok, len(req.generated))
            if fin is not None:  # later tokens (the guard's forced EOS) are dropped
                text = req.detok.push(new) + req.detok.flush()
                metrics.generated(self, len(new))
                self._finish(req, new, new_lps, text, fin)
                return
        if new:
            metrics.generated(self, len(new))
            text = req.detok.push(new)
            if req.whole:
                req.held_text.append(text)
            else:
                req.queue.put_nowait(SequenceEvent(new, text, logprobs=new_lps))

    def _finish(self, req: _Req, toks: list[int], lps: list[float], text: str, fin: FinishReason) -> None:
        req.closed = True
        if req.whole and fin != FinishReason.CANCELLED:
            toks, lps, text = list(req.generated), list(req.logprobs), "".join(req.held_text) + text
            if req.finish_state is not None:
                kept = self.half.finish_tokens(req.finish_state, toks)
                if kept != toks:
                    toks, lps, text = kept, [], self.half.decode_text(kept)
        req.queue.put_nowait(SequenceEvent(toks, text, fin, req.usage(), lps))
        req.queue.put_nowait(None)
        metrics.finished(self, fin, req.usage())
        if self._reqs.pop(req.rid, None) is not None and self.llm is not None:
            # Frees its KV blocks (a no-op when vLLM finished it); kept referenced until done.
            task = asyncio.ensure_future(self.llm.abort(req.rid))
            self._aborts.add(task)
            task.add_done_callback(self._aborts.discard)
