"""The encoder's queue of prepared pages, grouped by batch shape (no threads, no model here).

Pages whose tensors can be stacked share a ``PreparedPage.batch_key``; each key has a group, kept in
:mod:`inkstream.fair` order (priority class, then round-robin over requests, FIFO within one). A group
is ready when it holds ``max_batch_size`` live pages or when its oldest page has waited
``max_wait_s``. Only groups holding a page of the best priority class queued anywhere may run: while
an interactive page waits, no batch of asynchronous-job pages starts, so such pages delay it by the
forward in progress at most. Among those groups, the ready one with the oldest page goes first (so
one busy shape cannot starve another), and its batch is taken in fair order, so a one-page request
rides in the next forward however many pages of a long document are queued. The batch is filled
up to ``max_batch_size`` with the group's next pages in that order.
:class:`encoder_service.batcher.MicroBatcher` owns admission and the forward pass; this module only
decides which pages form the next batch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any

from inkstream.fair import FairQueue, InService, WorkKey
from models.base import PreparedPage


@dataclass(eq=False)
class QueuedPage:
    """One admitted, preprocessed page waiting for (or inside) a forward pass.

    ``future`` gets the page's EncodedPage or exception; ``enqueued_at``: ``loop.time()`` seconds;
    ``stream_id``: the request stream it belongs to; ``key``: its request and priority class (from
    the call's metadata, :func:`inkstream.fair.key_from_metadata`); ``released``: its admission slot
    was given back (it entered a forward pass or left the queue); ``forward_at`` (seconds of the
    batcher's ``clock``) and ``batch_pages``: when its forward pass started and how many pages it held;
    ``paced``: its forward pass ended and counted it in the replica's rate (``Batcher.pace``).
    """

    prepared: PreparedPage
    future: asyncio.Future
    enqueued_at: float
    stream_id: Any = None
    key: WorkKey = field(default_factory=WorkKey)
    released: bool = False
    forward_at: float | None = None
    batch_pages: int = 0
    paced: bool = False


class BatchQueue:
    """Queued pages by batch key; :meth:`pop_ready` takes the next batch (see the module docstring).

    ``max_batch_size``: pages per forward; ``max_wait_s``: seconds a page waits for batch-mates;
    ``in_service``: pages per request id in the encoder (the batcher's count; a batch is filled
    with the pages of the requests holding the fewest first, :mod:`inkstream.fair`), None: plain
    round-robin.
    """

    def __init__(self, max_batch_size: int, max_wait_s: float, in_service: InService | None = None):
        self.max_batch_size = max_batch_size
        self.max_wait_s = max_wait_s
        self.in_service = in_service
        self._groups: dict[Hashable, FairQueue[QueuedPage]] = {}

    def push(self, page: QueuedPage) -> None:
        """Queue ``page`` in its batch key's group, at the end of its request's pages."""
        self._groups.setdefault(page.prepared.batch_key, FairQueue()).push(page.key, page)

    def remove(self, page: QueuedPage) -> bool:
        """Take ``page`` off the queue; True when it was still queued."""
        group = self._groups.get(page.prepared.batch_key)
        if group is None or not group.remove(page):
            return False
        if not group:
            del self._groups[page.prepared.batch_key]
        return True

    def __len__(self) -> int:
        """Pages queued (in every group)."""
        return sum(len(group) for group in self._groups.values())

    def __iter__(self) -> Iterator[QueuedPage]:
        """Every queued page (a snapshot: the queue may be changed while iterating)."""
        return iter([p for group in self._groups.values() for p in group])

    def clear(self) -> list[QueuedPage]:
        """Empty the queue; returns the pages that were in it."""
        pages = list(self)
        self._groups.clear()
        return pages

    def pop_ready(self, now: float) -> tuple[list[QueuedPage], list[QueuedPage]]:
        """Pop the next batch (``now``: ``loop.time()`` seconds; the module docstring says which).

        Returns (batch, popped): ``batch`` holds the live pages (empty when no group may run yet),
        ``popped`` every page taken off the queue, including those of cancelled streams (future
        already done), whose admission slots the caller gives back.
        """
        popped = self.purge_done()
        if not self._groups:
            return [], popped
        top = min(g.top_priority() or 0 for g in self._groups.values())
        best_key, best_t = None, float("inf")
        for key, group in self._groups.items():
            if group.top_priority() != top:
                continue
            head_t = min(p.enqueued_at for p in group)
            if (len(group) >= self.max_batch_size or now - head_t >= self.max_wait_s) and head_t < best_t:
                best_key, best_t = key, head_t
        if best_key is None:
            return [], popped
        group = self._groups[best_key]
        batch: list[QueuedPage] = []
        while len(batch) < self.max_batch_size and (p := group.pop(self.in_service)) is not None:
            batch.append(p)
        if not group:
            del self._groups[best_key]
        return batch, popped + batch

    def next_deadline(self, now: float) -> float | None:
        """Seconds from ``now`` until the oldest queued page's window expires; None when empty."""
        heads = [p.enqueued_at for g in self._groups.values() for p in g]
        if not heads:
            return None
        return max(0.0, min(heads) + self.max_wait_s - now)

    def purge_done(self) -> list[QueuedPage]:
        """Drop pages whose future is already done (cancelled stream); returns them."""
        dropped: list[QueuedPage] = []
        for key in list(self._groups):
            group = self._groups[key]
            dropped += group.drop_where(lambda p: p.future.done())
            if not group:
                del self._groups[key]
        return dropped
