"""Unit/integration tests of inkstream.tracing: gRPC interceptors, request id, JSONL exporter, ASGI.

Two in-process grpc.aio servers on 127.0.0.1:0 with raw-bytes handlers: "front" calls "back" through
an intercepted channel, like the gateway calls the encoder and decoder.
"""

from __future__ import annotations

import asyncio
import json

import grpc
import httpx
import pytest
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from inkstream import request_id, trace_asgi, trace_interceptors, tracing

pytestmark = pytest.mark.timeout(60)

SERVICE = "test.v1.Echo"


def _back_handlers(seen: list[dict]) -> grpc.GenericRpcHandler:
    async def unary(request: bytes, context) -> bytes:
        seen.append({"meta": dict(context.invocation_metadata()), "rid": request_id.current_request_id(),
                     "span": trace.get_current_span().get_span_context()})
        if request == b"bad":
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "bad request")
        return b"echo:" + request

    async def server_stream(request: bytes, context):
        seen.append({"meta": dict(context.invocation_metadata()), "rid": request_id.current_request_id()})
        for i in range(3):
            yield bytes([i])

    async def endless(request: bytes, context):
        i = 0
        while True:
            i += 1
            yield bytes([i % 256])
            await asyncio.sleep(0.01)

    async def bidi(request_iterator, context):
        seen.append({"meta": dict(context.invocation_metadata()), "rid": request_id.current_request_id()})
        async for item in request_iterator:
            yield item + b"!"

    async def client_stream(request_iterator, context) -> bytes:
        seen.append({"meta": dict(context.invocation_metadata()), "rid": request_id.current_request_id()})
        return b"".join([x async for x in request_iterator])

    return grpc.method_handlers_generic_handler(SERVICE, {
        "Unary": grpc.unary_unary_rpc_method_handler(unary),
        "ServerStream": grpc.unary_stream_rpc_method_handler(server_stream),
        "Bidi": grpc.stream_stream_rpc_method_handler(bidi),
        "Endless": grpc.unary_stream_rpc_method_handler(endless),
        "ClientStream": grpc.stream_unary_rpc_method_handler(client_stream),
    })


