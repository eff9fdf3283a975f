"""Against a real uvicorn server on loopback: NDJSON pages arrive as each page is ready, in page order;
a declared Content-Length over the limit is refused before the body is read."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest
import uvicorn

from client import ocr_cli
from gateway.apis.rest import create_app
from gateway.core import GatewayCore
from gateway.session import SHUTDOWN_MESSAGE
from tests.gateway_api.conftest import FakePipeline, expected_text, marked_pdf

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def server(gw_config):
    """(base_url, fake pipeline, core) of a uvicorn server on a free loopback port."""
    fake = FakePipeline(delay_s=0.4)
    gw_config.limits.max_upload_bytes = 1_000_000
    core = GatewayCore(gw_config, fake)
    app = create_app(gw_config, fake, core)
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on"))
    task = asyncio.create_task(srv.serve())
    while not srv.started:
        await asyncio.sleep(0.02)
    port = srv.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}", fake, core
    srv.should_exit = True
    await task
    await core.close()


async def test_ndjson_streams_pages_as_they_are_ready(server):
    url, fake, _ = server
    numbers = [5, 1, 4, 2]
    arrivals: list[float] = []
    lines: list[dict] = []
    async with httpx.AsyncClient(timeout=30) as c:
        t0 = time.monotonic()
        async with c.stream("POST", f"{url}/v1/ocr", files={"file": ("d.pdf", marked_pdf(numbers))},
                            data={"format": "text"}, headers={"Accept": "application/x-ndjson"}) as r:
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("application/x-ndjson")
            async for line in r.aiter_lines():
                if line:
                    arrivals.append(time.monotonic() - t0)
                    lines.append(json.loads(line))
    pages = [ln["page"] for ln in lines[:-1]]
    assert [p["index"] for p in pages] == [1, 2, 3, 4]
    assert [p["text"] for p in pages] == [expected_text(n) for n in numbers]
    summary = lines[-1]["summary"]
    assert summary["pages"] == 4 and summary["pages_ok"] == 4
    assert summary["document"].count("\f") == 3
    # 0.4 s per page: the first page line must arrive well before the last page is done
    assert arrivals[0] < arrivals[3] - 0.6, arrivals


async def test_declared_oversize_refused_before_body(server):
    url, _, _ = server
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"POST /v1/ocr HTTP/1.1\r\nHost: gw\r\nContent-Type: application/pdf\r\n"
                 b"Content-Length: 10000000000\r\n\r\n%PDF-1.7\n")  # 10 GB declared, 9 bytes sent
    await writer.drain()
    head = await asyncio.wait_for(reader.read(4096), timeout=5)
    writer.close()
    assert head.startswith(b"HTTP/1.1 413"), head[:200]
    assert b"too large" in head


async def test_client_disconnect_releases_admission(server):
    url, fake, _ = server
    async with httpx.AsyncClient(timeout=30) as c:
        async with c.stream("POST", f"{url}/v1/ocr", files={"file": ("d.pdf", marked_pdf([1, 2, 3, 4, 5, 6]))},
                            headers={"Accept": "application/x-ndjson"}) as r:
            async for _ in r.aiter_lines():
                break  # go away after the first page
    for _ in range(100):
        if fake.admitted == 0:
            break
        await asyncio.sleep(0.05)
    assert fake.admitted == 0
    assert fake.pages_run < 6  # the rest of the document was not processed


async def test_disconnect_stops_a_whole_document_request(server):
    url, fake, core = server
    async with httpx.AsyncClient(timeout=0.7) as c:  # gives up after ~1 page of 0.4 s
        with pytest.raises(httpx.ReadTimeout):
            await c.post(f"{url}/v1/ocr", files={"file": ("d.pdf", marked_pdf(list(range(1, 11))))})
    for _ in range(60):
        if core.inflight == 0 and fake.admitted == 0:
            break
        await asyncio.sleep(0.1)
    assert core.inflight == 0 and fake.admitted == 0
    assert fake.pages_run < 10


async def test_slow_upload_times_out_and_frees_its_slot(server):
    url, fake, core = server
    core.config.limits.upload_timeout_s = 0.5

    async def trickle():
        yield b"%PDF-1.7\n"
        await asyncio.sleep(3)
        yield b"rest"

    async with httpx.AsyncClient(timeout=10) as c:
        r = await c.post(f"{url}/v1/ocr", content=trickle(), headers={"content-type": "application/pdf"})
    assert r.status_code == 408 and "did not finish within 0.5 s" in r.json()["error"]["message"]
    assert fake.admitted == 0


async def test_client_that_leaves_mid_upload_is_an_info_line_and_a_metric(server, caplog):
    """A client closing its connection halfway through the body: no ERROR and no traceback in the
    gateway's log, one ``client_disconnects`` count (phase upload), and the request's slot freed."""
    import logging

    url, fake, core = server
    counted: list[dict] = []
    real_add = core.metrics.client_disconnects.add
    core.metrics.client_disconnects.add = lambda n, attrs=None: (counted.append(dict(attrs or {})), real_add(n, attrs))
    host, port = url.removeprefix("http://").split(":")
    body = b"%PDF-1.7\n" + b"x" * 200_000
    caplog.set_level(logging.INFO)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"POST /v1/ocr HTTP/1.1\r\nHost: x\r\nContent-Type: application/pdf\r\n"
                 + f"Content-Length: {len(body)}\r\n\r\n".encode() + body[:50_000])
    await writer.drain()
    await asyncio.sleep(0.3)
    writer.close()  # gone, 150 kB short
    await writer.wait_closed()
    for _ in range(100):
        if counted:
            break
        await asyncio.sleep(0.05)
    assert counted == [{"phase": "upload"}]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], [r.getMessage() for r in caplog.records]
    assert any("client went away during the upload" in r.getMessage() for r in caplog.records)
    assert fake.admitted == 0 and core.inflight == 0


async def test_ndjson_ends_with_an_error_line_when_the_stack_stops_and_the_cli_prints_it(server, tmp_path, capsys):
    """The decoder hangs after two pages (crash-looping) and the stack is stopped: the gateway's
    drain gives up on the open stream, whose last line says why; ``inkstream ocr`` prints it.
    """
    url, fake, core = server
    fake.delay_s = 0.05
    fake.raise_after = (2, None)  # then every page waits "for ever" (see below)
    doc = tmp_path / "d.pdf"
    doc.write_bytes(marked_pdf([1, 2, 3, 4]))

    async def stop_the_stack_after_two_pages() -> None:
        while fake.pages_run < 2:
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.2)
        await core.drain(0.3)

    stopper = asyncio.create_task(stop_the_stack_after_two_pages())
    rc = await asyncio.to_thread(ocr_cli.main, ["--gateway", url, "--no-progress", "--format", "text", str(doc)])
    await stopper
    err = capsys.readouterr().err
    assert rc == 1
    assert f"the gateway stopped after 2 page(s): UNAVAILABLE: {SHUTDOWN_MESSAGE}" in err, err
    core.draining = False
    core.abandoned.clear()
    fake.pages_run = 0
    stopper = asyncio.create_task(stop_the_stack_after_two_pages())
    async with httpx.AsyncClient(timeout=30) as c:
        async with c.stream("POST", f"{url}/v1/ocr", files={"file": ("d.pdf", marked_pdf([1, 2, 3, 4]))},
                            data={"format": "text"}, headers={"Accept": "application/x-ndjson"}) as r:
            assert r.status_code == 200
            lines = [json.loads(line) async for line in r.aiter_lines() if line]
    await stopper
    assert [ln["page"]["index"] for ln in lines[:-1]] == [1, 2]
    assert lines[-1] == {"error": {"code": "UNAVAILABLE", "reason": "UNAVAILABLE", "retry_after_s": 1.0,
                                   "message": SHUTDOWN_MESSAGE}}
