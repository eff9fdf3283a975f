"""Tenants and secrets on the real engines (issue 41): one real redis-server and one real SeaweedFS
(tests/system/servers.py), with a fault-injecting HTTP proxy (tests/system/fault_proxy.py, a real
proxy) between the gateways and S3; two gateways (in-process GatewayCores with the fake pipeline of
tests/gateway_api/conftest.py, each behind the real API-key middleware), two tenants and an admin.

Shown: tenant B gets 404 for A's job, result, cancel and idempotency key; ``source`` into the
store's job objects, into another tenant's uploads or with ``..`` is refused (403 / 400) and the
proxy sees no read of it; the admin routes need the admin role; the Redis dump (``redis-cli --rdb``
and every key's value) and every log line of a run with a PDF password and a webhook token contain
neither; S3 answering 500 / 503 / 403 gives 503 + Retry-After at submission and a completed job once
it recovers; the audit lines of all of it (tenant, key id, request id, outcome; never the key).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pikepdf
import pytest
from cryptography.fernet import Fernet

from gateway.apis.auth import ApiKeys
from gateway.apis.rest import create_app
from gateway.config import GatewayConfig
from gateway.core import GatewayCore
from gateway.stores.sealed import secret_box
from gateway.tenancy import key_id
from inkstream.logs import ContextFilter, JsonFormatter
from tests.gateway_api.conftest import FakePipeline, expected_text, marked_pdf
from tests.system.fault_proxy import FaultProxy
from tests.system.servers import RedisServer, SeaweedS3

pytestmark = [pytest.mark.slow, pytest.mark.system, pytest.mark.timeout(300)]

KEY_A, KEY_B, KEY_ADMIN = "key-of-tenant-a-7c1e9b", "key-of-tenant-b-2f84d0", "key-of-operator-5a0c33"
PASSWORD = "Pdf-Pw-6d2f81c4e9"
TOKEN = "hooktok-93be1d7a55"
PREFIX = "jobs"


def encrypted_pdf(numbers: list[int]) -> bytes:
    """A marked PDF encrypted with user password :data:`PASSWORD` (AES-256)."""
    out = io.BytesIO()
    with pikepdf.open(io.BytesIO(marked_pdf(numbers))) as pdf:
        pdf.save(out, encryption=pikepdf.Encryption(user=PASSWORD, owner=PASSWORD + "-owner", R=6))
    return out.getvalue()


class Hook(BaseHTTPRequestHandler):
    seen: list[str] = []

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length") or 0))
        Hook.seen.append(self.path)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


class Lines(logging.Handler):
    """Every log record of the run as the JSON line the gateway would write."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.setFormatter(JsonFormatter("gateway"))
        self.addFilter(ContextFilter())
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(self.format(record))


@pytest.fixture(scope="module")
def engines(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tenants")
    redis_srv = RedisServer(tmp_path_factory.mktemp("redis")).start()
    s3 = SeaweedS3(tmp_path_factory.mktemp("seaweed")).start()
    proxy = FaultProxy(s3.endpoint).start()
    keys = tmp / "api-keys"
    keys.write_text(f"# tenants\n{KEY_A} tenant-a\n{KEY_B} tenant-b\n{KEY_ADMIN} ops admin\n")
    mp = pytest.MonkeyPatch()
    for k, v in {**s3.env, "AWS_ENDPOINT_URL": proxy.url, "INKSTREAM_WEBHOOK_SECRET": "hook-secret",
                 "INKSTREAM_WEBHOOK_ALLOWED_HOSTS": "127.0.0.1",
                 "INKSTREAM_SECRETS_KEY": Fernet.generate_key().decode()}.items():
        mp.setenv(k, v)
    secret_box.cache_clear()
    try:
        yield redis_srv, s3, proxy, keys
    finally:
        mp.undo()
        secret_box.cache_clear()
        proxy.stop()
        s3.stop()
        redis_srv.stop()


@pytest.fixture
async def world(engines, tmp_path):
    """Gateways A and B on the shared stores, and the log lines of the run."""
    redis_srv, s3, proxy, keys = engines
    lines = Lines()
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(lines)
    root.setLevel(logging.INFO)
    out = []
    try:
        async with contextlib.AsyncExitStack() as stack:
            for name in ("a", "b"):
                cfg = GatewayConfig()
                st = cfg.stores
                st.job_store, st.redis_url, st.result_store = "redis", redis_srv.url, "s3"
                st.s3_url, st.data_dir, st.job_lease_s = f"s3://{s3.bucket}/{PREFIX}", str(tmp_path / name), 3.0
                cfg.request_timeout_s = 30.0
                fake = FakePipeline(delay_s=0.02)
                core = GatewayCore(cfg, fake)
                core.start()
                stack.push_async_callback(core.close)
                app = create_app(cfg, fake, core, api_keys=ApiKeys.from_file(keys))
                client = await stack.enter_async_context(
                    httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=f"http://{name}", timeout=30))
                out.append(client)
            yield out[0], out[1], lines, proxy, redis_srv, s3
    finally:
        root.removeHandler(lines)
        root.setLevel(old_level)


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def wait_done(c: httpx.AsyncClient, key: str, job_id: str, timeout_s: float = 60) -> dict:
    job: dict = {}
    for _ in range(int(timeout_s / 0.1)):
        job = (await c.get(f"/v1/jobs/{job_id}", headers=auth(key))).json()
        if job["status"] in ("done", "failed", "cancelled"):
            return job
        await asyncio.sleep(0.1)
    raise AssertionError(f"job {job_id} did not finish: {job}")


