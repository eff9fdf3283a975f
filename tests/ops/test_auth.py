"""Tests of gateway.apis.auth (API keys for REST + gRPC) and inkstream.tls (mutual TLS between services)."""

from __future__ import annotations

import contextlib
import hmac
import shutil
import socket
import subprocess

import grpc
import httpx
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from gateway import tenancy
from gateway.apis import auth
from inkstream import tls

pytestmark = pytest.mark.timeout(60)

KEY_A = "ka-0123456789abcdef"
KEY_B = "kb-fedcba9876543210"


def test_check_accepts_only_configured_keys():
    keys = auth.ApiKeys([KEY_A, KEY_B])
    assert keys.check(KEY_A) and keys.check(KEY_B)
    for bad in (None, "", KEY_A[:-1], KEY_A + "x", KEY_A.upper(), "kb-fedcba9876543211"):
        assert not keys.check(bad)


def test_short_or_missing_keys_refused(tmp_path):
    with pytest.raises(ValueError, match="shorter than 16"):
        auth.ApiKeys(["short"])
    with pytest.raises(ValueError, match="no API keys"):
        auth.ApiKeys([])
    empty = tmp_path / "keys"
    empty.write_text("# only a comment\n\n")
    with pytest.raises(ValueError, match="holds no key"):
        auth.ApiKeys.from_file(empty)
    with pytest.raises(ValueError, match="does not exist"):
        auth.load_api_keys(str(tmp_path / "nope"))


def test_constant_time_path_compares_every_key(monkeypatch):
    """Every check compares fixed-length digests against *all* keys, whichever key matches."""
    keys = auth.ApiKeys([KEY_A, KEY_B, "kc-" + "1" * 16])
    calls: list[tuple[int, int]] = []
    real = hmac.compare_digest

    def counting(a, b):
        calls.append((len(a), len(b)))
        return real(a, b)

    monkeypatch.setattr(auth.hmac, "compare_digest", counting)
    for presented in (KEY_A, "wrong-key-of-any-length-at-all", "x"):
        calls.clear()
        keys.check(presented)
        assert calls == [(32, 32)] * 3  # SHA-256 digests: same length whatever was presented


def test_sources_file_env_and_reload(tmp_path):
    path = tmp_path / "keys"
    path.write_text(f"# team A\n{KEY_A}\n\n")
    keys = auth.load_api_keys(environ={"INKSTREAM_API_KEYS_FILE": str(path)})
    keys.reload_interval_s = 0.0
    assert keys.check(KEY_A) and not keys.check(KEY_B)
    path.write_text(f"{KEY_B}\n")
    import os

    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert keys.check(KEY_B) and not keys.check(KEY_A)  # rotated without a restart
    env_keys = auth.load_api_keys(environ={"INKSTREAM_API_KEYS": f" {KEY_A} , {KEY_B} "})
    assert len(env_keys) == 2
    assert auth.load_api_keys(environ={}) is None


def _app(keys):
    from fastapi import FastAPI

    app = FastAPI(telemetry={"tracing": False, "metrics": False})
    app.add_middleware(auth.ApiKeyMiddleware, keys=keys)

    @app.post("/v1/ocr")
    async def ocr():
        return {"ok": True}

    @app.get("/readyz")
    async def readyz():
        return {"ready": True}

    return app


async def test_rest_401_without_detail_leak():
    app = _app(auth.ApiKeys([KEY_A]))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        bodies = []
        for headers in ({}, {"authorization": "Bearer " + KEY_B}, {"x-api-key": "not-a-key"}, {"authorization": KEY_A}):
            r = await c.post("/v1/ocr", headers=headers)
            assert r.status_code == 401
            assert r.headers["www-authenticate"].startswith("Bearer")
            bodies.append(r.content)
        assert len(set(bodies)) == 1  # same answer whatever was wrong
        assert KEY_B.encode() not in bodies[1] and b"not-a-key" not in bodies[2]
        assert r.json() == {"error": {"code": "UNAUTHENTICATED", "reason": "UNAUTHENTICATED",
                                      "message": "missing or invalid API key"}}
        assert (await c.post("/v1/ocr", headers={"authorization": "Bearer " + KEY_A})).status_code == 200
        assert (await c.post("/v1/ocr", headers={"x-api-key": KEY_A})).status_code == 200
        assert (await c.get("/readyz")).status_code == 200  # probes are open
    open_app = _app(None)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=open_app), base_url="http://t") as c:
        assert (await c.post("/v1/ocr")).status_code == 200


