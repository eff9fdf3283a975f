"""Scale-out data plane with real processes: two gateways (``inkstream serve gateway``) on one real
redis-server (append-only persistence) and one real SeaweedFS S3 server, sharing one encoder and
one decoder (LocalStack, tiny deepseek_ocr2 checkpoint). Servers: tests/system/servers.py.

* kill -9 of the gateway running a 20-page job: the other takes it over after the lease and
  finishes it; every page once; pages the dead one had finished are not encoded again;
* Redis restarted mid-job, S3 down at submit (503 + Retry-After) and mid-job: jobs complete;
* a 200-page PDF uploaded with a presigned PUT, then a job with ``source=``: the gateway's peak RSS
  stays within 1.15x of its peak for a 1-page job;
* every ``inkstream_*`` series the k8s alert rules name is on the gateways' /metrics.
"""

from __future__ import annotations

import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from launcher.local_stack import LocalStack
from tests.gateway_api.conftest import marked_pdf
from tests.ops.test_k8s import K8S, render
from tests.ops.test_k8s_scaled import alert_series
from tests.system.servers import GatewayProcess, RedisServer, SeaweedS3, running

pytestmark = [pytest.mark.slow, pytest.mark.system, pytest.mark.timeout(600)]

LEASE_S = 3.0
N_PAGES = 20
WINDOW = 4  # pages of one request in flight (encoded by a gateway that dies, not finished)


@pytest.fixture(scope="module")
def world(tiny_ds_checkpoint, tmp_path_factory):
    """(stack, redis, s3, env for gateways, log dir)."""
    logs = tmp_path_factory.mktemp("logs")
    redis_srv = RedisServer(tmp_path_factory.mktemp("redis")).start()
    s3 = SeaweedS3(tmp_path_factory.mktemp("seaweed")).start()
    stack = LocalStack(tiny_ds_checkpoint, encoders=1, decoders=1, gateway=False, startup_timeout_s=150,
                       env={"INKSTREAM_DECODER__MAX_NEW_TOKENS": "8"})
    st = "INKSTREAM_GATEWAY__STORES__"
    env = {**s3.env, f"{st}JOB_STORE": "redis", f"{st}REDIS_URL": redis_srv.url, f"{st}RESULT_STORE": "s3",
           f"{st}S3_URL": f"s3://{s3.bucket}/t",
           "INKSTREAM_GATEWAY__STORES__JOB_LEASE_S": str(LEASE_S),
           "INKSTREAM_GATEWAY__PIPELINE__MAX_PAGES_PER_REQUEST": str(WINDOW),
           "INKSTREAM_WEBHOOK_ALLOWED_HOSTS": "127.0.0.1"}
    with running(redis_srv, s3), stack:
        yield stack, redis_srv, s3, env, logs


def gateways(world, n: int = 2) -> list[GatewayProcess]:
    stack, _, _, env, logs = world
    gws = [GatewayProcess(stack.encoder_addrs, stack.decoder_addrs, env, logs / f"gw-{time.time_ns()}-{i}.log")
           for i in range(n)]
    for g in gws:
        g.wait_ready()
    return gws


def encoded(stack: LocalStack) -> float:
    return sum(v for k, v in stack.metrics("encoder", 0).items()
               if k.startswith("inkstream_encoder_pages_encoded_total"))


def status(url: str, job_id: str) -> dict:
    return httpx.get(f"{url}/v1/jobs/{job_id}", timeout=10).json()


def wait(url: str, job_id: str, cond, timeout_s: float = 180) -> dict:
    deadline, job = time.monotonic() + timeout_s, {}
    while time.monotonic() < deadline:
        try:
            job = status(url, job_id)
        except httpx.HTTPError:
            job = {}
        if job and cond(job):
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id}: condition not met in {timeout_s} s: {job}")


def submit(url: str, data: bytes | None = None, **fields) -> dict:
    files = {"file": ("d.pdf", data)} if data is not None else None
    r = httpx.post(f"{url}/v1/jobs", files=files, data={"format": "json", **fields}, timeout=60)
    assert r.status_code == 202, r.text
    return r.json()


def check_result(url: str, job_id: str, n: int) -> None:
    res = httpx.get(f"{url}/v1/jobs/{job_id}/result", timeout=30).json()
    assert [p["index"] for p in res["pages"]] == list(range(1, n + 1))  # every page exactly once, in order
    assert all(p["status"] == "ok" for p in res["pages"]), [p["error"] for p in res["pages"] if p["error"]]


def test_killed_gateway_job_finishes_on_the_other(world):
    stack = world[0]
    gws = gateways(world)
    with running(*gws):
        job = submit(gws[0].url, marked_pdf(list(range(1, N_PAGES + 1))))
        run = wait(gws[0].url, job["job_id"], lambda j: j["status"] == "running" and j["pages_done"] >= WINDOW + 2)
        victim = next(g for g in gws if run["worker"].split("-")[-2] == str(g.proc.pid))
        other = next(g for g in gws if g is not victim)
        victim.kill()
        killed_at, enc_at_kill = time.monotonic(), encoded(stack)
        done_at_kill = status(other.url, job["job_id"])["pages_done"]  # checkpointed by the dead gateway
        assert done_at_kill < N_PAGES, "the job finished before the kill: nothing to take over"
        moved = wait(other.url, job["job_id"], lambda j: j["worker"] != run["worker"], 60)
        takeover_s = time.monotonic() - killed_at
        final = wait(other.url, job["job_id"], lambda j: j["status"] in ("done", "failed"))
        assert final["status"] == "done" and final["pages_done"] == N_PAGES and final["attempts"] == 2, final
        check_result(other.url, job["job_id"], N_PAGES)
        assert encoded(stack) - enc_at_kill <= N_PAGES - done_at_kill + WINDOW < N_PAGES
        assert takeover_s < LEASE_S + 10, (takeover_s, moved)


