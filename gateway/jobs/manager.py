"""Asynchronous OCR jobs: submission, status, result, cancel, pause and expiry (any gateway).

Lifecycle: ``queued`` -> ``running`` -> ``done`` | ``failed`` | ``cancelled``. Submission needs only the
stores and the queue, no replica: it checks the options and the document's type by its first bytes
(4xx then), stores the document in the result store (``<id>/document``; a ``source=s3://`` object
stays where it is), creates the record (an idempotency key returns the job first created with it;
the same document and options are required, else 422) and queues the job. What needs the document
opened or the model's Info (limits, page selection, mode, task) is checked by the worker, which
opens the document once (:mod:`gateway.jobs.run`): such a job fails with that 4xx error, and its
``pages_total`` and ``model_id`` are 0 / "" until then. Jobs are run by
:class:`gateway.jobs.worker.JobWorker` on whichever gateway consumes the queue (see
:mod:`gateway.jobs.queue`). With the embedded stores (SQLite + directory) that is this process, and
jobs left unfinished by an earlier process (queued, or stopped while running) are queued again at
start (:meth:`JobManager.resume`; a running one continues from its page checkpoints), except those
whose document is no longer stored: they fail with :data:`DOCUMENT_LOST`. With Redis another worker
takes them over. A job's error is stored as ``error_code`` + ``error_message``. Finished jobs
expire after ``stores.job_ttl_s`` seconds (records, checkpoints and result blobs).

Tenants (:mod:`gateway.tenancy`): a job belongs to the tenant that submitted it; every call takes the
caller's ``tenant`` and answers NotFound for another tenant's job (its existence is not revealed);
idempotency keys are stored per tenant. A PDF password and a webhook URL are stored sealed
(:mod:`gateway.stores.sealed`) and opened only where used.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any, Protocol

from gateway.config import Stores
from gateway.ingest import UploadedFile
from gateway.ingest.selection import check_selection
from gateway.ingest.sniff import detect_type
from gateway.jobs.queue import JobQueue
from gateway.jobs.results import JobResult, document_blob, read_result, result_url
from gateway.jobs.webhooks import WebhookSender, allowed_hosts, check_callback_url
from gateway.service import OcrRequest, OcrService
from gateway.stores import FINISHED, JobRecord, JobStore, ResultStore
from gateway.stores.sealed import secret_box
from gateway.tenancy import DEFAULT_TENANT, scoped_idempotency_key
from inkstream.errors import FailedPrecondition, IdempotencyConflict, InvalidInput, NotFound, ResourceExhausted

__all__ = ["JobManager", "JobResult"]

log = logging.getLogger("inkstream.gateway.jobs")

#: (code, message) of a job left unfinished by an earlier process whose stored document is gone
DOCUMENT_LOST = ("FAILED_PRECONDITION", "the gateway stopped before this job finished, and its document is no "
                 "longer stored, so it cannot be run again; submit it again")


class LocalJobs(Protocol):
    """The jobs running in this process (:class:`gateway.jobs.worker.JobWorker`)."""

    async def stop(self, job_id: str) -> None:
        """Cancel job ``job_id`` if it runs here and wait for it to stop."""


class JobManager:
    """The job API of one gateway process over shared or embedded stores.

    ``jobs`` / ``results`` / ``queue``: the stores (:mod:`gateway.stores`, :mod:`gateway.jobs.queue`);
    ``settings``: the gateway's ``stores`` section; ``webhooks``: the sender used when a job this
    process finishes (or cancels) has a ``callback_url``. ``recover``: queue the unfinished jobs of an
    earlier process again with :meth:`resume` (embedded stores only: nobody else would run them). ``local``: the jobs
    running in this process (set by the gateway when it runs a worker), stopped by :meth:`cancel`.
    """

    def __init__(self, service: OcrService, jobs: JobStore, results: ResultStore, queue: JobQueue, *,
                 settings: Stores, webhooks: WebhookSender, recover: bool):
        self.service, self.jobs, self.results, self.queue = service, jobs, results, queue
        self.settings = settings
        self.ttl_s = settings.job_ttl_s
        self.webhooks = webhooks
        self.recover = recover
        self.local: LocalJobs | None = None
        self._notify: set[asyncio.Task[None]] = set()

    async def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Run a blocking store call in a thread (SQLite, Redis, S3); raises what it raises."""
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def start(self) -> None:
        """Remove expired jobs (at start-up; raises Unavailable while the job store is unreachable)."""
        await self.call(self.jobs.ping)
        await self.sweep()

    async def resume(self, unfinished: list[JobRecord]) -> tuple[int, int]:
        """Queue again the jobs ``unfinished`` by an earlier process (:meth:`JobStore.unfinished`, read
        at start before any submission), oldest first, as ``queued`` (a running one's checkpointed
        pages are kept; its ``attempts`` still count towards ``job_max_attempts``); a job whose
        stored document is gone fails with :data:`DOCUMENT_LOST` (its webhook is sent). An ``s3://``
        source is not checked here: the worker fails the job, naming the object, if it is gone.
        Each job is removed from ``unfinished`` once handled, so a call that failed part-way can be
        made again. Returns (queued again, failed). Raises Unavailable when a store is unreachable.
        """
        queued = failed = 0
        for job in sorted(unfinished, key=lambda j: j.created_at):
            if await self.call(self._document_stored, job):
                if await self.call(self.jobs.update, job.job_id, unless_finished=True, status="queued"):
                    await self.queue.put(job.job_id, job.created_at)
                    queued += 1
            elif await self.finish(job.job_id, "failed", error_code=DOCUMENT_LOST[0], error_message=DOCUMENT_LOST[1]):
                failed += 1
            unfinished.remove(job)
        return queued, failed

    def _document_stored(self, job: JobRecord) -> bool:
        """Whether the job's document can still be read (an ``s3://`` source is assumed to be)."""
        if job.source.startswith("s3://"):
            return True
        folder = job.source.rpartition("/")[0]
        return any(name == job.source for name, _ in self.results.names(f"{folder}/" if folder else ""))

    async def submit(self, upload: UploadedFile, request: OcrRequest, idempotency_key: str = "", *,
                     source: str = "", callback_url: str = "", tenant: str = DEFAULT_TENANT) -> JobRecord:
        """Check the options and the document's type (4xx now; the rest is the worker's, see the
        module docstring), store it (unless it is the ``source`` object), create the job and queue it;
        returns the record. ``callback_url``: webhook destination (InvalidInput 400 when
        its host is not allowed). The same ``idempotency_key`` of the same ``tenant`` returns the
        existing job (IdempotencyConflict 422 if it was created for a different document or options).
        Raises ResourceExhausted (429) when ``max_jobs_queued`` jobs wait, Unavailable (503) when a store
        is unreachable.
        """
        if len(idempotency_key) > 255:
            raise InvalidInput("the Idempotency-Key is longer than 255 characters")
        if callback_url:
            check_callback_url(callback_url, allowed_hosts())
        request = request.validated(await self.service.pipeline.decoder_tasks())
        detect_type(upload.head)
        check_selection(request.pages)
        idempotency_key = scoped_idempotency_key(tenant, idempotency_key)
        if idempotency_key:
            existing = await self.call(self.jobs.get_by_key, idempotency_key)
            if existing is not None:
                return self._same_doc(existing, upload, request)
        waiting, _ = await self.queue.depth()
        if waiting >= self.settings.max_jobs_queued:
            raise ResourceExhausted(f"{waiting} jobs are already waiting; retry later", retry_after_s=10.0)
        now, job_id = time.time(), uuid.uuid4().hex
        if not source:
            source = document_blob(job_id)
            await self.call(self.results.put_file, source, upload.path)
        record = JobRecord(job_id=job_id, options=request.public(),
                           idempotency_key=idempotency_key, doc_sha256=upload.sha256,
                           created_at=now, updated_at=now, source=source,
                           callback_url=secret_box().seal(callback_url),
                           doc_password=secret_box().seal(request.password), tenant=tenant)
        record, created = await self.call(self.jobs.create, record)
        if not created:
            await self.call(self.results.delete, document_blob(job_id))
            return self._same_doc(record, upload, request)
        try:
            await self.queue.put(job_id, now)
        except BaseException:
            await self.call(self.jobs.delete, job_id)
            raise
        return record

    @staticmethod
    def _same_doc(job: JobRecord, upload: UploadedFile, request: OcrRequest) -> JobRecord:
        """``job`` when it was created for the same document and options; else IdempotencyConflict (422), as
        the IETF Idempotency-Key draft asks for a key reused with a different payload.
        """
        if job.doc_sha256 != upload.sha256:
            raise IdempotencyConflict("this Idempotency-Key was already used for a different document")
        if job.options != request.public():
            opts = ", ".join(f"{k}={v!r}" for k, v in job.options.items())
            raise IdempotencyConflict(f"this Idempotency-Key was already used with different options ({opts}); "
                                "use a new key for new options")
        return job

    async def get(self, job_id: str, tenant: str = DEFAULT_TENANT) -> JobRecord:
        """The job's record; NotFound (404) for an unknown or expired id or another tenant's job,
        Unavailable (503).
        """
        job = await self.call(self.jobs.get, job_id) if job_id.isalnum() else None
        if job is None or job.tenant != tenant:
            raise NotFound(f"no job {job_id!r} (unknown, or expired after {self.ttl_s / 3600:g} h)")
        return job

    def result_url(self, job: JobRecord) -> str:
        """Presigned GET URL of a done job's document ("" when not done or the store is local)."""
        if job.status != "done":
            return ""
        return result_url(self.results, job, self.settings.presign_expires_s)

    async def result(self, job_id: str, tenant: str = DEFAULT_TENANT) -> JobResult | JobRecord:
        """The JobResult of a done job; the record itself while it is not done (callers report the
        status). Raises NotFound (404, also for another tenant's job), Unavailable (503).
        """
        job = await self.get(job_id, tenant)
        if job.status != "done":
            return job
        res = await self.call(read_result, self.results, job)
        if res is None:
            raise NotFound(f"the result of job {job_id!r} is no longer stored")
        return res

    async def cancel(self, job_id: str, tenant: str = DEFAULT_TENANT) -> JobRecord:
        """Cancel a queued or running job wherever it runs (its worker sees the record within a
        second); a finished job is returned unchanged. Raises NotFound (also for another tenant's
        job), Unavailable.
        """
        job = await self.get(job_id, tenant)
        if job.status not in FINISHED and await self.finish(job_id, "cancelled") and self.local is not None:
            await self.local.stop(job_id)
        return await self.get(job_id, tenant)

    async def finish(self, job_id: str, status: str, **fields: Any) -> bool:
        """Move an unfinished job to ``status`` (done / failed / cancelled) with ``fields``; then its
        webhook, if any, is sent in the background. Returns False when it had finished already.
        """
        if not await self.call(self.jobs.update, job_id, unless_finished=True, status=status, doc_password="",
                               **fields):
            return False
        job = await self.call(self.jobs.get, job_id)
        if job is not None and job.callback_url:
            task = asyncio.create_task(self._send_webhook(job), name=f"webhook-{job_id}")
            self._notify.add(task)
            task.add_done_callback(self._notify.discard)
        return True

    async def _send_webhook(self, job: JobRecord) -> None:
        payload: dict[str, Any] = {"job_id": job.job_id, "status": job.status, "pages_done": job.pages_done,
                                   "pages_total": job.pages_total}
        if url := self.result_url(job):
            payload["result_url"] = url
        if job.error_code:
            payload["error"] = {"code": job.error_code, "reason": job.error_reason or job.error_code,
                                "message": job.error_message}
        try:
            url = secret_box().open(job.callback_url)
        except FailedPrecondition as exc:  # sealed with a key this process lacks: record the failure
            log.warning("job %s: webhook not sent: %s", job.job_id, exc.message)
            url = ""
        outcome = await self.webhooks.deliver(url, payload) if url else None
        try:
            await self.call(self.jobs.update, job.job_id,
                            webhook="delivered" if outcome is not None and outcome.delivered else "failed",
                            webhook_attempts=outcome.attempts if outcome is not None else 0)
        except Exception as exc:  # noqa: BLE001 - recording the outcome is best effort
            log.warning("job %s: webhook outcome not recorded (%s)", job.job_id, exc)

    async def pause(self, paused: bool) -> dict[str, Any]:
        """Pause (True) or resume (False) queue consumption on every worker; returns :meth:`queue_state`."""
        await self.queue.set_paused(paused)
        return await self.queue_state()

    async def queue_state(self) -> dict[str, Any]:
        """``{paused, queued, oldest_queued_age_s}``."""
        depth, age = await self.queue.depth()
        return {"paused": await self.queue.paused(), "queued": depth, "oldest_queued_age_s": round(age, 3)}

    async def sweep(self) -> None:
        """Delete finished jobs (record, checkpoints, result blobs) older than the TTL."""
        for job_id in await self.call(self.jobs.expired, time.time() - self.ttl_s):
            await self.call(self.results.delete_prefix, f"{job_id}/")
            await self.call(self.jobs.delete, job_id)

    async def close(self) -> None:
        """Stop webhook deliveries still in flight (shutdown)."""
        for t in list(self._notify):
            t.cancel()
        await asyncio.gather(*self._notify, return_exceptions=True)