def redis_contents(redis_srv: RedisServer, tmp) -> bytes:
    """Every byte Redis holds: an RDB snapshot (``redis-cli --rdb``) plus every key's DUMP and, for
    hashes and strings, the plain values (an RDB may compress a long value).
    """
    import redis as redis_py

    rdb = tmp / "dump.rdb"
    subprocess.run(["redis-cli", "-p", str(redis_srv.port), "--rdb", str(rdb)], check=True, capture_output=True,
                   timeout=30)
    blob = rdb.read_bytes()
    r = redis_py.Redis.from_url(redis_srv.url)
    for key in r.scan_iter(count=1000):
        blob += key + (r.dump(key) or b"")
        kind = r.type(key)
        if kind == b"hash":
            blob += b"".join(k + v for k, v in r.hgetall(key).items())
        elif kind == b"string":
            blob += r.get(key) or b""
        elif kind == b"stream":
            blob += json.dumps([[str(i), {str(k): str(v) for k, v in f.items()}]
                                for i, f in r.xrange(key)]).encode()
    return blob


async def test_tenants_cannot_see_each_other_and_admin_routes_need_the_role(world):
    a, b, lines, proxy, _, s3 = world
    pdf = marked_pdf([3, 1])
    r = await a.post("/v1/jobs", files={"file": ("d.pdf", pdf)}, data={"format": "text"},
                     headers={**auth(KEY_A), "Idempotency-Key": "shared-key"})
    assert r.status_code == 202, r.text
    job_a = r.json()["job_id"]
    assert (await wait_done(a, KEY_A, job_a))["status"] == "done"
    assert (await b.get(f"/v1/jobs/{job_a}", headers=auth(KEY_A))).status_code == 200  # any gateway, same tenant

    unknown = await b.get("/v1/jobs/0123456789abcdef0123456789abcdef", headers=auth(KEY_B))
    for method, path in (("GET", f"/v1/jobs/{job_a}"), ("GET", f"/v1/jobs/{job_a}/result"),
                         ("DELETE", f"/v1/jobs/{job_a}")):
        for c in (a, b):
            r = await c.request(method, path, headers=auth(KEY_B))
            assert r.status_code == 404, (method, path, r.text)
            assert r.json()["error"]["code"] == unknown.json()["error"]["code"] == "NOT_FOUND"
            assert r.json()["error"]["message"].replace(job_a, "X") == \
                unknown.json()["error"]["message"].replace("0123456789abcdef0123456789abcdef", "X")
    assert (await a.get(f"/v1/jobs/{job_a}", headers=auth(KEY_A))).json()["status"] == "done"  # not cancelled

    # B's own use of the same Idempotency-Key makes B's own job, whatever the document
    r = await b.post("/v1/jobs", files={"file": ("d.pdf", marked_pdf([4]))}, headers={**auth(KEY_B),
                     "Idempotency-Key": "shared-key"})
    assert r.status_code == 202 and r.json()["job_id"] != job_a
    again = await a.post("/v1/jobs", files={"file": ("d.pdf", pdf)}, data={"format": "text"},
                         headers={**auth(KEY_A), "Idempotency-Key": "shared-key"})
    assert again.json()["job_id"] == job_a
    conflict = await a.post("/v1/jobs", files={"file": ("d.pdf", marked_pdf([9]))},
                            headers={**auth(KEY_A), "Idempotency-Key": "shared-key"})
    assert conflict.status_code == 422 and conflict.json()["error"]["reason"] == "IDEMPOTENCY_CONFLICT"

    res = await a.get(f"/v1/jobs/{job_a}/result", headers=auth(KEY_A))
    assert res.status_code == 200 and res.text.split("\f")[0].strip() == expected_text(3)

    # the shared result cache never tells one tenant that another read the same document
    doc = marked_pdf([11, 12])
    first = await a.post("/v1/ocr", files={"file": ("d.pdf", doc)}, headers=auth(KEY_A))
    assert first.headers["x-inkstream-cache"] == "miss"
    assert (await b.post("/v1/ocr", files={"file": ("d.pdf", doc)}, headers=auth(KEY_A))).headers[
        "x-inkstream-cache"] == "hit"  # the same tenant on the other gateway: shared
    assert (await b.post("/v1/ocr", files={"file": ("d.pdf", doc)}, headers=auth(KEY_B))).headers[
        "x-inkstream-cache"] == "miss"

    for c in (a, b):
        assert (await c.post("/v1/admin/queue/pause", headers=auth(KEY_B))).status_code == 403
        assert (await c.get("/v1/admin/queue", headers=auth(KEY_A))).status_code == 403
    assert (await a.get("/v1/admin/queue", headers=auth(KEY_ADMIN))).status_code == 200
    assert (await a.get("/v1/jobs/x", headers=auth("not-a-key-of-anyone-123"))).status_code == 401

    ready_anon = (await a.get("/readyz")).json()
    ready_admin = (await a.get("/readyz", headers=auth(KEY_ADMIN))).json()
    assert ready_anon["checks"] == {"job_store": "ok", "result_store": "ok", "replicas": "ok"}
    assert "details" not in ready_anon and "reason" not in ready_anon and "details" in ready_admin

    audit = [json.loads(ln) for ln in lines.lines if '"logger":"inkstream.audit"' in ln]
    by = {(x["action"], x["tenant"], x["outcome"]) for x in audit}
    assert ("job_submit", "tenant-a", "ok") in by and ("result_read", "tenant-a", "ok") in by
    assert ("job_read", "tenant-b", "NOT_FOUND") in by and ("job_cancel", "tenant-b", "NOT_FOUND") in by
    assert ("result_read", "tenant-b", "NOT_FOUND") in by
    assert ("queue_pause", "tenant-b", "PERMISSION_DENIED") in by and ("queue_read", "ops", "ok") in by
    assert ("job_submit", "tenant-a", "IDEMPOTENCY_CONFLICT") in by
    assert ("refused_key", "", "denied") in by
    for x in audit:
        assert x["request_id"], x
        assert x["key_id"] in ("", key_id(KEY_A), key_id(KEY_B), key_id(KEY_ADMIN), key_id("not-a-key-of-anyone-123"))
    submit = next(x for x in audit if x["action"] == "job_submit" and x["outcome"] == "ok")
    assert submit["key_id"] == key_id(KEY_A) and submit["job_id"] == job_a
    assert not [ln for ln in lines.lines for k in (KEY_A, KEY_B, KEY_ADMIN) if k in ln]