async def _start(handlers: grpc.GenericRpcHandler) -> tuple[grpc.aio.Server, int]:
    server = grpc.aio.server(interceptors=trace_interceptors.server_interceptors())
    server.add_generic_rpc_handlers((handlers,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, port


@pytest.fixture
async def back():
    seen: list[dict] = []
    server, port = await _start(_back_handlers(seen))
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}", interceptors=trace_interceptors.client_interceptors())
    channel.port = port
    yield channel, seen
    await channel.close()
    await server.stop(None)


def _by_kind(exporter, kind: str) -> list:
    return [s for s in exporter.get_finished_spans() if s.kind.name == kind]


async def _settle() -> None:
    # Client spans end from a done-callback task; let it run.
    for _ in range(5):
        await asyncio.sleep(0.01)


async def test_front_to_back_one_trace_and_request_id(spans, back):
    """A request entering "front" (with the caller's traceparent + x-request-id) reaches "back"
    in the same trace, with the same request id, as a child of front's CLIENT span."""
    channel, seen = back

    async def front_unary(request: bytes, context) -> bytes:
        call = channel.unary_unary(f"/{SERVICE}/Unary")
        return await call(request)

    front_handlers = grpc.method_handlers_generic_handler("test.v1.Front", {
        "Call": grpc.unary_unary_rpc_method_handler(front_unary)})
    front, fport = await _start(front_handlers)
    try:
        caller_trace = "4bf92f3577b34da6a3ce929d0e0e4736"
        md = (("traceparent", f"00-{caller_trace}-00f067aa0ba902b7-01"), ("x-request-id", "req-abc.123"))
        async with grpc.aio.insecure_channel(f"127.0.0.1:{fport}") as ch:
            out = await ch.unary_unary("/test.v1.Front/Call")(b"hi", metadata=md)
        assert out == b"echo:hi"
        await _settle()
    finally:
        await front.stop(None)

    # The handler's context is the RPC's own: nothing leaks into the caller's context.
    assert request_id.current_request_id() is None and not trace.get_current_span().get_span_context().is_valid
    assert seen[0]["meta"]["x-request-id"] == "req-abc.123"
    assert seen[0]["rid"] == "req-abc.123"
    assert seen[0]["meta"]["traceparent"].split("-")[1] == caller_trace
    servers = {s.name: s for s in _by_kind(spans, "SERVER")}
    clients = _by_kind(spans, "CLIENT")
    assert set(servers) == {"test.v1.Front/Call", f"{SERVICE}/Unary"}
    assert len(clients) == 1
    for s in [*servers.values(), *clients]:
        assert format(s.context.trace_id, "032x") == caller_trace
        assert s.attributes["inkstream.request_id"] == "req-abc.123"
    front_span, back_span, client = servers["test.v1.Front/Call"], servers[f"{SERVICE}/Unary"], clients[0]
    assert front_span.parent.span_id == 0x00F067AA0BA902B7  # the caller's span
    assert client.parent.span_id == front_span.context.span_id
    assert back_span.parent.span_id == client.context.span_id
    assert back_span.attributes["rpc.grpc.status_code"] == 0
    assert back_span.attributes["rpc.service"] == SERVICE and back_span.attributes["rpc.method"] == "Unary"


async def test_error_status_recorded_on_both_sides(spans, back):
    channel, _ = back
    with request_id.request_scope("rid-err"):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await channel.unary_unary(f"/{SERVICE}/Unary")(b"bad")
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    await _settle()
    (server_span,) = _by_kind(spans, "SERVER")
    (client_span,) = _by_kind(spans, "CLIENT")
    for s in (server_span, client_span):
        assert s.attributes["rpc.grpc.status_code"] == grpc.StatusCode.INVALID_ARGUMENT.value[0]
        assert s.status.status_code.name == "ERROR"


async def test_streaming_shapes_carry_context(spans, back):
    channel, seen = back
    with request_id.request_scope("rid-streams"):
        got = [m async for m in channel.unary_stream(f"/{SERVICE}/ServerStream")(b"x")]
        assert got == [b"\x00", b"\x01", b"\x02"]
        call = channel.stream_stream(f"/{SERVICE}/Bidi")()
        await call.write(b"a")
        assert await call.read() == b"a!"
        await call.done_writing()
        assert await call.read() is grpc.aio.EOF

        async def gen():
            yield b"p"
            yield b"q"

        assert await channel.stream_unary(f"/{SERVICE}/ClientStream")(gen()) == b"pq"
    await _settle()
    assert [s["rid"] for s in seen] == ["rid-streams"] * 3
    assert all("traceparent" in s["meta"] for s in seen)
    assert len(_by_kind(spans, "SERVER")) == 3 and len(_by_kind(spans, "CLIENT")) == 3
    assert len({s.context.trace_id for s in spans.get_finished_spans()}) == 3  # no parent: one trace per call


async def test_cancelled_stream_ends_server_span(spans, back, caplog):
    channel, _ = back
    call = channel.unary_stream(f"/{SERVICE}/Endless")(b"")
    for _ in range(3):
        await call.read()
    call.cancel()
    for _ in range(100):
        if _by_kind(spans, "SERVER"):
            break
        await asyncio.sleep(0.02)
    (server_span,) = _by_kind(spans, "SERVER")
    assert server_span.attributes["rpc.grpc.status_code"] == grpc.StatusCode.CANCELLED.value[0]
    assert "different Context" not in caplog.text


@pytest.mark.parametrize("bad_id", ["x" * 200, "a b", "id\nforged log line", ""])
async def test_invalid_client_request_id_is_replaced(spans, back, bad_id):
    channel, seen = back
    md = (("x-request-id", bad_id.replace("\n", " ")),) if bad_id else ()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{channel.port}") as plain:
        await plain.unary_unary(f"/{SERVICE}/Unary")(b"x", metadata=md)
    rid = seen[-1]["rid"]
    assert rid != bad_id and request_id.valid_request_id(rid) and len(rid) == 32


async def test_health_checks_make_no_spans(spans):
    from grpc_health.v1 import health, health_pb2, health_pb2_grpc

    server = grpc.aio.server(interceptors=trace_interceptors.server_interceptors())
    servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
            resp = await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=""))
        assert resp.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        await server.stop(None)
    assert spans.get_finished_spans() == ()


def test_jsonl_exporter_writes_one_line_per_span(tmp_path):
    path = tmp_path / "spans.jsonl"
    provider = TracerProvider(resource=Resource.create({"service.name": "inkstream-unit"}))
    provider.add_span_processor(SimpleSpanProcessor(tracing.JsonLinesSpanExporter(path)))
    t = provider.get_tracer("t")
    with t.start_as_current_span("outer", kind=trace.SpanKind.SERVER, attributes={"inkstream.request_id": "r1"}):
        with t.start_as_current_span("inner"):
            pass
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [x["name"] for x in lines] == ["inner", "outer"]
    inner, outer = lines
    assert inner["trace_id"] == outer["trace_id"] and len(inner["trace_id"]) == 32
    assert inner["parent_span_id"] == outer["span_id"] and outer["parent_span_id"] is None
    assert outer["service"] == "inkstream-unit" and outer["kind"] == "SERVER"
    assert outer["attributes"]["inkstream.request_id"] == "r1"
    assert outer["end_ns"] >= outer["start_ns"] > 0


