"""Replica sets: where the gateway sends encode and decode work.

A :class:`ReplicaSet` holds one long-lived ``grpc.aio`` channel per replica (HTTP/2 connections are
long-lived, so a plain ClusterIP Service would pin the gateway to the pods that existed when it
connected; DESIGN.md asks for client-side balancing instead). Targets are ``host:port`` strings:

- an IP literal (``10.0.0.7:50051``, ``[::1]:50051``) is one static replica;
- a name (``encoder.ocr.svc.cluster.local:50051``, ``localhost:50051``) is resolved with
  ``getaddrinfo`` every ``resolve_interval_s`` seconds; every address it resolves to is a replica.
  With a k8s *headless* Service the name resolves to one A record per ready pod, so scaled-out
  replicas start receiving traffic within one interval and removed ones stop receiving new work.

Each replica's health is watched with the standard ``grpc.health.v1.Health/Watch`` stream (overall
service ``""``). A replica gets new work only while its last reported status is SERVING and no call
to it has just failed with a lost / refused connection. Among the eligible replicas,
:meth:`ReplicaSet.acquire` picks the one with the fewest outstanding pages ("least outstanding
requests", the usual choice for backends with uneven per-item cost), ties broken at random.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import random
import socket
from collections.abc import AsyncIterator, Callable, Iterable, Set

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from inkstream import trace_interceptors
from inkstream.errors import Unavailable
from inkstream.lifecycle import DEFAULT_MAX_MESSAGE_BYTES, server_options
from inkstream.tls import TlsConfig, open_channel

log = logging.getLogger("inkstream.gateway.replicas")

_SERVING = health_pb2.HealthCheckResponse.SERVING


def split_target(target: str) -> tuple[str, int]:
    """``"host:port"`` / ``"[v6]:port"`` -> (host, port). Raises ValueError for a malformed target."""
    t = target.strip().removeprefix("dns:///").removeprefix("dns:")
    host, sep, port = t.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError(f"replica address {target!r} is not host:port")
    return host.strip("[]"), int(port)


def join_target(host: str, port: int) -> str:
    """(host, port) -> gRPC target string, bracketing IPv6 literals."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


class Replica:
    """One replica: its channel, health and outstanding-page count.

    ``address``: gRPC target ``ip:port``. ``healthy`` is True while the last health report was
    SERVING and no connection failure was seen since. ``outstanding``: pages currently sent to it
    by this gateway and not finished.
    """

    def __init__(self, address: str, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES, tls: TlsConfig | None = None):
        self.address = address
        # Client interceptors: one CLIENT span per call, W3C trace context + request id in metadata.
        # TLS / mutual TLS when ``tls.enabled`` (inkstream.tls), else plaintext.
        self.channel = open_channel(address, tls, options=server_options(max_message_bytes),
                                    interceptors=trace_interceptors.client_interceptors())
        self.outstanding = 0
        # Work this gateway may have open on the replica (decoders: segments, max_running +
        # max_waiting; encoders: pages, max_queue_pages + max_batch_size; both from its Info),
        # shared by all pages; set by the pipeline on first use. ``slots_capacity``
        # is that size; ``slots_stale`` asks the pipeline to re-read Info (the replica came back,
        # perhaps restarted with other limits); ``slots_checked_at``: monotonic time of the last try.
        self.segment_slots: asyncio.Semaphore | None = None
        self.slots_capacity = 0
        self.slots_stale = False
        self.slots_checked_at = float("-inf")
        self.slots_lock = asyncio.Lock()  # one Info call at a time; the other pages wait for its answer
        self.model_revision = ""  # weights revision from its Info ("" until read): pages go to matching ones
        self.healthy = False
        self.retired = False  # removed from DNS: finishes its work, gets no new work
        self._watch_task: asyncio.Task | None = None
        self._watch_args: tuple[Callable[[], None], float] | None = None

    def __repr__(self) -> str:
        return f"Replica({self.address}, healthy={self.healthy}, outstanding={self.outstanding})"

    def mark_unreachable(self) -> None:
        """A call saw the connection refused or lost: no new work until health reports SERVING.

        The health watch is restarted, so a replica that is in fact up (only that call's stream
        was reset) reports SERVING again at once instead of staying excluded.
        """
        self.healthy = False
        if self._watch_task is not None and self._watch_args is not None:
            self._watch_task.cancel()
            self._watch_task = None
            self.start_watch(*self._watch_args)

    def start_watch(self, on_change: Callable[[], None], retry_s: float) -> None:
        """Start the background ``Health/Watch`` loop (reconnects every ``retry_s`` seconds)."""
        self._watch_args = (on_change, retry_s)
        if self._watch_task is None:
            self._watch_task = asyncio.get_running_loop().create_task(self._watch(on_change, retry_s))

    async def _watch(self, on_change: Callable[[], None], retry_s: float) -> None:
        stub = health_pb2_grpc.HealthStub(self.channel)
        while True:
            try:
                async for resp in stub.Watch(health_pb2.HealthCheckRequest(service="")):
                    new = resp.status == _SERVING
                    if new != self.healthy:
                        log.info("replica %s %s", self.address, "SERVING" if new else "NOT_SERVING")
                        self.slots_stale = self.slots_stale or new
                    self.healthy = new
                    on_change()
                # The server ended the watch (shutting down): its state is unknown until re-watched.
                self.healthy = False
                on_change()
            except asyncio.CancelledError:
                raise
            except grpc.RpcError as err:
                if err.code() == grpc.StatusCode.UNIMPLEMENTED:
                    # No health service: treat a reachable replica as serving (calls still mark
                    # it unreachable on connection failures).
                    self.healthy = True
                    on_change()
                    await asyncio.sleep(retry_s * 10)
                    continue
                if self.healthy:
                    log.warning("replica %s unreachable: %s", self.address, err.code().name)
                self.healthy = False
                on_change()
            await asyncio.sleep(retry_s)

    async def close(self) -> None:
        """Stop the health watch and close the channel (in-flight calls are cancelled)."""
        if self._watch_task is not None:
            self._watch_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._watch_task
        await self.channel.close()


