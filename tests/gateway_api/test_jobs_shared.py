"""Jobs on shared stores, in-process: two GatewayCores (gateways A and B) on one real redis-server
and one real SeaweedFS S3 server (tests/system/servers.py), with the fake pipeline of conftest.
Any gateway answers for any job; the cache is shared; pause / resume; webhooks; sources; cancel
across gateways; a store down -> 503 + Retry-After and not ready.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from gateway.apis.rest import create_app
from gateway.config import GatewayConfig
from gateway.core import GatewayCore
from tests.gateway_api.conftest import FakePipeline, expected_text, marked_pdf
from tests.system.servers import RedisServer, SeaweedS3

pytestmark = pytest.mark.timeout(120)
SECRET = "hook-secret"


@pytest.fixture(scope="module")
def engines(tmp_path_factory):
    redis_srv = RedisServer(tmp_path_factory.mktemp("redis")).start()
    s3 = SeaweedS3(tmp_path_factory.mktemp("seaweed")).start()
    mp = pytest.MonkeyPatch()
    for k, v in s3.env.items():
        mp.setenv(k, v)
    mp.setenv("INKSTREAM_WEBHOOK_SECRET", SECRET)
    mp.setenv("INKSTREAM_WEBHOOK_ALLOWED_HOSTS", "127.0.0.1")
    try:
        yield redis_srv, s3
    finally:
        mp.undo()
        s3.stop()
        redis_srv.stop()


def shared_config(redis_srv: RedisServer, s3: SeaweedS3, tmp_path, name: str, prefix: str) -> GatewayConfig:
    cfg = GatewayConfig()
    st = cfg.stores
    st.job_store, st.redis_url, st.result_store, st.s3_url = "redis", redis_srv.url, "s3", f"s3://{s3.bucket}/{prefix}"
    st.data_dir, st.job_lease_s = str(tmp_path / name), 3.0
    cfg.request_timeout_s = 30.0
    return cfg


@pytest.fixture
async def pair(engines, tmp_path, request):
    """Gateways A and B (each its own core, fake pipeline and ASGI client) on the same Redis DB
    (flushed first) and the same bucket prefix.
    """
    redis_srv, s3 = engines
    import redis as redis_py

    redis_py.Redis.from_url(redis_srv.url).flushdb()
    out = []
    async with contextlib.AsyncExitStack() as stack:
        for name in ("a", "b"):
            fake = FakePipeline(delay_s=0.02)
            core = GatewayCore(shared_config(redis_srv, s3, tmp_path, name, request.node.name[:40]), fake)
            core.start()
            stack.push_async_callback(core.close)
            app = create_app(core.config, fake, core)
            client = await stack.enter_async_context(
                httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=f"http://{name}"))
            out.append((client, fake, core))
        yield out


async def wait_status(c, job_id: str, statuses: tuple[str, ...], timeout: float = 30.0) -> dict:
    job: dict = {}
    for _ in range(int(timeout / 0.05)):
        job = (await c.get(f"/v1/jobs/{job_id}")).json()
        if job["status"] in statuses:
            return job
        await asyncio.sleep(0.05)
    raise AssertionError(f"job {job_id} never reached {statuses}: {job}")


async def test_any_gateway_answers_and_the_result_is_in_s3(pair, engines):
    (a, _, core_a), (b, fake_b, core_b) = pair
    core_b.worker and await core_b.worker.close()  # only A works: B answers from the shared stores
    job = (await a.post("/v1/jobs", files={"file": ("d.pdf", marked_pdf([4, 5]))}, data={"format": "text"})).json()
    done = await wait_status(b, job["job_id"], ("done", "failed"))
    assert done["status"] == "done" and done["pages_done"] == 2 and done["error"] is None
    assert fake_b.pages_run == 0
    text = (await b.get(f"/v1/jobs/{job['job_id']}/result")).text
    assert [t.strip() for t in text.split("\f")] == [expected_text(4), expected_text(5)]
    assert httpx.get(done["result_url"]).text == text  # presigned GET of the job's own format
    keys = {o["Key"].rsplit("/", 1)[1] for o in engines[1].client().list_objects_v2(
        Bucket=engines[1].bucket, Prefix=f"{core_a.results.prefix}/{job['job_id']}/")["Contents"]}
    assert {"result.json", "pages.ndjson", "document.md", "document.txt", "document"} <= keys


async def test_cache_is_shared_between_gateways(pair):
    (a, fake_a, _), (b, fake_b, _) = pair
    pdf = marked_pdf([7, 8, 9])
    first = await a.post("/v1/ocr", files={"file": ("d.pdf", pdf)}, data={"format": "json"})
    second = await b.post("/v1/ocr", files={"file": ("d.pdf", pdf)}, data={"format": "json"})
    assert first.headers["x-inkstream-cache"] == "miss" and second.headers["x-inkstream-cache"] == "hit"
    assert second.json()["cached"] is True and fake_b.pages_run == 0 and fake_a.pages_run == 3
    assert [p["text"] for p in second.json()["pages"]] == [p["text"] for p in first.json()["pages"]]


async def test_pause_accepts_then_resume_runs(pair):
    (a, _, _), (b, _, _) = pair
    assert (await b.post("/v1/admin/queue/pause")).json()["paused"] is True
    job = await a.post("/v1/jobs", files={"file": ("d.pdf", marked_pdf([1]))})
    assert job.status_code == 202
    await asyncio.sleep(1.5)
    assert (await b.get(f"/v1/jobs/{job.json()['job_id']}")).json()["status"] == "queued"
    state = (await a.get("/v1/admin/queue")).json()
    assert state["paused"] and state["queued"] == 1 and state["oldest_queued_age_s"] >= 1.0
    assert (await a.post("/v1/admin/queue/resume")).json()["paused"] is False
    assert (await wait_status(b, job.json()["job_id"], ("done", "failed")))["status"] == "done"


async def test_entry_read_as_the_queue_is_paused_waits_for_resume(engines):
    """A worker's blocking read (XREADGROUP, up to POLL_S) that began before the pause returns the
    entry put after it: the queue must hold it, lease renewed, until resume (the race CI caught)."""
    from gateway.jobs.queue import POLL_S, RedisQueue

    redis_srv, _ = engines
    q = RedisQueue(redis_srv.url, lease_s=3.0, prefix="race:")
    try:
        for _ in range(5):  # the read is in flight for most of each POLL_S: a few tries hit it
            taking = asyncio.create_task(q.take())
            await asyncio.sleep(POLL_S / 4)
            await q.set_paused(True)
            await q.put("job-race", created_at=0.0)
            await asyncio.sleep(2 * POLL_S)
            assert not taking.done(), "an entry was handed to the worker while the queue was paused"
            await q.set_paused(False)
            delivery = await asyncio.wait_for(taking, 4 * POLL_S)
            assert delivery.job_id == "job-race"
            await q.ack(delivery)
    finally:
        await q.close()


async def test_idempotency_key_across_gateways(pair):
    (a, _, _), (b, _, _) = pair
    pdf = marked_pdf([2])
    first = (await a.post("/v1/jobs", files={"file": ("d.pdf", pdf)}, headers={"Idempotency-Key": "k1"})).json()
    again = (await b.post("/v1/jobs", files={"file": ("d.pdf", pdf)}, headers={"Idempotency-Key": "k1"})).json()
    assert again["job_id"] == first["job_id"]
    other = await b.post("/v1/jobs", files={"file": ("d.pdf", marked_pdf([3]))}, headers={"Idempotency-Key": "k1"})
    assert other.status_code == 422


async def test_cancel_on_b_stops_the_job_running_on_a(pair):
    (a, fake_a, _), (b, _, core_b) = pair
    await core_b.worker.close()
    fake_a.delay_s = 0.5
    job = (await a.post("/v1/jobs", files={"file": ("d.pdf", marked_pdf(list(range(1, 21))))})).json()
    await wait_status(b, job["job_id"], ("running",))
    assert (await b.delete(f"/v1/jobs/{job['job_id']}")).json()["status"] == "cancelled"
    await asyncio.sleep(1.5)
    ran = fake_a.pages_run
    await asyncio.sleep(1.0)
    assert fake_a.pages_run == ran < 20  # A stopped
    assert (await a.get(f"/v1/jobs/{job['job_id']}/result")).status_code == 409


class Hook(BaseHTTPRequestHandler):
    """Answers 500 to the first two POSTs, then 200; keeps (body, signature) of each."""

    seen: list[tuple[bytes, str]] = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["content-length"]))
        Hook.seen.append((body, self.headers.get("x-inkstream-signature", "")))
        self.send_response(500 if len(Hook.seen) <= 2 else 200)
        self.end_headers()

    def log_message(self, *args):
        pass


async def test_webhook_retried_until_2xx_with_valid_signatures(pair, monkeypatch):
    (a, _, core_a), (b, _, _) = pair
    monkeypatch.setattr(core_a.jobs.webhooks, "base_s", 0.05)
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    Hook.seen = []
    try:
        url = f"http://127.0.0.1:{srv.server_port}/hook"
        job = (await a.post("/v1/jobs", files={"file": ("d.pdf", marked_pdf([1]))}, data={"callback_url": url})).json()
        await wait_status(b, job["job_id"], ("done",))
        for _ in range(100):
            rec = (await b.get(f"/v1/jobs/{job['job_id']}")).json()
            if rec["webhook"]:
                break
            await asyncio.sleep(0.05)
        assert rec["webhook"] == "delivered" and rec["webhook_attempts"] == 3 and len(Hook.seen) == 3
        for body, sig in Hook.seen:
            assert sig == "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        payload = json.loads(Hook.seen[-1][0])
        assert payload["job_id"] == job["job_id"] and payload["status"] == "done" and payload["pages_done"] == 1
        assert payload["result_url"].startswith("http")
    finally:
        srv.shutdown()
    refused = await a.post("/v1/jobs", files={"file": ("d.pdf", marked_pdf([1]))},
                           data={"callback_url": "http://evil.example.com/x"})
    assert refused.status_code == 400 and "not allowed" in refused.json()["error"]["message"]


async def test_presigned_upload_then_source(pair, engines):
    (a, _, _), (b, _, _) = pair
    up = await a.post("/v1/uploads")
    assert up.status_code == 201 and up.json()["source"].startswith(f"s3://{engines[1].bucket}/")
    assert httpx.put(up.json()["upload_url"], content=marked_pdf([6, 2])).status_code == 200
    r = await b.post("/v1/ocr", data={"source": up.json()["source"], "format": "text"})
    assert r.status_code == 200 and r.text.split("\f")[0].strip() == expected_text(6)
    job = (await a.post("/v1/jobs", data={"source": up.json()["source"], "format": "json"})).json()
    res = await wait_status(b, job["job_id"], ("done", "failed"))
    assert res["status"] == "done" and res["pages_total"] == 2
    for bad in ("s3://other-bucket/x", "https://example.com/doc.pdf", f"s3://{engines[1].bucket}/missing",
                up.json()["source"].replace("/uploads/default/", "/uploads/other/")):
        r = await a.post("/v1/jobs", data={"source": bad})
        assert r.status_code in (400, 403, 404), (bad, r.text)


async def test_source_as_a_query_parameter_beside_multipart_options(pair):
    # Found in the new-user tryout: `curl -F format=text "/v1/ocr?source=s3://..."` was refused "no
    # document in the request" (the multipart parser judged the form alone), while the same source
    # with urlencoded options or a bare POST was read.
    (a, _, _), _ = pair
    up = (await a.post("/v1/uploads")).json()
    assert httpx.put(up["upload_url"], content=marked_pdf([3])).status_code == 200
    r = await a.post("/v1/ocr", params={"source": up["source"]}, files={"format": (None, "text")})
    assert r.status_code == 200, r.text
    assert r.text.strip() == expected_text(3)
    job = await a.post("/v1/jobs", params={"source": up["source"]}, files={"format": (None, "text")})
    assert job.status_code == 202, job.text


async def test_redis_down_means_not_ready_and_503(engines, tmp_path):
    redis_srv, s3 = engines
    cfg = shared_config(redis_srv, s3, tmp_path, "c", "down")
    cfg.stores.redis_url = "redis://127.0.0.1:1/0"  # nothing listens there
    fake = FakePipeline()
    core = GatewayCore(cfg, fake)
    core.start()
    app = create_app(cfg, fake, core)
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://c") as c:
            ready = await c.get("/readyz")
            assert ready.status_code == 503 and "127.0.0.1:1" in ready.json()["reason"]
            r = await c.post("/v1/jobs", files={"file": ("d.pdf", marked_pdf([1]))})
            assert r.status_code == 503 and int(r.headers["retry-after"]) >= 1
    finally:
        await core.close()


async def test_a_presigned_upload_while_the_object_store_is_down_is_503(engines, tmp_path, monkeypatch):
    """Found by tryout7: with the object store down, POST /v1/uploads still answered 201 with a presigned
    URL (signing needs no store), whose PUT then failed at the client. Now the store is asked first:
    503 + Retry-After, a message without the endpoint, within the S3 client's short timeouts."""
    import time

    redis_srv, s3 = engines
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")  # the store is down: nothing listens there
    cfg = shared_config(redis_srv, s3, tmp_path, "d", "down")
    fake = FakePipeline()
    core = GatewayCore(cfg, fake)
    core.start()
    app = create_app(cfg, fake, core)
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://d") as c:
            t0 = time.monotonic()
            r = await c.post("/v1/uploads")
            assert time.monotonic() - t0 < 20
            assert r.status_code == 503 and int(r.headers["retry-after"]) >= 1, r.text
            err = r.json()["error"]
            assert err["code"] == "UNAVAILABLE" and "object store cannot be reached" in err["message"], err
            assert "127.0.0.1" not in err["message"]
    finally:
        await core.close()