async def test_rest_dependency():
    from fastapi import Depends, FastAPI

    app = FastAPI(telemetry={"tracing": False, "metrics": False})

    @app.get("/v1/jobs", dependencies=[Depends(auth.require_api_key(auth.ApiKeys([KEY_A])))])
    async def jobs():
        return []

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        assert (await c.get("/v1/jobs")).status_code == 401
        assert (await c.get("/v1/jobs", headers={"x-api-key": KEY_A})).status_code == 200


def _echo_handlers() -> grpc.GenericRpcHandler:
    async def unary(request: bytes, context) -> bytes:
        return request

    async def bidi(request_iterator, context):
        async for item in request_iterator:
            yield item

    async def whoami(request: bytes, context) -> bytes:
        p = tenancy.current()
        return f"{p.tenant}:{p.admin}".encode()

    async def whoami_stream(request: bytes, context):
        yield tenancy.current().tenant.encode()

    return grpc.method_handlers_generic_handler("test.v1.Api", {
        "Unary": grpc.unary_unary_rpc_method_handler(unary),
        "Bidi": grpc.stream_stream_rpc_method_handler(bidi),
        "WhoAmI": grpc.unary_unary_rpc_method_handler(whoami),
        "WhoAmIStream": grpc.unary_stream_rpc_method_handler(whoami_stream),
    })


async def test_grpc_handlers_run_as_the_keys_tenant():
    keys = auth.ApiKeys([f"{KEY_A} acme", f"{KEY_B} ops admin"])
    server = grpc.aio.server(interceptors=[auth.ApiKeyInterceptor(keys)])
    server.add_generic_rpc_handlers((_echo_handlers(),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
            who = ch.unary_unary("/test.v1.Api/WhoAmI")
            assert await who(b"", metadata=(("authorization", "Bearer " + KEY_A),)) == b"acme:False"
            assert await who(b"", metadata=(("x-api-key", KEY_B),)) == b"ops:True"
            stream = ch.unary_stream("/test.v1.Api/WhoAmIStream")
            assert [m async for m in stream(b"", metadata=(("x-api-key", KEY_A),))] == [b"acme"]
    finally:
        await server.stop(None)


async def test_grpc_unauthenticated_and_health_open():
    server = grpc.aio.server(interceptors=[auth.ApiKeyInterceptor(auth.ApiKeys([KEY_A]))])
    server.add_generic_rpc_handlers((_echo_handlers(),))
    hs = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(hs, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
            unary = ch.unary_unary("/test.v1.Api/Unary")
            for md in ((), (("authorization", "Bearer " + KEY_B),), (("x-api-key", "nope"),)):
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await unary(b"x", metadata=md)
                assert err.value.code() is grpc.StatusCode.UNAUTHENTICATED
                assert err.value.details() == auth.FAILURE_MESSAGE
            assert await unary(b"x", metadata=(("authorization", "Bearer " + KEY_A),)) == b"x"
            bidi = ch.stream_stream("/test.v1.Api/Bidi")
            call = bidi(metadata=(("x-api-key", "nope"),))
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await call.read()
            assert err.value.code() is grpc.StatusCode.UNAUTHENTICATED
            ok = bidi(metadata=(("x-api-key", KEY_A),))
            await ok.write(b"y")
            assert await ok.read() == b"y"
            await ok.done_writing()
            resp = await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=""))
            assert resp.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        await server.stop(None)


def _openssl(*args: str, cwd) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=30)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A throw-away CA, a server certificate for 'localhost' and a client certificate (openssl CLI)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl command not installed")
    d = tmp_path_factory.mktemp("pki")
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=test-ca",
             "-keyout", "ca.key", "-out", "ca.pem", cwd=d)
    (d / "san.ext").write_text("subjectAltName=DNS:localhost\n")
    for name in ("server", "client"):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout", f"{name}.key",
                 "-out", f"{name}.csr", cwd=d)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                 "-days", "1", "-extfile", "san.ext", "-out", f"{name}.pem", cwd=d)
    return d


async def test_mutual_tls_between_services(pki):
    server_cfg = tls.TlsConfig(enabled=True, cert_file=str(pki / "server.pem"), key_file=str(pki / "server.key"),
                               client_ca_file=str(pki / "ca.pem"))
    server = grpc.aio.server()
    hs = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(hs, server)
    port = tls.add_port(server, "127.0.0.1:0", server_cfg)
    await server.start()
    try:
        good = tls.TlsConfig(enabled=True, ca_file=str(pki / "ca.pem"), cert_file=str(pki / "client.pem"),
                             key_file=str(pki / "client.key"), server_name_override="localhost")
        async with tls.open_channel(f"127.0.0.1:{port}", good) as ch:
            resp = await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=10)
            assert resp.status == health_pb2.HealthCheckResponse.SERVING
        no_client_cert = tls.TlsConfig(enabled=True, ca_file=str(pki / "ca.pem"), server_name_override="localhost")
        async with tls.open_channel(f"127.0.0.1:{port}", no_client_cert) as ch:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=10)
            assert err.value.code() is grpc.StatusCode.UNAVAILABLE
        async with tls.open_channel(f"127.0.0.1:{port}", None) as ch:  # plaintext to a TLS port
            with pytest.raises(grpc.aio.AioRpcError):
                await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=5)
    finally:
        await server.stop(None)


