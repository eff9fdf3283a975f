"""System tests (real processes on loopback, ``launcher.local_stack.LocalStack``) of operations:

* one OCR request produces spans from the gateway, the encoder and the decoder, all in one trace and
  carrying one request id (every process appends spans to ``INKSTREAM_TRACES_FILE``);
* no log line of the whole run (start, request, drain) contains the page's text or the upload's
  file name;
* every metric an HPA / prometheus-adapter rule names is exported by the corresponding running
  service's ``/metrics`` (and no metric family is exported twice, which Prometheus would reject);
* with API keys configured, the running gateway refuses requests without a valid key (REST 401,
  gRPC UNAUTHENTICATED) while probes and metrics stay open;
* SIGTERM to a decoder holding in-flight pages, with a second decoder up: every page of every
  in-flight document completes, and the drained replica reported NOT_SERVING before it stopped.
"""

from __future__ import annotations

import io
import json
import pathlib
import re
import signal
import threading
import time

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from PIL import Image, ImageDraw, ImageFont

pytestmark = [pytest.mark.slow, pytest.mark.system]

PAGE_LINES = ("Quartz zebra 4711 jumps", "over the marmalade fjord")
API_KEY = "ops-test-key-0123456789abcdef"
UPLOAD_NAME = "secret-merger-plan-ACME.png"


def page_png(lines=PAGE_LINES, size=(900, 300)) -> bytes:
    """A white page with dark printed lines (DejaVu Sans when installed, else Pillow's default font)."""
    im = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(im)
    try:
        font = ImageFont.truetype("DejaVuSans.ttf", 36)
    except OSError:
        font = ImageFont.load_default(size=36)
    for i, line in enumerate(lines):
        draw.text((40, 40 + 80 * i), line, fill="black", font=font)
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    return buf.getvalue()


def multipage_pdf(n_pages: int, lines_per_page: int = 4) -> bytes:
    """An ``n_pages`` PDF of text lines (rasterised pages saved by Pillow)."""
    pages = []
    for p in range(n_pages):
        lines = [f"Page {p + 1} line {j + 1} of the drain test" for j in range(lines_per_page)]
        pages.append(Image.open(io.BytesIO(page_png(lines, size=(1000, 120 + 80 * lines_per_page)))).convert("RGB"))
    buf = io.BytesIO()
    pages[0].save(buf, format="PDF", save_all=True, append_images=pages[1:], resolution=100)
    return buf.getvalue()


def ocr(url: str, data: bytes, filename: str, content_type: str, request_id: str | None = None,
        timeout_s: float = 150.0, api_key: str | None = None) -> httpx.Response:
    headers = {"x-request-id": request_id} if request_id else {}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    return httpx.post(f"{url}/v1/ocr", files={"file": (filename, data, content_type)}, data={"format": "json"},
                      headers=headers, timeout=timeout_s)


def _pages_of(resp: httpx.Response) -> list[dict]:
    body = resp.json()
    return body["pages"] if isinstance(body, dict) and "pages" in body else body["document"]["pages"]


@pytest.fixture(scope="module")
def traced_stack(tmp_path_factory):
    from launcher.local_stack import LocalStack

    d = tmp_path_factory.mktemp("ops-stack")
    spans = d / "spans.jsonl"
    stack = LocalStack(env={"INKSTREAM_TRACES_FILE": str(spans), "INKSTREAM_LOG_LEVEL": "DEBUG",
                            "INKSTREAM_API_KEYS": API_KEY},
                       log_dir=d / "logs", startup_timeout_s=240)
    stack.start()
    try:
        yield stack, spans
    finally:
        stack.close()


@pytest.fixture(scope="module")
def one_request(traced_stack):
    stack, _ = traced_stack
    resp = ocr(stack.gateway_url, page_png(), UPLOAD_NAME, "image/png", request_id="ops-trace-0001", api_key=API_KEY)
    assert resp.status_code == 200, resp.text[:500]
    return resp