async def test_source_is_only_the_tenants_uploads(world):
    a, b, lines, proxy, _, s3 = world
    up_a = (await a.post("/v1/uploads", headers=auth(KEY_A))).json()
    assert f"/{PREFIX}/uploads/tenant-a/" in up_a["source"]
    assert httpx.put(up_a["upload_url"], content=marked_pdf([2])).status_code == 200
    job = (await a.post("/v1/jobs", files={"file": ("d.pdf", marked_pdf([5]))}, headers=auth(KEY_A))).json()
    await wait_done(a, KEY_A, job["job_id"])
    secret_doc = f"s3://{s3.bucket}/{PREFIX}/{job['job_id']}/document"
    escapes = [f"s3://{s3.bucket}/{PREFIX}/uploads/tenant-b/../../{job['job_id']}/document",
               f"s3://{s3.bucket}/{PREFIX}/uploads/tenant-b/./x", f"s3://{s3.bucket}/{PREFIX}/uploads//tenant-b/x"]
    proxy.seen.clear()
    for src, status in ([(secret_doc, 403), (up_a["source"], 403), (f"s3://{s3.bucket}/{PREFIX}/cache/x.json", 403)]
                        + [(e, 400) for e in escapes]):
        for send in ({"data": {"source": src}}, {"params": {"source": src}},
                     {"files": {"source": (None, src)}}):  # form field, query, multipart field
            r = await b.post("/v1/jobs", headers=auth(KEY_B), **send)
            assert r.status_code == status, (src, send, r.text)
            r = await b.post("/v1/ocr", headers=auth(KEY_B), **send)
            assert r.status_code == status, (src, send, r.text)
    assert not [p for _, p in proxy.seen if job["job_id"] in p or "uploads/tenant-a" in p or "/cache/" in p], \
        proxy.seen
    # the tenant's own upload, as a multipart field (curl -F source=...) and as a query parameter
    r = await a.post("/v1/jobs", headers=auth(KEY_A),
                     files={"source": (None, up_a["source"]), "format": (None, "text")})
    assert r.status_code == 202, r.text
    assert (await wait_done(a, KEY_A, r.json()["job_id"]))["status"] == "done"
    r = await a.post("/v1/ocr", headers=auth(KEY_A), params={"source": up_a["source"], "format": "text"})
    assert r.status_code == 200 and r.text.strip() == expected_text(2)
    audit = [json.loads(ln) for ln in lines.lines if '"logger":"inkstream.audit"' in ln]
    assert any(x["action"] == "upload" and x["tenant"] == "tenant-a" and x["outcome"] == "ok" for x in audit)
    assert any(x["action"] == "job_submit" and x["tenant"] == "tenant-b" and x["outcome"] == "PERMISSION_DENIED"
               for x in audit)