def test_tls_config_errors_name_the_file(tmp_path):
    with pytest.raises(ValueError, match="needs cert_file and key_file"):
        tls.server_credentials(tls.TlsConfig(enabled=True))
    with pytest.raises(ValueError, match=str(tmp_path / "missing.pem")):
        tls.channel_credentials(tls.TlsConfig(enabled=True, ca_file=str(tmp_path / "missing.pem")))
    with pytest.raises(ValueError, match="both cert_file and key_file"):
        tls.channel_credentials(tls.TlsConfig(enabled=True, cert_file="x.pem"))


async def test_gateway_reaches_replicas_over_mutual_tls(pki, tmp_path):
    """``replica_tls`` in the gateway's settings: its replica channels (health watch and calls) use
    TLS with a client certificate; a plaintext gateway cannot reach the same TLS-only replica, and a
    missing PEM file stops the gateway at start-up with the path in the message."""
    from gateway.config import load_gateway_config
    from gateway.routing.replicas import ReplicaSet
    from inkstream.config import ConfigError

    server_cfg = tls.TlsConfig(enabled=True, cert_file=str(pki / "server.pem"), key_file=str(pki / "server.key"),
                               client_ca_file=str(pki / "ca.pem"))
    server = grpc.aio.server()
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
    port = tls.add_port(server, "127.0.0.1:0", server_cfg)
    await server.start()
    cfg = load_gateway_config(overrides={"replica_tls": {
        "enabled": True, "ca_file": str(pki / "ca.pem"), "cert_file": str(pki / "client.pem"),
        "key_file": str(pki / "client.key"), "server_name_override": "localhost"}})
    secure = ReplicaSet([f"127.0.0.1:{port}"], name="decoder", health_retry_s=0.1, tls=cfg.replica_tls)
    plain = ReplicaSet([f"127.0.0.1:{port}"], name="decoder", health_retry_s=0.1)
    try:
        await secure.start()
        await plain.start()
        await secure.wait_ready(10)
        assert not next(iter(plain.replicas.values())).healthy
    finally:
        await secure.close()
        await plain.close()
        await server.stop(None)
    with pytest.raises(ConfigError, match="missing-ca.pem"):
        load_gateway_config(overrides={"replica_tls": {"enabled": True, "ca_file": str(tmp_path / "missing-ca.pem")}})


async def test_tls_replica_serves_plaintext_health_for_kubelet_probes(pki, tmp_path):
    """With ``tls.health_port`` an encoder on a TLS-only port also answers grpc.health.v1 in plaintext
    on that port (kubelet's gRPC probes cannot do TLS), and only health: the Encode service is not
    there. A drain stops both servers."""
    from encoder_service.config import EncoderConfig
    from encoder_service.server import build_server
    from inkstream.lifecycle import LIVENESS_SERVICE
    from inkstream.pb import encoder_pb2, encoder_pb2_grpc
    from launcher.local_stack import free_port

    hport = free_port()
    cfg = EncoderConfig(model_dir=str(tmp_path / "no-model"), port=0, tls={
        "enabled": True, "cert_file": str(pki / "server.pem"), "key_file": str(pki / "server.key"),
        "health_port": hport})
    srv = await build_server(cfg)
    await srv.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{hport}") as ch:
            stub = health_pb2_grpc.HealthStub(ch)
            live = await stub.Check(health_pb2.HealthCheckRequest(service=LIVENESS_SERVICE), timeout=10)
            assert live.status == health_pb2.HealthCheckResponse.SERVING
            ready = await stub.Check(health_pb2.HealthCheckRequest(), timeout=10)
            assert ready.status == health_pb2.HealthCheckResponse.NOT_SERVING  # the model never loads
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await encoder_pb2_grpc.VisionEncoderStub(ch).Info(encoder_pb2.InfoRequest(), timeout=10)
            assert err.value.code() is grpc.StatusCode.UNIMPLEMENTED
        async with grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}") as ch:  # the main port wants TLS
            with pytest.raises(grpc.aio.AioRpcError):
                await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=5)
    finally:
        await srv.lifecycle.drain(srv.server, 0.1)
        with contextlib.suppress(Exception):
            await srv.ready_task  # failed: there is no model
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT of the probe's connection is fine
        s.bind(("127.0.0.1", hport))  # a listener left open would refuse this
        s.listen()
