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
service ``""``). A replica is eligible for new work only while its last reported status is SERVING
and no call to it has just failed with a lost / refused connection. This module owns membership and
health only; which replica gets a page, and the work windows, are :class:`gateway.routing.router.Router`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable, Iterable

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from gateway.routing.targets import _is_ip, join_target, split_target
from inkstream import trace_interceptors
from inkstream.errors import Unavailable
from inkstream.lifecycle import DEFAULT_MAX_MESSAGE_BYTES, client_options
from inkstream.tls import TlsConfig, open_channel

log = logging.getLogger("inkstream.gateway.replicas")

_SERVING = health_pb2.HealthCheckResponse.SERVING


class Replica:
    """One replica: its channel and its health, nothing else (routing state lives in
    :class:`gateway.routing.router.Router`).

    ``address``: gRPC target ``ip:port``. :attr:`healthy`: the last health report was SERVING and
    no connection failure was seen since. :attr:`incarnation`: how many times the replica has turned
    SERVING (1 after the first report); a restart behind the same address (the watch broke, then
    reports SERVING again) is a new incarnation, which is what "already tried" is keyed by.
    ``retired``: its address vanished from DNS; it gets no new work and is closed when idle.
    """

    def __init__(self, address: str, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES, tls: TlsConfig | None = None):
        self.address = address
        # Client interceptors: one CLIENT span per call, W3C trace context + request id in metadata.
        # TLS / mutual TLS when ``tls.enabled`` (inkstream.tls), else plaintext; keepalive agreeing
        # with the servers' ping policy (inkstream.lifecycle.client_options).
        self.channel = open_channel(address, tls, options=client_options(max_message_bytes),
                                    interceptors=trace_interceptors.client_interceptors())
        self._healthy = False
        self.incarnation = 0
        self.retired = False
        self.closed = False
        self._watch_task: asyncio.Task | None = None
        self._on_change: Callable[[], None] = lambda: None
        self._retry_s = 0.5

    def __repr__(self) -> str:
        return f"Replica({self.address}, healthy={self.healthy}, incarnation={self.incarnation})"

    @property
    def healthy(self) -> bool:
        """SERVING by its last health report, with no connection failure seen since."""
        return self._healthy

    def _set_health(self, serving: bool) -> None:
        if serving and not self._healthy:
            self.incarnation += 1
        if serving != self._healthy:
            log.info("replica %s %s", self.address, "SERVING" if serving else "NOT_SERVING")
        self._healthy = serving
        self._on_change()

    def mark_unreachable(self) -> None:
        """A call saw the connection refused or lost: no new work until health reports SERVING.

        The health watch is restarted, so a replica that is in fact up (only that call's stream
        was reset) reports SERVING again at once (as a new incarnation) instead of staying excluded.
        """
        if self._healthy:
            self._set_health(False)
        if self._watch_task is not None and not self.closed:
            self._watch_task.cancel()
            self._watch_task = None
            self.start_watch(self._on_change, self._retry_s)

    def start_watch(self, on_change: Callable[[], None], retry_s: float) -> None:
        """Start the background ``Health/Watch`` loop (reconnects every ``retry_s`` seconds);
        ``on_change()`` is called after every health report.
        """
        self._on_change, self._retry_s = on_change, retry_s
        if self._watch_task is None:
            self._watch_task = asyncio.get_running_loop().create_task(self._watch(retry_s))

    async def _watch(self, retry_s: float) -> None:
        stub = health_pb2_grpc.HealthStub(self.channel)
        while True:
            try:
                async for resp in stub.Watch(health_pb2.HealthCheckRequest(service="")):
                    self._set_health(resp.status == _SERVING)
                # The server ended the watch (shutting down): its state is unknown until re-watched.
                self._set_health(False)
            except asyncio.CancelledError:
                raise
            except grpc.RpcError as err:
                if err.code() == grpc.StatusCode.UNIMPLEMENTED:
                    # No health service: treat a reachable replica as serving (calls still mark
                    # it unreachable on connection failures).
                    self._set_health(True)
                    await asyncio.sleep(retry_s * 10)
                    continue
                if self._healthy:
                    log.warning("replica %s unreachable: %s", self.address, err.code().name)
                self._set_health(False)
            await asyncio.sleep(retry_s)

    async def close(self) -> None:
        """Stop the health watch and close the channel (in-flight calls are cancelled)."""
        self.closed = True
        if self._watch_task is not None:
            self._watch_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._watch_task
        await self.channel.close()


