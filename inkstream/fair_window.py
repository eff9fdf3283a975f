"""Bounded slots shared fairly between requests: an asyncio semaphore in :mod:`inkstream.fair` order.

Every replica accepts a bounded amount of work at once (an encoder's page window, a decoder's
segment window in the gateway's router; the encoder's preprocessing threads). When more is wanted
than fits, the surplus waits here, and :class:`FairWindow` grants freed slots by priority class,
then to the request holding the fewest slots, then round-robin over requests, FIFO within one
(:class:`inkstream.fair.FairQueue` with the slots each request holds as what it has in service).
Waiters that are cancelled leave the queue without taking a slot; a slot granted to a waiter that
was cancelled at the same moment is passed on. Single event loop, no locks (every method runs on
the loop's thread).

*Express slots* (``express`` > 0, the gateway's encoder windows): an interactive request (a client
waits) that holds no slot of the window may take one of ``express`` slots beyond ``capacity`` at
once, instead of waiting until another request's unit in flight is done. The window is sized so
the replica stays busy, so every slot is usually held by a long document; without them a one-page
request waited for one of its
pages to go all the way through the replica (measured: ~2.5-5 s of a one-page request's 8-10 s
beside a long document, compact checkpoint on a loaded 2-core machine), and with them it waits only
for the work in progress there, which the replica's own fair queues put it next after. An express
slot is counted apart from the ``capacity`` slots: while a request holds one, the others keep all
of ``capacity`` (earlier an express unit took the next freed slot of the window, so a long
document had one page fewer on the replica while a probe was there, and the replica idled).
At most ``capacity + express`` units are in flight.
"""

from __future__ import annotations

import asyncio
import collections

from inkstream.fair import INTERACTIVE, FairQueue, InService, WorkKey


class FairWindow:
    """``capacity`` slots shared by requests in :mod:`inkstream.fair` order.

    ``capacity`` >= 1 (units: pages or segments, whatever the caller counts). :meth:`resize` changes
    it (a replica restarted with other limits); slots held beyond a smaller capacity are returned as
    they are released. ``express`` >= 0: slots beyond ``capacity`` for interactive requests holding
    none (module docstring). :meth:`release` names the key the slot was taken for (what each
    request holds orders the waiters). ``in_service``: what each request (by id) has in service as
    its owner counts it, when that is more than the slots of this window (the encoder's
    preprocessing thread: a request's pages anywhere in the encoder, so a long document's page
    waiting for the one thread does not tie with a new request's as both hold no thread); default:
    the slots each holds here. Raises ValueError for ``capacity`` < 1 or ``express`` < 0.
    """

    def __init__(self, capacity: int, express: int = 0, in_service: InService | None = None):
        if capacity < 1 or express < 0:
            raise ValueError(f"a work window needs at least one slot and no negative express slots, "
                             f"got {capacity}, {express}")
        self.capacity = capacity
        self.express = express
        self.used = 0  # slots of ``capacity`` in use
        self.express_used = 0  # express slots in use
        self._held: collections.Counter[str] = collections.Counter()  # slots held per request id
        self._express_held: collections.Counter[str] = collections.Counter()  # of which express
        self._waiters: FairQueue[tuple[WorkKey, asyncio.Future[None]]] = FairQueue()
        self._in_service: InService = self._held if in_service is None else in_service

    @property
    def waiting(self) -> int:
        """Waiters not yet granted a slot."""
        return len(self._waiters)

    def held(self, key: WorkKey) -> int:
        """Slots ``key``'s request holds (express ones included)."""
        return self._held[key.request_id]

    def resize(self, capacity: int) -> None:
        """Set a new capacity (>= 1) and grant what the larger one frees."""
        if capacity < 1:
            raise ValueError(f"a work window needs at least one slot, got {capacity}")
        self.capacity = capacity
        self._grant()

    async def acquire(self, key: WorkKey) -> None:
        """Take one slot for ``key``, waiting for its turn when none is free (cancellable); an
        express slot at once when ``key`` holds none and the window is full (module docstring).
        """
        if self.used < self.capacity and not self._waiters:
            self._take(key)
            return
        if self.express_used < self.express and key.priority == INTERACTIVE and not self._held[key.request_id]:
            self._take(key, express=True)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        item = (key, fut)
        self._waiters.push(key, item)
        self._grant()
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():  # granted as we were cancelled: pass it on
                self.release(key)
            else:
                self._waiters.remove(item)
            raise

    def _take(self, key: WorkKey, express: bool = False) -> None:
        self._held[key.request_id] += 1
        if express:
            self.express_used += 1
            self._express_held[key.request_id] += 1
        else:
            self.used += 1

    def release(self, key: WorkKey | None = None) -> None:
        """Give back one slot taken for ``key`` (None: for a request with id "") and grant it to the
        next waiter in turn.
        """
        rid = key.request_id if key is not None else ""
        if _take_one(self._express_held, rid):
            self.express_used = max(0, self.express_used - 1)
        else:
            self.used = max(0, self.used - 1)
        _take_one(self._held, rid)
        self._grant()

    def for_request(self, key: WorkKey) -> KeyedSlots:
        """A semaphore-like view (``await acquire()`` / ``release()``) bound to ``key``."""
        return KeyedSlots(self, key)

    def _grant(self) -> None:
        while self.used < self.capacity:
            item = self._waiters.pop(self._in_service)
            if item is None:
                return
            key, fut = item
            if fut.done():  # cancelled while waiting, not yet removed
                continue
            self._take(key)
            fut.set_result(None)


def _take_one(counts: collections.Counter[str], rid: str) -> bool:
    """Count one unit of ``rid`` off ``counts`` (dropping a zero count); False when it held none."""
    if counts[rid] <= 0:
        counts.pop(rid, None)
        return False
    counts[rid] -= 1
    if not counts[rid]:
        del counts[rid]
    return True


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
