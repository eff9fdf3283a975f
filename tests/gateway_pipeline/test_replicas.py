"""ReplicaSet: address parsing, least-outstanding choice, DNS re-resolution, health watch."""

from __future__ import annotations

import asyncio
import socket

import grpc
import pytest

from gateway.clients.calls import CallFailure, classify_rpc_error
from gateway.replicas import ReplicaSet, split_target
from inkstream import errors

from .fakes import FakeDecoder, start_server

pytestmark = pytest.mark.timeout(30)


def test_split_target():
    assert split_target("10.0.0.1:5000") == ("10.0.0.1", 5000)
    assert split_target("[::1]:7") == ("::1", 7)
    assert split_target("dns:///dec.svc:50051") == ("dec.svc", 50051)
    with pytest.raises(ValueError, match="host:port"):
        split_target("nohost")


async def test_least_outstanding_pick():
    rs = ReplicaSet(["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"], name="decoder")
    await rs.start()
    try:
        a, b, c = rs.replicas.values()
        for r in (a, b, c):
            r.healthy = True
        a.outstanding, b.outstanding, c.outstanding = 3, 1, 2
        assert rs.pick() is b
        assert rs.pick({b.address}) is c
        b.healthy = False
        assert rs.pick() is c
        c.retired = True
        assert rs.pick() is a
        a.healthy = False
        assert rs.pick() is None
        with pytest.raises(errors.Unavailable, match="no decoder replica"):
            await rs.wait_pick(set(), 0.1)
    finally:
        await rs.close()


async def test_an_outage_is_waited_for_once_not_once_per_page():
    """With every replica down, the first pick waits ``wait_s``; picks made later in the same outage
    fail at once (a long document must not wait ``wait_s`` per page); a recovery resets the clock."""
    rs = ReplicaSet(["127.0.0.1:1"], name="decoder")
    await rs.start()
    loop = asyncio.get_running_loop()
    try:
        (r,) = rs.replicas.values()
        r.healthy = False
        t0 = loop.time()
        first = [rs.wait_pick(set(), 0.4) for _ in range(3)]  # pages waiting together fail together
        results = await asyncio.gather(*first, return_exceptions=True)
        assert all(isinstance(x, errors.Unavailable) for x in results)
        assert 0.35 <= loop.time() - t0 < 1.0
        t1 = loop.time()
        with pytest.raises(errors.Unavailable):
            await rs.wait_pick(set(), 0.4)
        assert loop.time() - t1 < 0.1
        r.healthy = True
        assert rs.pick() is r  # the outage is over
        r.healthy = False
        t2 = loop.time()
        with pytest.raises(errors.Unavailable):
            await rs.wait_pick(set(), 0.3)
        assert loop.time() - t2 >= 0.25  # a new outage: waited for again
    finally:
        await rs.close()


async def test_dns_reresolution_adds_and_retires(monkeypatch):
    answers = [["10.1.0.1"], ["10.1.0.1", "10.1.0.2"], ["10.1.0.2"]]
    loop = asyncio.get_running_loop()

    async def fake_getaddrinfo(host, port, **kw):
        assert host == "decoder.ocr.svc.cluster.local"
        ips = answers[0]
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port)) for ip in ips]

    monkeypatch.setattr(loop, "getaddrinfo", fake_getaddrinfo)
    rs = ReplicaSet(["decoder.ocr.svc.cluster.local:50051"], name="decoder", resolve_interval_s=3600)
    await rs.start()
    try:
        assert set(rs.replicas) == {"10.1.0.1:50051"}
        answers.pop(0)
        await rs.refresh()
        assert set(rs.replicas) == {"10.1.0.1:50051", "10.1.0.2:50051"}
        old = rs.replicas["10.1.0.1:50051"]
        old.outstanding = 1  # busy: retired but kept until its work finishes
        answers.pop(0)
        await rs.refresh()
        assert old.retired and rs.pick() is not old
        assert "10.1.0.1:50051" in rs.replicas
        old.outstanding = 0
        async with rs.lease(old):  # its last page finishes -> closed and removed
            pass
        assert set(rs.replicas) == {"10.1.0.2:50051"}
    finally:
        await rs.close()


async def test_retired_replica_whose_address_comes_back_is_taken_back(monkeypatch):
    """An address that vanishes from DNS while busy, then reappears before its work finished, is
    un-retired (same replica, same channel), not left without new work until it drains."""
    answers = [["10.1.0.1", "10.1.0.2"], ["10.1.0.2"], ["10.1.0.1", "10.1.0.2"]]
    loop = asyncio.get_running_loop()

    async def fake_getaddrinfo(host, port, **kw):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port)) for ip in answers[0]]

    monkeypatch.setattr(loop, "getaddrinfo", fake_getaddrinfo)
    rs = ReplicaSet(["decoder.ocr.svc.cluster.local:50051"], name="decoder", resolve_interval_s=3600)
    await rs.start()
    try:
        busy = rs.replicas["10.1.0.1:50051"]
        busy.outstanding = 1
        answers.pop(0)
        await rs.refresh()
        assert busy.retired
        answers.pop(0)
        await rs.refresh()
        assert rs.replicas["10.1.0.1:50051"] is busy and not busy.retired
    finally:
        busy.outstanding = 0
        await rs.close()


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