async def test_password_and_webhook_token_rest_nowhere_in_plain_text(world, tmp_path):
    a, b, lines, proxy, redis_srv, _ = world
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    Hook.seen = []
    try:
        hook = f"http://127.0.0.1:{srv.server_port}/hooks/{TOKEN}?token={TOKEN}"
        assert (await a.post("/v1/admin/queue/pause", headers=auth(KEY_ADMIN))).status_code == 200
        r = await a.post("/v1/jobs", files={"file": ("e.pdf", encrypted_pdf([7, 8]))},
                         data={"password": PASSWORD, "callback_url": hook, "format": "text"}, headers=auth(KEY_A))
        assert r.status_code == 202, r.text
        job_id = r.json()["job_id"]
        assert PASSWORD not in r.text and TOKEN not in r.text
        held = redis_contents(redis_srv, tmp_path)  # while the job waits, password and URL are stored
        assert job_id.encode() in held
        assert PASSWORD.encode() not in held and TOKEN.encode() not in held
        assert (await b.post("/v1/admin/queue/resume", headers=auth(KEY_ADMIN))).status_code == 200
        job = await wait_done(b, KEY_A, job_id)
        assert job["status"] == "done", job
        res = await b.get(f"/v1/jobs/{job_id}/result", headers=auth(KEY_A))
        assert res.text.split("\f")[1].strip() == expected_text(8)  # the password opened it
        for _ in range(100):
            if Hook.seen:
                break
            await asyncio.sleep(0.05)
        assert Hook.seen == [f"/hooks/{TOKEN}?token={TOKEN}"]  # the webhook got its token
        await asyncio.sleep(0.3)
        after = redis_contents(redis_srv, tmp_path)
        assert PASSWORD.encode() not in after and TOKEN.encode() not in after
    finally:
        srv.shutdown()
    assert lines.lines
    leaks = [ln for ln in lines.lines if PASSWORD in ln or TOKEN in ln]
    assert not leaks, leaks


async def test_object_store_500_503_403_is_503_with_retry_after_then_the_job_completes(world):
    a, b, lines, proxy, _, _ = world
    pdf = marked_pdf([6])
    try:
        for status in (500, 503, 403):
            proxy.fail_with(status)
            faults = proxy.faults
            r = await a.post("/v1/jobs", files={"file": ("d.pdf", pdf)}, headers=auth(KEY_A))
            assert r.status_code == 503, (status, r.text)
            assert int(r.headers["retry-after"]) >= 1
            assert proxy.faults > faults  # the store was asked and answered the fault
            assert "127.0.0.1" not in r.text  # no endpoint in what clients see
            up = await b.post("/v1/ocr", headers=auth(KEY_A), data={"source": f"s3://x/{PREFIX}/uploads/tenant-a/x"})
            assert up.status_code in (400, 503)
    finally:
        proxy.fail_with(0)
    r = await a.post("/v1/jobs", files={"file": ("d.pdf", pdf)}, data={"format": "text"}, headers=auth(KEY_A))
    assert r.status_code == 202, r.text
    job = await wait_done(b, KEY_A, r.json()["job_id"])
    assert job["status"] == "done"
    res = await b.get(f"/v1/jobs/{job['job_id']}/result", headers=auth(KEY_A))
    assert res.text.strip() == expected_text(6)
    audit = [json.loads(ln) for ln in lines.lines if '"logger":"inkstream.audit"' in ln]
    assert any(x["action"] == "job_submit" and x["outcome"] == "UNAVAILABLE" for x in audit)


async def test_redis_refusing_writes_is_503_with_retry_after(world):
    """Redis answering an error (OOM under maxmemory), not only an unreachable Redis, is a 503."""
    a, _, _, _, redis_srv, _ = world
    import redis as redis_py

    r = redis_py.Redis.from_url(redis_srv.url)
    r.config_set("maxmemory-policy", "noeviction")
    r.config_set("maxmemory", "1")
    try:
        got = await a.post("/v1/jobs", files={"file": ("d.pdf", marked_pdf([1]))}, headers=auth(KEY_A))
        assert got.status_code == 503 and int(got.headers["retry-after"]) >= 1, got.text
        assert "127.0.0.1" not in got.text
    finally:
        r.config_set("maxmemory", "0")
    got = await a.post("/v1/jobs", files={"file": ("d.pdf", marked_pdf([1]))}, headers=auth(KEY_A))
    assert got.status_code == 202
