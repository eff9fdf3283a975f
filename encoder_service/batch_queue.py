"""The encoder's queue of prepared pages, grouped by batch shape (no threads, no model here).

Pages whose tensors can be stacked share a ``PreparedPage.batch_key``; each key has a FIFO group.
A group is ready when it holds ``max_batch_size`` pages or when its oldest page has waited
``max_wait_s``; among ready groups the one with the oldest head page goes first (FIFO across
groups, so one busy shape cannot starve another). :class:`encoder_service.batcher.MicroBatcher`
owns admission and the forward pass; this module only decides which pages form the next batch.
"""

from __future__ import annotations

import asyncio
import collections
import math
from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from typing import Any

from models.base import PreparedPage


@dataclass(eq=False)
class QueuedPage:
    """One admitted, preprocessed page waiting for (or inside) a forward pass.

    ``future`` gets the page's EncodedPage or exception; ``enqueued_at``: ``loop.time()`` seconds;
    ``stream_id``: the request stream it belongs to; ``released``: its admission slot was given back
    (it entered a forward pass or left the queue).
    """

    prepared: PreparedPage
    future: asyncio.Future
    enqueued_at: float
    stream_id: Any = None
    released: bool = False


class BatchQueue:
    """Queued pages by batch key; :meth:`pop_ready` takes the next batch (see the module docstring)."""

    def __init__(self, max_batch_size: int, max_wait_s: float):
        self.max_batch_size = max_batch_size
        self.max_wait_s = max_wait_s
        self._groups: dict[Hashable, collections.deque[QueuedPage]] = {}

    def push(self, page: QueuedPage) -> None:
        """Queue ``page`` at the end of its batch key's group."""
        self._groups.setdefault(page.prepared.batch_key, collections.deque()).append(page)

    def remove(self, page: QueuedPage) -> bool:
        """Take ``page`` off the queue; True when it was still queued."""
        group = self._groups.get(page.prepared.batch_key)
        if group is None:
            return False
        try:
            group.remove(page)
        except ValueError:
            return False
        if not group:
            del self._groups[page.prepared.batch_key]
        return True

    def __iter__(self) -> Iterator[QueuedPage]:
        """Every queued page (a snapshot: the queue may be changed while iterating)."""
        return iter([p for group in self._groups.values() for p in group])

    def clear(self) -> list[QueuedPage]:
        """Empty the queue; returns the pages that were in it."""
        pages = list(self)
        self._groups.clear()
        return pages

    def pop_ready(self, now: float) -> tuple[list[QueuedPage], list[QueuedPage]]:
        """Pop the next batch (``now``: ``loop.time()`` seconds): full groups or expired windows,
        oldest head page first. Returns (batch, popped): ``batch`` holds the live pages (empty when
        no group is ready), ``popped`` every page taken off the queue, including those of cancelled
        streams (future already done), whose admission slots the caller gives back.
        """
        best_key, best_t = None, math.inf
        for key, group in self._groups.items():
            live = [p for p in group if not p.future.done()]
            if not live:
                continue
            head_t = live[0].enqueued_at
            if (len(live) >= self.max_batch_size or now - head_t >= self.max_wait_s) and head_t < best_t:
                best_key, best_t = key, head_t
        if best_key is None:
            return [], []
        group = self._groups[best_key]
        batch: list[QueuedPage] = []
        popped: list[QueuedPage] = []
        while group and len(batch) < self.max_batch_size:
            p = group.popleft()
            popped.append(p)
            if not p.future.done():  # skip pages of cancelled streams
                batch.append(p)
        if not group:
            del self._groups[best_key]
        return batch, popped

    def next_deadline(self, now: float) -> float | None:
        """Seconds from ``now`` until the oldest head page's window expires; None when empty."""
        heads = [g[0].enqueued_at for g in self._groups.values() if g]
        if not heads:
            return None
        return max(0.0, min(heads) + self.max_wait_s - now)

    def purge_done(self) -> list[QueuedPage]:
        """Drop queue heads whose page already failed (cancelled stream); returns them."""
        dropped: list[QueuedPage] = []
        for key in list(self._groups):
            group = self._groups[key]
            while group and group[0].future.done():
                dropped.append(group.popleft())
            if not group:
                del self._groups[key]
        return dropped
