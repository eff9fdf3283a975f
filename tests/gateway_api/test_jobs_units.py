"""Job pieces without servers: webhook signature and allowlist, source bucket checks, roles,
and the SQLite store's migration of a file written before error code / message were two columns.
"""

from __future__ import annotations

import hashlib
import hmac
import sqlite3

import httpx
import pytest

from gateway.apis.rest import create_app
from gateway.config import GatewayConfig
from gateway.core import GatewayCore
from gateway.jobs.sources import Sources
from gateway.jobs.webhooks import allowed_hosts, check_callback_url, sign
from gateway.stores import JobRecord, SqliteJobStore
from gateway.stores.s3 import S3ResultStore
from inkstream.errors import FailedPrecondition, InvalidInput, PermissionDenied
from tests.gateway_api.conftest import FakePipeline

pytestmark = pytest.mark.timeout(60)


def test_signature_is_hmac_sha256_of_the_raw_body():
    body = b'{"job_id":"x","status":"done"}'
    assert sign(body, "s3cret") == "sha256=" + hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    assert sign(body, "other") != sign(body, "s3cret")


@pytest.mark.parametrize("url,ok", [
    ("https://hooks.example.com/x", True),          # host allows every port
    ("http://hooks.example.com:8080/x", True),
    ("http://ci.example.com:9000/x", True),         # host:port
    ("http://ci.example.com:9001/x", False),
    ("http://evil.example.com/x", False),
    ("ftp://hooks.example.com/x", False),
    ("http://hooks.example.com.evil.net/x", False),
])
def test_callback_allowlist(url, ok):
    allowed = allowed_hosts({"INKSTREAM_WEBHOOK_ALLOWED_HOSTS": "Hooks.example.com, ci.example.com:9000"})
    if ok:
        assert check_callback_url(url, allowed) == url
    else:
        with pytest.raises(InvalidInput):
            check_callback_url(url, allowed)


def test_sources_read_only_the_tenants_uploads_and_read_prefixes(monkeypatch):
    env = {"AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    store = S3ResultStore("s3://mine/jobs")  # no call reaches a server: check() only parses
    monkeypatch.setattr(store, "ping", lambda: None)  # new_upload asks the store first: up, here
    src = Sources(store, ["shared", "mine/incoming/{tenant}"], 60)
    assert src.check("s3://mine/jobs/uploads/default/a") == ("mine", "jobs/uploads/default/a")
    assert src.check("s3://mine/jobs/uploads/acme/a", "acme") == ("mine", "jobs/uploads/acme/a")
    assert src.check("s3://shared/b", "acme") == ("shared", "b")
    assert src.check("s3://mine/incoming/acme/x.pdf", "acme") == ("mine", "incoming/acme/x.pdf")
    assert src.new_upload("acme")["source"].startswith("s3://mine/jobs/uploads/acme/")
    for bad in ("s3://theirs/a", "https://mine/a", "s3://mine/", "file:///etc/passwd",
                "s3://mine/jobs/uploads/acme/../../0123abcd/document", "s3://shared/a/./b", "s3://shared/a//b"):
        with pytest.raises(InvalidInput):
            src.check(bad, "acme")
    for forbidden in ("s3://mine/jobs/0123abcd/document", "s3://mine/jobs/uploads/other/a",
                      "s3://mine/jobs/cache/k.json", "s3://mine/incoming/other/x.pdf", "s3://mine/elsewhere"):
        with pytest.raises(PermissionDenied):
            src.check(forbidden, "acme")
    with pytest.raises(FailedPrecondition):
        Sources(None, [], 60).check("s3://mine/a")


def test_sqlite_store_migrates_an_older_file(tmp_path):
    path = tmp_path / "jobs.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE jobs (job_id TEXT PRIMARY KEY, status TEXT, pages_done INTEGER, pages_total INTEGER, "
               "error TEXT, options TEXT, idempotency_key TEXT, doc_sha256 TEXT, model_id TEXT, created_at REAL, "
               "updated_at REAL)")
    db.execute("INSERT INTO jobs VALUES ('old', 'done', 1, 1, '', '{}', '', '', 'm', 1.0, 1.0)")
    db.commit()
    db.close()
    store = SqliteJobStore(path)
    old = store.get("old")
    assert old is not None and old.status == "done" and old.error_code == "" and old.attempts == 0
    store.create(JobRecord("new"))
    assert store.update("new", unless_finished=True, status="failed", error_code="INTERNAL", error_message="x")
    assert not store.update("new", unless_finished=True, status="done")  # a finished job stays finished
    assert store.get("new").failure().code_name == "INTERNAL"
    assert store.put_page("new", 2, {"index": 2}) == 1 and store.pages("new") == {2: {"index": 2}}
    store.close()


def test_roles_need_a_shared_queue_and_worker_serves_only_probes(tmp_path):
    with pytest.raises(ValueError, match="needs a shared queue"):
        GatewayConfig(role="worker")
    cfg = GatewayConfig(role="worker", stores={"job_store": "redis", "redis_url": "redis://127.0.0.1:1/0",
                                               "data_dir": str(tmp_path)})
    app = create_app(cfg, FakePipeline(), GatewayCore(cfg, FakePipeline()))
    paths = set(app.openapi()["paths"])
    assert {"/healthz", "/readyz", "/metrics"} <= paths
    assert not any(p.startswith("/v1/") for p in paths)


async def test_worker_role_answers_404_for_the_public_api(tmp_path):
    cfg = GatewayConfig(role="worker", stores={"job_store": "redis", "redis_url": "redis://127.0.0.1:1/0",
                                               "data_dir": str(tmp_path)})
    fake = FakePipeline()
    core = GatewayCore(cfg, fake)
    try:
        app = create_app(cfg, fake, core)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://w") as c:
            assert (await c.post("/v1/jobs")).status_code == 404
            assert (await c.get("/healthz")).status_code == 200
    finally:
        await core.close()
