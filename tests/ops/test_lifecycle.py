"""Unit tests of inkstream.lifecycle: health states, drain ordering, in-flight wait, liveness, signals."""

from __future__ import annotations

import asyncio
import os
import signal

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from inkstream.errors import Unavailable
from inkstream.lifecycle import LIVENESS_SERVICE, Lifecycle

pytestmark = pytest.mark.timeout(30)

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


@pytest.fixture
async def served():
    lc = Lifecycle(["test.v1.Thing"])
    server = grpc.aio.server()
    lc.register(server)
    port = server.add_insecure_port("127.0.0.1:0")
    await lc.set_not_serving()
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    yield lc, server, health_pb2_grpc.HealthStub(channel)
    await channel.close()
    await server.stop(None)


async def _status(stub, service=""):
    return (await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)).status


async def test_states_through_start_and_drain(served):
    lc, server, stub = served
    assert await _status(stub) == NOT_SERVING
    with pytest.raises(Unavailable, match="loading"):
        lc.check_accepting()
    await lc.set_serving()
    assert await _status(stub) == SERVING and await _status(stub, "test.v1.Thing") == SERVING
    assert await _status(stub, LIVENESS_SERVICE) == SERVING
    lc.check_accepting()

    async with lc.track(3):
        drain = asyncio.create_task(lc.drain(server, grace_s=10))
        await asyncio.sleep(0.2)
        # Draining: readiness down, liveness still up, new work refused, in-flight work continues.
        assert await _status(stub) == NOT_SERVING and await _status(stub, "test.v1.Thing") == NOT_SERVING
        assert await _status(stub, LIVENESS_SERVICE) == SERVING
        with pytest.raises(Unavailable, match="draining"):
            lc.check_accepting()
        assert lc.inflight == 3 and not drain.done() and not lc.stopped.is_set()
    await asyncio.wait_for(drain, 5)  # in-flight work done -> the server stops
    assert lc.stopped.is_set() and lc.inflight == 0


async def test_not_serving_is_published_before_work_is_refused():
    lc = Lifecycle(["test.v1.Thing"])
    await lc.set_serving()
    events: list[tuple[str, int, bool]] = []
    real_set = lc.health.set

    async def recording_set(service, status):
        events.append((service, status, lc.draining))
        await real_set(service, status)

    lc.health.set = recording_set

    class FakeServer:
        stopped_with = None

        async def stop(self, grace):
            FakeServer.stopped_with = grace

    await lc.drain(FakeServer(), grace_s=1)
    not_serving = [e for e in events if e[1] == NOT_SERVING]
    assert {e[0] for e in not_serving} == {"", "test.v1.Thing"}
    assert all(draining is False for _, _, draining in not_serving), "readiness must drop before refusing work"
    assert lc.draining and FakeServer.stopped_with is not None
    assert all(e[0] != LIVENESS_SERVICE for e in events)


async def test_grace_period_bounds_the_wait():
    lc = Lifecycle([])
    await lc.set_serving()

    class FakeServer:
        async def stop(self, grace):
            pass

    loop = asyncio.get_running_loop()
    async with lc.track():
        t0 = loop.time()
        await lc.drain(FakeServer(), grace_s=0.3)
        assert 0.25 <= loop.time() - t0 < 2.0  # gave up after the grace period with work in flight
        assert lc.stopped.is_set()


async def test_sigterm_starts_drain_and_second_signal_stops_now(served):
    lc, server, stub = served
    await lc.set_serving()
    lc.install_signal_handlers(server, grace_s=30)
    try:
        async with lc.track():
            os.kill(os.getpid(), signal.SIGTERM)
            await asyncio.sleep(0.3)
            assert lc.draining and await _status(stub) == NOT_SERVING
            assert not lc.stopped.is_set()  # waiting for the tracked work
            os.kill(os.getpid(), signal.SIGTERM)  # second signal: stop at once
            await asyncio.sleep(0.5)
            with pytest.raises(grpc.aio.AioRpcError):
                await _status(stub)
    finally:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)


async def test_warm_up_finishing_during_drain_does_not_reopen(served):
    lc, server, stub = served
    drain = asyncio.create_task(lc.drain(server, grace_s=5))
    await asyncio.sleep(0)  # the drain has started (readiness going down)
    await lc.set_serving()  # e.g. the model finished loading just now
    await asyncio.wait_for(drain, 5)
    assert lc.health._server_status[""] == NOT_SERVING
    assert lc.health._server_status[LIVENESS_SERVICE] == SERVING


async def test_in_daemon_thread_returns_and_raises():
    from inkstream.lifecycle import in_daemon_thread

    assert await in_daemon_thread(lambda a, b: a + b, 2, 3) == 5
    with pytest.raises(ValueError, match="bad checkpoint"):
        await in_daemon_thread(_raise_value_error)


def _raise_value_error():
    raise ValueError("bad checkpoint")


def test_a_stop_during_model_loading_does_not_wait_for_the_load():
    """asyncio.run joins the default executor at exit; loading on a daemon thread is abandoned, so a
    process told to stop while its (here: 60 s) load runs exits at once."""
    import subprocess
    import sys
    import time

    script = ("import asyncio, time\n"
              "from inkstream.lifecycle import in_daemon_thread\n"
              "async def main():\n"
              "    asyncio.ensure_future(in_daemon_thread(time.sleep, 60))\n"
              "    await asyncio.sleep(0.2)\n"
              "    return 0\n"
              "raise SystemExit(asyncio.run(main()))\n")
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=50)
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - t0 < 30
