"""Router: one owner of routing state; the races that shared mutable replica fields allowed.

The race tests go through the public Pipeline API only, so each of them also runs (and fails)
against the gateway as it was before the router existed.
"""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from gateway.routing.config import PipelineConfig, RetryPolicy
from gateway.routing.pipeline import Pipeline
from gateway.routing.replicas import ReplicaSet
from gateway.routing.router import Router
from gateway.types import PipelineOptions
from inkstream import errors
from inkstream.fair import WorkKey

from .fakes import FakeDecoder, FakeEncoder, digest, expected_page_text, start_server
from .test_pipeline import PageSource, collect, make_pages

pytestmark = pytest.mark.timeout(60)


async def _servers(*servicers):
    out = []
    for svc in servicers:
        kind = "encoder" if isinstance(svc, FakeEncoder) else "decoder"
        out.append(await start_server(svc, kind))
    return out


async def _stop(servers):
    for srv, _ in servers:
        await srv.stop(0)


def _fake_dns(monkeypatch, table: dict[str, list[str]]):
    """``loop.getaddrinfo`` answering from ``table`` (host -> IPs; a missing host fails)."""
    loop = asyncio.get_running_loop()

    async def getaddrinfo(host, port, **kw):
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port)) for ip in table[host]]

    monkeypatch.setattr(loop, "getaddrinfo", getaddrinfo)


async def test_a_replica_retired_during_the_backoff_sleep_costs_no_page(monkeypatch):
    """pick -> backoff -> call: a DNS refresh during the sleep closed the replica chosen before it,
    and the page became INTERNAL. Now the replica is chosen after the sleep (and a leased one is
    never closed under its call)."""
    enc, dec_a, dec_b = FakeEncoder(), FakeDecoder(), FakeDecoder()
    servers = await _servers(enc, dec_a, dec_b)
    (_, enc_addr), (_, a_addr), (_, b_addr) = servers
    table = {"b.decoder.test": ["127.0.0.1"]}
    _fake_dns(monkeypatch, table)
    b_port = b_addr.rsplit(":", 1)[1]
    monkeypatch.setattr(RetryPolicy, "backoff_s", lambda self, retry, hint=None: 0.6)
    cfg = PipelineConfig(retry=RetryPolicy(replica_wait_s=5.0), resolve_interval_s=3600)
    pipeline = await Pipeline.connect([enc_addr], [a_addr, f"b.decoder.test:{b_port}"], cfg)
    try:
        await pipeline.wait_ready(5)
        await pipeline.decoders.wait_ready(5, count=2)
        await dec_b.lifecycle.set_not_serving()  # the page's first decode goes to A ...
        while len(pipeline.decoders.eligible()) > 1:
            await asyncio.sleep(0.01)
        dec_a.fail_all, dec_a.fail_delay_s = "UNAVAILABLE", 0.3  # ... and fails there (A stays eligible)
        images = make_pages(1, seed=5)
        task = asyncio.ensure_future(collect(pipeline, PageSource(images)))
        await asyncio.wait_for(dec_a.started.wait(), 10)
        await dec_b.lifecycle.set_serving()  # B is back before A answers: untried, so a retry target
        await pipeline.decoders.wait_ready(5, count=2)
        await asyncio.sleep(0.45)  # A has failed; the retry sleeps its backoff
        b_replica = pipeline.decoders.replicas[f"127.0.0.1:{b_port}"]
        dec_a.fail_all = None
        table["b.decoder.test"] = ["127.0.0.2"]  # B's pod is replaced during the sleep (nothing listens
        # at the new address yet): the old B is retired and closed, as nothing is leased on it
        await pipeline.decoders.refresh()
        assert b_replica.address not in pipeline.decoders.replicas
        outs = await asyncio.wait_for(task, 20)
        assert [o.status for o in outs] == ["ok"], outs[0].error
        assert outs[0].text == expected_page_text(images[0])
        assert sum(dec_a.calls.values()) == 2 and sum(dec_b.calls.values()) == 0
    finally:
        await pipeline.close()
        await _stop(servers)


async def test_a_failed_decode_writer_fails_over_at_once(monkeypatch):
    """The task writing a page's segments to the Decode stream failed, its exception was swallowed
    and the reader waited for answers until decode_timeout_s; now the call ends at once and the
    page is retried (here on the same, only, decoder)."""
    import gateway.clients.decoder as decoder_client

    real = decoder_client.decode_request
    failed = []

    def decode_request(seg, **kw):
        if not failed:
            failed.append(seg.index)
            raise RuntimeError("cannot build the request")
        return real(seg, **kw)

    monkeypatch.setattr(decoder_client, "decode_request", decode_request)
    enc, dec = FakeEncoder(), FakeDecoder()
    servers = await _servers(enc, dec)
    cfg = PipelineConfig(decode_timeout_s=120.0, retry=RetryPolicy(base_s=0.01, cap_s=0.02))
    pipeline = await Pipeline.connect([servers[0][1]], [servers[1][1]], cfg)
    try:
        await pipeline.wait_ready(5)
        images = make_pages(2, seed=3)
        t0 = time.monotonic()
        outs = await asyncio.wait_for(collect(pipeline, PageSource(images)), 30)
        assert time.monotonic() - t0 < 10
        assert [o.status for o in outs] == ["ok", "ok"]
        assert [o.text for o in outs] == [expected_page_text(i) for i in images]
        assert failed
    finally:
        await pipeline.close()
        await _stop(servers)


