"""The gateway's data path: pages -> encoder replicas -> decoder replicas -> page outcomes.

:class:`Pipeline` implements :class:`gateway.types.PagePipeline`. For one request, ``run`` keeps a
sliding window of at most ``max_pages_per_request`` pages (and never more than the gateway-wide
bound of :mod:`gateway.admission`): each page in the window is a task that encodes it on the
least-loaded encoder replica, then decodes all of its segments in one ``Decode`` stream on the
least-loaded decoder replica. So page 2 is being encoded while page 1 decodes, the encoder can
micro-batch the window's pages, and the decoder's continuous batching runs their segments together.

Outcomes are yielded strictly in input order as soon as the head of the window is done; a page's
slot is freed only when its outcome has been yielded, so at most the window's page images (until
each is encoded) and vision tokens (until each is decoded) are held, whatever the page count. The
vision tokens stay in the gateway until the decode finished, so a decode retried on another decoder
replica never re-runs the encoder. Every input page yields exactly one PageOutcome: text, or an
explicit error (see :mod:`gateway.retry` for what is retried and when a page is quarantined).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from typing import AsyncIterator, Sequence

from opentelemetry import trace

from gateway.admission import Admission, Ticket
from gateway.clients import (CallFailure, DecodeAttempt, EncodedTokens, decode_segments, encode_page,
                             fetch_decoder_info, fetch_encoder_info)
from gateway.replicas import Replica, ReplicaSet
from gateway.pipeline_config import PipelineConfig, PipelineStats
from gateway.retry import PageFailed, RetryBudget, RetryCounters, with_retries
from gateway.types import EncoderInfo, PageError, PageInput, PageOutcome, PipelineOptions, SegmentText
from inkstream.errors import InternalError, Unavailable, as_inkstream_error
from inkstream.lifecycle import DEFAULT_MAX_MESSAGE_BYTES
from inkstream.revision import known_different
from inkstream.tls import TlsConfig

log = logging.getLogger("inkstream.gateway.pipeline")
# Spans per page stage; their W3C context goes to the replicas in gRPC metadata (clients.call_metadata).
_tracer = trace.get_tracer("inkstream.gateway.pipeline")

_FINISH_RANK = {"stop": 0, "length": 1, "repetition": 2, "cancelled": 3}

__all__ = ["Pipeline", "PipelineConfig", "PipelineStats"]


class Pipeline:
    """Encoder + decoder replica sets driven page by page (see the module docstring).

    Use :meth:`connect` (or build the two :class:`ReplicaSet` yourself and call :meth:`start`), and
    :meth:`close` at shutdown; also an async context manager.
    """

    def __init__(self, encoders: ReplicaSet, decoders: ReplicaSet, config: PipelineConfig = PipelineConfig()):
        self.encoders = encoders
        self.decoders = decoders
        self.config = config
        self.admission = Admission(config.max_pages_in_flight)
        self.budget = RetryBudget(config.retry_budget_tokens, config.retry_budget_ratio)
        self.stats = PipelineStats()
        self._info: EncoderInfo | None = None
        self._info_at = 0.0
        self._tasks: tuple[str, ...] = ()
        self._tasks_next_at = float("-inf")  # monotonic time of the next decoder-Info try
        self._register_metrics()

    @classmethod
    async def connect(
        cls,
        encoder_addrs: Sequence[str],
        decoder_addrs: Sequence[str],
        config: PipelineConfig = PipelineConfig(),
        *,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        tls: TlsConfig | None = None,
    ) -> "Pipeline":
        """Build replica sets for ``host:port`` address lists (names are re-resolved every
        ``config.resolve_interval_s`` seconds; channels use ``max_message_bytes`` limits, bytes, and
        TLS when ``tls.enabled``) and start them. Raises ValueError for malformed addresses or
        missing / empty TLS files."""
        kw = dict(resolve_interval_s=config.resolve_interval_s, health_retry_s=config.health_retry_s,
                  max_message_bytes=max_message_bytes, tls=tls)
        p = cls(ReplicaSet(encoder_addrs, name="encoder", **kw), ReplicaSet(decoder_addrs, name="decoder", **kw),
                config)
        await p.start()
        return p

    async def start(self) -> None:
        """Open channels and start health watches / DNS re-resolution of both replica sets."""
        await self.encoders.start()
        await self.decoders.start()

    async def wait_ready(self, timeout_s: float) -> None:
        """Wait until one encoder and one decoder replica are SERVING; raises Unavailable."""
        await self.encoders.wait_ready(timeout_s)
        await self.decoders.wait_ready(timeout_s)

    def ready(self) -> tuple[bool, str]:
        """(ready, reason): ready while at least one encoder and one decoder replica are SERVING."""
        missing = [rs.name for rs in (self.encoders, self.decoders) if not rs.eligible()]
        if missing:
            return False, f"no SERVING {' or '.join(missing)} replica"
        return True, ""

    async def close(self) -> None:
        """Close every replica channel."""
        await self.encoders.close()
        await self.decoders.close()

    async def __aenter__(self) -> "Pipeline":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------ PagePipeline

    async def encoder_info(self) -> EncoderInfo:
        """The encoders' model id and modes (cached for ``info_ttl_s`` seconds after a success).

        Raises Unavailable when no encoder replica answers within the retry policy's wait.
        """
        if self._info is None or time.monotonic() - self._info_at > self.config.info_ttl_s:

            async def call(r: Replica) -> EncoderInfo:
                return await fetch_encoder_info(r.channel, self.config.info_timeout_s)

            try:
                self._info = await with_retries(self.encoders, call, policy=self.config.retry, budget=self.budget,
                                                counters=RetryCounters(), what="encoder Info")
            except PageFailed as exc:
                if self._info is not None:  # keep serving with the last known Info
                    log.warning("refreshing encoder Info failed: %s", exc.error.message)
                    return self._info
                raise exc.error from None
            self._info_at = time.monotonic()
        return self._info

    async def decoder_tasks(self) -> tuple[str, ...]:
        """The decoders' task names (cached ``info_ttl_s`` seconds), so the gateway refuses an unknown
        ``task`` with 400 before any page is encoded. One try on one SERVING decoder within
        ``info_timeout_s``, tried again 5 s after a failure; () when none answers (then the decoder
        rejects the task per page)."""
        if time.monotonic() >= self._tasks_next_at:
            replica = self.decoders.pick()
            if replica is None:
                return self._tasks
            try:
                self._tasks = (await fetch_decoder_info(replica.channel, self.config.info_timeout_s)).tasks
                self._tasks_next_at = time.monotonic() + self.config.info_ttl_s
            except CallFailure as exc:
                log.warning("decoder Info failed: %s", exc)
                # Not again for a few seconds, so requests do not each wait info_timeout_s for it.
                self._tasks_next_at = time.monotonic() + min(5.0, self.config.info_ttl_s)
        return self._tasks

    async def _segment_slots(self, r: Replica) -> asyncio.Semaphore | None:
        """The decoder replica's shared segment window (its ``max_running + max_waiting``, from Info),
        so that all pages together never overflow its waiting queue; see :meth:`_slots`."""
        return await self._slots(r, fetch_decoder_info)

    async def _page_slots(self, r: Replica) -> asyncio.Semaphore | None:
        """The encoder replica's shared page window (its ``max_queue_pages + max_batch_size``, from
        Info): pages beyond it wait here, bounded by admission, instead of being refused by the
        encoder's queue with RESOURCE_EXHAUSTED and failing after a few retries; see :meth:`_slots`."""
        return await self._slots(r, fetch_encoder_info)

    async def _slots(self, r: Replica, fetch) -> asyncio.Semaphore | None:  # type: ignore[no-untyped-def]
        """The replica's work window (a semaphore of its Info's ``capacity``, shared by every page of
        this gateway), learning its weights ``revision`` too; None when its Info is unavailable or
        gives no capacity (the replica's own admission then answers). ``fetch(channel, timeout_s)``
        is :func:`fetch_decoder_info` or :func:`fetch_encoder_info`.

        Info is read on first use and again after the replica comes back SERVING (a restarted
        replica may have other limits: the window is replaced only if the capacity changed).
        Otherwise Info is tried at most once per ``info_ttl_s`` seconds, so that while it fails (or
        gives no capacity) pages do not each wait ``info_timeout_s`` for it."""
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

    def admit(self, request_id: str) -> Ticket:
        """Reserve a request's slot in the global page bound (see :mod:`gateway.admission`)."""
        return self.admission.admit(request_id)

    async def run(self, pages: AsyncIterator[PageInput], options: PipelineOptions) -> AsyncIterator[PageOutcome]:
        """Yield one PageOutcome per page of ``pages``, in input order, each exactly once.

        Uses the ticket that :meth:`admit` reserved for ``options.request_id``; without one, admits
        the request itself (raising ResourceExhausted at the first ``__anext__`` when full).
        Exceptions raised by ``pages`` itself propagate after in-flight pages are cancelled.
        """
        ticket = self.admission.ticket(options.request_id)
        own: Ticket | None = None
        if ticket is None:
            own = self.admission.admit(options.request_id)
            ticket = await own.__aenter__()
        limit = max(1, self.config.max_pages_per_request)
        window: collections.deque[tuple[asyncio.Task, float]] = collections.deque()
        source = pages.__aiter__()
        exhausted = False
        try:
            while True:
                while not exhausted and ticket.try_start_page(limit):
                    try:
                        page = await source.__anext__()
                    except StopAsyncIteration:
                        exhausted = True
                        ticket.unclaim_page()
                        break
                    except BaseException:
                        ticket.unclaim_page()
                        raise
                    window.append((asyncio.ensure_future(self._page(page, options)), time.monotonic()))
                    del page  # the task owns the image now; it drops it once encoded
                if not window:
                    if exhausted:
                        break
                    # Only possible when the request's admission was exited while it still ran.
                    raise InternalError("the request's admission ended while pages remained to be processed")
                head, started = window[0]
                if not head.done():
                    waits: set[asyncio.Future] = {head}
                    if not exhausted and ticket.inflight < limit:
                        waits.add(self.admission.budget.freed())
                    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                    for w in waits:
                        if w is not head and not w.done():
                            w.cancel()
                    continue
                window.popleft()
                outcome = head.result()
                ticket.finish_page(time.monotonic() - started)
                if outcome.status == "ok":
                    self.stats.pages_ok += 1
                else:
                    self.stats.pages_error += 1
                yield outcome
        finally:
            for task, _ in window:
                task.cancel()
            if window:
                await asyncio.gather(*(t for t, _ in window), return_exceptions=True)
            for _ in window:
                ticket.unclaim_page()
            if own is not None:
                await own.__aexit__(None, None, None)

    # ------------------------------------------------------------ one page

    async def _page(self, page: PageInput, options: PipelineOptions) -> PageOutcome:
        """Encode + decode one page; never raises (except cancellation): failures become errors."""
        index = page.index
        if page.error is not None:
            return PageOutcome(index=index, status="error", error=page.error, width=page.width, height=page.height)
        if not page.image:
            return PageOutcome(index=index, status="error", width=page.width, height=page.height,
                               error=PageError("INVALID_ARGUMENT", f"page {index + 1} has no image"))
        attrs = {"inkstream.page": index + 1, "inkstream.request_id": options.request_id}
        try:
            with _tracer.start_as_current_span("gateway.encode", attributes=attrs):
                encoded = await self._encode(page, options)
            page = None  # type: ignore[assignment]  # drop the image bytes: only vision tokens from here
            with _tracer.start_as_current_span("gateway.decode", attributes=attrs):
                segments = await self._decode(encoded, options) if encoded.segments else []
        except PageFailed as exc:
            return PageOutcome(index=index, status="error", error=PageError(exc.error.code_name, exc.error.message))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a bug must not lose the page: report it
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
            slots = await self._page_slots(r)
            async with slots if slots is not None else contextlib.nullcontext():
                return await encode_page(r.channel, page.index, page.image or b"", options.mode,
                                         timeout_s=self.config.encode_timeout_s, request_id=options.request_id)

        return await with_retries(self.encoders, call, policy=self.config.retry, budget=self.budget,
                                  counters=self.stats.encode, what=f"page {page.index + 1} encode",
                                  accept=self._decodable, unaccepted="whose weights no ready decoder serves yet")

    def _decodable(self, encoder: Replica) -> bool:
        """Whether some ready decoder may decode what ``encoder`` makes: during a weights rollout
        the first new encoders are often ready before any new decoder; pages then go to the old
        encoders instead of failing at the decode step. True while revisions are unknown."""
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
            slots = await self._segment_slots(r)  # also learns the replica's weights revision
            if known_different(encoded.revision, r.model_revision):
                raise CallFailure(Unavailable(
                    f"decoder {r.address} serves weights revision {r.model_revision}, but the page was encoded "
                    f"by revision {encoded.revision}"), transient=True, misrouted=True)
            remaining = [s for s in encoded.segments if s.index not in attempt.done]
            attempt.failed.clear()
            await decode_segments(r.channel, remaining, task=options.task, max_new_tokens=options.max_new_tokens,
                                  timeout_s=self.config.decode_timeout_s, request_id=options.request_id,
                                  attempt=attempt, max_segments_in_flight=self.config.decode_window_segments,
                                  replica_slots=slots, vision_revision=encoded.revision)
            if attempt.failed:
                worst = _worst(attempt.failed.values())
                if worst.misrouted:  # the decoder itself refused other weights: its Info is stale
                    r.slots_stale = True
                raise worst
            return list(attempt.done.values())

        return await with_retries(self.decoders, call, policy=self.config.retry, budget=self.budget,
                                  counters=self.stats.decode, what=f"page {encoded.page_index + 1} decode",
                                  accept=same_weights,
                                  unaccepted=f"serving other weights than revision {encoded.revision} of the page's encoder")

    # ------------------------------------------------------------ metrics

    def _register_metrics(self) -> None:
        """Observable OTel instruments (Prometheus: ``inkstream_gateway_pipeline_*``,
        ``inkstream_gateway_replica_*``); pages by status are counted by :mod:`gateway.metrics`."""
        from opentelemetry.metrics import Observation

        from inkstream.telemetry import meter

        def per_stage(attr: str):  # type: ignore[no-untyped-def]
            return lambda _o: [Observation(getattr(self.stats.encode, attr), {"stage": "encode"}),
                               Observation(getattr(self.stats.decode, attr), {"stage": "decode"})]

        def per_replica(value):  # type: ignore[no-untyped-def]
            return lambda _o: [Observation(value(r), {"service": rs.name, "replica": r.address})
                               for rs in (self.encoders, self.decoders) for r in list(rs.replicas.values())]

        m = meter("inkstream.gateway.pipeline")
        m.create_observable_gauge(
            "inkstream.gateway.pipeline.pages_in_flight", unit="{page}",
            description="pages held by the gateway (being encoded or decoded, or waiting to be returned)",
            callbacks=[lambda _o: [Observation(self.admission.pages_in_flight)]])
        m.create_observable_counter("inkstream.gateway.pipeline.calls", unit="{call}",
                                    description="encode / decode calls made to replicas",
                                    callbacks=[per_stage("calls")])
        m.create_observable_counter("inkstream.gateway.pipeline.retries", unit="{call}",
                                    description="encode / decode calls that were retries",
                                    callbacks=[per_stage("retries")])
        m.create_observable_counter("inkstream.gateway.pipeline.quarantined", unit="{page}",
                                    description="pages quarantined after failing on two replicas",
                                    callbacks=[per_stage("quarantined")])
        m.create_observable_gauge("inkstream.gateway.replica.outstanding", unit="{page}",
                                  description="pages sent to a replica and not finished",
                                  callbacks=[per_replica(lambda r: r.outstanding)])
        m.create_observable_gauge("inkstream.gateway.replica.serving", unit="1",
                                  description="1 while the replica is eligible for new work (health SERVING)",
                                  callbacks=[per_replica(lambda r: int(r.healthy and not r.retired))])


def _worst(failures) -> CallFailure:  # type: ignore[no-untyped-def]
    """The failure deciding what happens to a page with several failed segments: a final one
    first, then a suspect one, then a transient one."""
    fs = list(failures)
    for pred in (lambda f: not (f.transient or f.suspect), lambda f: f.suspect):
        for f in fs:
            if pred(f):
                return f
    return fs[0] if fs else CallFailure(InternalError("decode failed"))