class ReplicaSet:
    """Membership of one service's replicas (encoder or decoder) behind a list of targets.

    ``targets``: ``host:port`` strings (see the module docstring for static vs DNS targets).
    ``resolve_interval_s``: seconds between DNS re-resolutions. ``health_retry_s``: seconds between
    reconnect attempts of a broken health watch. ``name``: for logs and errors ("encoder").
    ``tls``: client side of the hop (:class:`inkstream.tls.TlsConfig`; None or disabled = plaintext);
    a missing or empty PEM file raises ValueError when the first replica is added. ``busy(replica)``:
    whether work is leased on it (given by :class:`gateway.routing.router.Router`); a vanished replica is
    closed only once it is not busy (:meth:`discard_if_idle`).
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
        self.busy: Callable[[Replica], bool] = lambda r: False
        self._waiters: list[asyncio.Future[None]] = []
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
                r.start_watch(self.notify, self.health_retry_s)
                log.info("%s replica added: %s", self.name, a)
            elif self.replicas[a].retired:  # vanished while busy, back before it went idle
                self.replicas[a].retired = False
                log.info("%s replica back: %s", self.name, a)
        for a, r in list(self.replicas.items()):
            if a not in addrs:
                r.retired = True
                await self.discard_if_idle(r)
        self.notify()

    async def discard_if_idle(self, replica: Replica) -> None:
        """Close and forget ``replica`` if it is retired and nothing is leased on it."""
        if replica.retired and not self.busy(replica) and self.replicas.get(replica.address) is replica:
            del self.replicas[replica.address]
            await replica.close()
            log.info("%s replica removed: %s", self.name, replica.address)

    async def _resolve_loop(self) -> None:
        while True:
            await asyncio.sleep(self.resolve_interval_s)
            try:
                await self.refresh()
            except Exception:  # keep resolving; the next round may succeed
                log.exception("re-resolving %s replicas failed", self.name)

    def notify(self) -> None:
        """Wake everyone waiting in :meth:`changed` (health, membership or routing state changed)."""
        waiters, self._waiters = self._waiters, []
        for f in waiters:
            if not f.done():
                f.set_result(None)

    def changed(self) -> asyncio.Future[None]:
        """A future resolved at the next :meth:`notify`. Registered at once, so a change that
        happens between a caller's check and its wait is not lost; each waiter has its own future
        (no shared event that one waiter clears under another).
        """
        f: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters = [w for w in self._waiters if not w.done()]
        self._waiters.append(f)
        return f

    def eligible(self) -> list[Replica]:
        """Healthy, non-retired replicas."""
        return [r for r in self.replicas.values() if r.healthy and not r.retired]

    async def wait_ready(self, timeout_s: float, count: int = 1) -> None:
        """Wait until at least ``count`` replicas are SERVING; raises Unavailable after ``timeout_s``."""
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout_s
        while True:
            changed = self.changed()
            if len(self.eligible()) >= count:
                changed.cancel()
                return
            left = end - loop.time()
            if left <= 0:
                changed.cancel()
                raise Unavailable(f"{self.name}: {len(self.eligible())} of {count} replicas serving "
                                  f"after {timeout_s:.0f} s")
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(changed, timeout=left)

    def describe(self) -> str:
        """The known replicas and their health, for the gateway's log (never a client's message: addresses)."""
        return ", ".join(f"{a} ({'serving' if x.healthy else 'not serving'})"
                         for a, x in self.replicas.items()) or "none"

    async def close(self) -> None:
        """Stop resolving and watching; close every channel."""
        if self._resolver is not None:
            self._resolver.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._resolver
        for r in list(self.replicas.values()):
            await r.close()
        self.replicas.clear()
