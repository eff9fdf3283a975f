"""Bounded slots shared fairly between requests: an asyncio semaphore in :mod:`inkstream.fair` order.

Every replica accepts a bounded amount of work at once (an encoder's page window, a decoder's
segment window in the gateway's router; the encoder's preprocessing threads). When more is wanted
than fits, the surplus waits here, and :class:`FairWindow` grants freed slots by priority class,
then round-robin over requests, FIFO within one (:class:`inkstream.fair.FairQueue`). Waiters that
are cancelled leave the queue without taking a slot; a slot granted to a waiter that was cancelled
at the same moment is passed on. Single event loop, no locks (every method runs on the loop's thread).
"""

from __future__ import annotations

import asyncio

from inkstream.fair import FairQueue, WorkKey


class FairWindow:
    """``capacity`` slots shared by requests in :mod:`inkstream.fair` order.

    ``capacity`` >= 1 (units: pages or segments, whatever the caller counts). :meth:`resize` changes
    it (a replica restarted with other limits); slots held beyond a smaller capacity are returned as
    they are released. Raises ValueError for ``capacity`` < 1.
    """

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError(f"a work window needs at least one slot, got {capacity}")
        self.capacity = capacity
        self.used = 0
        self._waiters: FairQueue[asyncio.Future[None]] = FairQueue()

    @property
    def waiting(self) -> int:
        """Waiters not yet granted a slot."""
        return len(self._waiters)

    def resize(self, capacity: int) -> None:
        """Set a new capacity (>= 1) and grant what the larger one frees."""
        if capacity < 1:
            raise ValueError(f"a work window needs at least one slot, got {capacity}")
        self.capacity = capacity
        self._grant()

    async def acquire(self, key: WorkKey) -> None:
        """Take one slot for ``key``, waiting for its turn when none is free (cancellable)."""
        if self.used < self.capacity and not self._waiters:
            self.used += 1
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.push(key, fut)
        self._grant()
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():  # granted as we were cancelled: pass it on
                self.release()
            else:
                self._waiters.remove(fut)
            raise

    def release(self) -> None:
        """Give back one slot and grant it to the next waiter in turn."""
        self.used = max(0, self.used - 1)
        self._grant()

    def for_request(self, key: WorkKey) -> KeyedSlots:
        """A semaphore-like view (``await acquire()`` / ``release()``) bound to ``key``."""
        return KeyedSlots(self, key)

    def _grant(self) -> None:
        while self.used < self.capacity:
            fut = self._waiters.pop()
            if fut is None:
                return
            if fut.done():  # cancelled while waiting, not yet removed
                continue
            self.used += 1
            fut.set_result(None)


class KeyedSlots:
    """:class:`FairWindow` slots taken on behalf of one :class:`~inkstream.fair.WorkKey`; what
    :func:`gateway.clients.decoder.decode_segments` holds per open segment.
    """

    def __init__(self, window: FairWindow, key: WorkKey):
        self.window, self.key = window, key

    async def acquire(self) -> None:
        """Take one slot in ``key``'s turn."""
        await self.window.acquire(self.key)

    def release(self) -> None:
        """Give one slot back."""
        self.window.release()
