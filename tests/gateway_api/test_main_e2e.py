"""``inkstream serve gateway`` as a real process with the real Pipeline, in front of fake encoder /
decoder gRPC replicas (tests/gateway_pipeline/fakes.py, whose text is derived from each page image);
``inkstream ocr --gateway`` and the gRPC client against it; SIGTERM drains and exits 0."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import httpx
import pytest

from client import ocr_cli
from client.gateway_client import GatewayClient
from gateway.ingest import UploadSink, close_document, open_document
from inkstream.parent_death import PARENT_PID_ENV
from launcher.local_stack import free_port
from tests.gateway_api.conftest import marked_pdf
from tests.gateway_api.test_slow_clients import trickle
from tests.gateway_pipeline.fakes import FakeDecoder, FakeEncoder, expected_page_text, start_server

pytestmark = [pytest.mark.timeout(120), pytest.mark.integration]


async def rendered_pages(path, long_side: int) -> list[bytes]:
    """The PNG bytes the gateway sends for each page (same ingest code, same settings)."""
    sink = UploadSink(path.parent, 1 << 30, name="copy")
    sink.write(path.read_bytes())
    doc = await open_document(sink.finish(), long_side_px=long_side, max_pixels=50_000_000, max_pages=100)
    loop = asyncio.get_running_loop()
    pages = [(await loop.run_in_executor(doc.executor, doc.render, i)).image for i in range(doc.page_count)]
    await close_document(doc)
    return pages


HEADER_TIMEOUT_S = 3.0


@contextlib.asynccontextmanager
async def running_gateway(tmp_path: pathlib.Path, enc: FakeEncoder, dec: FakeDecoder, **env_settings: str):
    """``inkstream serve gateway`` as a process in front of ``enc`` and ``dec`` (served here), ready;
    yields (REST URL, gRPC address, process). ``env_settings``: more environment variables.
    """
    (es, eaddr), (ds, daddr) = await start_server(enc, "encoder"), await start_server(dec, "decoder")
    port, gport = free_port(), free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "INKSTREAM_LOG_FORMAT": "text",
           "INKSTREAM_GATEWAY__STORES__DATA_DIR": str(tmp_path / "data"),
           "INKSTREAM_GATEWAY__LIMITS__HEADER_TIMEOUT_S": str(HEADER_TIMEOUT_S),
           PARENT_PID_ENV: str(os.getpid()), **env_settings}  # it dies with this test run, however that ends
    env.pop("INKSTREAM_API_KEYS", None)
    env.pop("INKSTREAM_API_KEYS_FILE", None)
    log = open(tmp_path / "gateway.log", "wb")  # noqa: SIM115 - the child's output; closed in the finally below
    proc = subprocess.Popen([sys.executable, "-m", "inkstream.cli", "serve", "gateway", "--encoders", eaddr,
                             "--decoders", daddr, "--port", str(port), "--grpc-port", str(gport)],
                            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=os.getcwd())
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient() as c:
            for _ in range(600):
                assert proc.poll() is None, (tmp_path / "gateway.log").read_text()
                try:
                    if (await c.get(f"{url}/readyz")).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.1)
            else:
                raise AssertionError("gateway not ready:\n" + (tmp_path / "gateway.log").read_text())
        yield url, f"127.0.0.1:{gport}", proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        log.close()
        await es.stop(None)
        await ds.stop(None)


@pytest.fixture
async def gateway_proc(tmp_path):
    dec = FakeDecoder()
    async with running_gateway(tmp_path, FakeEncoder(), dec) as (url, grpc_addr, proc):
        yield url, grpc_addr, proc, dec


async def test_cli_and_grpc_through_real_pipeline(gateway_proc, tmp_path, capsys):
    url, grpc_addr, proc, _ = gateway_proc
    pdf = tmp_path / "doc.pdf"
    pdf.write_bytes(marked_pdf([1, 2, 3]))
    expected = [expected_page_text(png) for png in await rendered_pages(pdf, 1024)]
    assert len(set(expected)) == 3  # pages differ, so order / duplication errors show

    out = tmp_path / "out.json"
    rc = await asyncio.to_thread(ocr_cli.main, [str(pdf), "--gateway", url, "--format", "json", "-o", str(out),
                                                "--no-progress"])
    assert rc == 0
    doc = json.loads(out.read_text())
    assert doc["model_id"] == "fake/encoder"
    assert [p["text"] for p in doc["pages"]] == expected
    assert all(p["status"] == "ok" and p["blocks"] for p in doc["pages"])

    def via_grpc():
        with GatewayClient(grpc_addr, timeout_s=30) as c:
            return c.recognize(pdf, format="text", pages="2-3")

    res = await asyncio.to_thread(via_grpc)
    assert [p.text for p in res.pages] == expected[1:]

    rc = await asyncio.to_thread(ocr_cli.main, [str(tmp_path / "missing.pdf"), "--gateway", url])
    assert rc == 2
    bad = tmp_path / "bad.pdf"
    bad.write_bytes(b"%PDF-1.4 broken")
    rc = await asyncio.to_thread(ocr_cli.main, [str(bad), "--gateway", url, "--no-progress"])
    assert rc == 2  # the gateway refused the file itself (400): the caller's input, like a bad argument
    rc = await asyncio.to_thread(ocr_cli.main, [str(pdf), "--gateway", url, "--no-progress", "--pages", "7"])
    assert rc == 2 and "page" in capsys.readouterr().err
    rc = await asyncio.to_thread(ocr_cli.main, [str(pdf), "--gateway", url.removeprefix("http://"), "--no-progress"])
    assert rc == 2 and "with its scheme" in capsys.readouterr().err
    rc = await asyncio.to_thread(ocr_cli.main, [str(pdf), "--gateway", f"http://{grpc_addr}", "--no-progress"])
    assert rc == 1 and "gRPC port" in capsys.readouterr().err

    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    rc = await asyncio.to_thread(proc.wait, 30)
    assert rc == 0 and time.monotonic() - t0 < 20


def test_bad_command_lines():
    from gateway import main as gw_main

    assert gw_main.main(["--encoders", "127.0.0.1:1"]) == 2  # no decoders
    assert gw_main.main(["--help"]) == 0
    assert ocr_cli.main(["--format", "docx", "x.pdf"]) == 2


async def test_sigterm_drains_in_flight_request(gateway_proc, tmp_path):
    url, _, proc, dec = gateway_proc
    dec.delay_s = 1.0  # every Decode call takes >= 1 s: 12 pages in windows of 8 take >= 2 s
    pdf = marked_pdf(list(range(1, 13)))
    async with httpx.AsyncClient(timeout=60) as c:
        req = asyncio.ensure_future(c.post(f"{url}/v1/ocr", files={"file": ("d.pdf", pdf)}, data={"format": "json"}))
        await asyncio.sleep(0.3)
        assert not req.done()
        proc.send_signal(signal.SIGTERM)
        await asyncio.sleep(0.2)
        ready = await c.get(f"{url}/readyz")
        refused = await c.post(f"{url}/v1/ocr", files={"file": ("d.pdf", marked_pdf([1]))})
        r = await req
    assert ready.status_code == 503 and ready.json()["reason"] == "draining"
    assert refused.status_code == 503 and refused.headers.get("retry-after") == "1"
    assert r.status_code == 200 and r.json()["pages_ok"] == 12
    assert await asyncio.to_thread(proc.wait, 30) == 0


@pytest.mark.slow
@pytest.mark.system
@pytest.mark.timeout(600)
def test_ocr_cli_with_temporary_local_stack(tmp_path):
    """The README's main job: ``inkstream ocr samples/scotus_p01.pdf`` without --gateway starts real
    encoder, decoder and gateway processes on the embedded default model, and the page is read."""
    from rapidfuzz.distance import Levenshtein

    repo = pathlib.Path(__file__).resolve().parents[2]
    pdf = repo / "samples" / "scotus_p01.pdf"
    out = tmp_path / "out.json"
    proc = subprocess.run([sys.executable, "-m", "inkstream.cli", "ocr", str(pdf), "--format", "json", "-o", str(out),
                           "--no-progress"], capture_output=True, text=True, timeout=580,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["model_id"] == "inkstream-compact"
    assert [p["index"] for p in doc["pages"]] == [1]
    page = doc["pages"][0]
    assert page["status"] == "ok" and page["vision_tokens"] > 0 and len(page["blocks"]) > 10, page
    truth = " ".join((repo / "samples" / "scotus_p01.gt.txt").read_text().split())
    cer = Levenshtein.normalized_distance(" ".join(page["text"].split()), truth)
    assert cer < 0.35, f"CER {cer:.3f} on the sample page"  # measured 0.18 (model card)
    assert "1/1 pages read" in proc.stderr


async def test_served_gateway_cuts_a_slow_header_client(gateway_proc):
    """``inkstream serve gateway`` runs uvicorn with the request-head deadline (limits.header_timeout_s)."""
    url, _, _, _ = gateway_proc
    port = int(url.rsplit(":", 1)[1])
    slow = asyncio.create_task(trickle(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 40 + b"\r\n\r\n"))
    async with httpx.AsyncClient(timeout=10) as c:
        while not slow.done():
            assert (await c.get(f"{url}/healthz")).status_code == 200
            await asyncio.sleep(0.3)
    took, answer = await slow
    assert answer.startswith(b"HTTP/1.1 408 ") and took <= HEADER_TIMEOUT_S + 1.5, (took, answer)
