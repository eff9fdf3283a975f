"""Batch replay for training on an accelerator faster than the CPU workers that render lines.

On a GPU the compact model takes a few tens of milliseconds per batch while rendering a batch of
synthetic lines takes seconds of CPU time, so the accelerator would sit idle. :class:`ReplayBatches`
reads rendered batches from the DataLoader on a background thread and, whenever no fresh batch is
waiting, hands out a recently seen one again (uniformly from the last ``capacity`` batches, each at
most ``max_uses`` times). Fresh batches are always served first, so with ``max_uses = 1`` it is the
plain stream. Re-using data a few times is the usual remedy when data loading bounds training speed
("data echoing", Choi et al. 2019, arXiv:1907.05550); the compact model is under-fitted (its
training and held-out error are equal), so a few repeats cost little.
"""

from __future__ import annotations

import collections
import queue
import random
import threading
from collections.abc import Iterable, Iterator
from typing import Any


class ReplayBatches:
    """Iterator over batches of ``source`` with replay. ``capacity``: batches kept for replay (host
    memory: up to ``capacity`` + 64 queued batches, e.g. ~20 MB each for 256 lines of 600 x 32 float32);
    ``max_uses``: most times one batch is returned (>= 1). ``stats()`` gives (fresh, replayed) counts;
    ``close()`` stops the reading thread. Raises whatever the source raises (re-raised in the
    consumer's thread); ValueError for ``max_uses`` or ``capacity`` < 1.
    """

    def __init__(self, source: Iterable[Any], capacity: int = 128, max_uses: int = 4, seed: int = 0):
        if max_uses < 1 or capacity < 1:
            raise ValueError("max_uses and capacity must be >= 1")
        self._q: queue.Queue = queue.Queue(maxsize=64)
        self._kept: collections.deque = collections.deque(maxlen=capacity)
        self._max_uses, self._rng = max_uses, random.Random(seed)
        self.fresh = self.replayed = 0
        self._closed = threading.Event()
        self._final: tuple[str, Any] | None = None  # ("end" | "error", ...) once the source is done
        threading.Thread(target=self._pump, args=(iter(source),), daemon=True, name="replay-pump").start()

    def _pump(self, it: Iterator[Any]) -> None:
        try:
            for batch in it:
                if not self._put(("batch", batch)):
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            self._put(("error", exc))
        else:
            self._put(("end", None))

    def _put(self, item: tuple[str, Any]) -> bool:
        """Queue ``item`` unless closed meanwhile; False when closed."""
        while not self._closed.is_set():
            try:
                self._q.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def _take(self, item: tuple[str, Any]) -> Any:
        kind, value = item
        if kind != "batch":
            self._final = item
        if kind == "error":
            raise value
        if kind == "end":
            raise StopIteration
        entry = [value, 1]
        if self._max_uses > 1:
            self._kept.append(entry)
        self.fresh += 1
        return value

    def __iter__(self) -> ReplayBatches:
        return self

    def __next__(self) -> Any:
        if self._final is not None:  # ended or failed: stays so
            return self._take(self._final)
        try:
            return self._take(self._q.get_nowait())
        except queue.Empty:
            pass
        usable = [e for e in self._kept if e[1] < self._max_uses]
        if not usable:
            return self._take(self._q.get())
        entry = self._rng.choice(usable)
        entry[1] += 1
        self.replayed += 1
        return entry[0]

    def close(self) -> None:
        """Stop reading the source (the thread ends at its next batch); idempotent."""
        self._closed.set()

    def stats(self) -> tuple[int, int]:
        """(fresh batches served, replayed batches served)."""
        return self.fresh, self.replayed
