"""Keepalive: the gateway's client pings and the services' ping policy agree (no too_many_pings).

A client pinging more often than its server allows gets GOAWAY ENHANCE_YOUR_CALM "too_many_pings"
after two strikes, and every stream on the connection breaks. Both sides take their arguments from
:data:`inkstream.grpc_options.KEEPALIVE`; here a scaled-down policy (pings every 0.3 s) is run for a
few seconds on an idle connection and the connection must stay up, while the same client against a
server with gRPC's default ping policy (at most one ping per 5 minutes) loses it: the check can fail.
"""

from __future__ import annotations

import asyncio

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from inkstream.grpc_options import KEEPALIVE, KeepalivePolicy, client_options, server_options

pytestmark = pytest.mark.timeout(60)

FAST = KeepalivePolicy(time_s=0.3, timeout_s=2.0)


def test_the_servers_accept_what_the_clients_send():
    client = dict(client_options())
    server = dict(server_options())
    assert server["grpc.http2.min_ping_interval_without_data_ms"] <= client["grpc.keepalive_time_ms"]
    assert client["grpc.keepalive_permit_without_calls"] == server["grpc.keepalive_permit_without_calls"] == 1
    assert client["grpc.keepalive_time_ms"] == int(KEEPALIVE.time_s * 1000)


async def _idle_connection_states(server_opts, seconds: float) -> tuple[set, bool]:
    """Connect with FAST client keepalive, stay idle ``seconds``; return the channel states seen
    after it was READY, and whether a call on the same channel then succeeded without reconnecting."""
    server = grpc.aio.server(options=server_opts)
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=client_options(keepalive=FAST)) as ch:
            stub = health_pb2_grpc.HealthStub(ch)
            await stub.Check(health_pb2.HealthCheckRequest(), timeout=5)
            seen = set()
            loop = asyncio.get_running_loop()
            end = loop.time() + seconds
            while loop.time() < end:
                seen.add(ch.get_state())
                await asyncio.sleep(0.05)
            still_ready = ch.get_state() == grpc.ChannelConnectivity.READY
            await stub.Check(health_pb2.HealthCheckRequest(), timeout=5)
            return seen, still_ready
    finally:
        await server.stop(0)


async def test_an_idle_connection_stays_up_under_the_shared_policy():
    seen, still_ready = await _idle_connection_states(server_options(keepalive=FAST), 3.0)
    assert seen == {grpc.ChannelConnectivity.READY} and still_ready


async def test_a_server_with_the_default_ping_policy_would_drop_it():
    defaults = [("grpc.max_receive_message_length", 1 << 20)]
    seen, still_ready = await _idle_connection_states(defaults, 3.0)
    assert seen != {grpc.ChannelConnectivity.READY} or not still_ready
