"""The scheduling loop of :class:`encoder_service.batcher.MicroBatcher`: pick the next ready batch
from its :class:`~encoder_service.batch_queue.BatchQueue` (steps 3-4 of the batcher's module
docstring), run it, one forward pass at a time, on the forward thread
(:func:`encoder_service.forward.encode_isolated`), and deliver one result or error per page, with the
forward-time average, statistics, metrics, the service rate (:mod:`inkstream.pace`) and the forward
health trip wire (:mod:`inkstream.fatal`) updated.

:class:`BatchLoop` is a mixin: the batcher holds the state (annotated below) and gives back
admission slots (``_release``); admission and submission stay in :mod:`encoder_service.batcher`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from encoder_service.batch_queue import BatchQueue, QueuedPage
from encoder_service.batch_types import BatcherStats
from encoder_service.forward import encode_isolated, forward_outcome
from encoder_service.metrics import EncoderMetrics
from inkstream.errors import InkstreamError, as_inkstream_error
from inkstream.fatal import ForwardHealth
from inkstream.pace import ServiceRate
from models.base import EncoderHalf

log = logging.getLogger("inkstream.encoder.batcher")


class BatchLoop:
    """The scheduler task and the forward step of the micro-batcher (module docstring); the state
    below is the batcher's (:class:`encoder_service.batcher.MicroBatcher` sets it in its ``__init__``).
    """

    _queue: BatchQueue
    _wake: asyncio.Event
    _closed: bool
    _half: EncoderHalf | None
    _running: list[QueuedPage]
    _fwd_pool: ThreadPoolExecutor
    _forward_ema_s: float | None
    _release: Callable[[QueuedPage], None]
    stats: BatcherStats
    metrics: EncoderMetrics
    forward_health: ForwardHealth | None
    pace: ServiceRate
    clock: Callable[[], float]

    def _ready_batch(self, now: float) -> list[QueuedPage] | None:
        """Pop the next batch (see :meth:`BatchQueue.pop_ready`), giving back the popped pages'
        admission slots; None when no group is ready.
        """
        batch, popped = self._queue.pop_ready(now)
        for it in popped:
            self._release(it)
        return batch or None

    async def _schedule(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._closed:
            batch = self._ready_batch(loop.time())
            if batch is None:
                self._purge_done()
                self._wake.clear()
                timeout = self._queue.next_deadline(loop.time())
                try:
                    await asyncio.wait_for(self._wake.wait(), timeout)
                except TimeoutError:
                    pass
                continue
            self._running = batch
            try:
                await self._forward(batch)
            except Exception as exc:  # a bug here must fail the batch, not stall the queue
                log.exception("batch scheduling failed")
                for it in batch:
                    if not it.future.done():
                        it.future.set_exception(as_inkstream_error(exc))
            finally:
                self._running = []

    def _purge_done(self) -> None:
        """Drop queue heads whose page already failed (cancelled stream); their submit released them."""
        for it in self._queue.purge_done():
            self._release(it)

    async def _forward(self, batch: list[QueuedPage]) -> None:
        half = self._half
        assert half is not None
        t0 = self.clock()
        for it in batch:
            it.forward_at, it.batch_pages = t0, len(batch)
        results = await encode_isolated(self._fwd_pool, half, [it.prepared for it in batch])
        elapsed = self.clock() - t0
        self._forward_ema_s = elapsed if self._forward_ema_s is None else 0.8 * self._forward_ema_s + 0.2 * elapsed
        self.stats.batches += 1
        self.stats.batch_sizes.append(len(batch))
        self.stats.forward_seconds += elapsed
        self.metrics.batch_size.record(len(batch), self.metrics.attrs)
        self.metrics.forward.record(elapsed, self.metrics.attrs)
        ok, error = forward_outcome(results)
        if self.forward_health is not None and ok is True:
            self.forward_health.success()
        elif self.forward_health is not None and ok is False:
            self.forward_health.failure(error)
        # The batch's pages finish together: one completion for the rate (inkstream.pace), judged full
        # or not on the pages in flight before it. Counted page by page, the pages after the first few
        # of a batch that took the replica below full were dropped while their time was kept.
        answered = [(it, res) for it, res in zip(batch, results, strict=True) if not it.future.done()]
        n_ok = sum(not isinstance(res, BaseException) for _, res in answered)
        self.pace.finished(n_ok)
        self.pace.abandoned(len(answered) - n_ok)
        for it, res in answered:  # one result per page (encode_isolated)
            it.paced = True
            if isinstance(res, BaseException):
                if not isinstance(res, InkstreamError):
                    log.error("encode_batch failed", exc_info=res)
                it.future.set_exception(as_inkstream_error(res))
            else:
                self.stats.pages_encoded += 1
                it.future.set_result(res)
