"""The one fairness policy of inkstream: priority class, fewest in service, round-robin over requests, FIFO.

Every place where work queues (the gateway's replica windows, the encoder's preprocessing slots and
batch queue, the decoder's admission to its running batch) orders waiting work the same way
(DESIGN.md, "Fairness everywhere a queue forms"):

- by priority class first: :data:`INTERACTIVE` (a client waits on the connection: REST /v1/ocr,
  gRPC Recognize, the OpenAI route) before :data:`BATCH` (asynchronous jobs);
- then, where the queue's owner knows what each request has *in service* (slots of a window held,
  rows of the decoder's running batch), the request holding the fewest units first (max-min
  fairness of the service itself: a request that just arrived, holding nothing, is served before
  one that holds the whole window, instead of waiting for its turn behind that one's next unit);
- then round-robin over the requests waiting in that class (deficit round-robin with a quantum of
  one unit, which is plain round-robin since every unit costs the same: one page, one segment;
  Shreedhar & Varghese, "Efficient Fair Queueing using Deficit Round Robin", SIGCOMM 1995);
- FIFO within one request, so a document's pages keep their order.

So with a 100-page document queued, the next unit served is a 1-page request's page that arrived a
moment ago, not the document's next page. (Without the in-service count plain round-robin still
served the document's page queued before the small request's, so a one-page request waited for a
whole unit of the document before its own: measured with ``bench/fairness.py --spans``.)

:class:`FairQueue` is that order as a plain data structure
(no asyncio, no locks: its owner serialises access); :mod:`inkstream.fair_window` builds the async
slots of the gateway and the encoder on it. A request's :class:`WorkKey` travels from the gateway
to the replicas in gRPC metadata (:func:`key_metadata`, :func:`key_from_metadata`).
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from inkstream.request_id import REQUEST_ID_KEY, valid_request_id

INTERACTIVE = 0  # a client waits on the connection (REST /v1/ocr, gRPC Recognize, OpenAI route)
BATCH = 1  # an asynchronous job: runs when no interactive work waits
PRIORITIES = (INTERACTIVE, BATCH)
#: gRPC metadata key of a call's priority class, values :data:`PRIORITY_NAMES`.
PRIORITY_KEY = "x-inkstream-priority"
PRIORITY_NAMES = {INTERACTIVE: "interactive", BATCH: "batch"}
_PRIORITY_OF_NAME = {v: k for k, v in PRIORITY_NAMES.items()}

T = TypeVar("T")


@dataclass(frozen=True)
class WorkKey:
    """Who a unit of work belongs to: ``request_id`` (the unit of fairness; "" = no request in
    particular, one shared turn) and ``priority`` (:data:`INTERACTIVE` or :data:`BATCH`; any other
    value is served as :data:`BATCH`).
    """

    request_id: str = ""
    priority: int = INTERACTIVE


NO_KEY = WorkKey()  # work for no request in particular: interactive, one shared turn
#: Units each request (by request id) has in service, as the queue's owner counts them (module docstring).
InService = Mapping[str, int]


def key_metadata(key: WorkKey) -> list[tuple[str, str]]:
    """Outgoing gRPC metadata for ``key``: ``x-request-id`` (when set) and ``x-inkstream-priority``."""
    md = [(PRIORITY_KEY, PRIORITY_NAMES.get(key.priority, "batch"))]
    return [(REQUEST_ID_KEY, key.request_id), *md] if key.request_id else md


def key_from_metadata(metadata: Iterable[tuple[str, str | bytes]] | None) -> WorkKey:
    """The :class:`WorkKey` a call's incoming metadata carries (what :func:`key_metadata` wrote).

    A missing or invalid request id gives "" (all such calls share one turn); a missing priority
    gives :data:`INTERACTIVE` (a caller that does not say is served like a waiting client, as before
    priorities existed), an unknown one :data:`BATCH`.
    """
    rid, prio = "", INTERACTIVE
    for k, v in metadata or ():
        value = v.decode("ascii", "replace") if isinstance(v, bytes) else v
        if k == REQUEST_ID_KEY and valid_request_id(value):
            rid = value
        elif k == PRIORITY_KEY:
            prio = _PRIORITY_OF_NAME.get(value.strip().lower(), BATCH)
    return WorkKey(rid, prio)


class FairQueue(Generic[T]):
    """Items in the order of the module docstring: :meth:`pop` returns the next one.

    :meth:`peek` and :meth:`pop` take ``in_service`` (units in service per request id, missing = 0)
    from an owner that counts them; without it the order is priority, round-robin, FIFO. Items are
    compared by identity for :meth:`remove`. Not thread-safe: the owner serialises calls (one event
    loop, or one lock).
    """

    def __init__(self) -> None:
        # priority -> request id -> FIFO of items; the dict's order is the round-robin turn.
        self._queues: dict[int, dict[str, collections.deque[T]]] = {p: {} for p in PRIORITIES}
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def __bool__(self) -> bool:
        return self._len > 0

    def __iter__(self) -> Iterator[T]:
        """Every queued item, highest priority class first (a snapshot; not the exact service order)."""
        return iter([it for p in PRIORITIES for q in self._queues[p].values() for it in q])

    def push(self, key: WorkKey, item: T) -> None:
        """Queue ``item`` at the end of ``key``'s request in ``key``'s class."""
        queues = self._queues.get(key.priority, self._queues[BATCH])
        queues.setdefault(key.request_id, collections.deque()).append(item)
        self._len += 1

    def _turn(self, in_service: InService | None) -> tuple[dict[str, collections.deque[T]], str] | None:
        """The class's queues and the request id whose item goes next; None when empty."""
        for p in PRIORITIES:
            queues = self._queues[p]
            if not queues:
                continue
            if not in_service:
                return queues, next(iter(queues))
            # The fewest units in service; among equals the first in the round-robin turn.
            return queues, min(queues, key=lambda rid: in_service.get(rid, 0))
        return None

    def peek(self, in_service: InService | None = None) -> T | None:
        """The item :meth:`pop` (with the same ``in_service``) would return, without taking it (None
        when empty).
        """
        turn = self._turn(in_service)
        return turn[0][turn[1]][0] if turn is not None else None  # every deque in the dicts is non-empty

    def pop(self, in_service: InService | None = None) -> T | None:
        """Take the next item (None when empty); its request goes to the end of its class's turn."""
        turn = self._turn(in_service)
        if turn is None:
            return None
        queues, rid = turn
        q = queues.pop(rid)
        item = q.popleft()
        if q:
            queues[rid] = q  # queued again at the end of the round
        self._len -= 1
        return item

    def top_priority(self) -> int | None:
        """The best (lowest) priority class holding an item; None when empty."""
        return next((p for p in PRIORITIES if self._queues[p]), None)

    def remove(self, item: T) -> bool:
        """Take ``item`` (compared by identity) out of the queue; True when it was queued."""
        for queues in self._queues.values():
            for rid, q in queues.items():
                for i, it in enumerate(q):
                    if it is item:
                        del q[i]
                        if not q:
                            del queues[rid]
                        self._len -= 1
                        return True
        return False

    def drop_where(self, pred: Callable[[T], bool]) -> list[T]:
        """Remove every item for which ``pred(item)`` is true (e.g. its caller went away); returns them."""
        dropped: list[T] = []
        for queues in self._queues.values():
            for rid in list(queues):
                kept = collections.deque(it for it in queues[rid] if not pred(it))
                dropped.extend(it for it in queues[rid] if pred(it))
                if kept:
                    queues[rid] = kept
                else:
                    del queues[rid]
        self._len -= len(dropped)
        return dropped

    def clear(self) -> list[T]:
        """Empty the queue; returns the items that were in it."""
        items = list(self)
        for queues in self._queues.values():
            queues.clear()
        self._len = 0
        return items
