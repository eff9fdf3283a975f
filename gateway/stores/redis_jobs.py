"""Job records, page checkpoints and idempotency keys in Redis (shared by every gateway).

Keys (``prefix`` default ``inkstream:``): ``job:<id>`` a hash of the :class:`JobRecord` fields
(``options`` as JSON); ``job:<id>:pages`` a hash 1-based page index -> PageResult JSON (the page
checkpoints a worker taking over continues from); ``idem:<key>`` -> job id, taken with ``SET NX``;
``finished`` a sorted set job id -> time it finished (the expiry sweep). A finished job's keys also
get a Redis TTL of ``ttl_s`` + 1 h as a backstop. Connection failures raise
:class:`inkstream.errors.Unavailable` (503 + Retry-After at submission; a worker waits and retries).
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any, TypeVar

import redis

from gateway.stores.records import FIELDS, JobRecord
from inkstream.errors import InvalidInput, Unavailable

T = TypeVar("T")
_INTS = {"pages_done", "pages_total", "webhook_attempts", "attempts"}
_FLOATS = {"created_at", "updated_at"}
RETRY_AFTER_S = 5.0

# KEYS[1] job hash, KEYS[2] finished zset; ARGV[1] "1" = only while unfinished, ARGV[2] now,
# ARGV[3] ttl of finished keys (s), ARGV[4] job id, then field/value pairs.
_UPDATE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local st = redis.call('HGET', KEYS[1], 'status')
if ARGV[1] == '1' and (st == 'done' or st == 'failed' or st == 'cancelled') then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 5))
local new = redis.call('HGET', KEYS[1], 'status')
if new == 'done' or new == 'failed' or new == 'cancelled' then
  redis.call('ZADD', KEYS[2], ARGV[2], ARGV[4])
  redis.call('EXPIRE', KEYS[1], ARGV[3])
  redis.call('EXPIRE', KEYS[1] .. ':pages', ARGV[3])
end
return 1
"""