def test_exporter_choice_from_env(monkeypatch, tmp_path):
    monkeypatch.delenv("INKSTREAM_TRACES_EXPORTER", raising=False)
    monkeypatch.delenv("INKSTREAM_TRACES_FILE", raising=False)
    assert tracing._exporter_choice(None, None) == ("none", None)
    monkeypatch.setenv("INKSTREAM_TRACES_FILE", str(tmp_path / "t.jsonl"))
    assert tracing._exporter_choice(None, None) == ("jsonl", str(tmp_path / "t.jsonl"))
    with pytest.raises(ValueError, match="unknown traces exporter 'zipkin'"):
        tracing._exporter_choice("zipkin", None)
    monkeypatch.delenv("INKSTREAM_TRACES_FILE")
    with pytest.raises(ValueError, match="INKSTREAM_TRACES_FILE"):
        tracing._exporter_choice("jsonl", None)


def test_otlp_without_package_names_the_package():
    try:
        import opentelemetry.exporter.otlp.proto.grpc  # noqa: F401 - only whether the optional package imports
    except ImportError:
        with pytest.raises(RuntimeError, match=tracing.OTLP_PACKAGE):
            tracing._span_processor("otlp", None)
    else:
        assert tracing._span_processor("otlp", None) is not None


@pytest.mark.parametrize("fastapi_tracing", [True, False])
async def test_asgi_middleware_span_and_request_id(spans, fastapi_tracing):
    """Request id in and out; one SERVER span per request (FastAPI's own when its telemetry is on,
    the middleware's otherwise) parented on the caller's traceparent and carrying the request id."""
    from fastapi import FastAPI

    app = FastAPI(telemetry={"tracing": fastapi_tracing, "operation_spans": False, "metrics": False})
    app.add_middleware(trace_asgi.asgi_middleware)

    @app.get("/v1/thing")
    async def thing():
        return {"rid": request_id.current_request_id(),
                "trace": format(trace.get_current_span().get_span_context().trace_id, "032x")}

    @app.get("/healthz")
    async def healthz():
        return {"ok": True}

    tid = "0af7651916cd43dd8448eb211c80319c"
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        r = await c.get("/v1/thing", headers={"traceparent": f"00-{tid}-b7ad6b7169203331-01", "x-request-id": "abc-1"})
        r2 = await c.get("/v1/thing")
        await c.get("/healthz")
    assert r.json() == {"rid": "abc-1", "trace": tid} and r.headers["x-request-id"] == "abc-1"
    assert request_id.valid_request_id(r2.headers["x-request-id"]) and r2.json()["rid"] == r2.headers["x-request-id"]
    servers = [s for s in _by_kind(spans, "SERVER") if "/v1/thing" in s.name]
    assert len(servers) == 2
    first = servers[0]
    assert format(first.context.trace_id, "032x") == tid
    assert first.attributes["inkstream.request_id"] == "abc-1"
    if not fastapi_tracing:
        assert [s.name for s in _by_kind(spans, "SERVER")] == ["GET /v1/thing", "GET /v1/thing"]  # not /healthz
        assert first.attributes["http.response.status_code"] == 200


async def test_gateway_encode_call_runs_to_its_end(spans):
    """The gateway reads an Encode stream to its end (status OK) instead of cancelling it after the
    result: an unfinished intercepted call kept its native state alive and the gateway's RSS grew
    with the page count (bench/memory.py)."""
    from gateway.clients.encoder import encode_page
    from gateway.routing.replicas import Replica
    from tests.gateway_pipeline.fakes import FakeEncoder, n_segments, start_server

    server, addr = await start_server(FakeEncoder(), "encoder")
    replica = Replica(addr)
    try:
        image = b"\x05page"
        for _ in range(3):
            got = await encode_page(replica.channel, 0, image, "base", timeout_s=10)
            assert len(got.segments) == n_segments(image)
        await _settle()
        encodes = [s for s in _by_kind(spans, "CLIENT") if s.name.endswith("VisionEncoder/Encode")]
        assert len(encodes) == 3
        assert all(s.attributes["rpc.grpc.status_code"] == grpc.StatusCode.OK.value[0] for s in encodes)
    finally:
        await replica.channel.close()
        await server.stop(None)