def test_alert_rule_series_are_exported(world):
    (gw,) = gateways(world, 1)
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    with running(gw):
        try:
            r = httpx.post(f"{gw.url}/v1/ocr", files={"file": ("d.pdf", marked_pdf([5]))}, timeout=60)
            assert r.status_code == 200
            job = submit(gw.url, marked_pdf([6]), callback_url=f"http://127.0.0.1:{srv.server_port}/hook")
            wait(gw.url, job["job_id"], lambda j: j["webhook"] == "delivered", 60)
        finally:
            srv.shutdown()
        time.sleep(2.5)  # the queue gauges are refreshed every 2 s
        metrics = httpx.get(f"{gw.url}/metrics", timeout=10).text
    names = {line.split("{")[0].split(" ")[0] for line in metrics.splitlines() if line.startswith("inkstream_")}
    missing = {n for n in alert_series(render(K8S / "overlays" / "scaled"))
               if not any(m == n or m.startswith(n + "_") for m in names)}
    assert not missing, f"alert rules name series the gateway does not export: {missing}"


class _Ok(BaseHTTPRequestHandler):
    """A webhook receiver answering 200."""

    def do_POST(self):
        self.rfile.read(int(self.headers["content-length"]))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_redis_restart_mid_job_loses_nothing(world):
    _, redis_srv, _, _, _ = world
    (gw,) = gateways(world, 1)
    with running(gw):
        small = [submit(gw.url, marked_pdf([i]))["job_id"] for i in (1, 2, 3)]
        job = submit(gw.url, marked_pdf(list(range(1, N_PAGES + 1))))
        wait(gw.url, job["job_id"], lambda j: j["status"] == "running" and j["pages_done"] >= 2)
        redis_srv.restart(down_s=1.0)
        final = wait(gw.url, job["job_id"], lambda j: j["status"] in ("done", "failed"))
        assert final["status"] == "done", final
        check_result(gw.url, job["job_id"], N_PAGES)
        for job_id in small:
            assert wait(gw.url, job_id, lambda j: j["status"] in ("done", "failed"))["status"] == "done"


def test_object_store_down_at_submit_and_mid_job(world):
    _, _, s3, _, _ = world
    (gw,) = gateways(world, 1)
    with running(gw):
        job = submit(gw.url, marked_pdf(list(range(1, N_PAGES + 1))))
        wait(gw.url, job["job_id"], lambda j: j["status"] == "running" and j["pages_done"] >= 2)
        s3.stop()
        try:  # down at submit: 503 + Retry-After, while the running job waits
            r = httpx.post(f"{gw.url}/v1/jobs", files={"file": ("d.pdf", marked_pdf([1]))}, timeout=60)
            assert r.status_code == 503 and int(r.headers["retry-after"]) >= 1, r.text
            assert "object store" in r.json()["error"]["message"]
            time.sleep(2.0)
            assert status(gw.url, job["job_id"])["status"] == "running"  # never done on a half-written result
        finally:
            s3.start()
        final = wait(gw.url, job["job_id"], lambda j: j["status"] in ("done", "failed"))
        assert final["status"] == "done", final
        check_result(gw.url, job["job_id"], N_PAGES)


def test_presigned_upload_of_200_pages_keeps_gateway_memory_flat(world):
    (gw,) = gateways(world, 1)
    with running(gw):
        def via_source(pdf: bytes) -> dict:
            up = httpx.post(f"{gw.url}/v1/uploads", timeout=10).json()
            assert httpx.put(up["upload_url"], content=pdf, timeout=120).status_code == 200
            job = submit(gw.url, source=up["source"])
            return wait(gw.url, job["job_id"], lambda j: j["status"] in ("done", "failed"), 400)

        assert via_source(marked_pdf([1]))["status"] == "done"
        one_page = gw.peak_rss_bytes()
        big = via_source(marked_pdf([(i % 1000) + 1 for i in range(200)]))
        assert big["status"] == "done" and big["pages_done"] == 200, big
        peak = gw.peak_rss_bytes()
        print(f"gateway peak RSS: 1-page job {one_page / 2**20:.0f} MiB, 200-page job {peak / 2**20:.0f} MiB "
              f"({peak / one_page:.3f}x)")
        assert peak <= 1.15 * one_page


def test_default_stack_needs_neither_redis_nor_s3():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INKSTREAM_GATEWAY__STORES", "AWS_"))}
    from gateway.config import load_gateway_config

    st = load_gateway_config(environ=env).stores
    assert (st.job_store, st.result_store) == ("sqlite", "dir")
