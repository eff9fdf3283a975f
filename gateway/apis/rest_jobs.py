"""Job routes (APIRouter): ``/v1/jobs`` (submit, status, result, cancel), ``POST /v1/uploads``
(presigned upload into the object store) and the queue admin routes ``/v1/admin/queue``
(state, ``/pause``, ``/resume``; behind the API keys like every ``/v1/`` route, and the admin role).
Every route acts for the caller's tenant (:mod:`gateway.tenancy`) and writes an audit line
(:mod:`gateway.audit`).
Each handler converts the request and calls :class:`gateway.jobs.manager.JobManager` /
:class:`gateway.jobs.sources.Sources`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from gateway import tenancy
from gateway.apis import rest_schema as schema
from gateway.apis.rest_http import receive_upload
from gateway.apis.rest_ocr import MEDIA, cache_header, document_response
from gateway.audit import audited
from gateway.core import GatewayCore
from gateway.jobs.results import blob
from gateway.service import OcrRequest
from gateway.stores import JobRecord
from inkstream.errors import FailedPrecondition, JobCancelled


def job_json(job: JobRecord, result_url: str = "") -> dict[str, Any]:
    """The REST view of a job (never its password)."""
    return {"job_id": job.job_id, "status": job.status, "pages_done": job.pages_done,
            "pages_total": job.pages_total,
            "error": {"code": job.error_code, "reason": job.error_reason or job.error_code,
                      "message": job.error_message} if job.error_code else None,
            "model_id": job.model_id, "options": job.options, "created_at": job.created_at,
            "updated_at": job.updated_at, "result_url": result_url, "webhook": job.webhook,
            "webhook_attempts": job.webhook_attempts, "attempts": job.attempts, "worker": job.worker}


async def _stream(chunks: Any) -> Any:
    """A blocking chunk iterator read in a thread, chunk by chunk."""
    while (chunk := await asyncio.to_thread(next, chunks, b"")) != b"":
        yield chunk


def jobs_router(core: GatewayCore) -> APIRouter:
    """The job, upload and queue-admin routes over ``core``."""
    router = APIRouter()
    jobs = core.jobs

    @router.post("/v1/jobs", **schema.JOB_SUBMIT_ROUTE)
    async def submit_job(request: Request) -> JSONResponse:
        """Validate the document now (4xx as for /v1/ocr) and queue an asynchronous job; 202 with the
        job. ``Idempotency-Key`` returns the job first created with that key; ``callback_url`` a webhook.
        """
        with audited("job_submit") as a:
            core.check_accepting()
            with core.request_dir() as tmp:
                got = await receive_upload(request, core, tmp, ("source", "callback_url"))
                job = await jobs.submit(got.upload, got.options, request.headers.get("idempotency-key", "").strip(),
                                        source=got.source, callback_url=got.callback_url,
                                        tenant=tenancy.current().tenant)
            a.fields["job_id"] = job.job_id
        return JSONResponse(job_json(job), status_code=202, headers={"Location": f"/v1/jobs/{job.job_id}"})

    @router.get("/v1/jobs/{job_id}", **schema.JOB_STATUS_ROUTE)
    async def get_job(job_id: str) -> dict[str, Any]:
        """Status (queued | running | done | failed | cancelled), pages, error, result_url."""
        with audited("job_read", job_id=job_id):
            job = await jobs.get(job_id, tenancy.current().tenant)
        return job_json(job, jobs.result_url(job))

    @router.get("/v1/jobs/{job_id}/result", **schema.JOB_RESULT_ROUTE)
    async def job_result(job_id: str, format: str = Query(  # noqa: A002 - the query parameter's name
            "", description=schema.FORMAT_QUERY_DESCRIPTION, examples=["markdown", "text", "json"])) -> Response:
        """The document of a done job in its format (or ``?format=``); 202 with the job while it runs;
        the job's error status when it failed on its document, 409 (JOB_FAILED) when it failed for a
        transient reason (never 503 + Retry-After: asking again cannot help); 409 (JOB_CANCELLED) when
        it was cancelled.
        """
        with audited("result_read", job_id=job_id):
            res = await jobs.result(job_id, tenancy.current().tenant)
        if isinstance(res, JobRecord):
            if res.status in ("queued", "running"):
                return JSONResponse(job_json(res), status_code=202, headers={"Retry-After": "2"})
            if res.status == "cancelled":
                raise JobCancelled(f"job {job_id} was cancelled; it has no result")
            raise res.failure()
        fmt = OcrRequest(format=format or res.job.options.get("format", "markdown")).validated().format
        if fmt != "pdf":
            return document_response(res.pages, fmt, res.model_id, res.seconds, {"X-Job-Id": job_id}, res.cached)
        chunks = await asyncio.to_thread(core.results.chunks, blob(job_id, "searchable.pdf"))
        if chunks is None:
            raise FailedPrecondition(f"job {job_id} was not submitted with format=pdf; its document is no longer "
                                     "kept, so ask for markdown, text, json or hocr")
        return StreamingResponse(_stream(chunks), media_type=MEDIA["pdf"],
                                 headers={"X-Job-Id": job_id, **cache_header(res.cached)})

    @router.delete("/v1/jobs/{job_id}", **schema.JOB_CANCEL_ROUTE)
    async def cancel_job(job_id: str) -> dict[str, Any]:
        """Cancel a queued or running job on whichever gateway runs it; returns the job."""
        with audited("job_cancel", job_id=job_id):
            return job_json(await jobs.cancel(job_id, tenancy.current().tenant))

    @router.post("/v1/uploads", **schema.UPLOAD_ROUTE)
    async def new_upload() -> JSONResponse:
        """201 ``{upload_url, source, expires_in}``: PUT the document to ``upload_url``, then submit
        ``source`` to /v1/jobs or /v1/ocr (the file never passes through the gateway); 503 +
        Retry-After while the object store does not answer.
        """
        with audited("upload"):
            core.check_accepting()
            upload = await asyncio.to_thread(core.sources.new_upload, tenancy.current().tenant)  # asks the store
            return JSONResponse(upload, status_code=201)

    @router.get("/v1/admin/queue", summary="Job queue state", **schema.QUEUE_ROUTE)
    async def queue_state() -> dict[str, Any]:
        """``{paused, queued, oldest_queued_age_s}`` (admin role)."""
        with audited("queue_read"):
            tenancy.require_admin(tenancy.current())
            return await jobs.queue_state()

    @router.post("/v1/admin/queue/pause", summary="Pause job consumption on every worker", **schema.QUEUE_ROUTE)
    async def pause() -> dict[str, Any]:
        """Workers take no new job (running ones finish); submissions are still accepted (202). Admin role."""
        with audited("queue_pause"):
            tenancy.require_admin(tenancy.current())
            return await jobs.pause(True)

    @router.post("/v1/admin/queue/resume", summary="Resume job consumption", **schema.QUEUE_ROUTE)
    async def resume() -> dict[str, Any]:
        """Workers take queued jobs again (admin role)."""
        with audited("queue_resume"):
            tenancy.require_admin(tenancy.current())
            return await jobs.pause(False)

    return router
