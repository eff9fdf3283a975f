"""Slow clients on a real uvicorn server (the gateway's protocol, gateway.apis.header_deadline): a
client sending its headers one byte a second is answered 408 and cut within the documented
``limits.header_timeout_s``, while normal clients are served meanwhile and keep-alive reuse works.
"""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
import uvicorn

from gateway.apis.header_deadline import header_deadline_protocol
from gateway.apis.rest import create_app
from gateway.core import GatewayCore
from tests.gateway_api.conftest import FakePipeline, marked_pdf

pytestmark = pytest.mark.timeout(60)
HEADER_TIMEOUT_S = 2.0


@pytest.fixture
async def server(gw_config):
    fake = FakePipeline()
    gw_config.limits.header_timeout_s = HEADER_TIMEOUT_S
    core = GatewayCore(gw_config, fake)
    app = create_app(gw_config, fake, core)
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on",
                                        http=header_deadline_protocol(gw_config.limits.header_timeout_s)))
    task = asyncio.create_task(srv.serve())
    while not srv.started:
        await asyncio.sleep(0.02)
    yield srv.servers[0].sockets[0].getsockname()[1]
    srv.should_exit = True
    await task
    await core.close()


async def trickle(port: int, data: bytes) -> tuple[float, bytes]:
    """Send ``data`` one byte a second; (seconds until the server closed, what it answered)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    t0 = time.monotonic()
    answer = b""
    try:
        for b in data:
            writer.write(bytes([b]))
            await writer.drain()
            try:
                answer += await asyncio.wait_for(reader.read(4096), 1.0)
            except TimeoutError:
                continue
            if reader.at_eof() or answer:
                break
        answer += await asyncio.wait_for(reader.read(), 5.0)
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()
    return time.monotonic() - t0, answer


async def test_a_one_byte_per_second_client_is_cut_while_others_are_served(server):
    port = server
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Padding: " + b"a" * 60 + b"\r\n\r\n"
    slow = asyncio.create_task(trickle(port, head))
    served = 0
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as c:
        while not slow.done():
            r = await c.get("/healthz")  # one keep-alive connection, reused
            assert r.status_code == 200
            served += 1
            await asyncio.sleep(0.2)
        r = await c.post("/v1/ocr", files={"file": ("d.pdf", marked_pdf([1]))}, data={"format": "text"})
        assert r.status_code == 200
    took, answer = await slow
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert HEADER_TIMEOUT_S - 0.5 <= took <= HEADER_TIMEOUT_S + 1.5, took
    assert served >= 5


async def test_a_slow_head_on_a_reused_connection_is_cut_too(server):
    port = server
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    await writer.drain()
    first = await asyncio.wait_for(reader.readuntil(b'"ok"}'), 5.0)
    assert first.startswith(b"HTTP/1.1 200")
    t0 = time.monotonic()
    writer.write(b"GET /hea")  # then nothing more: the second head never completes
    await writer.drain()
    rest = await asyncio.wait_for(reader.read(), HEADER_TIMEOUT_S + 3)
    assert rest.startswith(b"HTTP/1.1 408 ") and time.monotonic() - t0 <= HEADER_TIMEOUT_S + 1.5
    writer.close()