class ReplicaSet:
    """Replicas of one service (encoder or decoder) behind a list of targets.

    ``targets``: ``host:port`` strings (see the module docstring for static vs DNS targets).
    ``resolve_interval_s``: seconds between DNS re-resolutions. ``health_retry_s``: seconds between
    reconnect attempts of a broken health watch. ``name``: for logs and errors ("encoder").
    ``tls``: client side of the hop (:class:`inkstream.tls.TlsConfig`; None or disabled = plaintext);
    a missing or empty PEM file raises ValueError when the first replica is added.
    Call :meth:`start` inside the event loop before use and :meth:`close` at shutdown.
    """

    def __init__(
        self,
        targets: Iterable[str],
        *,
        name: str = "replica",
        resolve_interval_s: float = 10.0,
        health_retry_s: float = 0.5,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        tls: TlsConfig | None = None,
    ):
        self.name = name
        self.tls = tls
        self.targets = [split_target(t) for t in targets]
        if not self.targets:
            raise ValueError(f"no {name} addresses given")
        self.resolve_interval_s = resolve_interval_s
        self.health_retry_s = health_retry_s
        self.max_message_bytes = max_message_bytes
        self.replicas: dict[str, Replica] = {}
        self._changed = asyncio.Event()
        self._outage_since: float | None = None  # loop time since when no replica has been SERVING
        self._resolver: asyncio.Task | None = None

    async def start(self) -> None:
        """Resolve the targets once, open channels, start health watches and the re-resolver."""
        await self.refresh()
        if any(not _is_ip(h) for h, _ in self.targets) and self._resolver is None:
            self._resolver = asyncio.get_running_loop().create_task(self._resolve_loop())

    async def _resolve(self) -> list[str]:
        loop = asyncio.get_running_loop()
        out: list[str] = []
        for host, port in self.targets:
            if _is_ip(host):
                out.append(join_target(host, port))
                continue
            try:
                infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except OSError as err:
                log.warning("cannot resolve %s address %s: %s", self.name, host, err)
                # Keep the replicas we already know for this name rather than dropping all traffic.
                out.extend(a for a, r in self.replicas.items() if not r.retired and a.endswith(f":{port}"))
                continue
            # One server listening on both stacks would otherwise count as two replicas: use the
            # IPv4 addresses when the name has any, else the IPv6 ones.
            # sockaddr[0] is the IP string for AF_INET / AF_INET6 (typeshed types it str | int).
            v4 = [str(i[4][0]) for i in infos if i[0] == socket.AF_INET]
            for ip in v4 or [str(i[4][0]) for i in infos]:
                out.append(join_target(ip, port))
        return list(dict.fromkeys(out))

    async def refresh(self) -> None:
        """Re-resolve: add replicas for new addresses, retire (close when idle) vanished ones, and
        take back a retired one whose address came back before it was closed.
        """
        addrs = await self._resolve()
        for a in addrs:
            if a not in self.replicas:
                r = Replica(a, self.max_message_bytes, self.tls)
                self.replicas[a] = r
                r.start_watch(self._notify, self.health_retry_s)
                log.info("%s replica added: %s", self.name, a)
            elif self.replicas[a].retired:  # vanished while busy, back before it went idle
                self.replicas[a].retired = False
                log.info("%s replica back: %s", self.name, a)
        for a, r in list(self.replicas.items()):
            if a not in addrs:
                r.retired = True
                if r.outstanding == 0:
                    del self.replicas[a]
                    await r.close()
                    log.info("%s replica removed: %s", self.name, a)
        self._notify()

    async def _resolve_loop(self) -> None:
        while True:
            await asyncio.sleep(self.resolve_interval_s)
            try:
                await self.refresh()
            except Exception:  # keep resolving; the next round may succeed
                log.exception("re-resolving %s replicas failed", self.name)

    def _notify(self) -> None:
        self._changed.set()

    def eligible(self, exclude: Set[str] = frozenset(),
                 accept: Callable[[Replica], bool] | None = None) -> list[Replica]:
        """Healthy, non-retired replicas not in ``exclude`` (addresses) for which ``accept`` (when
        given) is true.
        """
        return [r for r in self.replicas.values() if r.healthy and not r.retired and r.address not in exclude
                and (accept is None or accept(r))]

    def pick(self, exclude: Set[str] = frozenset(),
             accept: Callable[[Replica], bool] | None = None) -> Replica | None:
        """The eligible replica with the fewest outstanding pages (random among ties), or None."""
        rs = self.eligible(exclude, accept)
        if not rs:
            return None
        self._outage_since = None
        least = min(r.outstanding for r in rs)
        return random.choice([r for r in rs if r.outstanding == least])

    def outage_s(self, now: float) -> float:
        """Seconds (event-loop clock ``now``) since this set was first seen with no SERVING replica;
        0 while one serves.
        """
        if any(r.healthy and not r.retired for r in self.replicas.values()):
            self._outage_since = None
            return 0.0
        if self._outage_since is None:
            self._outage_since = now
        return now - self._outage_since

    async def wait_pick(self, exclude: set[str], wait_s: float, accept: Callable[[Replica], bool] | None = None,
                        unaccepted: str = "") -> Replica:
        """:meth:`pick`, waiting up to ``wait_s`` seconds for a replica to become eligible (and
        accepted by ``accept``; ``unaccepted`` says why a serving replica was not, for the error).

        The wait counts from the start of an outage (no replica SERVING at all), not from this call:
        when every replica is down, the pages queued behind the first ones fail together after
        ``wait_s`` instead of each waiting ``wait_s`` in turn. Raises Unavailable (UNAVAILABLE)
        naming the service when none becomes eligible in time.
        """
        loop = asyncio.get_running_loop()
        end = loop.time() + max(0.0, wait_s - self.outage_s(loop.time()))
        while True:
            r = self.pick(exclude, accept)
            if r is not None:
                return r
            left = end - loop.time()
            if left <= 0:
                known = ", ".join(f"{a} ({'serving' if x.healthy else 'not serving'})"
                                  for a, x in self.replicas.items())
                tried = f"; already tried: {', '.join(sorted(exclude))}" if exclude else ""
                refused = [a for a, x in self.replicas.items() if accept is not None and not accept(x)]
                why = f"; {unaccepted}: {', '.join(refused)}" if refused and unaccepted else ""
                raise Unavailable(f"no {self.name} replica is available (known: {known or 'none'}{tried}{why})")
            self._changed.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout=min(left, 0.25))

    async def wait_ready(self, timeout_s: float, count: int = 1) -> None:
        """Wait until at least ``count`` replicas are SERVING; raises Unavailable after ``timeout_s``."""
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout_s
        while len(self.eligible()) < count:
            if loop.time() >= end:
                raise Unavailable(f"{self.name}: {len(self.eligible())} of {count} replicas serving "
                                  f"after {timeout_s:.0f} s")
            self._changed.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout=0.2)

    @contextlib.asynccontextmanager
    async def lease(self, replica: Replica, pages: int = 1) -> AsyncIterator[Replica]:
        """Count ``pages`` as outstanding on ``replica`` for the duration of the block."""
        replica.outstanding += pages
        try:
            yield replica
        finally:
            replica.outstanding -= pages
            if replica.retired and replica.outstanding == 0 and self.replicas.get(replica.address) is replica:
                del self.replicas[replica.address]
                await replica.close()

    async def close(self) -> None:
        """Stop resolving and watching; close every channel."""
        if self._resolver is not None:
            self._resolver.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._resolver
        for r in list(self.replicas.values()):
            await r.close()
        self.replicas.clear()
