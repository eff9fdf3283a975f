"""Fair sharing of a bounded work window between requests: round-robin per request, interactive first.

Every replica accepts a bounded amount of work at once (an encoder's page window, a decoder's segment
window; :mod:`gateway.routing.router`). When more is wanted than fits, the surplus waits here, and the order
in which waiters get the slots that free up decides whether a small request is stuck behind a long
document. :class:`FairWindow` grants freed slots

- by priority class first: :data:`INTERACTIVE` (synchronous requests: a client is waiting on the
  connection) before :data:`BATCH` (asynchronous jobs), as the issue tracker's admission policy asks;
- then round-robin over the requests waiting in that class (deficit round-robin with a quantum of
  one unit, which is plain round-robin since every unit costs the same: one page or one segment;
  Shreedhar & Varghese, "Efficient Fair Queueing using Deficit Round Robin", SIGCOMM 1995);
- FIFO within one request, so a document's pages keep their order.

So with a 100-page document holding the window, the next freed slot goes to a 1-page request that
arrived a moment ago, not to the document's 9th waiting page. Waiters that are cancelled leave the
queue without taking a slot; a slot granted to a waiter that was cancelled at the same moment is
passed on. Single event loop, no locks (every method runs on the loop's thread).
"""

from __future__ import annotations

import asyncio
import collections
from dataclasses import dataclass

INTERACTIVE = 0  # a client waits on the connection (REST /v1/ocr, gRPC Recognize, OpenAI route)
BATCH = 1  # an asynchronous job: runs when no interactive work waits
PRIORITIES = (INTERACTIVE, BATCH)


@dataclass(frozen=True)
class WorkKey:
    """Who is asking for a slot: ``request_id`` (the unit of fairness) and ``priority``
    (:data:`INTERACTIVE` or :data:`BATCH`).
    """

    request_id: str = ""
    priority: int = INTERACTIVE


class FairWindow:
    """``capacity`` slots shared by requests in the order the module docstring gives.

    ``capacity`` >= 1 (units: pages or segments, whatever the caller counts). :meth:`resize` changes
    it (a replica restarted with other limits); slots held beyond a smaller capacity are returned as
    they are released. Raises ValueError for ``capacity`` < 1.
    """

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError(f"a work window needs at least one slot, got {capacity}")
        self.capacity = capacity
        self.used = 0
        # priority -> request id -> FIFO of waiting futures; the dict's order is the round-robin turn.
        self._queues: dict[int, dict[str, collections.deque[asyncio.Future[None]]]] = {p: {} for p in PRIORITIES}

    @property
    def waiting(self) -> int:
        """Waiters not yet granted a slot."""
        return sum(len(q) for qs in self._queues.values() for q in qs.values())

    def resize(self, capacity: int) -> None:
        """Set a new capacity (>= 1) and grant what the larger one frees."""
        if capacity < 1:
            raise ValueError(f"a work window needs at least one slot, got {capacity}")
        self.capacity = capacity
        self._grant()

    async def acquire(self, key: WorkKey) -> None:
        """Take one slot for ``key``, waiting for its turn when none is free (cancellable)."""
        if self.used < self.capacity and not self.waiting:
            self.used += 1
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queues = self._queues.get(key.priority, self._queues[BATCH])
        queues.setdefault(key.request_id, collections.deque()).append(fut)
        self._grant()
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():  # granted as we were cancelled: pass it on
                self.release()
            else:
                self._forget(queues, key.request_id, fut)
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
            fut = self._next_waiter()
            if fut is None:
                return
            self.used += 1
            fut.set_result(None)

    def _next_waiter(self) -> asyncio.Future[None] | None:
        for p in PRIORITIES:
            queues = self._queues[p]
            while queues:
                rid, q = next(iter(queues.items()))
                del queues[rid]  # take its turn ...
                while q and q[0].done():  # cancelled while waiting
                    q.popleft()
                if not q:
                    continue
                fut = q.popleft()
                if q:
                    queues[rid] = q  # ... and queue it again at the end of the round
                return fut
        return None

    @staticmethod
    def _forget(queues: dict[str, collections.deque[asyncio.Future[None]]], rid: str,
                fut: asyncio.Future[None]) -> None:
        q = queues.get(rid)
        if q is None:
            return
        try:
            q.remove(fut)
        except ValueError:
            pass
        if not q:
            del queues[rid]


class KeyedSlots:
    """:class:`FairWindow` slots taken on behalf of one :class:`WorkKey`; what
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