@pytest.mark.timeout(400)
def test_one_request_one_trace_across_services(traced_stack, one_request):
    """The request's HTTP span (request id = the client's ``X-Request-Id``) and the encoder's and
    decoder's SERVER spans are in one trace; the model services all see one request id, which is
    the client's id (the gateway may append a ``.suffix`` that makes it unique per run)."""
    stack, spans_file = traced_stack
    assert one_request.headers.get("x-request-id") == "ops-trace-0001"
    wanted = {"inkstream-gateway", "inkstream-encoder", "inkstream-decoder"}
    deadline = time.monotonic() + 10
    while True:  # spans of a streaming call end just after the response
        spans = [json.loads(x) for x in spans_file.read_text().splitlines()] if spans_file.exists() else []
        roots = [s for s in spans if s["kind"] == "SERVER" and s["service"] == "inkstream-gateway"
                 and s["attributes"].get("inkstream.request_id") == "ops-trace-0001"]
        trace_ids = {s["trace_id"] for s in roots}
        mine = [s for s in spans if s["trace_id"] in trace_ids]
        services = {s["service"] for s in mine}
        if wanted <= services or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert len(roots) == 1, roots
    assert wanted <= services, services
    assert len({s["trace_id"] for s in mine}) == 1, "one request must be one trace"
    by_id = {s["span_id"]: s for s in spans}
    model_spans = [s for s in mine
                   if s["service"] in ("inkstream-encoder", "inkstream-decoder") and s["kind"] == "SERVER"]
    assert {s["service"] for s in model_spans} == {"inkstream-encoder", "inkstream-decoder"}
    for s in model_spans:
        parent = by_id.get(s["parent_span_id"])  # a gateway span (its CLIENT span or its page span)
        assert parent is not None and parent["service"] == "inkstream-gateway", s
    rids = {s["attributes"].get("inkstream.request_id") for s in model_spans}
    assert len(rids) == 1, rids
    (rid,) = rids
    assert rid == "ops-trace-0001" or rid.startswith("ops-trace-0001."), rid
    assert len({s["pid"] for s in mine}) >= 3


@pytest.mark.timeout(400)
def test_hpa_metrics_exported_by_running_services(traced_stack, one_request):
    from tests.ops.test_k8s import K8S, adapter_rules, hpa_metric_names, render

    stack, _ = traced_stack
    objs = render(K8S / "overlays" / "cpu")
    wanted = hpa_metric_names(objs)
    rule_series = {re.match(r"^(\w+)\{", r["seriesQuery"]).group(1) for r in adapter_rules(objs)}

    def names(text: str) -> set[str]:
        return {re.split(r"[{ ]", line, maxsplit=1)[0] for line in text.splitlines()
                if line and not line.startswith("#")}

    texts = {
        "encoder": httpx.get(f"http://127.0.0.1:{stack.metrics_ports['encoder'][0]}/metrics", timeout=30).text,
        "decoder": httpx.get(f"http://127.0.0.1:{stack.metrics_ports['decoder'][0]}/metrics", timeout=30).text,
        "gateway": httpx.get(f"{stack.gateway_url}/metrics", timeout=30).text,
    }
    exported = {stage: names(text) for stage, text in texts.items()}
    for stage, metric_names in wanted.items():
        missing = metric_names - exported[stage]
        assert not missing, f"{stage} does not export {missing}"
    for series in rule_series:
        stage = series.split("_")[1]
        assert series in exported[stage], f"adapter rule series {series} not exported by {stage}"
    for stage in ("encoder", "decoder", "gateway"):
        assert {"inkstream_device_memory_used_bytes", "inkstream_device_memory_peak_bytes"} <= exported[stage], stage
    # Every inkstream metric family a running service exports is documented (names and units).
    doc = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "metrics.md").read_text()
    families = {re.sub(r"_(bucket|sum|count)$", "", n) for names_ in exported.values() for n in names_
                if n.startswith("inkstream_")}
    undocumented = sorted(f for f in families if f"`{f}`" not in doc)
    assert not undocumented, f"exported but not in docs/metrics.md: {undocumented}"
    for stage, text in texts.items():
        # Prometheus rejects a whole scrape with a second "# TYPE" line for one name (two instruments
        # exported under the same name), and the HPA would then see no metrics at all.
        types = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")]
        dupes = sorted({t for t in types if types.count(t) > 1})
        assert not dupes, f"{stage} exports these metric families twice: {dupes}"