def unreachable(what: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Decorator: every redis error (connection, timeout, loading, a refused command such as OOM or
    READONLY) becomes Unavailable (503 + Retry-After) naming ``what`` but not the endpoint (clients
    see the message; ``/readyz`` gives the endpoint to the admin role).
    """

    def wrap(fn: Callable[..., T]) -> Callable[..., T]:
        @functools.wraps(fn)
        def inner(self: Any, *args: Any, **kwargs: Any) -> T:
            try:
                return fn(self, *args, **kwargs)
            except redis.RedisError as exc:
                raise Unavailable(f"the {what} is unavailable ({type(exc).__name__}); retry shortly",
                                  retry_after_s=RETRY_AFTER_S) from exc
        return inner
    return wrap


def redis_client(url: str, timeout_s: float = 2.0) -> redis.Redis:
    """A synchronous, thread-safe client of ``url`` (``redis://HOST:PORT/DB``) with short timeouts."""
    return redis.Redis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s,
                                health_check_interval=10, decode_responses=False)


class RedisJobStore:
    """:class:`gateway.stores.JobStore` on Redis at ``url``; finished keys expire after ``ttl_s`` + 1 h."""

    def __init__(self, url: str, ttl_s: float, prefix: str = "inkstream:"):
        self.where = url.split("@")[-1]
        self.client: Any = redis_client(url)
        self.prefix = prefix
        self.ttl_s = ttl_s
        self._update = self.client.register_script(_UPDATE)

    def _k(self, job_id: str) -> str:
        return f"{self.prefix}job:{job_id}"

    @staticmethod
    def _encode(fields: dict[str, Any]) -> dict[str, Any]:
        return {k: json.dumps(v) if k == "options" else v for k, v in fields.items()}

    @staticmethod
    def _decode(raw: dict[bytes, bytes]) -> JobRecord | None:
        if not raw or b"job_id" not in raw:
            return None
        d: dict[str, Any] = {}
        for f in FIELDS:
            v = raw.get(f.encode(), b"").decode()
            d[f] = int(v or 0) if f in _INTS else float(v or 0) if f in _FLOATS else v
        d["options"] = json.loads(d["options"] or "{}")
        return JobRecord(**d)

    @unreachable("job store")
    def create(self, job: JobRecord) -> tuple[JobRecord, bool]:
        """See :meth:`JobStore.create` (the key is taken with SET NX, so two gateways never both win)."""
        if job.idempotency_key:
            idem = f"{self.prefix}idem:{job.idempotency_key}"
            if not self.client.set(idem, job.job_id, nx=True, ex=int(self.ttl_s + 3600)):
                other = self.client.get(idem)
                existing = self.get(other.decode()) if other else None
                if existing is None:
                    raise InvalidInput("idempotency key conflict (its job is being created or expired); "
                                       "retry the request")
                return existing, False
        self.client.hset(self._k(job.job_id), mapping=self._encode(asdict(job)))
        return job, True

    @unreachable("job store")
    def get(self, job_id: str) -> JobRecord | None:
        """See :meth:`JobStore.get`."""
        return self._decode(self.client.hgetall(self._k(job_id)))

    @unreachable("job store")
    def get_by_key(self, idempotency_key: str) -> JobRecord | None:
        """See :meth:`JobStore.get_by_key`."""
        job_id = self.client.get(f"{self.prefix}idem:{idempotency_key}")
        return self.get(job_id.decode()) if job_id else None

    @unreachable("job store")
    def update(self, job_id: str, *, unless_finished: bool = False, **fields: Any) -> bool:
        """See :meth:`JobStore.update` (one Lua script: check, write, and index a finished job)."""
        now = time.time()
        fields["updated_at"] = now
        flat: list[Any] = []
        for k, v in self._encode(fields).items():
            flat += [k, v]
        keys = [self._k(job_id), f"{self.prefix}finished"]
        args = ["1" if unless_finished else "0", now, int(self.ttl_s + 3600), job_id, *flat]
        return bool(self._update(keys=keys, args=args))

    @unreachable("job store")
    def put_page(self, job_id: str, index: int, page: dict[str, Any]) -> int:
        """See :meth:`JobStore.put_page`."""
        pipe = self.client.pipeline()
        pipe.hset(f"{self._k(job_id)}:pages", str(index), json.dumps(page))
        pipe.hlen(f"{self._k(job_id)}:pages")
        return int(pipe.execute()[1])

    @unreachable("job store")
    def pages(self, job_id: str) -> dict[int, dict[str, Any]]:
        """See :meth:`JobStore.pages`."""
        raw = self.client.hgetall(f"{self._k(job_id)}:pages")
        return {int(k): json.loads(v) for k, v in raw.items()}

    @unreachable("job store")
    def delete(self, job_id: str) -> None:
        """See :meth:`JobStore.delete` (also its idempotency key and its place in the sweep index)."""
        job = self.get(job_id)
        keys = [self._k(job_id), f"{self._k(job_id)}:pages"]
        if job is not None and job.idempotency_key:
            keys.append(f"{self.prefix}idem:{job.idempotency_key}")
        self.client.delete(*keys)
        self.client.zrem(f"{self.prefix}finished", job_id)

    @unreachable("job store")
    def expired(self, before: float) -> list[str]:
        """See :meth:`JobStore.expired`."""
        ids = self.client.zrangebyscore(f"{self.prefix}finished", "-inf", before, start=0, num=500)
        return [i.decode() for i in ids]

    def unfinished(self) -> list[JobRecord]:
        """None to recover: an unfinished job in Redis is still in the shared queue, or is taken over
        by another worker once its lease lapses (so this store never lists them).
        """
        return []

    @unreachable("job store")
    def ping(self) -> None:
        """See :meth:`JobStore.ping`."""
        self.client.ping()

    def close(self) -> None:
        """Close the connection pool."""
        self.client.close()
