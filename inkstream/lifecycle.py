"""Service lifecycle shared by the gRPC services: server options, health, readiness and drain.

Health uses the standard ``grpc.health.v1`` service from grpcio-health-checking (asyncio servicer).
States: NOT_SERVING while weights load and warm up -> SERVING -> NOT_SERVING as soon as a drain starts
(SIGTERM). While draining, new work is refused with UNAVAILABLE; in-flight work finishes within the
grace period, then the server stops. Liveness (the process answering) stays up until then.

Kubernetes probes (``k8s/base``): the startup and readiness probes check the overall service ``""``
(SERVING only between warm-up and drain); the liveness probe checks :data:`LIVENESS_SERVICE`, which
turns SERVING with :meth:`Lifecycle.set_serving` (or :meth:`Lifecycle.set_alive`) and is *not*
changed by a drain, so a draining pod is not restarted by its liveness probe (a gRPC probe fails on
NOT_SERVING). A second SIGTERM / SIGINT during a drain stops the server at once (Ctrl-C twice).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable
from typing import Any, TypeVar, cast

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from inkstream.errors import Unavailable
from inkstream.fatal import ForwardHealth
from inkstream.grpc_options import (  # noqa: F401 - re-exported: the services import them from here
    DEFAULT_MAX_MESSAGE_BYTES,
    client_options,
    listener_options,
    server_options,
)

T = TypeVar("T")

log = logging.getLogger("inkstream.lifecycle")

# Health service name the liveness probe asks for (stays SERVING while draining).
LIVENESS_SERVICE = "inkstream.liveness"


async def in_daemon_thread(fn: Callable[..., T], *args: object) -> T:
    """Run ``fn(*args)`` on a new daemon thread and await its result (its exception is re-raised).

    For model loading and warm-up (seconds to minutes): ``asyncio.to_thread`` uses the loop's default
    executor, which ``asyncio.run`` joins at exit, so a SIGTERM during loading would drain at once
    and then wait for the load to finish before the process exits (and be SIGKILLed by Kubernetes
    meanwhile). A daemon thread is abandoned at exit instead.
    """
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, exc: BaseException | None) -> None:
        if fut.done():  # the awaiting task was cancelled
            return
        if exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(cast(T, result))  # fn returned it: a T (None only alongside an exception)

    def run() -> None:
        try:
            result, exc = fn(*args), None
        except BaseException as e:  # noqa: BLE001 - handed to the awaiting coroutine
            result, exc = None, e
        try:
            loop.call_soon_threadsafe(settle, result, exc)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    threading.Thread(target=run, name=f"inkstream-{getattr(fn, '__name__', 'task')}", daemon=True).start()
    return await fut


class Lifecycle:
    """Readiness, in-flight accounting and drain for one gRPC server.

    ``services``: fully-qualified service names registered with the health servicer (the overall
    ``""`` entry is always included). Call :meth:`set_serving` after warm-up, :meth:`drain` on SIGTERM.
    """

    def __init__(self, services: Iterable[str]):
        self.health = health.aio.HealthServicer()
        self.services = ["", *services]
        self.ready = False
        self.draining = False
        self._drain_started = False
        self._inflight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self.stopped = asyncio.Event()
        self.failed: str | None = None  # why the replica stopped on an unrecoverable failure
        self._health_servers: list[grpc.aio.Server] = []  # plaintext health-only servers (TLS setups)
        self._servers: list[grpc.aio.Server] = []
        self._fail_task: asyncio.Task[None] | None = None

    def register(self, server: grpc.aio.Server) -> None:
        """Add the health service to ``server``."""
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        self._servers.append(server)

    def forward_health(self, name: str, max_consecutive_failures: int = 8) -> ForwardHealth:
        """A :class:`inkstream.fatal.ForwardHealth` whose trip calls :meth:`fail` on this loop
        (callable from any thread). Must be called from the running event loop.
        """
        loop = asyncio.get_running_loop()

        def on_trip(reason: str) -> None:
            def start() -> None:
                self._fail_task = asyncio.ensure_future(self.fail(reason))
            try:
                loop.call_soon_threadsafe(start)
            except RuntimeError:  # the loop is closed: the process is ending anyway
                pass

        return ForwardHealth(name, on_trip, max_consecutive_failures)

    async def fail(self, reason: str) -> None:
        """The replica can no longer work (:mod:`inkstream.fatal`): every health entry, liveness
        included, NOT_SERVING; new work refused; the servers stop (calls in flight are cancelled:
        they would fail anyway) and :attr:`stopped` is set, so the service's main exits with
        :data:`inkstream.fatal.EXIT_UNRECOVERABLE`.
        """
        if self.failed is not None:
            return
        self.failed = reason
        self._drain_started = self.draining = True
        await self.set_not_serving()
        await self.health.set(LIVENESS_SERVICE, health_pb2.HealthCheckResponse.NOT_SERVING)
        for server in self._servers:
            await server.stop(grace=0.5)
        await self._stop_plain_health()
        self.stopped.set()

    def add_plain_health(self, address: str) -> int:
        """A second server on ``address`` serving only this health service, without TLS (kubelet's
        gRPC probes cannot do TLS; the health status is not secret). Started by
        :meth:`start_plain_health`, stopped after the main server by :meth:`drain`. Returns the
        bound port; raises RuntimeError when it cannot be bound.
        """
        server = grpc.aio.server(options=listener_options())
        self.register(server)
        port = server.add_insecure_port(address)
        if port == 0:
            raise RuntimeError(f"could not bind the plaintext health port at {address}")
        self._health_servers.append(server)
        return port

    async def start_plain_health(self) -> None:
        """Start the servers of :meth:`add_plain_health`."""
        for server in self._health_servers:
            await server.start()

    async def _stop_plain_health(self) -> None:
        for server in self._health_servers:
            await server.stop(grace=None)

    async def set_alive(self) -> None:
        """Liveness SERVING (the process and its event loop answer); never cleared by a drain."""
        await self.health.set(LIVENESS_SERVICE, health_pb2.HealthCheckResponse.SERVING)

    async def set_not_serving(self) -> None:
        """Readiness NOT_SERVING for every registered service (liveness untouched)."""
        for s in self.services:
            await self.health.set(s, health_pb2.HealthCheckResponse.NOT_SERVING)

    async def set_serving(self) -> None:
        """Mark ready (after weights are loaded and a warm-up batch ran). Once a drain has started
        this only marks liveness: a warm-up finishing during a drain must not re-open the replica.
        """
        self.ready = True
        await self.set_alive()
        if self._drain_started:
            return
        for s in self.services:
            await self.health.set(s, health_pb2.HealthCheckResponse.SERVING)

    @property
    def inflight(self) -> int:
        """Units of work (pages / sequences) currently admitted."""
        return self._inflight

    def check_accepting(self) -> None:
        """Raise Unavailable (UNAVAILABLE) when not ready yet or draining."""
        if self.draining:
            raise Unavailable("this replica is draining; retry on another replica")
        if not self.ready:
            raise Unavailable("this replica is still loading its model; retry shortly")

    @contextlib.asynccontextmanager
    async def track(self, units: int = 1) -> AsyncIterator[None]:
        """Count ``units`` of in-flight work for the duration of the block (drain waits for zero)."""
        self._inflight += units
        self._idle.clear()
        try:
            yield
        finally:
            self._inflight -= units
            if self._inflight <= 0:
                self._inflight = 0
                self._idle.set()

    async def drain(self, server: grpc.aio.Server, grace_s: float) -> None:
        """NOT_SERVING at once, refuse new work, wait up to ``grace_s`` seconds for in-flight work,
        then stop the server (remaining calls are cancelled).
        """
        if self._drain_started:
            return
        self._drain_started = True
        # Readiness first (health watchers such as the gateway stop routing here), then refuse.
        await self.set_not_serving()
        self.draining = True
        log.info("drain started", extra={"inflight": self._inflight, "grace_s": grace_s})
        try:
            await asyncio.wait_for(self._idle.wait(), timeout=grace_s)
        except TimeoutError:
            log.warning("drain grace period over with work in flight", extra={"inflight": self._inflight})
        await server.stop(grace=1.0)
        await self._stop_plain_health()
        self.stopped.set()

    def install_signal_handlers(self, server: grpc.aio.Server, grace_s: float) -> None:
        """SIGTERM / SIGINT start :meth:`drain` (must be called from the running event loop)."""
        loop = asyncio.get_running_loop()
        tasks: set[asyncio.Future] = set()  # held until done: the loop keeps only weak references to tasks

        def start(coro: Coroutine[Any, Any, Any]) -> None:
            task = asyncio.ensure_future(coro)
            tasks.add(task)
            task.add_done_callback(tasks.discard)

        def on_signal() -> None:
            if self._drain_started:
                log.warning("second stop signal during drain: stopping now", extra={"inflight": self._inflight})
                start(server.stop(grace=None))
                return
            start(self.drain(server, grace_s))

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, on_signal)
