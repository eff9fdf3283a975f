"""``inkstream`` command line against a real uvicorn gateway on loopback (fake pipeline): --version,
the message of an unreachable gateway, the progress bar's clock, and the "(cached)" summary line."""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import pathlib
import re
import socket
import subprocess
import sys
import time

import httpx
import pytest
import uvicorn

from client import ocr_cli
from gateway.apis.rest import create_app
from gateway.core import GatewayCore
from inkstream import cli
from tests.gateway_api.conftest import FakePipeline, marked_pdf

pytestmark = pytest.mark.timeout(60)

PAGE_DELAY_S = 0.5


@pytest.fixture
async def server(gw_config):
    """(base_url, fake pipeline) of a uvicorn gateway on a free loopback port; each page takes
    :data:`PAGE_DELAY_S` seconds."""
    fake = FakePipeline(delay_s=PAGE_DELAY_S)
    core = GatewayCore(gw_config, fake)
    app = create_app(gw_config, fake, core)
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on"))
    task = asyncio.create_task(srv.serve())
    while not srv.started:
        await asyncio.sleep(0.02)
    port = srv.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}", fake
    srv.should_exit = True
    await task
    await core.close()


def test_version(capsys):
    assert cli.main(["--version"]) == 0
    assert re.fullmatch(r"inkstream \d+\.\d+\.\d+\S*\n", capsys.readouterr().out)