@pytest.mark.timeout(400)
def test_gateway_requires_api_key(traced_stack, one_request):
    """With keys configured, the running gateway answers 401 (REST) / UNAUTHENTICATED (gRPC) without
    a valid key, never echoing it, while probes and metrics stay open."""
    from inkstream.pb import gateway_pb2, gateway_pb2_grpc

    stack, _ = traced_stack
    for key in (None, "wrong-key-0123456789abcdef"):
        r = ocr(stack.gateway_url, page_png(), "x.png", "image/png", api_key=key, timeout_s=30)
        assert r.status_code == 401 and r.json()["error"]["code"] == "UNAUTHENTICATED"
        assert "wrong-key" not in r.text
    assert httpx.get(f"{stack.gateway_url}/readyz", timeout=10).status_code == 200
    assert httpx.get(f"{stack.gateway_url}/metrics", timeout=30).status_code == 200
    with grpc.insecure_channel(stack.gateway_grpc_addr) as ch:
        stub = gateway_pb2_grpc.OcrGatewayStub(ch)
        with pytest.raises(grpc.RpcError) as err:
            stub.GetJob(gateway_pb2.JobRef(job_id="nope"), timeout=10)
        assert err.value.code() is grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(grpc.RpcError) as err:
            stub.GetJob(gateway_pb2.JobRef(job_id="nope"), timeout=10, metadata=(("x-api-key", API_KEY),))
        assert err.value.code() is grpc.StatusCode.NOT_FOUND  # authenticated: the job just does not exist


@pytest.mark.timeout(400)
def test_logs_never_contain_page_text_or_file_name(traced_stack, one_request):
    """Runs last of the traced-stack tests: it stops the stack to include the drain's log lines."""
    stack, _ = traced_stack
    text = "\n".join(p.get("text", "") for p in _pages_of(one_request))
    # Options may come as query parameters; the PDF password must not reach the access log.
    httpx.post(f"{stack.gateway_url}/v1/ocr?format=text&password=hunter2-secret-pw",
               files={"file": ("p.png", page_png(), "image/png")},
               headers={"authorization": f"Bearer {API_KEY}"}, timeout=120)
    stack.stop()  # include start-up, request and drain log lines
    logs = "\n".join(p.read_text(errors="replace") for p in sorted(stack.log_dir.glob("*.log")))
    assert logs.strip(), "no log output captured"
    forbidden = {UPLOAD_NAME, UPLOAD_NAME.rsplit(".", 1)[0], *PAGE_LINES, "hunter2-secret-pw", API_KEY}
    forbidden |= {line.strip() for line in text.splitlines() if len(line.strip()) >= 12}
    for needle in forbidden:
        assert needle not in logs, f"log output contains {needle!r}"


def _watch_health(addr: str, events: list, timeout_s: float) -> None:
    """Record ``(monotonic time, status)`` from a ``grpc.health.v1.Health/Watch`` stream until it ends
    (the last event is ``(time, "end:<code>")``)."""
    with grpc.insecure_channel(addr) as ch:
        try:
            watch = health_pb2_grpc.HealthStub(ch).Watch(health_pb2.HealthCheckRequest(service=""), timeout=timeout_s)
            for resp in watch:
                events.append((time.monotonic(), resp.status))
        except grpc.RpcError as exc:
            events.append((time.monotonic(), f"end:{exc.code().name}"))


def _decoder_figures(stack, i: int) -> dict[str, float] | None:
    """Running sequences, generated tokens and cancelled sequences of decoder ``i`` (None if down)."""
    try:
        m = stack.metrics("decoder", i)
    except httpx.HTTPError:
        return None

    if not any(k.startswith("inkstream_decoder_generated_tokens_total") for k in m):
        return None  # an exposition without the decoder's series (not a figure of zero)

    def total(prefix: str, label: str = "") -> float:
        return sum(v for k, v in m.items() if k.startswith(prefix) and label in k)

    return {"running": total("inkstream_decoder_sequences_running"),
            "tokens": total("inkstream_decoder_generated_tokens_total"),
            "cancelled": total("inkstream_decoder_sequences_finished_total", 'reason="cancelled"')}