async def test_waiting_pages_are_woken_by_changes_not_by_polling(monkeypatch):
    """Pages waiting for a decoder used to re-check every 0.2-0.25 s (a shared asyncio.Event that
    each waiter cleared, with polling to cover lost wake-ups). Now each waiter has its own future,
    resolved by the change itself: no re-check without a change, and a prompt wake-up on one."""
    enc, dec = FakeEncoder(), FakeDecoder()
    servers = await _servers(enc, dec)
    cfg = PipelineConfig(health_retry_s=30.0, retry=RetryPolicy(base_s=0.01, cap_s=0.02, replica_wait_s=20.0))
    pipeline = await Pipeline.connect([servers[0][1]], [servers[1][1]], cfg)
    try:
        await pipeline.wait_ready(5)
        await dec.lifecycle.set_not_serving()
        while pipeline.decoders.eligible():
            await asyncio.sleep(0.01)
        checks = []
        real = ReplicaSet.eligible

        def counted(self, *a, **kw):
            if self is pipeline.decoders:
                checks.append(time.monotonic())
            return real(self, *a, **kw)

        monkeypatch.setattr(ReplicaSet, "eligible", counted)
        images = make_pages(3, seed=4)
        task = asyncio.ensure_future(collect(pipeline, PageSource(images)))
        await asyncio.sleep(0.3)  # the pages are encoded and now wait for a decoder
        n0 = len(checks)
        await asyncio.sleep(1.2)
        assert len(checks) - n0 <= 1, f"{len(checks) - n0} re-checks in 1.2 s without any change"
        await dec.lifecycle.set_serving()
        # Woken by the change: nothing else wakes them before replica_wait_s (20 s, then they would
        # fail) and nothing polls (counted above); not timed, so a loaded machine cannot fail it.
        outs = await asyncio.wait_for(task, 10)
        assert [o.text for o in outs] == [expected_page_text(i) for i in images]
    finally:
        await pipeline.close()
        await _stop(servers)


async def test_least_leased_replica_is_picked_and_tried_ones_avoided():
    decs = [FakeDecoder() for _ in range(3)]
    servers = await _servers(*decs)
    encs = ReplicaSet([servers[0][1]], name="encoder")
    rs = ReplicaSet([a for _, a in servers], name="decoder")
    router = Router(encs, rs, PipelineConfig())
    await encs.start()
    await rs.start()
    try:
        await rs.wait_ready(5, count=3)
        a, b, c = (rs.replicas[addr] for _, addr in servers)
        held = []
        for r, n in ((a, 3), (b, 1), (c, 2)):
            for _ in range(n):
                cm = router.lease("decoder", avoid={(x.address, x.incarnation) for x in (a, b, c) if x is not r})
                lease = await cm.__aenter__()
                assert lease.replica is r
                held.append(cm)
        async with router.lease("decoder") as lease:
            assert lease.replica is b
        async with router.lease("decoder", avoid={b.address and (b.address, b.incarnation)}) as lease:
            assert lease.replica is c
        async with router.lease("decoder", exclude={(a.address, a.incarnation), (c.address, c.incarnation)}) as lease:
            assert lease.replica is b
        assert router.leases(a) == 3
        for cm in held:
            await cm.__aexit__(None, None, None)
        assert router.leases(a) == router.leases(b) == router.leases(c) == 0
    finally:
        await rs.close()
        await encs.close()
        await _stop(servers)