def test_version_of_the_console_script():
    exe = [sys.executable, "-m", "inkstream.cli", "--version"]
    out = subprocess.run(exe, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("inkstream "), out


def test_training_commands_run_from_a_checkouts_root_and_say_where_else(tmp_path):
    """The console script (which puts no working directory on sys.path) finds the repository's
    training package from the checkout's root, and elsewhere says where to run it."""
    script = pathlib.Path(sys.executable).with_name("inkstream")
    assert script.is_file(), script
    root = pathlib.Path(__file__).resolve().parents[2]
    here = subprocess.run([str(script), "train-compact-zh", "--help"], capture_output=True, text=True, timeout=120,
                          cwd=root)
    assert here.returncode == 0 and "--init" in here.stdout, here
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # a PYTHONPATH naming the checkout would find it
    away = subprocess.run([str(script), "train-compact-zh", "--help"], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env=env)
    assert away.returncode == 2 and "repository's root" in away.stderr, away


def test_refused_connection_names_the_url(tmp_path, capsys):
    with socket.socket() as s:  # a port nobody listens on once the socket is closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    doc = tmp_path / "d.pdf"
    doc.write_bytes(marked_pdf([1]))
    url = f"http://127.0.0.1:{port}"
    assert ocr_cli.main([str(doc), "--gateway", url, "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert f"cannot reach the gateway at {url}: connection refused" in err, err
    assert "Errno" not in err


class _NotAGatewayHandler(http.server.BaseHTTPRequestHandler):
    """POST answers what a web server that is not the gateway may: 200 HTML on /ok, else 404 HTML."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        ok = self.server.ok  # type: ignore[attr-defined]
        body = b"<html>hello</html>"
        self.send_response(200 if ok else 404)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.mark.parametrize("what", ["encoder-grpc", "metrics", "web-404", "web-200"])
def test_a_server_that_is_not_a_gateway_is_named_as_such(tmp_path, capsys, what):
    """``--gateway`` pointed at another service's port (an encoder's gRPC port, a replica's /metrics
    port, another web server) says the URL is not an inkstream gateway and where its REST URL is
    printed, exit 1; the metrics port was reported as the gateway refusing the document
    ("HTTP 405: # HTTP 405 Method Not Allowed", exit 2), the encoder's port as "the gateway's gRPC port?".
    """
    import threading
    from concurrent import futures

    import grpc
    from grpc_health.v1 import health, health_pb2_grpc
    from prometheus_client import start_http_server

    doc = tmp_path / "d.pdf"
    doc.write_bytes(marked_pdf([1]))
    stop = None
    if what == "encoder-grpc":
        srv = grpc.server(futures.ThreadPoolExecutor(2))
        health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), srv)
        port = srv.add_insecure_port("127.0.0.1:0")
        srv.start()
        stop = lambda: srv.stop(0)  # noqa: E731
    elif what == "metrics":
        httpd, thread = start_http_server(0, addr="127.0.0.1")
        port = httpd.server_port
        stop = httpd.shutdown
    else:
        web = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotAGatewayHandler)
        web.ok = what == "web-200"  # type: ignore[attr-defined]
        threading.Thread(target=web.serve_forever, daemon=True).start()
        port = web.server_port
        stop = web.shutdown
    try:
        url = f"http://127.0.0.1:{port}"
        for fmt in ("text", "pdf"):
            out = ["-o", str(tmp_path / "o.pdf")] if fmt == "pdf" else []
            rc = ocr_cli.main([str(doc), "--gateway", url, "--format", fmt, *out, "--no-progress"])
            err = capsys.readouterr().err
            assert rc == 1 and f"{url} is not an inkstream gateway" in err and "'inkstream up' prints it" in err, err
            assert "Traceback" not in err
    finally:
        stop()


async def test_progress_clock_starts_when_the_request_is_sent(server, tmp_path, monkeypatch):
    """One page that takes PAGE_DELAY_S: the bar's elapsed time covers it (it used to start when the
    response headers came, i.e. after the page was read: '1/1 ... 694 page/s')."""
    import tqdm

    url, _ = server
    bars: list[dict] = []

    class RecordingBar(tqdm.tqdm):
        def close(self) -> None:
            if not self.disable and not any(b["bar"] is self for b in bars):
                bars.append({"bar": self, "start_t": self.start_t, "elapsed": self._time() - self.start_t,
                             "n": self.n, "total": self.total})
            super().close()

    sent: list[float] = []
    real_send = httpx.Client.send

    def send(self, request, **kw):
        sent.append(time.time())
        return real_send(self, request, **kw)

    monkeypatch.setattr(tqdm, "tqdm", RecordingBar)
    monkeypatch.setattr(httpx.Client, "send", send)
    doc = tmp_path / "one.pdf"
    doc.write_bytes(marked_pdf([1]))
    pages, summary = await asyncio.to_thread(ocr_cli.stream_pages, url, doc, {"format": "text"})
    assert len(pages) == 1 and summary["pages_ok"] == 1
    assert len(bars) == 1 and len(sent) == 1
    bar = bars[0]
    assert bar["start_t"] <= sent[0], "the bar was created after the request was sent"
    assert bar["n"] == 1 and bar["total"] == 1
    assert bar["elapsed"] >= PAGE_DELAY_S * 0.9, bar
    assert bar["n"] / bar["elapsed"] < 1 / (PAGE_DELAY_S * 0.9)  # page/s as the page really took


async def test_progress_line_before_the_page_count_is_known_says_what_it_waits_for(server, tmp_path, capsys):
    """Found in the new-user tryout: until X-Pages-Total came, the bar read "one.pdf: 0page [00:00, ?page/s]".
    Every frame it draws now is either the waiting line or a counted one ("n/total")."""
    url, _ = server
    doc = tmp_path / "two.pdf"
    doc.write_bytes(marked_pdf([1, 2]))
    pages, _ = await asyncio.to_thread(ocr_cli.stream_pages, url, doc, {"format": "text"}, progress=True)
    assert len(pages) == 2
    frames = [f.strip() for f in re.split(r"[\r\n]", capsys.readouterr().err) if f.strip()]
    frames = [re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", f).strip() for f in frames]
    frames = [f for f in frames if f]
    assert frames, "no progress line was drawn"
    assert frames[0] == "two.pdf: waiting for the first page [00:00]", frames
    assert not any("0page" in f or "?page" in f for f in frames), frames
    assert all(f.startswith("two.pdf: waiting") or re.search(r"\b[0-2]/2\b", f) for f in frames), frames
    assert re.search(r"\b2/2\b.* page/s", frames[-1]), frames


async def test_a_refused_document_is_reported_with_its_reason(server, tmp_path, capsys):
    # Found in the new-user tryout: a zero-page PDF (HTTP 422) printed "INVALID_ARGUMENT: the document has
    # no pages", the code shared with every 400; the gateway's reason says which refusal it was.
    import pikepdf

    url, _ = server
    doc = tmp_path / "zero.pdf"
    pikepdf.new().save(doc)
    assert await asyncio.to_thread(ocr_cli.main, [str(doc), "--gateway", url, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "inkstream ocr: NOTHING_TO_READ: the document has no pages" in err, err


async def test_cached_answer_says_so(server, tmp_path, capsys):
    url, fake = server
    doc = tmp_path / "two.pdf"
    doc.write_bytes(marked_pdf([1, 2]))
    out = tmp_path / "out.json"
    args = [str(doc), "--gateway", url, "--no-progress", "--format", "json", "-o", str(out)]
    assert await asyncio.to_thread(ocr_cli.main, args) == 0
    first = capsys.readouterr().err.strip().splitlines()[-1]
    assert "2/2 pages read" in first and "(cached)" not in first, first
    assert json.loads(out.read_text())["cached"] is False
    assert await asyncio.to_thread(ocr_cli.main, args) == 0
    second = capsys.readouterr().err.strip().splitlines()[-1]
    assert "2/2 pages read" in second and second.endswith("(cached)"), second
    assert json.loads(out.read_text())["cached"] is True
    assert fake.pages_run == 2  # the second answer came from the cache


async def test_output_extension_picks_the_format(server, tmp_path, capsys):
    """``-o out.pdf`` writes a searchable PDF (the pages are read once: the PDF comes from the cache),
    ``-o out.hocr`` hOCR; pdf without -o is refused."""
    import pikepdf

    url, fake = server
    doc = tmp_path / "three.pdf"
    doc.write_bytes(marked_pdf([1, 2, 3]))
    out = tmp_path / "out.pdf"
    assert await asyncio.to_thread(ocr_cli.main, [str(doc), "--gateway", url, "--no-progress", "-o", str(out)]) == 0
    with pikepdf.open(out) as pdf:
        assert len(pdf.pages) == 3
    assert fake.pages_run == 3
    hocr = tmp_path / "out.hocr"
    assert await asyncio.to_thread(ocr_cli.main, [str(doc), "--gateway", url, "--no-progress", "-o", str(hocr)]) == 0
    assert hocr.read_text().count("class='ocr_page'") == 3
    capsys.readouterr()
    assert ocr_cli.main([str(doc), "--gateway", url, "--format", "pdf"]) == 2
    assert "-o OUT.pdf" in capsys.readouterr().err
    # Found by tryout9: -o out.docx wrote markdown with nothing said; the name's extension is now
    # named as no format's on stderr (still written: -o with no extension, or --format, says nothing).
    for name, said in (("out.docx", True), ("out", False)):
        dest = tmp_path / name
        args = [str(doc), "--gateway", url, "--no-progress", "-o", str(dest)]
        assert await asyncio.to_thread(ocr_cli.main, args) == 0
        err = capsys.readouterr().err
        assert ("'.docx' is no output format's extension" in err and "writing markdown" in err) == said, err
        assert dest.read_text().startswith("<!-- page 1 -->")
    dest = tmp_path / "out.docx"
    assert await asyncio.to_thread(ocr_cli.main, [str(doc), "--gateway", url, "--no-progress", "-o", str(dest),
                                                  "--format", "text"]) == 0
    assert "no output format" not in capsys.readouterr().err


def test_a_temporary_stack_gives_a_synchronous_request_as_long_as_the_command_waits(monkeypatch):
    # Without it the fresh stack's gateway would refuse a long document at its encoder's warm-up rate
    # against the default 600 s, though this command waits --timeout (3600 s) and nothing else uses the stack.
    import launcher.local_stack

    seen: list[dict] = []

    class Recording:
        gateway_url = "http://127.0.0.1:1"

        def __init__(self, model, *, env=None):
            seen.append(dict(env or {}))

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

    monkeypatch.setattr(launcher.local_stack, "LocalStack", Recording)
    monkeypatch.delenv("INKSTREAM_GATEWAY__REQUEST_TIMEOUT_S", raising=False)
    with ocr_cli._gateway(None, "model", 1234.5) as url:
        assert url == Recording.gateway_url
    monkeypatch.setenv("INKSTREAM_GATEWAY__REQUEST_TIMEOUT_S", "60")  # the user's own setting wins
    with ocr_cli._gateway(None, "model", 1234.5):
        pass
    assert seen == [{"INKSTREAM_GATEWAY__REQUEST_TIMEOUT_S": "1234.5"}, {}]


@pytest.mark.parametrize(("content", "reason", "words"), [
    (b"# notes\njust text, not a scan\n", "UNSUPPORTED_MEDIA_TYPE", "unsupported file type"),
    (b"", "INVALID_ARGUMENT", "empty"),
])
def test_a_file_no_stack_could_read_is_refused_before_a_temporary_stack_starts(monkeypatch, tmp_path, capsys,
                                                                              content, reason, words):
    # Before: `inkstream ocr notes.md` started an encoder, a decoder and a gateway (30-40 s on a
    # loaded 2-core machine) only for the gateway to answer 415; the type is known from the first bytes.
    import launcher.local_stack

    class NoStack:
        def __init__(self, *a, **k):
            raise AssertionError("a temporary stack was started for a file no stack reads")

    monkeypatch.setattr(launcher.local_stack, "LocalStack", NoStack)
    doc = tmp_path / "notes.md"
    doc.write_bytes(content)
    assert ocr_cli.main([str(doc), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"{reason}: " in err and words in err and "starting a temporary local stack" not in err


def test_a_model_folder_that_is_not_a_checkpoint_exits_2_before_a_stack_starts(tmp_path, capsys, monkeypatch):
    """``--model`` of a missing folder was reported after the temporary stack's start message, exit 1
    (a failed request); it is a bad argument: exit 2, nothing started.
    """
    import launcher.local_stack

    monkeypatch.setattr(launcher.local_stack, "LocalStack", None)  # nothing may be started
    doc = tmp_path / "d.pdf"
    doc.write_bytes(marked_pdf([1]))
    assert ocr_cli.main([str(doc), "--model", str(tmp_path / "missing"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"--model {tmp_path / 'missing'}: no such directory" in err and "starting" not in err, err


@pytest.mark.parametrize("fmt", ["text", "pdf"])
async def test_an_output_that_cannot_be_written_is_refused_before_the_pages_are_read(server, tmp_path, capsys, fmt):
    """``-o`` into a missing folder or onto a directory: exit 2 before anything is sent; it was a
    FileNotFoundError / IsADirectoryError traceback (exit 1) once every page had been read. A
    directory as FILE says so rather than "no such file".
    """
    url, fake = server
    doc = tmp_path / "d.pdf"
    doc.write_bytes(marked_pdf([1]))
    for out, says in ((tmp_path / "missing" / f"o.{fmt}", f"no such folder {tmp_path / 'missing'}"),
                      (tmp_path, "is a directory; give a file name")):
        argv = [str(doc), "--gateway", url, "--format", fmt, "-o", str(out), "--no-progress"]
        assert await asyncio.to_thread(ocr_cli.main, argv) == 2
        err = capsys.readouterr().err
        assert says in err and "Traceback" not in err, err
    assert fake.pages_run == 0
    assert await asyncio.to_thread(ocr_cli.main, [str(tmp_path), "--gateway", url]) == 2
    assert "is a directory, not a document" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["0", "-1", "nan", "soon"])
def test_a_timeout_that_is_not_a_positive_number_of_seconds_exits_2(tmp_path, capsys, value):
    """``--timeout -1`` was a ValueError traceback from the socket layer, ``--timeout 0`` "[Errno 11]
    Resource temporarily unavailable" (exit 1), both after the document was sent.
    """
    doc = tmp_path / "d.pdf"
    doc.write_bytes(marked_pdf([1]))
    assert ocr_cli.main([str(doc), "--gateway", "http://127.0.0.1:1", "--timeout", value]) == 2
    err = capsys.readouterr().err
    assert "argument --timeout" in err and "number of seconds" in err and "Traceback" not in err, err


async def test_a_document_whose_every_page_failed_says_why_in_one_line(server, tmp_path, capsys):
    """Found by tryout7: every page failing (replicas down) printed a document of error placeholders, a
    line per page and "0/2 pages read", and exited 3 ("some pages failed"). Now nothing is written,
    one stderr line gives the error a job of the document has, and the exit code is that answer's:
    1 for a transient cause (UNAVAILABLE), 2 for pages the gateway cannot read (NOTHING_TO_READ)."""
    import io

    from PIL import Image

    url, fake = server
    fake.fail = {1, 2}
    doc = tmp_path / "two.pdf"
    doc.write_bytes(marked_pdf([1, 2]))
    out = tmp_path / "out.txt"
    for args in ([], ["-o", str(out)]):
        rc = await asyncio.to_thread(ocr_cli.main, [str(doc), "--gateway", url, "--no-progress", *args])
        cap = capsys.readouterr()
        assert rc == 1, (rc, cap.err)
        assert cap.out == "" and not out.exists()
        assert cap.err.splitlines() == ["inkstream ocr: UNAVAILABLE: no page could be read (2 of 2 failed): "
                                        "pages 1-2: UNAVAILABLE: no decoder replica answered"], cap.err
    tiny = Image.new("L", (4, 4), 255)
    buf = io.BytesIO()
    tiny.save(buf, "TIFF", save_all=True, append_images=[tiny])
    small = tmp_path / "small.tiff"
    small.write_bytes(buf.getvalue())
    rc = await asyncio.to_thread(ocr_cli.main, [str(small), "--gateway", url, "--no-progress"])
    err = capsys.readouterr().err.splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("inkstream ocr: NOTHING_TO_READ: no page could be read "
                                                           "(2 of 2 failed): pages 1-2: "), (rc, err)