# Decoder settings that make every sequence of the tiny random checkpoint run ~300 tokens (its
# greedy output loops at once; a 300-gram must repeat before the loop guard stops it), so that
# pages are still in flight when SIGTERM arrives.
SLOW_DECODE_ENV = {
    "INKSTREAM_DECODER__MAX_NEW_TOKENS": "400",
    "INKSTREAM_DECODER__REPETITION_NGRAM": "300",
    "INKSTREAM_DECODER__REPETITION_REPEATS": "2",
    "INKSTREAM_DECODER__REPETITION_WINDOW": "600",
}


@pytest.mark.timeout(180)
def test_sigterm_drains_decoder_without_losing_pages(tmp_path, tiny_ds_checkpoint):
    from launcher.local_stack import LocalStack

    n_docs, n_pages = 2, 3
    SERVING, NOT_SERVING = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING
    # The tiny random checkpoint (its greedy output loops, see SLOW_DECODE_ENV), not the embedded
    # model, whose short lines finish too fast to be caught in flight.
    with LocalStack(tiny_ds_checkpoint, decoders=2, env=SLOW_DECODE_ENV, log_dir=tmp_path / "logs",
                    startup_timeout_s=100) as stack:
        target, proc = stack.decoder_addrs[0], stack.procs["decoder"][0]
        events: list[tuple[float, object]] = []
        watcher = threading.Thread(target=_watch_health, args=(target, events, 170), daemon=True)
        watcher.start()
        results: list[httpx.Response | BaseException] = []

        def send(k: int) -> None:
            try:
                results.append(ocr(stack.gateway_url, multipage_pdf(n_pages), f"doc{k}.pdf", "application/pdf",
                                   timeout_s=150))
            except BaseException as exc:  # noqa: BLE001 - reported by the assertions below
                results.append(exc)

        senders = [threading.Thread(target=send, args=(k,)) for k in range(n_docs)]
        for t in senders:
            t.start()
        deadline = time.monotonic() + 60
        while True:
            at_term = _decoder_figures(stack, 0)
            if at_term and at_term["running"] >= 1:
                break
            assert time.monotonic() < deadline, "decoder 0 never held a sequence"
            time.sleep(0.02)
        t_term = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        last = at_term
        while proc.poll() is None:  # its /metrics answers until the process exits
            last = _decoder_figures(stack, 0) or last
            time.sleep(0.05)
        proc.wait(timeout=120)
        t_exit = time.monotonic()
        watcher.join(timeout=10)
        for t in senders:
            t.join(timeout=150)

        # Health: SERVING before SIGTERM, NOT_SERVING after it while the process was still up, never
        # SERVING again, then the stream ended when the server stopped.
        statuses = [st for _, st in events]
        assert statuses[0] == SERVING, events
        assert NOT_SERVING in statuses, events
        i_not = statuses.index(NOT_SERVING)
        assert t_term <= events[i_not][0] < t_exit
        assert SERVING not in statuses[i_not:]
        assert str(statuses[-1]).startswith("end:")
        assert proc.returncode == 0, stack.log_tail("decoder", 0)
        # The sequences it held kept decoding during the drain and finished; none was cancelled.
        assert last["tokens"] > at_term["tokens"], (at_term, last)
        assert last["running"] == 0 and last["cancelled"] == 0, (at_term, last)
        # Every page of every in-flight document completed with text.
        assert len(results) == n_docs
        for r in results:
            assert isinstance(r, httpx.Response) and r.status_code == 200, r
            pages = _pages_of(r)
            assert [p["index"] for p in pages] == list(range(1, n_pages + 1))
            assert all(p["status"] == "ok" and p["generated_tokens"] > 0 for p in pages), \
                [p.get("error") for p in pages]
        # The survivor keeps serving new work.
        after = ocr(stack.gateway_url, page_png(), "after.png", "image/png")
        assert after.status_code == 200 and all(p["status"] == "ok" for p in _pages_of(after))
