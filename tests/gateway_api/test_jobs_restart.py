"""Jobs across a gateway restart on the embedded stores (SQLite + directory, as ``inkstream up``):
jobs left queued or running are queued again at the next start and finish there; one whose document
is gone fails with a clear error; the result of a failed job never answers 503 + Retry-After.
"""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
from collections.abc import AsyncIterator

import httpx
import pytest

from gateway.apis.rest import create_app
from gateway.core import GatewayCore
from gateway.jobs.manager import DOCUMENT_LOST
from gateway.jobs.results import document_blob
from gateway.stores import JobRecord, SqliteJobStore
from tests.gateway_api.conftest import FakePipeline, expected_text, marked_pdf

pytestmark = pytest.mark.timeout(60)


@contextlib.asynccontextmanager
async def gateway(cfg, fake: FakePipeline) -> AsyncIterator[tuple[httpx.AsyncClient, GatewayCore]]:
    """One gateway process's core and a REST client of it; closed (as at Ctrl-C) on exit."""
    core = GatewayCore(cfg, fake)
    core.start()
    app = create_app(cfg, fake, core)
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as c:
            yield c, core
    finally:
        await core.close()


async def submit(c: httpx.AsyncClient, numbers: list[int]) -> str:
    r = await c.post("/v1/jobs", files={"file": ("d.pdf", marked_pdf(numbers))}, data={"format": "text"})
    assert r.status_code == 202, r.text
    return str(r.json()["job_id"])


async def wait_for(c: httpx.AsyncClient, job_id: str, done, timeout_s: float = 20.0) -> dict:
    for _ in range(int(timeout_s / 0.05)):
        job = (await c.get(f"/v1/jobs/{job_id}")).json()
        if done(job):
            return job
        await asyncio.sleep(0.05)
    raise AssertionError(f"job {job_id} never got there: {job}")


async def test_queued_and_running_jobs_run_again_after_a_restart(gw_config):
    fake = FakePipeline(delay_s=0.3)
    async with gateway(gw_config, fake) as (c, core):
        running = await submit(c, [1, 2, 3, 4])
        await wait_for(c, running, lambda j: j["pages_done"] >= 1)
        await core.jobs.pause(True)  # the next job stays queued
        queued = await submit(c, [5, 6])
    # the old gateway was stopped: neither job was failed by it; the running one kept its checkpoints
    store = SqliteJobStore(pathlib.Path(gw_config.stores.data_dir) / "jobs.sqlite")
    assert [store.get(j).status for j in (running, queued)] == ["running", "queued"]
    checkpointed = len(store.pages(running))
    store.close()
    assert 1 <= checkpointed < 4
    fake2 = FakePipeline()
    async with gateway(gw_config, fake2) as (c, core):
        first = await wait_for(c, running, lambda j: j["status"] in ("done", "failed"))
        second = await wait_for(c, queued, lambda j: j["status"] in ("done", "failed"))
        assert first["status"] == "done" and second["status"] == "done", (first, second)
        text = (await c.get(f"/v1/jobs/{running}/result")).text
        assert all(expected_text(n) in text for n in (1, 2, 3, 4)), text
        text = (await c.get(f"/v1/jobs/{queued}/result")).text
        assert all(expected_text(n) in text for n in (5, 6)), text
        # the pages read before the stop are not read again
        assert fake2.pages_run == (4 - checkpointed) + 2
        assert first["attempts"] == 2 and second["attempts"] == 1


async def test_a_job_whose_document_is_gone_fails_clearly(gw_config):
    fake = FakePipeline()
    async with gateway(gw_config, fake) as (c, core):
        await core.jobs.pause(True)
        job_id = await submit(c, [7])
        core.results.delete(document_blob(job_id))
    async with gateway(gw_config, fake) as (c, core):
        job = await wait_for(c, job_id, lambda j: j["status"] != "queued")
        assert job["status"] == "failed" and job["error"] == {"code": DOCUMENT_LOST[0], "reason": DOCUMENT_LOST[0],
                                                   "message": DOCUMENT_LOST[1]}
        r = await c.get(f"/v1/jobs/{job_id}/result")
        assert r.status_code == 409 and "retry-after" not in r.headers, r.text
        assert "no longer stored" in r.json()["error"]["message"]
    assert fake.pages_run == 0


async def test_the_result_of_a_job_failed_by_an_outage_is_not_503(gw_config):
    # 503 + Retry-After invites a client to ask again; the job's failure never changes, so it would
    # ask forever. It answers 409 JOB_FAILED with the job's own error instead.
    async with gateway(gw_config, FakePipeline()) as (c, core):
        now = 1.0
        core.job_store.create(JobRecord(job_id="j1", status="failed", error_code="UNAVAILABLE",
                                        error_message="no decoder replica is reachable", created_at=now))
        r = await c.get("/v1/jobs/j1/result")
        assert r.status_code == 409 and "retry-after" not in r.headers, r.text
        assert r.json()["error"] == {"code": "FAILED_PRECONDITION", "reason": "JOB_FAILED",
                                     "message": "job j1 failed: UNAVAILABLE: no decoder replica is reachable; "
                                                "submit the job again (this job's result stays failed)"}
        # Found by tryout9: a job failed with no replica up answered "job ... failed: UNAVAILABLE: the
        # gateway cannot read documents now (...); retry shortly", inviting the client to ask again for
        # a result that never changes; the hint now says what helps.
        core.job_store.create(JobRecord(job_id="j3", status="failed", error_code="UNAVAILABLE",
                                        error_message="the gateway cannot read documents now (no SERVING "
                                                      "encoder or decoder replica); retry shortly", created_at=now))
        msg = (await c.get("/v1/jobs/j3/result")).json()["error"]["message"]
        assert "retry shortly" not in msg and msg.endswith("replica); submit the job again "
                                                           "(this job's result stays failed)"), msg
        core.job_store.create(JobRecord(job_id="j2", status="failed", error_code="INVALID_ARGUMENT",
                                        error_message="page 9 does not exist", created_at=now))
        r = await c.get("/v1/jobs/j2/result")  # a failure of the document keeps its own status
        assert r.status_code == 400 and r.json()["error"]["message"] == "page 9 does not exist"
