"""One page's way through the replicas: encoded on an encoder replica, then all of its segments
decoded in one ``Decode`` stream on a decoder replica.

Each stage is retried across replicas by :func:`gateway.retry.with_retries` (policy, budget and
counters shared with :class:`gateway.pipeline.Pipeline`). During a weights rollout a page goes only
to an encoder whose vision tokens some ready decoder can decode, and its vision tokens only to a
decoder running the same weights revision. Each replica's work window (a semaphore of the capacity
its Info reports) bounds what all pages of this gateway send it at once, so the surplus waits here
instead of being refused by the replica's own queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from opentelemetry import trace

from gateway.clients.calls import CallFailure
from gateway.clients.decoder import DecodeAttempt, decode_segments, fetch_decoder_info
from gateway.clients.encoder import EncodedTokens, encode_page, fetch_encoder_info
from gateway.pipeline_config import PipelineConfig
from gateway.pipeline_metrics import PipelineStats
from gateway.replicas import Replica, ReplicaSet
from gateway.retry import PageFailed, RetryBudget, with_retries
from gateway.types import PageError, PageInput, PageOutcome, PipelineOptions, SegmentText
from inkstream.errors import InternalError, Unavailable, as_inkstream_error
from inkstream.revision import known_different

log = logging.getLogger("inkstream.gateway.pipeline")
# Spans per page stage; their W3C context goes to the replicas in gRPC metadata (clients.calls.call_metadata).
_tracer = trace.get_tracer("inkstream.gateway.pipeline")

_FINISH_RANK = {"stop": 0, "length": 1, "repetition": 2, "cancelled": 3}


class PageStages:
    """Encode + decode of single pages over ``encoders`` and ``decoders`` (see the module docstring)."""

    def __init__(self, encoders: ReplicaSet, decoders: ReplicaSet, config: PipelineConfig, budget: RetryBudget,
                 stats: PipelineStats):
        self.encoders = encoders
        self.decoders = decoders
        self.config = config
        self.budget = budget
        self.stats = stats

    async def segment_slots(self, r: Replica) -> asyncio.Semaphore | None:
        """The decoder replica's shared segment window (its ``max_running + max_waiting``, from Info),
        so that all pages together never overflow its waiting queue; see :meth:`_slots`.
        """
        return await self._slots(r, fetch_decoder_info)

    async def page_slots(self, r: Replica) -> asyncio.Semaphore | None:
        """The encoder replica's shared page window (its ``max_queue_pages + max_batch_size``, from
        Info): pages beyond it wait here, bounded by admission, instead of being refused by the
        encoder's queue with RESOURCE_EXHAUSTED and failing after a few retries; see :meth:`_slots`.
        """
        return await self._slots(r, fetch_encoder_info)

    async def _slots(self, r: Replica, fetch) -> asyncio.Semaphore | None:
        """The replica's work window (a semaphore of its Info's ``capacity``, shared by every page of
        this gateway), learning its weights ``revision`` too; None when its Info is unavailable or
        gives no capacity (the replica's own admission then answers). ``fetch(channel, timeout_s)``
        is :func:`fetch_decoder_info` or :func:`fetch_encoder_info`.

        Info is read on first use and again after the replica comes back SERVING (a restarted
        replica may have other limits: the window is replaced only if the capacity changed).
        Otherwise Info is tried at most once per ``info_ttl_s`` seconds, so that while it fails (or
        gives no capacity) pages do not each wait ``info_timeout_s`` for it.
        """
        if r.segment_slots is not None and not r.slots_stale:
            return r.segment_slots
        async with r.slots_lock:  # pages arriving meanwhile wait for this answer, not run unbounded
            if r.segment_slots is not None and not r.slots_stale:
                return r.segment_slots
            if not r.slots_stale and time.monotonic() - r.slots_checked_at < self.config.info_ttl_s:
                return r.segment_slots
            r.slots_stale, r.slots_checked_at = False, time.monotonic()
            try:
                info = await fetch(r.channel, self.config.info_timeout_s)
            except CallFailure as exc:
                log.warning("replica %s Info failed: %s", r.address, exc)
                return r.segment_slots
            r.model_revision = info.revision
            if info.capacity and info.capacity != r.slots_capacity:
                if r.segment_slots is not None:
                    log.info("replica %s capacity %d -> %d", r.address, r.slots_capacity, info.capacity)
                r.segment_slots, r.slots_capacity = asyncio.Semaphore(info.capacity), info.capacity
            return r.segment_slots

    async def run_page(self, page: PageInput, options: PipelineOptions) -> PageOutcome:
        """Encode + decode one page; never raises (except cancellation): failures become errors."""
        index = page.index
        if page.error is not None:
            return PageOutcome(index=index, status="error", error=page.error, width=page.width, height=page.height)
        if not page.image:
            return PageOutcome(index=index, status="error", width=page.width, height=page.height,
                               error=PageError("INVALID_ARGUMENT", f"page {index + 1} has no image"))
        attrs: dict[str, str | int] = {"inkstream.page": index + 1, "inkstream.request_id": options.request_id}
        try:
            with _tracer.start_as_current_span("gateway.encode", attributes=attrs):
                encoded = await self._encode(page, options)
            del page  # drop the image bytes: only vision tokens from here
            with _tracer.start_as_current_span("gateway.decode", attributes=attrs):
                segments = await self._decode(encoded, options) if encoded.segments else []
        except PageFailed as exc:
            return PageOutcome(index=index, status="error", error=PageError(exc.error.code_name, exc.error.message))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug must not lose the page: report it
            log.exception("page %d failed unexpectedly", index + 1)
            err = as_inkstream_error(exc)
            return PageOutcome(index=index, status="error", error=PageError(err.code_name, err.message))
        segments.sort(key=lambda s: s.index)
        finish = max((s.finish_reason for s in segments), key=lambda r: _FINISH_RANK.get(r, 0), default="stop")
        return PageOutcome(
            index=index, status="ok", text="\n".join(s.text for s in segments), segments=segments,
            finish_reason=finish, vision_tokens=encoded.n_vision_tokens,
            generated_tokens=sum(s.generated_tokens for s in segments),
            width=encoded.width, height=encoded.height,
        )

    async def _encode(self, page: PageInput, options: PipelineOptions) -> EncodedTokens:
        async def call(r: Replica) -> EncodedTokens:
            slots = await self.page_slots(r)
            async with slots if slots is not None else contextlib.nullcontext():
                return await encode_page(r.channel, page.index, page.image or b"", options.mode,
                                         timeout_s=self.config.encode_timeout_s, request_id=options.request_id)

        return await with_retries(self.encoders, call, policy=self.config.retry, budget=self.budget,
                                  counters=self.stats.encode, what=f"page {page.index + 1} encode",
                                  accept=self._decodable, unaccepted="whose weights no ready decoder serves yet")

    def _decodable(self, encoder: Replica) -> bool:
        """Whether some ready decoder may decode what ``encoder`` makes: during a weights rollout
        the first new encoders are often ready before any new decoder; pages then go to the old
        encoders instead of failing at the decode step. True while revisions are unknown.
        """
        if not encoder.model_revision:
            return True
        return any(d.slots_stale or not known_different(encoder.model_revision, d.model_revision)
                   for d in self.decoders.eligible()) or not self.decoders.eligible()

    async def _decode(self, encoded: EncodedTokens, options: PipelineOptions) -> list[SegmentText]:
        attempt = DecodeAttempt()

        def same_weights(r: Replica) -> bool:
            # The decoder must run the weights of the encoder that made these vision tokens (they
            # differ while a rollout replaces one checkpoint by another); unknown revisions pass,
            # and so does a replica whose Info is to be read again (it came back, maybe restarted).
            return r.slots_stale or not known_different(encoded.revision, r.model_revision)

        async def call(r: Replica) -> list[SegmentText]:
            slots = await self.segment_slots(r)  # also learns the replica's weights revision
            if known_different(encoded.revision, r.model_revision):
                raise CallFailure(Unavailable(
                    f"decoder {r.address} serves weights revision {r.model_revision}, but the page was encoded "
                    f"by revision {encoded.revision}"), transient=True, misrouted=True)
            remaining = [s for s in encoded.segments if s.index not in attempt.done]
            attempt.failed.clear()
            await decode_segments(r.channel, remaining, task=options.task, max_new_tokens=options.max_new_tokens,
                                  timeout_s=self.config.decode_timeout_s, request_id=options.request_id,
                                  attempt=attempt, max_segments_in_flight=self.config.decode_window_segments,
                                  replica_slots=slots, vision_revision=encoded.revision,
                                  temperature=options.temperature)
            if attempt.failed:
                worst = _worst(attempt.failed.values())
                if worst.misrouted:  # the decoder itself refused other weights: its Info is stale
                    r.slots_stale = True
                raise worst
            return list(attempt.done.values())

        return await with_retries(self.decoders, call, policy=self.config.retry, budget=self.budget,
                                  counters=self.stats.decode, what=f"page {encoded.page_index + 1} decode",
                                  accept=same_weights,
                                  unaccepted=f"serving other weights than revision {encoded.revision} "
                                  "of the page's encoder")


def _worst(failures) -> CallFailure:
    """The failure deciding what happens to a page with several failed segments: a final one
    first, then a suspect one, then a transient one.
    """
    fs = list(failures)
    for pred in (lambda f: not (f.transient or f.suspect), lambda f: f.suspect):
        for f in fs:
            if pred(f):
                return f
    return fs[0] if fs else CallFailure(InternalError("decode failed"))