async def test_an_outage_is_waited_for_once_not_once_per_page():
    """With every replica down, pages without a deadline wait ``replica_wait_s`` counted from the
    start of the outage (pages waiting together fail together; a later page in the same outage
    fails at once); a page with a deadline waits up to it; a recovery resets the clock."""
    dec = FakeDecoder()
    servers = await _servers(dec)
    encs = ReplicaSet([servers[0][1]], name="encoder")
    rs = ReplicaSet([servers[0][1]], name="decoder", health_retry_s=30)
    router = Router(encs, rs, PipelineConfig(retry=RetryPolicy(replica_wait_s=0.4)))
    loop = asyncio.get_running_loop()
    await rs.start()

    async def lease(**kw):
        async with router.lease("decoder", **kw):
            return True

    try:
        await rs.wait_ready(5)
        await dec.lifecycle.set_not_serving()
        while rs.eligible():
            await asyncio.sleep(0.01)
        t0 = loop.time()
        results = await asyncio.gather(*(lease() for _ in range(3)), return_exceptions=True)
        assert all(isinstance(x, errors.Unavailable) for x in results), results
        assert 0.35 <= loop.time() - t0 < 1.0
        t1 = loop.time()
        with pytest.raises(errors.Unavailable, match="no decoder replica") as refused:
            await lease()
        assert servers[0][1] not in refused.value.message, refused.value.message  # counted, never named
        assert loop.time() - t1 < 0.1
        t2 = loop.time()
        with pytest.raises(errors.Unavailable):
            await lease(deadline=loop.time() + 0.6, key=WorkKey("r1"))  # its own deadline, not the outage's
        assert 0.55 <= loop.time() - t2 < 1.2
        waiter = asyncio.ensure_future(lease(deadline=loop.time() + 10))
        await asyncio.sleep(0.1)
        await dec.lifecycle.set_serving()
        assert await asyncio.wait_for(waiter, 5)
    finally:
        await rs.close()
        await _stop(servers)


async def test_dns_retired_replica_is_closed_after_its_last_lease(monkeypatch):
    decs = [FakeDecoder(), FakeDecoder()]
    servers = await _servers(*decs)
    ports = [a.rsplit(":", 1)[1] for _, a in servers]
    assert ports[0] != ports[1]
    table = {"one.test": ["127.0.0.1"], "two.test": ["127.0.0.1"]}
    _fake_dns(monkeypatch, table)
    encs = ReplicaSet([servers[0][1]], name="encoder")
    rs = ReplicaSet([f"one.test:{ports[0]}", f"two.test:{ports[1]}"], name="decoder", resolve_interval_s=3600)
    router = Router(encs, rs, PipelineConfig())
    await rs.start()
    try:
        await rs.wait_ready(5, count=2)
        old = rs.replicas[f"127.0.0.1:{ports[0]}"]
        other_key = (f"127.0.0.1:{ports[1]}", rs.replicas[f"127.0.0.1:{ports[1]}"].incarnation)
        cm = router.lease("decoder", avoid={other_key})
        lease = await cm.__aenter__()
        assert lease.replica is old
        table["one.test"] = ["127.0.0.2"]
        await rs.refresh()
        assert old.retired and old.address in rs.replicas  # busy: kept until its work finishes
        async with router.lease("decoder") as other:
            assert other.replica is not old
        # Back before it went idle: taken back, same channel.
        table["one.test"] = ["127.0.0.1"]
        await rs.refresh()
        assert rs.replicas[old.address] is old and not old.retired
        table["one.test"] = ["127.0.0.2"]
        await rs.refresh()
        await cm.__aexit__(None, None, None)  # its last lease ends -> closed and removed
        assert old.address not in rs.replicas and old.closed
    finally:
        await rs.close()
        await _stop(servers)


async def test_a_restarted_replica_is_a_new_incarnation_and_is_tried_again():
    """With one decoder, a page whose decode broke (connection lost) may be retried on the same
    address once it reports SERVING again: "already tried" is per incarnation."""
    dec = FakeDecoder()
    servers = await _servers(dec)
    encs = ReplicaSet([servers[0][1]], name="encoder")
    rs = ReplicaSet([servers[0][1]], name="decoder", health_retry_s=0.05)
    router = Router(encs, rs, PipelineConfig())
    loop = asyncio.get_running_loop()
    await rs.start()
    try:
        await rs.wait_ready(5)
        (r,) = rs.replicas.values()
        first = (r.address, r.incarnation)
        await dec.lifecycle.set_not_serving()
        while rs.eligible():
            await asyncio.sleep(0.01)
        waiter = asyncio.ensure_future(_lease_key(router, exclude={first}, deadline=loop.time() + 10))
        await asyncio.sleep(0.2)
        assert not waiter.done()  # the old incarnation is excluded, and not serving anyway
        await dec.lifecycle.set_serving()
        assert await asyncio.wait_for(waiter, 5) == (r.address, first[1] + 1)
        # A page suspect on the incarnation that still serves fails at once (no restart is coming).
        t0 = loop.time()
        with pytest.raises(errors.Unavailable):
            await _lease_key(router, exclude={(r.address, r.incarnation)}, deadline=loop.time() + 10)
        assert loop.time() - t0 < 0.5
    finally:
        await rs.close()
        await _stop(servers)


async def _lease_key(router: Router, **kw):
    async with router.lease("decoder", **kw) as lease:
        return lease.key


def test_options_default_to_interactive_without_deadline():
    o = PipelineOptions()
    assert o.priority == 0 and o.deadline is None
    assert digest(b"\x01abc") == digest(b"\x01abc")
