"""Bounded slots shared fairly between requests: an asyncio semaphore in :mod:`inkstream.fair` order.

Every replica accepts a bounded amount of work at once (an encoder's page window, a decoder's
segment window in the gateway's router; the encoder's preprocessing threads). When more is wanted
than fits, the surplus waits here, and :class:`FairWindow` grants freed slots by priority class,
then round-robin over requests, FIFO within one (:class:`inkstream.fair.FairQueue`). Waiters that
are cancelled leave the queue without taking a slot; a slot granted to a waiter that was cancelled
at the same moment is passed on. Single event loop, no locks (every method runs on the loop's thread).

*Express slots* (``express`` > 0, the gateway's encoder windows): a request that holds no slot of
the window may take one of ``express`` slots beyond ``capacity`` at once, instead of waiting until
another request's unit in flight is done. The window is sized so the replica stays busy, so every
slot is usually held by a long document; without them a one-page request waited for one of its
pages to go all the way through the replica (measured: ~2.5-5 s of a one-page request's 8-10 s
beside a long document, compact checkpoint on a loaded 2-core machine), and with them it waits only
for the work in progress there, which the replica's own fair queues put it next after. At most
``capacity + express`` units are in flight; freed slots are granted to waiters only below
``capacity``.
"""

from __future__ import annotations

import asyncio

from inkstream.fair import FairQueue, WorkKey


class FairWindow:
    """``capacity`` slots shared by requests in :mod:`inkstream.fair` order.

    ``capacity`` >= 1 (units: pages or segments, whatever the caller counts). :meth:`resize` changes
    it (a replica restarted with other limits); slots held beyond a smaller capacity are returned as
    they are released. ``express`` >= 0: slots beyond ``capacity`` for requests holding none (module
    docstring); they need :meth:`release` to name the key. Raises ValueError for ``capacity`` < 1 or
    ``express`` < 0.
    """

    def __init__(self, capacity: int, express: int = 0):
        if capacity < 1 or express < 0:
            raise ValueError(f"a work window needs at least one slot and no negative express slots, "
                             f"got {capacity}, {express}")
        self.capacity = capacity
        self.express = express
        self.used = 0
        self._held: dict[WorkKey, int] = {}  # slots held per key (express windows only)
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
        """Take one slot for ``key``, waiting for its turn when none is free (cancellable); an
        express slot at once when ``key`` holds none (module docstring).
        """
        if (self.used < self.capacity and not self._waiters) or (
                self.express and self.used < self.capacity + self.express and not self._held.get(key)):
            self._take(key)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.push(key, fut)
        self._grant()
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():  # granted as we were cancelled: pass it on
                self.release()  # not yet counted as held by key
            else:
                self._waiters.remove(fut)
            raise
        if self.express:
            self._held[key] = self._held.get(key, 0) + 1

    def _take(self, key: WorkKey) -> None:
        self.used += 1
        if self.express:
            self._held[key] = self._held.get(key, 0) + 1

    def release(self, key: WorkKey | None = None) -> None:
        """Give back one slot (taken for ``key``; a window with express slots needs it) and grant it
        to the next waiter in turn.
        """
        self.used = max(0, self.used - 1)
        if key is not None and key in self._held:
            self._held[key] -= 1
            if self._held[key] <= 0:
                del self._held[key]
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
        self.window.release(self.key)
