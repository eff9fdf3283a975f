"""Asynchronous jobs over REST: lifecycle, progress, result formats, cancel, idempotency, expiry."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from gateway import service as service_mod
from gateway.apis.rest import create_app
from gateway.core import GatewayCore
from gateway.jobs import worker as worker_mod
from gateway.jobs.queue import Delivery
from gateway.stores import JobRecord, SqliteJobStore
from inkstream.errors import Unavailable
from tests.gateway_api.conftest import MODEL_ID, FakePipeline, expected_text, marked_pdf

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def env(gw_config):
    fake = FakePipeline(delay_s=0.05)
    core = GatewayCore(gw_config, fake)
    core.start()
    app = create_app(gw_config, fake, core)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as c:
        yield c, fake, core
    await core.close()


async def submit(c, data: bytes, key: str = "", **fields):
    headers = {"Idempotency-Key": key} if key else {}
    return await c.post("/v1/jobs", files={"file": ("d.pdf", data)}, data=fields, headers=headers)


async def wait_status(c, job_id: str, statuses: tuple[str, ...], timeout: float = 20.0) -> dict:
    for _ in range(int(timeout / 0.05)):
        job = (await c.get(f"/v1/jobs/{job_id}")).json()
        if job["status"] in statuses:
            return job
        await asyncio.sleep(0.05)
    raise AssertionError(f"job {job_id} never reached {statuses}: {job}")


async def test_job_lifecycle_and_result_formats(env):
    c, fake, _ = env
    r = await submit(c, marked_pdf([3, 1, 2]), format="json")
    assert r.status_code == 202
    job = r.json()
    assert job["status"] in ("queued", "running")
    assert job["pages_total"] == 0 and job["model_id"] == ""  # known once the worker opened the document
    assert r.headers["location"] == f"/v1/jobs/{job['job_id']}"
    done = await wait_status(c, job["job_id"], ("done", "failed"))
    assert done["status"] == "done" and done["pages_done"] == 3 and done["pages_total"] == 3
    assert done["model_id"] == MODEL_ID
    res = (await c.get(f"/v1/jobs/{job['job_id']}/result")).json()
    assert [p["text"] for p in res["pages"]] == [expected_text(n) for n in (3, 1, 2)]
    md = await c.get(f"/v1/jobs/{job['job_id']}/result", params={"format": "markdown"})
    assert md.headers["content-type"].startswith("text/markdown") and "<!-- page 3 -->" in md.text


async def test_job_validation_errors_are_immediate(env):
    c, _, _ = env
    r = await submit(c, b"not a document at all")
    assert r.status_code == 415
    r = await submit(c, marked_pdf([1]), pages="2-1")
    assert r.status_code == 400 and "reversed" in r.json()["error"]["message"]
    r = await submit(c, marked_pdf([1]), format="docx")
    assert r.status_code == 400
    assert (await c.get("/v1/jobs/nope")).status_code == 404


async def test_what_needs_the_document_fails_the_job_with_the_4xx_error(env):
    # Submission does not open the document (the worker does, once): a page past its end is the job's error.
    c, fake, _ = env
    job = (await submit(c, marked_pdf([1]), pages="7")).json()
    failed = await wait_status(c, job["job_id"], ("failed", "done"))
    assert failed["status"] == "failed" and failed["error"]["code"] == "INVALID_ARGUMENT"
    assert "page 7 does not exist" in failed["error"]["message"]
    assert fake.pages_run == 0


async def test_a_job_refused_by_its_worker_answers_the_same_status_and_reason_as_v1_ocr(env):
    # Found trying the bad-input corpus: /v1/ocr answered a zero-page PDF 422 NOTHING_TO_READ, but the same
    # document as a job failed and its result answered 400 with reason INVALID_ARGUMENT (the reason was lost).
    c, _, _ = env
    ocr = await c.post("/v1/ocr", files={"file": ("d.pdf", zero_page_pdf())})
    assert ocr.status_code == 422 and ocr.json()["error"]["reason"] == "NOTHING_TO_READ"
    job = (await submit(c, zero_page_pdf())).json()
    failed = await wait_status(c, job["job_id"], ("failed", "done"))
    assert failed["status"] == "failed"
    assert failed["error"] == {"code": "INVALID_ARGUMENT", "reason": "NOTHING_TO_READ",
                               "message": ocr.json()["error"]["message"]}
    res = await c.get(f"/v1/jobs/{job['job_id']}/result")
    assert res.status_code == 422 and res.json()["error"] == ocr.json()["error"]


async def test_a_request_without_a_document_says_the_three_ways_to_send_one(env):
    # Found in the new-user tryout: urlencoded options without a document (`curl -d format=text`) were
    # answered "the upload is empty (0 bytes)", and a multipart form without 'file' named only 'file'.
    c, _, _ = env
    for route in ("/v1/ocr", "/v1/jobs"):
        for kw in ({"data": {"format": "text"}}, {"files": {"format": (None, "text")}}, {"data": {"source": ""}}):
            r = await c.post(route, **kw)
            assert r.status_code == 400, (route, kw, r.text)
            msg = r.json()["error"]["message"]
            assert msg.startswith("no document in the request") and "'file'" in msg and "source=s3://" in msg, msg
    empty = await c.post("/v1/ocr", files={"file": ("d.pdf", b"")})  # a document was sent: it is empty
    assert empty.status_code == 400 and "empty (0 bytes)" in empty.json()["error"]["message"]


def zero_page_pdf() -> bytes:
    """A well-formed PDF whose page tree is empty."""
    import io

    import pikepdf

    out = io.BytesIO()
    pikepdf.new().save(out)
    return out.getvalue()


async def test_a_gateway_without_replicas_accepts_jobs_and_runs_them_once_one_is_up(env):
    c, fake, core = env
    fake.healthy = False  # no SERVING encoder or decoder replica

    async def no_encoder():
        raise Unavailable("no encoder replica answered its Info", retry_after_s=0.2)

    fake.encoder_info = no_encoder
    r = await submit(c, marked_pdf([4, 5]))
    assert r.status_code == 202  # needs only the stores and the queue
    job = r.json()
    await asyncio.sleep(1.0)
    assert (await c.get(f"/v1/jobs/{job['job_id']}")).json()["status"] in ("queued", "running")
    del fake.encoder_info  # the replica is up
    fake.healthy = True
    done = await wait_status(c, job["job_id"], ("done", "failed"))
    assert done["status"] == "done" and done["pages_total"] == 2
    text = (await c.get(f"/v1/jobs/{job['job_id']}/result", params={"format": "text"})).text
    assert expected_text(4) in text and expected_text(5) in text


async def test_without_replicas_until_the_deadline_the_job_fails_with_a_clear_error(env):
    c, fake, core = env
    core.config.stores.job_deadline_s = 1.5
    fake.healthy = False
    job = (await submit(c, marked_pdf([1]))).json()
    failed = await wait_status(c, job["job_id"], ("failed", "done"))
    assert failed["status"] == "failed" and failed["error"]["code"] == "UNAVAILABLE"
    assert "no SERVING decoder replica" in failed["error"]["message"]


async def test_the_document_is_opened_once_per_job(env, monkeypatch):
    c, _, _ = env
    opened: list[str] = []
    real = service_mod.open_document

    async def counting(upload, **kw):
        opened.append(upload.sha256)
        return await real(upload, **kw)

    monkeypatch.setattr(service_mod, "open_document", counting)
    job = (await submit(c, marked_pdf([1, 2, 3]))).json()
    assert opened == []  # not at submit
    assert (await wait_status(c, job["job_id"], ("done", "failed")))["status"] == "done"
    assert len(opened) == 1


async def test_cancel_running_job(env):
    c, fake, _ = env
    fake.delay_s = 0.3
    job = (await submit(c, marked_pdf(list(range(1, 21))))).json()
    await wait_status(c, job["job_id"], ("running",))
    r = await c.delete(f"/v1/jobs/{job['job_id']}")
    assert r.status_code == 200 and r.json()["status"] == "cancelled"
    assert r.json()["pages_done"] < 20
    res = await c.get(f"/v1/jobs/{job['job_id']}/result")
    # 409 Conflict, not nginx's 499 (that is a client that went away): the job, not the call, was cancelled.
    assert res.status_code == 409, res.text
    assert res.json() == {"error": {"code": "FAILED_PRECONDITION", "reason": "JOB_CANCELLED",
                                    "message": f"job {job['job_id']} was cancelled; it has no result"}}
    ran = fake.pages_run
    await asyncio.sleep(0.5)
    assert fake.pages_run == ran  # nothing runs after the cancel
    assert fake.admitted == 0


async def test_result_while_running_is_202(env):
    c, fake, _ = env
    fake.delay_s = 0.3
    job = (await submit(c, marked_pdf([1, 2, 3]))).json()
    r = await c.get(f"/v1/jobs/{job['job_id']}/result")
    assert r.status_code == 202 and r.json()["status"] in ("queued", "running")
    await c.delete(f"/v1/jobs/{job['job_id']}")


async def test_idempotency_key_returns_same_job(env):
    c, fake, _ = env
    pdf = marked_pdf([1, 2])
    a = (await submit(c, pdf, key="order-42")).json()
    b = (await submit(c, pdf, key="order-42")).json()
    assert a["job_id"] == b["job_id"]
    await wait_status(c, a["job_id"], ("done",))
    assert fake.pages_run == 2  # ran once
    other = await submit(c, marked_pdf([3]), key="order-42")
    assert other.status_code == 422 and "different document" in other.json()["error"]["message"]
    # its own reason: NOTHING_TO_READ (the document has no pages) would send a client the wrong way
    assert other.json()["error"]["reason"] == "IDEMPOTENCY_CONFLICT"
    opts = await submit(c, pdf, key="order-42", format="text")
    assert opts.status_code == 422 and opts.json()["error"]["reason"] == "IDEMPOTENCY_CONFLICT"
    c2 = (await submit(c, pdf, key="order-43")).json()
    assert c2["job_id"] != a["job_id"]


async def test_transient_failure_is_retried(env):
    c, fake, _ = env
    fake.raise_on_run = Unavailable("no decoder replica is reachable", retry_after_s=0.2)
    job = (await submit(c, marked_pdf([6]))).json()
    await asyncio.sleep(0.1)
    fake.raise_on_run = None  # the replica came back
    done = await wait_status(c, job["job_id"], ("done", "failed"))
    assert done["status"] == "done"
    assert (await c.get(f"/v1/jobs/{job['job_id']}/result", params={"format": "text"})).text.strip() == expected_text(6)


async def test_failed_job_reports_its_error(env):
    c, fake, core = env
    core.config.stores.job_deadline_s = 1.5  # transient failures are retried until the job's deadline
    fake.raise_on_run = Unavailable("no decoder replica is reachable", retry_after_s=0.1)
    job = (await submit(c, marked_pdf([1]))).json()
    failed = await wait_status(c, job["job_id"], ("failed", "done"))
    assert failed["status"] == "failed"
    assert failed["error"]["code"] == "UNAVAILABLE" and "no decoder replica" in failed["error"]["message"]
    r = await c.get(f"/v1/jobs/{job['job_id']}/result")  # not 503 + Retry-After: asking again never helps
    assert r.status_code == 409 and r.json()["error"]["reason"] == "JOB_FAILED" and "retry-after" not in r.headers
    assert "UNAVAILABLE: no decoder replica" in r.json()["error"]["message"]


async def test_unexpected_error_is_generic_500(env):
    c, fake, _ = env

    async def broken_info():
        raise RuntimeError("secret internals")

    fake.encoder_info = broken_info
    r = await submit(c, marked_pdf([2]))
    assert r.status_code == 202  # the encoder is asked by the worker, not at submit
    failed = await wait_status(c, r.json()["job_id"], ("failed", "done"))
    assert failed["status"] == "failed" and failed["error"]["code"] == "INTERNAL"
    assert "secret" not in str(failed)


def test_unfinished_jobs_of_earlier_process_are_listed_and_finished_ones_expire(tmp_path):
    store = SqliteJobStore(tmp_path / "jobs.sqlite")
    store.create(JobRecord(job_id="a", status="running", updated_at=1.0, created_at=2.0))
    store.create(JobRecord(job_id="q", status="queued", updated_at=1.0, created_at=1.0))
    store.create(JobRecord(job_id="b", status="done", updated_at=1.0))
    store.create(JobRecord(job_id="c", status="done", updated_at=10.0))
    assert [j.job_id for j in store.unfinished()] == ["q", "a"]  # oldest first
    assert store.expired(before=5.0) == ["b"]  # unfinished jobs never expire
    _, created = store.create(JobRecord(job_id="d", idempotency_key="k"))
    existing, created2 = store.create(JobRecord(job_id="e", idempotency_key="k"))
    assert created and not created2 and existing.job_id == "d"
    store.close()


async def test_running_jobs_count_in_the_autoscaling_gauge(env):
    # The gateway HPA scales on inkstream_gateway_requests_inflight: a gateway busy with jobs only
    # must not look idle.
    c, fake, core = env
    assert core.worker._on_running == core.metrics.inflight.add
    deltas: list[int] = []
    core.worker._on_running = deltas.append
    fake.delay_s = 0.3
    job = (await submit(c, marked_pdf([1, 2]))).json()
    for _ in range(100):
        if deltas:
            break
        await asyncio.sleep(0.02)
    assert deltas == [1]  # counted while it runs
    await wait_status(c, job["job_id"], ("done", "failed"))
    for _ in range(100):  # the record says done a moment before the worker's task ends
        if len(deltas) > 1:
            break
        await asyncio.sleep(0.02)
    assert deltas == [1, -1]


async def test_job_result_says_when_it_came_from_the_cache(env):
    c, fake, _ = env
    pdf = marked_pdf([6, 7])
    r = await c.post("/v1/ocr", files={"file": ("d.pdf", pdf)}, data={"format": "json"})
    assert r.headers["x-inkstream-cache"] == "miss" and r.json()["cached"] is False
    job = (await submit(c, pdf, format="json")).json()
    await wait_status(c, job["job_id"], ("done",))
    res = await c.get(f"/v1/jobs/{job['job_id']}/result")
    assert res.headers["x-inkstream-cache"] == "hit" and res.json()["cached"] is True
    assert fake.pages_run == 2


async def test_a_checkpoint_write_that_keeps_failing_fails_the_job_naming_the_page(env, monkeypatch):
    c, fake, core = env
    core.config.stores.job_deadline_s = 1.5

    def down(job_id, index, page):
        raise Unavailable("the job store (sqlite) is unreachable", retry_after_s=0.1)

    monkeypatch.setattr(core.job_store, "put_page", down)
    job = (await submit(c, marked_pdf([1, 2]))).json()
    failed = await wait_status(c, job["job_id"], ("failed", "done"))
    assert failed["status"] == "failed" and failed["error"]["code"] == "UNAVAILABLE"
    assert "checkpoint of page 1 could not be stored" in failed["error"]["message"]
    assert "unreachable" in failed["error"]["message"]


async def test_a_checkpoint_write_that_fails_once_is_retried(env, monkeypatch):
    c, fake, core = env
    real, calls = core.job_store.put_page, []

    def flaky(job_id, index, page):
        calls.append(index)
        if len(calls) == 1:
            raise Unavailable("the job store is unreachable", retry_after_s=0.1)
        return real(job_id, index, page)

    monkeypatch.setattr(core.job_store, "put_page", flaky)
    job = (await submit(c, marked_pdf([1, 2]))).json()
    done = await wait_status(c, job["job_id"], ("failed", "done"))
    assert done["status"] == "done" and done["pages_done"] == 2
    assert calls == [1, 1, 2] and fake.pages_run == 2  # the page was not read again


async def test_a_failure_that_cannot_be_recorded_is_logged_and_left_to_the_queue(env, monkeypatch, caplog):
    _, _, core = env
    monkeypatch.setattr(worker_mod, "RECORD_TRIES", 2)
    acked: list[str] = []

    async def finish(job_id, status, **fields):
        raise Unavailable("the job store is unreachable")

    async def ack(d):
        acked.append(d.job_id)

    monkeypatch.setattr(core.worker, "finish", finish)
    monkeypatch.setattr(core.worker.queue, "ack", ack)
    with caplog.at_level("ERROR", logger="inkstream.gateway.jobs"):
        await core.worker._fail(Delivery("j1"), "INVALID_ARGUMENT", "page 7 does not exist")
    assert acked == []
    assert "job j1 failed (INVALID_ARGUMENT: page 7 does not exist)" in caplog.text
    assert "could not be recorded (the job store is unreachable)" in caplog.text


async def test_drain_lets_a_running_job_finish_and_takes_no_new_one(env):
    # Ctrl-C on `inkstream up` drains: a job already running here finishes (before, it was cancelled at
    # once and marked failed "the gateway shut down"), and a queued one is not started by this worker.
    c, fake, core = env
    fake.delay_s = 0.2
    job = (await submit(c, marked_pdf([1, 2, 3]))).json()
    await wait_status(c, job["job_id"], ("running",))
    await core.drain(20.0)
    assert not core.worker.tasks
    done = (await c.get(f"/v1/jobs/{job['job_id']}")).json()
    assert done["status"] == "done" and done["pages_done"] == 3, done
    core.worker.start()  # refused once draining: nothing consumes the queue any more
    assert core.worker._loop_task is None or core.worker._loop_task.done()


def test_a_reused_idempotency_key_keeps_its_reason_over_grpc():
    from inkstream.errors import IdempotencyConflict, error_for_code
    err = error_for_code("INVALID_ARGUMENT", "reused", None, "IDEMPOTENCY_CONFLICT")
    assert type(err) is IdempotencyConflict and err.http_status == 422


async def test_pages_past_a_jobs_deadline_name_the_jobs_deadline(env):
    """A job whose pages are not read by its deadline (``stores.job_deadline_s`` from submission)
    says so on each page it lost; the message said "the request deadline", a synchronous request's
    (``request_timeout_s``), which a job's submitter cannot change (tryout: 4 pages, 12 s deadline).
    """
    c, fake, core = env
    core.config.stores.job_deadline_s = 1.0
    fake.delay_s = 5.0
    job = (await submit(c, marked_pdf([1, 2]), format="json")).json()
    failed = await wait_status(c, job["job_id"], ("failed", "done"))
    assert failed["status"] == "failed" and failed["error"]["code"] == "DEADLINE_EXCEEDED", failed
    message = failed["error"]["message"]
    assert "pages 1-2: DEADLINE_EXCEEDED" in message and "job_deadline_s" in message, message
    assert "request deadline" not in message


async def test_a_job_whose_every_page_failed_fails_with_each_pages_reason(env):
    """A job none of whose pages could be read ended ``done``, every page an error; it fails, with
    each page's reason in its error (found by the tryout: a job whose pages all missed its deadline).
    A page failing transiently is read again until the deadline first.
    """
    c, fake, core = env
    core.config.stores.job_deadline_s = 1.5
    fake.fail = {1, 2}
    job = (await submit(c, marked_pdf([1, 2]), format="json")).json()
    failed = await wait_status(c, job["job_id"], ("failed", "done"))
    assert failed["status"] == "failed" and failed["error"]["code"] == "UNAVAILABLE", failed
    assert "pages 1-2: UNAVAILABLE: no decoder replica answered" in failed["error"]["message"]
    assert fake.pages_run > 2  # read again before the deadline
    r = await c.get(f"/v1/jobs/{job['job_id']}/result")
    assert r.status_code == 409 and r.json()["error"]["reason"] == "JOB_FAILED", r.text


async def test_a_page_that_failed_transiently_is_read_again_until_the_deadline(env):
    c, fake, core = env
    core.config.stores.job_deadline_s = 20.0
    fake.fail = {2}
    job = (await submit(c, marked_pdf([1, 2, 3]), format="json")).json()
    while fake.pages_run < 3:
        await asyncio.sleep(0.05)
    fake.fail = set()  # the replica is back
    done = await wait_status(c, job["job_id"], ("failed", "done"))
    assert done["status"] == "done", done
    pages = (await c.get(f"/v1/jobs/{job['job_id']}/result")).json()["pages"]
    assert [p["text"] for p in pages] == [expected_text(n) for n in (1, 2, 3)]
    assert fake.pages_run == 4  # only the failed page again


async def test_a_job_with_some_pages_read_is_done_with_the_others_errors(env):
    c, fake, core = env
    core.config.stores.job_deadline_s = 1.0
    fake.fail = {2}
    job = (await submit(c, marked_pdf([1, 2]), format="json")).json()
    done = await wait_status(c, job["job_id"], ("failed", "done"))
    assert done["status"] == "done", done
    pages = (await c.get(f"/v1/jobs/{job['job_id']}/result")).json()["pages"]
    assert [p["status"] for p in pages] == ["ok", "error"] and pages[1]["error"]["code"] == "UNAVAILABLE"


def test_every_page_failed_groups_the_reasons_and_takes_the_most_common_code():
    from inkstream.page_errors import MAX_REASONS, every_page_failed
    from inkstream.page_result import PageError, PageResult

    def err(i: int, code: str, message: str) -> PageResult:
        return PageResult(index=i, status="error", error=PageError(code, message))

    assert every_page_failed([]) is None
    assert every_page_failed([err(1, "UNAVAILABLE", "down"), PageResult(index=2, status="ok", text="x")]) is None
    e = every_page_failed([err(1, "UNAVAILABLE", "down"), err(2, "INVALID_ARGUMENT", "page 2: unreadable image"),
                           err(3, "INVALID_ARGUMENT", "page 3: too big"), err(4, "INVALID_ARGUMENT", "page 4: too big"),
                           err(5, "UNAVAILABLE", "down")])
    assert e is not None and e.code_name == "INVALID_ARGUMENT" and e.http_status == 400
    assert e.message == ("no page could be read (5 of 5 failed): pages 1, 5: UNAVAILABLE: down; "
                         "page 2: INVALID_ARGUMENT: unreadable image; pages 3-4: INVALID_ARGUMENT: too big")
    tie = every_page_failed([err(1, "UNAVAILABLE", "down"), err(2, "INVALID_ARGUMENT", "bad")])
    assert tie is not None and tie.code_name == "UNAVAILABLE"  # the first page's code
    # each page's own number left out (found by the tryout: "page 1: ...: page 1 encode: ..."), so alike reasons group
    alike = every_page_failed([err(i, "INVALID_ARGUMENT", f"page {i} encode: page of 2200x1 px is too small")
                               for i in (1, 2)])
    assert alike is not None and alike.message == ("no page could be read (2 of 2 failed): pages 1-2: "
                                                    "INVALID_ARGUMENT: encode: page of 2200x1 px is too small")
    many = every_page_failed([err(i, "INTERNAL", f"bug {i}") for i in range(1, MAX_REASONS + 4)])
    assert many is not None and many.code_name == "INTERNAL" and many.message.endswith("; and 3 more")


async def test_a_job_whose_every_page_is_too_small_answers_as_one_such_image(env):
    """Found by the breaker: a 3-page TIFF of pages too small to read failed its job with 400
    INVALID_ARGUMENT, a one-page image too small with 422 NOTHING_TO_READ: one cause, one answer (the
    pages' reason is kept and the job's error takes it)."""
    import io

    from PIL import Image

    c, _, _ = env
    tiny = Image.new("L", (4, 4), 255)
    one, many = io.BytesIO(), io.BytesIO()
    tiny.save(one, "PNG")
    tiny.save(many, "TIFF", save_all=True, append_images=[tiny, tiny])
    answers = []
    for data in (one.getvalue(), many.getvalue()):
        job = (await submit(c, data)).json()
        failed = await wait_status(c, job["job_id"], ("failed", "done"))
        assert failed["status"] == "failed", failed
        res = await c.get(f"/v1/jobs/{job['job_id']}/result")
        answers.append((res.status_code, res.json()["error"]["code"], res.json()["error"]["reason"]))
    assert answers[0] == answers[1] == (422, "INVALID_ARGUMENT", "NOTHING_TO_READ"), answers


async def test_an_attempt_taken_over_stops_without_touching_the_job(env):
    """Found by the tryout: Redis stopped for longer than a job's lease; once it was back the job was
    taken over (attempts 2) and done, while the first attempt, asleep in its store retry, woke and went
    on reading pages beside it (holding 3 of the gateway's 4 page slots: a sync request got 429) and
    checkpointing over the done job (pages_done 2/3). The first attempt stops when the record shows a
    later attempt, and leaves the record and the delivery to it."""
    c, fake, core = env
    fake.delay_s = 0.5
    job = (await submit(c, marked_pdf([1, 2, 3, 4, 5, 6]), format="json")).json()
    running = await wait_status(c, job["job_id"], ("running",))
    assert running["attempts"] == 1
    await asyncio.to_thread(core.job_store.update, job["job_id"], attempts=2)  # another worker took it over
    for _ in range(60):
        if core.worker.running == 0:
            break
        await asyncio.sleep(0.05)
    assert core.worker.running == 0, "the superseded attempt went on"
    read = fake.pages_run
    await asyncio.sleep(1.2)
    assert fake.pages_run == read  # no page read after it stopped
    after = (await c.get(f"/v1/jobs/{job['job_id']}")).json()
    assert (after["status"], after["attempts"]) == ("running", 2), after  # the new attempt's, untouched


async def test_a_failing_heartbeat_is_logged_once_not_every_beat(env, caplog, monkeypatch):
    """Found by the tryout: with Redis stopped each running job logged "heartbeat failed" twice a
    second (275 lines in 90 s); now once when it starts failing and once when it works again."""
    import logging

    from gateway.jobs.queue import Delivery

    _, _, core = env
    worker = core.worker
    down = True

    async def read(_job_id):
        if down:
            raise Unavailable("the job store is unavailable (ConnectionError); retry shortly")

    monkeypatch.setattr(worker, "_read", read)
    monkeypatch.setattr(worker_mod, "POLL_S", 0.01)
    caplog.set_level(logging.WARNING, logger="inkstream.gateway.jobs")
    beat = asyncio.create_task(worker._heartbeat(Delivery("j1"), None))
    await asyncio.sleep(0.5)  # about 50 beats
    down = False
    await asyncio.sleep(0.1)
    beat.cancel()
    lines = [r.getMessage() for r in caplog.records if "heartbeat" in r.getMessage()]
    assert len(lines) == 2 and "failed" in lines[0] and "works again" in lines[1], lines


@pytest.mark.parametrize("fail", [{1, 2}, {2}], ids=["every-page-failed", "one-page-failed"])
async def test_the_ndjson_summary_agrees_with_the_job_of_the_same_pages(env, fail):
    """Found by tryout7: a stream whose every page failed ended with a summary of ``pages_ok`` 0 and no
    error, where a job of the same pages fails with {code, reason, message} (and the whole-document
    answer with that status): the summary now carries the job's error (null when a page was read)."""
    c, fake, core = env
    core.config.stores.job_deadline_s = 1.0
    fake.fail = fail
    r = await c.post("/v1/ocr", files={"file": ("d.pdf", marked_pdf([1, 2]))}, data={"format": "text"},
                     headers={"Accept": "application/x-ndjson"})
    assert r.status_code == 200, r.text
    summary = json.loads(r.text.strip().splitlines()[-1])["summary"]
    job = (await submit(c, marked_pdf([1, 2]), format="text")).json()
    job = await wait_status(c, job["job_id"], ("failed", "done"))
    assert job["status"] == ("failed" if fail == {1, 2} else "done"), job
    assert (summary["pages"], summary["pages_ok"], summary["pages_error"]) == (job["pages_total"], 2 - len(fail),
                                                                               len(fail))
    assert summary["error"] == job["error"], (summary, job)
    if job["error"] is not None:
        assert job["error"]["code"] == "UNAVAILABLE" and "pages 1-2" in job["error"]["message"]
