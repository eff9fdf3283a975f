"""Job queues: which job a worker runs next, with a lease on it.

* :class:`LocalQueue` — in this process (the SQLite default): an asyncio queue; a lease cannot
  lapse (the process that holds it is the only one).
* :class:`RedisQueue` — a Redis Stream (``<prefix>queue``) read through one consumer group
  (``workers``) with at-least-once delivery: a delivered entry stays pending for its consumer (one
  per gateway process) until :meth:`Delivery.ack`; the holder renews its lease (``XCLAIM`` to itself,
  which resets the entry's idle time) every third of ``lease_s``; an entry idle for longer than
  ``lease_s`` — its worker was killed or lost its node — is taken over by the next worker that asks
  (``XAUTOCLAIM``). Queued-but-not-started jobs are also kept in a sorted set (``<prefix>queued``,
  score = submit time) for the queue-depth and oldest-age metrics; ``<prefix>queue:paused`` pauses
  consumption on every gateway at once (submissions are still accepted).

Both raise :class:`inkstream.errors.Unavailable` when their engine cannot be reached.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
import uuid
from dataclasses import dataclass
from typing import Any, Protocol

import redis.asyncio as aioredis
import redis.exceptions

from inkstream.errors import Unavailable

POLL_S = 0.5


@dataclass
class Delivery:
    """One job handed to this worker: ``job_id``, the queue entry ``entry_id``, ``deliveries`` so far."""

    job_id: str
    entry_id: str = ""
    deliveries: int = 1


class JobQueue(Protocol):
    """A queue of job ids with leases (see the module docstring)."""

    async def put(self, job_id: str, created_at: float) -> None:
        """Queue ``job_id`` (submitted at ``created_at`` UNIX seconds)."""

    async def take(self) -> Delivery:
        """Wait for the next job for this worker (not while paused)."""

    async def started(self, delivery: Delivery) -> None:
        """The job left the queued set (it is running)."""

    async def renew(self, delivery: Delivery) -> None:
        """Extend the lease of ``delivery``."""

    async def ack(self, delivery: Delivery) -> None:
        """The job is finished: remove it from the queue for good."""

    async def set_paused(self, paused: bool) -> None:
        """Pause / resume consumption (every worker on this queue)."""

    async def paused(self) -> bool:
        """Whether consumption is paused."""

    async def depth(self) -> tuple[int, float]:
        """(jobs queued and not started, age in seconds of the oldest of them; 0 when none)."""

    async def close(self) -> None:
        """Release connections."""


class LocalQueue:
    """In-process :class:`JobQueue` (no leases to lapse)."""

    def __init__(self) -> None:
        self._q: asyncio.Queue[str] = asyncio.Queue()
        self._queued: dict[str, float] = {}
        self._resumed = asyncio.Event()
        self._resumed.set()

    async def put(self, job_id: str, created_at: float) -> None:
        """See :meth:`JobQueue.put`."""
        self._queued[job_id] = created_at
        self._q.put_nowait(job_id)

    async def take(self) -> Delivery:
        """See :meth:`JobQueue.take`."""
        while True:
            await self._resumed.wait()
            job_id = await self._q.get()
            if self._resumed.is_set():
                return Delivery(job_id)
            self._q.put_nowait(job_id)  # paused while we waited: put it back

    async def started(self, delivery: Delivery) -> None:
        """See :meth:`JobQueue.started`."""
        self._queued.pop(delivery.job_id, None)

    async def renew(self, delivery: Delivery) -> None:
        """Nothing to renew in one process."""

    async def ack(self, delivery: Delivery) -> None:
        """See :meth:`JobQueue.ack`."""
        self._queued.pop(delivery.job_id, None)

    async def set_paused(self, paused: bool) -> None:
        """See :meth:`JobQueue.set_paused`."""
        if paused:
            self._resumed.clear()
        else:
            self._resumed.set()

    async def paused(self) -> bool:
        """See :meth:`JobQueue.paused`."""
        return not self._resumed.is_set()

    async def depth(self) -> tuple[int, float]:
        """See :meth:`JobQueue.depth`."""
        if not self._queued:
            return 0, 0.0
        return len(self._queued), max(0.0, time.time() - min(self._queued.values()))

    async def close(self) -> None:
        """Nothing to close."""


def _unreachable(where: str, exc: BaseException) -> Unavailable:
    """Every redis error of the queue as Unavailable (503 + Retry-After); the endpoint ``where`` is not in
    the message (clients see it).
    """
    return Unavailable(f"the job queue is unavailable ({type(exc).__name__}); retry shortly", retry_after_s=5.0)


class RedisQueue:
    """:class:`JobQueue` on a Redis Stream (see the module docstring). ``consumer``: this worker's
    name (default host-pid-random, unique per process so a restarted pod never inherits leases).
    """

    GROUP = "workers"

    def __init__(self, url: str, lease_s: float, prefix: str = "inkstream:", consumer: str = ""):
        self.where = url.split("@")[-1]
        self.client: Any = aioredis.Redis.from_url(url, socket_timeout=5.0, socket_connect_timeout=2.0)
        self.lease_ms = int(lease_s * 1000)
        self.stream, self.queued_key, self.paused_key = f"{prefix}queue", f"{prefix}queued", f"{prefix}queue:paused"
        self.consumer = consumer or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self._group_ready = False

    async def _group(self) -> None:
        if self._group_ready:
            return
        try:
            await self.client.xgroup_create(self.stream, self.GROUP, id="0", mkstream=True)
        except redis.exceptions.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        self._group_ready = True

    async def put(self, job_id: str, created_at: float) -> None:
        """See :meth:`JobQueue.put`."""
        try:
            await self._group()
            pipe = self.client.pipeline()
            pipe.zadd(self.queued_key, {job_id: created_at})
            pipe.xadd(self.stream, {"job_id": job_id})
            await pipe.execute()
        except redis.exceptions.RedisError as exc:
            raise _unreachable(self.where, exc) from exc

    async def take(self) -> Delivery:
        """See :meth:`JobQueue.take`: a lapsed lease first (takeover), else a new entry."""
        while True:
            try:
                if await self.paused():
                    await asyncio.sleep(POLL_S)
                    continue
                await self._group()
                _, claimed, *_ = await self.client.xautoclaim(self.stream, self.GROUP, self.consumer,
                                                              self.lease_ms, "0-0", count=1)
                entries = claimed or []
                if not entries:
                    got = await self.client.xreadgroup(self.GROUP, self.consumer, {self.stream: ">"}, count=1,
                                                       block=int(POLL_S * 1000))
                    entries = got[0][1] if got else []
                for entry_id, fields in entries:
                    if not fields:  # the entry was deleted meanwhile
                        await self.client.xack(self.stream, self.GROUP, entry_id)
                        continue
                    delivery = await self._delivery(entry_id, fields)
                    await self._hold_while_paused(delivery)
                    return delivery
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError, Unavailable):
                self._group_ready = False
                await asyncio.sleep(1.0)  # the engine is down: ask again, gently
            except redis.exceptions.ResponseError as exc:
                if "NOGROUP" not in str(exc):
                    raise
                self._group_ready = False

    async def _hold_while_paused(self, delivery: Delivery) -> None:
        """Keep an entry read just as the queue was paused (the blocking read began before the pause):
        renew its lease every :data:`POLL_S` seconds until consumption resumes, so it is neither run
        while paused nor taken over by another worker.
        """
        while await self.paused():
            await self.renew(delivery)
            await asyncio.sleep(POLL_S)

    async def _delivery(self, entry_id: Any, fields: dict[Any, Any]) -> Delivery:
        eid = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
        job_id = (fields.get(b"job_id") or fields.get("job_id") or b"").decode()
        info = await self.client.xpending_range(self.stream, self.GROUP, min=eid, max=eid, count=1)
        n = int(info[0]["times_delivered"]) if info else 1
        return Delivery(job_id, eid, n)

    async def started(self, delivery: Delivery) -> None:
        """See :meth:`JobQueue.started`."""
        await self._call(self.client.zrem, self.queued_key, delivery.job_id)

    async def renew(self, delivery: Delivery) -> None:
        """See :meth:`JobQueue.renew` (``XCLAIM`` with idle 0 to this consumer resets the idle time)."""
        await self._call(self.client.xclaim, self.stream, self.GROUP, self.consumer, 0, [delivery.entry_id],
                         justid=True)

    async def ack(self, delivery: Delivery) -> None:
        """See :meth:`JobQueue.ack`."""
        pipe = self.client.pipeline()
        pipe.xack(self.stream, self.GROUP, delivery.entry_id)
        pipe.xdel(self.stream, delivery.entry_id)
        pipe.zrem(self.queued_key, delivery.job_id)
        await self._call(pipe.execute)

    async def set_paused(self, paused: bool) -> None:
        """See :meth:`JobQueue.set_paused`."""
        if paused:
            await self._call(self.client.set, self.paused_key, "1")
        else:
            await self._call(self.client.delete, self.paused_key)

    async def paused(self) -> bool:
        """See :meth:`JobQueue.paused`."""
        return bool(await self._call(self.client.exists, self.paused_key))

    async def depth(self) -> tuple[int, float]:
        """See :meth:`JobQueue.depth`."""
        pipe = self.client.pipeline()
        pipe.zcard(self.queued_key)
        pipe.zrange(self.queued_key, 0, 0, withscores=True)
        n, oldest = await self._call(pipe.execute)
        return int(n), (max(0.0, time.time() - float(oldest[0][1])) if oldest else 0.0)

    async def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await fn(*args, **kwargs)
        except redis.exceptions.RedisError as exc:
            raise _unreachable(self.where, exc) from exc

    async def close(self) -> None:
        """Close the connection pool (at most 5 s: a connection cut mid-command must not hold a shutdown)."""
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.client.aclose(), 5.0)
