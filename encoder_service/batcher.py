"""Dynamic micro-batching of pages across concurrent requests for one :class:`EncoderHalf`.

Flow of one page (:meth:`MicroBatcher.submit`):

1. **Admission**: at most ``max_queue_pages`` pages may be admitted and not yet inside a forward
   pass (decoding, preprocessing or queued). Beyond that the page is refused at once with
   ResourceExhausted carrying a retry hint (never unbounded queueing).
2. **Decode + preprocess** off the event loop on ``preprocess_threads`` threads
   (:func:`images.decode_page`, then ``half.preprocess``), the threads given out in
   :mod:`inkstream.fair` order (:class:`encoder_service.prepare.FairPreparer`; after the priority
   class, the request with the fewest pages in the encoder first), so a small request's page is
   prepared next, after the page in progress, not after every admitted page of a long document. Bad bytes /
   unknown mode -> InvalidInput for this page only.
3. **Queue** by ``PreparedPage.batch_key`` (pages whose tensors can be stacked), in a
   :class:`~encoder_service.batch_queue.BatchQueue`, each group in the same fair order.
4. **Batch**: a group is run when it holds ``max_batch_size`` pages, or when its oldest page has
   waited ``max_wait_ms`` (which group first: :mod:`encoder_service.batch_queue`). This is the
   dynamic batching of Triton Inference Server (``max_queue_delay``) / TF-Serving's batch scheduler.
5. **Forward**: one ``half.encode_batch`` at a time in a dedicated worker thread; while it runs new
   pages keep queueing, so batches grow with load. If a batch of several pages raises, each page is
   re-run alone so that one bad page cannot fail its neighbours (:mod:`encoder_service.forward`).

A page whose caller is cancelled (stream cancelled) is removed from the queue; :meth:`cancel_stream`
removes all queued pages of one stream. Steps 3-5's loop is :mod:`encoder_service.batch_loop`. This
module never imports generated gRPC stubs.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import math
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from encoder_service.batch_loop import BatchLoop
from encoder_service.batch_queue import BatchQueue, QueuedPage
from encoder_service.batch_types import BatcherStats, BatchLimits, TimedPage
from encoder_service.metrics import EncoderMetrics
from encoder_service.prepare import FairPreparer
from inkstream.errors import Cancelled, InkstreamError, ResourceExhausted, Unavailable, as_inkstream_error
from inkstream.fair import NO_KEY, WorkKey
from inkstream.fatal import ForwardHealth
from inkstream.malloc import IdleTrim
from inkstream.pace import ServiceRate, window_units
from models.base import EncoderHalf

log = logging.getLogger("inkstream.encoder.batcher")


class MicroBatcher(BatchLoop):
    """Admission control + micro-batching + single-threaded forward for one encoder half (the
    scheduling loop and the forward step: :class:`encoder_service.batch_loop.BatchLoop`).

    ``clock``: monotonic seconds that every measured time is read from (a page's times, the forward
    and preprocessing averages, :attr:`pace`); tests pass a fake one. The batch queue's
    ``max_wait_ms`` runs on the event loop's own clock.
    """

    def __init__(self, limits: BatchLimits, metrics: EncoderMetrics | None = None, *,
                 clock: Callable[[], float] = time.perf_counter):
        self.limits = limits
        self.clock = clock
        self.metrics = metrics or EncoderMetrics()
        self.stats = BatcherStats()
        # Trip wire over forward passes (inkstream.fatal); set by the server, None in bare tests.
        self.forward_health: ForwardHealth | None = None
        self._half: EncoderHalf | None = None
        # Pages per request id admitted and not yet answered: what orders the preprocessing thread
        # and the batch queue after the priority class (inkstream.fair: the fewest in service first).
        self._requests: collections.Counter[str] = collections.Counter()
        self._queue = BatchQueue(limits.max_batch_size, limits.max_wait_ms / 1000.0, in_service=self._requests)
        self._pending = 0  # admitted, not yet inside a forward pass
        self._inflight = 0  # admitted, not yet answered
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._closed = False
        self._forward_ema_s: float | None = None
        self._running: list[QueuedPage] = []  # the batch inside the forward pass
        self._preparer = FairPreparer(limits.max_image_bytes, limits.max_image_pixels,
                                      in_service=self._requests, clock=clock)  # threads: at start
        self._fwd_pool = ThreadPoolExecutor(1, thread_name_prefix="encoder-forward")
        # The heaps keep freed memory for the next page while pages keep coming (no page faults to
        # fill it again) and are trimmed once the replica has been idle (inkstream.malloc).
        self.idle_trim = IdleTrim()
        #: busy seconds per encoded page with the replica kept full (inkstream.pace): busy while at least
        #: :attr:`full_inflight` pages are admitted and unanswered (set at :meth:`start`). Pages served
        #: with fewer in flight (one at a time) each take a whole forward pass alone: counted, they made
        #: the rate their latency (0.4 s a page where a full batch gave 0.1), so a gateway sizing a
        #: deadline with it refused documents that would have been read in time.
        self.pace = ServiceRate(min_inflight=self.full_inflight, clock=clock)
        #: the warm-up's estimate of the same (encoder_service.warm_rate; None until the server's warm-up ran)
        self.warmup_s: float | None = None

    # ----------------------------------------------------------------- lifecycle
    async def start(self, half: EncoderHalf) -> None:
        """Attach the loaded half and start the scheduler task (call on the serving event loop)."""
        self._half = half
        self._preparer.use(self.limits.preprocess_threads or half.preprocess_threads)
        self.pace.min_inflight = self.full_inflight
        self._task = asyncio.get_running_loop().create_task(self._schedule(), name="encoder-batcher")

    async def stop(self) -> None:
        """Stop scheduling; queued pages fail with Unavailable; worker threads are released."""
        self._closed = True
        running, self._running = list(self._running), []
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):  # shutting down
                await self._task
        for it in self._queue.clear():
            self._release(it)
            if not it.future.done():
                it.future.set_exception(Unavailable("the encoder is shutting down; retry on another replica"))
        for it in running:  # the forward thread may still finish; nobody waits for it
            if not it.future.done():
                it.future.set_exception(Unavailable("the encoder stopped during this page's forward pass; retry"))
        self._preparer.shutdown()
        self._fwd_pool.shutdown(wait=False, cancel_futures=True)

    @property
    def running(self) -> bool:
        """True once started with a half and not stopped."""
        return self._half is not None and not self._closed

    @property
    def queue_depth(self) -> int:
        """Admitted pages not yet inside a forward pass (decoding, preprocessing or queued)."""
        return self._pending

    @property
    def queued(self) -> int:
        """Pages prepared and waiting in the batch queue for a forward pass (part of :attr:`queue_depth`)."""
        return len(self._queue)

    @property
    def inflight(self) -> int:
        """Admitted pages not yet answered."""
        return self._inflight

    @property
    def preprocess_threads(self) -> int:
        """Threads preparing pages (set at :meth:`start`; 1 before)."""
        return max(1, self._preparer.threads)

    @property
    def full_inflight(self) -> int:
        """Pages in flight that keep this replica full: every preprocessing thread busy and one page in
        the forward stage (``preprocess_threads + 1``); the floor of :meth:`work_window_pages`, and
        what :attr:`pace` counts from.
        """
        return self.preprocess_threads + 1

    def seconds_per_page(self) -> float | None:
        """``InfoResponse.seconds_per_page``: measured busy seconds per page with the replica kept full
        (:attr:`pace`), or the warm-up's estimate of the same (:attr:`warmup_s`) until enough pages were
        measured that way (pages served one at a time never are); None when neither.
        """
        measured = self.pace.seconds_per_unit
        return measured if measured is not None else self.warmup_s

    def work_window_pages(self) -> int:
        """Pages this replica wants in flight, sized in time (``InfoResponse.work_window_pages``):
        the pages it completes at its measured seconds per page (:attr:`pace`) in the time one page
        takes through it when nothing queues (smoothed preprocessing + forward time), at least
        ``preprocess_threads + 1`` (every preprocessing thread busy and one page in the forward
        stage, so a thread never waits for a forward to finish), at most
        ``max_queue_pages + max_batch_size``.

        Without the extra page the threads idle during each forward, the measured pace equals one
        page's time through and sizes the window at the threads again (a fixed point): a one-page
        request beside a long document then waited ~5 s in the gateway for a slot, longer than its
        ~3.3 s in the encoder (compact, 1 thread, traces of ``bench/fairness.py``).
        """
        floor = self.full_inflight
        ceiling = max(floor, self.limits.max_queue_pages + self.limits.max_batch_size)
        prep, fwd = self._preparer.page_seconds, self._forward_ema_s
        through = prep + fwd if prep is not None and fwd is not None else 0.0
        return window_units(through, self.pace.seconds_per_unit, floor, ceiling)

    # ----------------------------------------------------------------- admission
    def retry_after_s(self) -> float:
        """Estimated seconds until the backlog clears: batches ahead x mean forward time + window;
        an exponential moving average (alpha 0.2) of measured forward passes, 1 s before any; within
        [0.05, 60] seconds.
        """
        per_batch = self._forward_ema_s if self._forward_ema_s is not None else 1.0
        batches = math.ceil(max(self._pending, 1) / self.limits.max_batch_size)
        return min(60.0, max(0.05, batches * per_batch + self.limits.max_wait_ms / 1000.0))

    def check_admission(self, pages: int = 1) -> None:
        """Raise Unavailable when not running, ResourceExhausted (with retry hint) when full."""
        if not self.running:
            raise Unavailable("the encoder is not running (model loading or shutting down); retry shortly")
        if self._pending + pages > self.limits.max_queue_pages:
            wait = self.retry_after_s()
            raise ResourceExhausted(
                f"encoder queue is full ({self._pending} of {self.limits.max_queue_pages} pages waiting); "
                f"retry after {wait:.2f} s or on another replica",
                retry_after_s=wait,
            )

    # ----------------------------------------------------------------- submit
    async def submit(self, image: bytes, mode: str = "", *, stream_id: Any = None,
                     key: WorkKey = NO_KEY) -> TimedPage:
        """Encode one page image (PNG/JPEG bytes) in mode ``mode`` (``""`` = the half's default);
        ``key``: its request and priority class, which order it in the preprocessing and batch queues.

        Returns the EncodedPage (vision tokens [n_tokens, H] per segment, model dtype, CPU) and the
        admission-to-result time in seconds. Raises ResourceExhausted (queue full, with
        ``retry_after_s``), Unavailable (not running), InvalidInput / PayloadTooLarge /
        UnsupportedMediaType (this page's bytes or mode), InternalError (model failure),
        Cancelled (its stream was cancelled). Cancelling the awaiting task removes the page.
        """
        try:
            self.check_admission()
        except InkstreamError as exc:
            self.metrics.reject(exc.code_name)
            raise
        loop = asyncio.get_running_loop()
        start = self.clock()
        self._pending += 1
        self._inflight += 1
        self._requests[key.request_id] += 1
        self.pace.started()
        self.idle_trim.busy()
        self.metrics.queue_depth.add(1, self.metrics.attrs)
        self.metrics.inflight.add(1, self.metrics.attrs)
        item: QueuedPage | None = None
        try:
            assert self._half is not None  # running (checked at admission)
            prepared, thread_wait_s = await self._preparer.prepare(self._half, image, mode, key)
            if self._closed:
                raise Unavailable("the encoder is shutting down; retry on another replica")
            item = QueuedPage(prepared, loop.create_future(), loop.time(), stream_id, key)
            queued_at = self.clock()
            self._queue.push(item)
            self._wake.set()
            page = await item.future
            now = self.clock()
            seconds = now - start
            self.metrics.latency.record(seconds, self.metrics.attrs)
            self.metrics.pages.add(1, self.metrics.attrs)
            fwd_at = item.forward_at if item.forward_at is not None else now
            return TimedPage(page, seconds, prepare_s=queued_at - start, queue_s=fwd_at - queued_at,
                             forward_s=now - fwd_at, batch_pages=item.batch_pages, thread_wait_s=thread_wait_s)
        except Exception as exc:  # mapped to the error map (CancelledError passes)
            err = as_inkstream_error(exc)
            self.metrics.reject(err.code_name)
            if err is not exc:
                log.error("page failed", exc_info=exc)
                raise err from exc
            raise
        finally:
            if item is None:  # failed or cancelled while decoding / preprocessing
                self._pending -= 1
                self.metrics.queue_depth.add(-1, self.metrics.attrs)
            else:  # cancelled while queued: leave the queue; no-op once it entered a forward pass
                self._queue.remove(item)
                self._release(item)
            self._inflight -= 1
            self._requests[key.request_id] -= 1
            if self._requests[key.request_id] <= 0:
                del self._requests[key.request_id]
            if item is None or not item.paced:  # else its forward pass counted it (_forward)
                self.pace.abandoned()
            self.metrics.inflight.add(-1, self.metrics.attrs)
            if self._inflight == 0:
                self.idle_trim.idle()

    def _release(self, item: QueuedPage) -> None:
        """Give back ``item``'s admission slot exactly once."""
        if not item.released:
            item.released = True
            self._pending -= 1
            self.metrics.queue_depth.add(-1, self.metrics.attrs)

    def cancel_stream(self, stream_id: Any) -> int:
        """Fail every queued page of ``stream_id`` with Cancelled; returns how many were queued.

        (The pages' ``submit`` calls then release their admission slots.)
        """
        n = 0
        for it in self._queue:
            if it.stream_id == stream_id and not it.future.done():
                it.future.set_exception(Cancelled("the request stream was cancelled"))
                n += 1
        return n
