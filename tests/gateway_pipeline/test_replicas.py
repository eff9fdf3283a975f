"""ReplicaSet: address parsing, health watch, failure classification (routing: test_router.py)."""

from __future__ import annotations

import asyncio
import socket

import grpc
import pytest

from gateway.clients.calls import CallFailure, classify_rpc_error
from gateway.routing.replicas import ReplicaSet
from gateway.routing.targets import split_target

from .fakes import FakeDecoder, start_server

pytestmark = pytest.mark.timeout(30)


def test_split_target():
    assert split_target("10.0.0.1:5000") == ("10.0.0.1", 5000)
    assert split_target("[::1]:7") == ("::1", 7)
    assert split_target("dns:///dec.svc:50051") == ("dec.svc", 50051)
    with pytest.raises(ValueError, match="host:port"):
        split_target("nohost")


async def test_health_watch_follows_serving_state():
    svc = FakeDecoder()
    server, addr = await start_server(svc, "decoder")
    rs = ReplicaSet([addr], name="decoder", health_retry_s=0.05)
    await rs.start()
    try:
        await rs.wait_ready(5)
        await svc.lifecycle.set_not_serving()
        for _ in range(100):
            if not rs.eligible():
                break
            await asyncio.sleep(0.02)
        assert not rs.eligible()
        await svc.lifecycle.set_serving()
        await rs.wait_ready(5)
        await server.stop(0)  # unreachable -> not eligible
        for _ in range(100):
            if not rs.eligible():
                break
            await asyncio.sleep(0.02)
        assert not rs.eligible()
    finally:
        await rs.close()
        await server.stop(0)


async def test_classify_refused_vs_server_status():
    # Nothing listens on this port: a refused connection is transient, unreachable, not suspect.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
        from inkstream.pb import encoder_pb2, encoder_pb2_grpc

        with pytest.raises(grpc.RpcError) as ei:
            await encoder_pb2_grpc.VisionEncoderStub(ch).Info(encoder_pb2.InfoRequest(), timeout=2)
    f = classify_rpc_error(ei.value)
    assert isinstance(f, CallFailure)
    assert f.transient and f.unreachable and not f.suspect
    # gRPC's own words name the address ("ipv4:127.0.0.1:PORT: Connection refused"): the log's, not the page's
    assert str(port) in f.detail and str(port) not in f.error.message, (f.detail, f.error.message)
    # A server-sent UNAVAILABLE (draining) is transient but neither suspect nor unreachable.
    svc = FakeDecoder()
    svc.fail_all = "UNAVAILABLE"
    server, addr = await start_server(svc, "decoder")
    try:
        from gateway.clients.decoder import decode_segments
        from gateway.clients.encoder import VisionSegment

        from .fakes import _tokens

        t = _tokens(5, 0)
        seg = VisionSegment(0, tuple(t.shape), t.dtype, t.data, (0, 0, 1, 1))
        async with grpc.aio.insecure_channel(addr) as ch:
            with pytest.raises(CallFailure) as fi:
                await decode_segments(ch, [seg], task="", max_new_tokens=0, timeout_s=5)
        assert fi.value.transient and not fi.value.suspect and not fi.value.unreachable
        assert fi.value.error.code_name == "UNAVAILABLE"
    finally:
        await server.stop(0)


async def test_lost_call_does_not_exclude_a_live_replica_for_good():
    svc = FakeDecoder()
    server, addr = await start_server(svc, "decoder")
    rs = ReplicaSet([addr], name="decoder", health_retry_s=0.05)
    await rs.start()
    try:
        await rs.wait_ready(5)
        rs.replicas[addr].mark_unreachable()  # e.g. one call's stream was reset
        assert not rs.eligible()
        await rs.wait_ready(5)  # the restarted watch reports SERVING again
    finally:
        await rs.close()
        await server.stop(0)
