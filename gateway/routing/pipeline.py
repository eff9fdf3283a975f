"""The gateway's data path: pages -> encoder replicas -> decoder replicas -> page outcomes.

:class:`Pipeline` implements :class:`gateway.types.PagePipeline`. For one request, ``run`` keeps a
sliding window of at most ``max_pages_per_request`` pages (and never more than the gateway-wide
bound of :mod:`gateway.routing.admission`): each page in the window is a task that encodes it on the
least-loaded encoder replica, then decodes all of its segments in one ``Decode`` stream on the
least-loaded decoder replica. So page 2 is being encoded while page 1 decodes, the encoder can
micro-batch the window's pages, and the decoder's continuous batching runs their segments together.

Outcomes are yielded strictly in input order as soon as the head of the window is done; a page's
slot is freed only when its outcome has been yielded, so at most the window's page images (until
each is encoded) and vision tokens (until each is decoded) are held, whatever the page count. The
vision tokens stay in the gateway until the decode finished, so a decode retried on another decoder
replica never re-runs the encoder. Every input page yields exactly one PageOutcome: text, or an
explicit error (see :mod:`gateway.routing.retry` for what is retried and when a page is quarantined).
One page's encode + decode is :class:`gateway.routing.page_stages.PageStages`.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import random
import time
from collections.abc import AsyncGenerator, AsyncIterator, Sequence

from gateway.clients.calls import CallFailure
from gateway.clients.decoder import fetch_decoder_info
from gateway.clients.encoder import fetch_encoder_info
from gateway.routing.admission import Admission, Ticket
from gateway.routing.config import PipelineConfig
from gateway.routing.deadline_fit import DocumentLoad, stage_seconds_per_page
from gateway.routing.metrics import PipelineStats, register_pipeline_metrics
from gateway.routing.page_stages import PageStages
from gateway.routing.replicas import ReplicaSet
from gateway.routing.retry import PageFailed, RetryBudget, RetryCounters, with_retries
from gateway.routing.router import Lease, Router
from gateway.types import EncoderInfo, PageInput, PageOutcome, PipelineOptions
from inkstream import malloc
from inkstream.errors import InternalError
from inkstream.fair import INTERACTIVE
from inkstream.lifecycle import DEFAULT_MAX_MESSAGE_BYTES
from inkstream.pace import ServiceRate
from inkstream.tls import TlsConfig

log = logging.getLogger("inkstream.gateway.pipeline")

__all__ = ["Pipeline", "PipelineConfig"]

_DEFAULT_CONFIG = PipelineConfig()  # the default of the constructors below (never mutated)
_TRIM_EVERY_S = 1.0  # malloc_trim takes up to tens of ms: not after every one of many small requests


class Pipeline:
    """Encoder + decoder replica sets driven page by page (see the module docstring).

    Use :meth:`connect` (or build the two :class:`ReplicaSet` yourself and call :meth:`start`), and
    :meth:`close` at shutdown; also an async context manager.
    """

    def __init__(self, encoders: ReplicaSet, decoders: ReplicaSet, config: PipelineConfig = _DEFAULT_CONFIG):
        self.encoders = encoders
        self.decoders = decoders
        self.config = config
        self.admission = Admission(config.max_pages_in_flight)
        self.budget = RetryBudget(config.retry_budget_tokens, config.retry_budget_ratio)
        self.stats = PipelineStats()
        self.router = Router(encoders, decoders, config)
        self.stages = PageStages(self.router, config, self.budget, self.stats)
        #: busy seconds per page finished, whole stack, counted while at least one request's window of
        #: pages is in flight (its throughput, not one page's latency; inkstream.pace): what deadlines
        #: are checked with (gateway.routing.deadline_fit)
        self.pace = ServiceRate(prior_s=config.seconds_per_page_prior,
                                min_inflight=max(1, config.max_pages_per_request))
        #: before the rate is measured, the encoders' reported rates (gateway.routing.deadline_fit)
        self.load = DocumentLoad(
            self.pace, lambda: stage_seconds_per_page(*self.router.reported_seconds_per_page("encoder")))
        self._info: EncoderInfo | None = None
        self._info_at = 0.0
        self._info_refresh: asyncio.Task[EncoderInfo] | None = None  # the one Info read under way
        self._tasks: tuple[str, ...] = ()
        self._tasks_next_at = float("-inf")  # monotonic time of the next decoder-Info try
        self._trimmed_at = float("-inf")
        self._trims: set[asyncio.Future] = set()  # trims running (held: the loop keeps weak references)
        register_pipeline_metrics(self.stats, self.admission, self.router)

    @classmethod
    async def connect(
        cls,
        encoder_addrs: Sequence[str],
        decoder_addrs: Sequence[str],
        config: PipelineConfig = _DEFAULT_CONFIG,
        *,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        tls: TlsConfig | None = None,
    ) -> Pipeline:
        """Build replica sets for ``host:port`` address lists (names are re-resolved every
        ``config.resolve_interval_s`` seconds; channels use ``max_message_bytes`` limits, bytes, and
        TLS when ``tls.enabled``) and start them. Raises ValueError for malformed addresses or
        missing / empty TLS files.
        """
        def replicas(addrs: Sequence[str], name: str) -> ReplicaSet:
            return ReplicaSet(addrs, name=name, resolve_interval_s=config.resolve_interval_s,
                              health_retry_s=config.health_retry_s, max_message_bytes=max_message_bytes, tls=tls)

        p = cls(replicas(encoder_addrs, "encoder"), replicas(decoder_addrs, "decoder"), config)
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
        """Stop an Info refresh under way and close every replica channel."""
        if self._info_refresh is not None and not self._info_refresh.done():
            self._info_refresh.cancel()
            with contextlib.suppress(BaseException):
                await self._info_refresh
        await self.encoders.close()
        await self.decoders.close()

    async def __aenter__(self) -> Pipeline:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------ PagePipeline

    async def encoder_info(self) -> EncoderInfo:
        """The encoders' model id and modes (cached for ``info_ttl_s`` seconds after a success).

        One refresh at a time, shared by every caller (:meth:`_refresh_info`). Once an Info is known, a
        stale one is answered at once while the refresh runs in the background: the Info call waits
        for a lease in the encoders' work windows, behind the pages queued there, and every request
        checks its options against the Info before admission, so under load each request used to
        wait (minutes) for its own Info call instead of being admitted or refused (429) at once.
        Raises Unavailable when no Info is known and no encoder replica answers within the retry
        policy's wait.
        """
        if self._info is not None and time.monotonic() - self._info_at <= self.config.info_ttl_s:
            return self._info
        if self._info_refresh is None or self._info_refresh.done():
            self._info_refresh = asyncio.create_task(self._refresh_info())
        if self._info is not None:
            return self._info
        return await asyncio.shield(self._info_refresh)

    async def _refresh_info(self) -> EncoderInfo:
        """Read the encoders' Info into the cache; on failure keep the last known one (logged) or raise
        the call's error (Unavailable) when there is none.
        """

        async def call(lease: Lease) -> EncoderInfo:
            return await fetch_encoder_info(lease.channel, self.config.info_timeout_s)

        try:
            info = await with_retries(self.router, "encoder", call, policy=self.config.retry,
                                      budget=self.budget, counters=RetryCounters(), what="encoder Info",
                                      told="the model's details could not be had from an encoder")
        except PageFailed as exc:
            if self._info is not None:  # keep serving with the last known Info
                log.warning("refreshing encoder Info failed: %s", exc.error.message)
                return self._info
            raise exc.error from None
        self._info, self._info_at = info, time.monotonic()
        return info

    async def decoder_tasks(self) -> tuple[str, ...]:
        """The decoders' task names (cached ``info_ttl_s`` seconds), so the gateway refuses an unknown
        ``task`` with 400 before any page is encoded. One try on one SERVING decoder within
        ``info_timeout_s``, tried again 5 s after a failure; () when none answers (then the decoder
        rejects the task per page).
        """
        if time.monotonic() >= self._tasks_next_at:
            serving = self.decoders.eligible()
            if not serving:
                return self._tasks
            replica = random.choice(serving)
            try:
                self._tasks = (await fetch_decoder_info(replica.channel, self.config.info_timeout_s)).tasks
                self._tasks_next_at = time.monotonic() + self.config.info_ttl_s
            except CallFailure as exc:
                log.warning("decoder Info failed: %s", exc)
                # Not again for a few seconds, so requests do not each wait info_timeout_s for it.
                self._tasks_next_at = time.monotonic() + min(5.0, self.config.info_ttl_s)
        return self._tasks

    def admit(self, request_id: str) -> Ticket:
        """Reserve a request's slot in the global page bound (see :mod:`gateway.routing.admission`)."""
        return self.admission.admit(request_id)

    async def run(self, pages: AsyncIterator[PageInput],
                  options: PipelineOptions) -> AsyncGenerator[PageOutcome, None]:
        """Yield one PageOutcome per page of ``pages``, in input order, each exactly once.

        Uses the ticket that :meth:`admit` reserved for ``options.request_id``; without one, admits
        the request itself (raising ResourceExhausted at the first ``__anext__`` when full).
        Exceptions raised by ``pages`` itself propagate after in-flight pages are cancelled. A
        synchronous request (``priority`` INTERACTIVE with a ``deadline`` and a ``page_count``) that
        cannot be read in time at the measured rate raises TooLongForDeadline at the first
        ``__anext__``, before any page is sent (:mod:`gateway.routing.deadline_fit`).
        """
        sync = options.priority == INTERACTIVE and options.deadline is not None and options.page_count > 0
        if sync and options.deadline is not None:  # refused before any page is sent (gateway.routing.deadline_fit)
            self.load.check(options.request_id, options.page_count,
                            options.deadline - asyncio.get_running_loop().time())
        ticket = self.admission.ticket(options.request_id)
        own: Ticket | None = None
        if ticket is None:
            own = self.admission.admit(options.request_id)
            ticket = await own.__aenter__()
        limit = max(1, self.config.max_pages_per_request)
        window: collections.deque[tuple[asyncio.Task, float]] = collections.deque()
        source = pages.__aiter__()
        exhausted = False
        if sync:
            self.load.begin(options.request_id, options.page_count)
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
                    window.append((asyncio.ensure_future(self.stages.run_page(page, options)), time.monotonic()))
                    self.pace.started()
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
                self.pace.finished()
                self.load.page_done(options.request_id)
                if outcome.status == "ok":
                    self.stats.pages_ok += 1
                else:
                    self.stats.pages_error += 1
                yield outcome
        finally:
            if sync:
                self.load.end(options.request_id)
            self.pace.abandoned(len(window))
            for task, _ in window:
                task.cancel()
            if window:
                await asyncio.gather(*(t for t, _ in window), return_exceptions=True)
            for _ in window:
                ticket.unclaim_page()
            if own is not None:
                await own.__aexit__(None, None, None)
            self._trim_when_idle()

    def _trim_when_idle(self) -> None:
        """When the last page in flight is done, return the freed heap memory to the system
        (:func:`inkstream.malloc.trim`, on a thread, at most once per ``_TRIM_EVERY_S``): without it
        the gateway kept the resident set of the largest document it had read (650 MB after a
        300-page PDF, 89 MB at start).
        """
        now = time.monotonic()
        if self.admission.pages_in_flight > 1 or now - self._trimmed_at < _TRIM_EVERY_S:
            return  # (the request that just finished may still hold its own reserved slot)
        self._trimmed_at = now
        task = asyncio.ensure_future(asyncio.to_thread(malloc.trim))
        self._trims.add(task)
        task.add_done_callback(self._trims.discard)
