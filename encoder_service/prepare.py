"""Decoding and preprocessing of page images on a few threads, given out in fair order.

A thread pool's own queue is FIFO across requests: with a long document's pages admitted, a small
request's page would be prepared after all of them. :class:`FairPreparer` hands its
``preprocess_threads`` threads out in :mod:`inkstream.fair` order instead (priority class, then
the request with the fewest pages in the encoder, round-robin over requests, FIFO within one;
:class:`inkstream.fair_window.FairWindow`), and gives a
thread's slot back when the thread is done with the page, not when a cancelled caller stops waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from encoder_service.images import decode_page
from inkstream.fair import InService, WorkKey
from inkstream.fair_window import FairWindow
from models.base import EncoderHalf, PreparedPage


class FairPreparer:
    """Bytes -> :class:`PreparedPage` on a few threads in fair order (module docstring); :meth:`use`
    sets how many (once the half, which knows what suits it, is loaded) before the first page.

    ``max_image_bytes`` / ``max_image_pixels``: limits of :func:`encoder_service.images.decode_page`;
    ``in_service``: pages each request (by id) has in the encoder, admitted and not answered (the
    batcher's count; the fewest go first, :mod:`inkstream.fair`); None: the threads each holds.
    ``clock``: monotonic seconds the waits and :attr:`page_seconds` are read from (tests: a fake one).
    """

    def __init__(self, max_image_bytes: int, max_image_pixels: int, in_service: InService | None = None, *,
                 clock: Callable[[], float] = time.perf_counter):
        self.max_image_bytes = max_image_bytes
        self._clock = clock
        self.max_image_pixels = max_image_pixels
        self.threads = 0
        self._pool: ThreadPoolExecutor | None = None
        self._slots = FairWindow(1, in_service=in_service)
        #: smoothed seconds one page takes on its thread (EWMA, weight 0.2); None before the first
        self.page_seconds: float | None = None

    def use(self, threads: int) -> None:
        """Prepare pages on ``threads`` threads (>= 1); a second call changes nothing."""
        if self._pool is None:
            self.threads = max(1, threads)
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="encoder-prep")
            self._slots.resize(self.threads)

    async def prepare(self, half: EncoderHalf, image: bytes, mode: str, key: WorkKey) -> tuple[PreparedPage, float]:
        """PNG/JPEG ``image`` -> ``half.preprocess`` in ``mode`` (``""`` = the half's default), on a
        thread taken in ``key``'s turn; returns the page and the seconds it waited for the thread.
        Raises what decode_page / preprocess raise (InvalidInput, PayloadTooLarge,
        UnsupportedMediaType); cancellable while waiting for its turn.
        """
        loop = asyncio.get_running_loop()
        if self._pool is None:
            raise RuntimeError("FairPreparer.prepare() before use()")
        t0 = self._clock()
        await self._slots.acquire(key)
        waited = self._clock() - t0
        try:
            work = self._pool.submit(self._prepare, half, image, mode)
        except BaseException:
            self._slots.release(key)
            raise

        def done(_: object) -> None:  # on the preprocessing thread
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits for the slot
                loop.call_soon_threadsafe(self._slots.release, key)

        work.add_done_callback(done)
        return await asyncio.wrap_future(work), waited

    def _prepare(self, half: EncoderHalf, image: bytes, mode: str) -> PreparedPage:
        """Worker thread: bytes -> RGB page -> PreparedPage (CPU tensors)."""
        t0 = self._clock()
        rgb = decode_page(image, max_image_bytes=self.max_image_bytes, max_image_pixels=self.max_image_pixels)
        page = half.preprocess(rgb, mode or half.default_mode)
        took = self._clock() - t0
        last = self.page_seconds  # one float written at once: a racing thread loses one sample at most
        self.page_seconds = took if last is None else 0.8 * last + 0.2 * took
        return page

    def shutdown(self) -> None:
        """Drop pages not yet started; threads finish the page they hold."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
