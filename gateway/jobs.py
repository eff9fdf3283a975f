"""Asynchronous OCR jobs, run inside the gateway process as asyncio tasks.

Lifecycle: ``queued`` -> ``running`` -> ``done`` | ``failed`` | ``cancelled``. At most
``stores.max_jobs_running`` jobs run at once (others wait queued); more than ``stores.max_jobs_queued``
unfinished jobs -> ResourceExhausted (429). A running job waits for pipeline admission (it retries
after the hinted delay instead of failing). The document is validated at submission (4xx then), kept
in the result store's job folder until the job finishes, and the result (page results + model id)
is stored as ``jobs/<id>.json``. A transient failure before the first page (no replica reachable)
is retried (:data:`JOB_ATTEMPTS` runs, waiting the hinted delay or 1, 2 s) before the job fails.
An idempotency key returns the job first created with it (the same
document is required). Finished jobs expire after ``stores.job_ttl_s`` seconds. Jobs left unfinished
by an earlier process are marked failed at start.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import pathlib
import shutil
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from gateway.ingest import UploadedFile
from gateway.render.searchable_pdf import write_searchable_pdf
from gateway.service import OcrRequest, OcrService
from gateway.stitch import PageResult
from gateway.stores import FINISHED, JobRecord, JobStore, ResultStore
from inkstream.errors import (
    InkstreamError,
    InvalidInput,
    NotFound,
    ResourceExhausted,
    Unprocessable,
    as_inkstream_error,
)

log = logging.getLogger("inkstream.gateway.jobs")

#: Runs of a job whose pipeline fails transiently (UNAVAILABLE / RESOURCE_EXHAUSTED) before its first page.
JOB_ATTEMPTS = 3

_SHUTDOWN = "UNAVAILABLE: the gateway shut down before this job finished; submit it again"


@dataclass
class JobResult:
    """A finished job's output: ``pages`` in page order, the model that read them, the options;
    ``cached``: the pages came from the gateway's result cache.
    """

    job: JobRecord
    model_id: str
    pages: list[PageResult]
    seconds: float
    cached: bool = False


class JobManager:
    """Creates, runs, cancels and expires jobs. ``spool``: local directory holding the documents of
    unfinished jobs (one folder per job, removed when the job ends). ``on_running(+1 / -1)`` is
    called as a job starts / stops running (the gateway adds it to its in-flight gauge).
    """

    def __init__(self, service: OcrService, jobs: JobStore, results: ResultStore, spool: pathlib.Path, *,
                 max_running: int, max_queued: int, ttl_s: float, on_running: Callable[[int], None] | None = None):
        self.service = service
        self.jobs = jobs
        self.results = results
        self.spool = pathlib.Path(spool)
        self.spool.mkdir(parents=True, exist_ok=True)
        self.max_queued = max_queued
        self.ttl_s = ttl_s
        self._running = asyncio.Semaphore(max_running)
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._closing = False
        self._on_running = on_running or (lambda _delta: None)  # +1 / -1 as a job starts / ends running

    def start(self) -> None:
        """Mark jobs of an earlier process failed and remove expired ones (call once at start-up)."""
        n = self.jobs.fail_unfinished(_SHUTDOWN)
        if n:
            log.warning("%d unfinished jobs from an earlier run marked failed", n)
        self.sweep()

    async def submit(self, upload: UploadedFile, request: OcrRequest, idempotency_key: str = "") -> JobRecord:
        """Validate ``upload`` (4xx now, not later), create the job and start it; returns the record.

        The same ``idempotency_key`` returns the existing job (Unprocessable 422 if it was created for
        a different document). Raises ResourceExhausted (429) when too many jobs are unfinished.
        """
        self.sweep()
        if len(idempotency_key) > 255:
            raise InvalidInput("the Idempotency-Key is longer than 255 characters")
        if idempotency_key:
            existing = self.jobs.get_by_key(idempotency_key)
            if existing is not None:
                return self._same_doc(existing, upload, request.validated())
        if len(self._tasks) >= self.max_queued:
            raise ResourceExhausted(f"{len(self._tasks)} jobs are already waiting or running; retry later",
                                    retry_after_s=10.0)
        request = request.validated()
        prepared = await self.service.prepare(upload, request, request_id="job-validate")
        pages_total, model_id = prepared.page_count, prepared.model_id
        await prepared.close()
        now = time.time()
        record = JobRecord(job_id=uuid.uuid4().hex, pages_total=pages_total, options=request.public(),
                           idempotency_key=idempotency_key, doc_sha256=upload.sha256, model_id=model_id,
                           created_at=now, updated_at=now)
        record, created = self.jobs.create(record)
        if not created:
            return self._same_doc(record, upload, request)
        folder = self.spool / record.job_id
        folder.mkdir(parents=True, exist_ok=True)
        doc_path = folder / "document"
        shutil.move(str(upload.path), doc_path)
        stored = UploadedFile(doc_path, upload.size, upload.sha256, upload.head)
        self._tasks[record.job_id] = asyncio.create_task(self._run(record.job_id, stored, request),
                                                         name=f"job-{record.job_id}")
        return record

    @staticmethod
    def _same_doc(job: JobRecord, upload: UploadedFile, request: OcrRequest) -> JobRecord:
        """``job`` when it was created for the same document and options; else Unprocessable (422), as
        the IETF Idempotency-Key draft asks for a key reused with a different payload.
        """
        if job.doc_sha256 != upload.sha256:
            raise Unprocessable("this Idempotency-Key was already used for a different document")
        if job.options != request.public():
            opts = ", ".join(f"{k}={v!r}" for k, v in job.options.items())
            raise Unprocessable(f"this Idempotency-Key was already used with different options ({opts}); "
                                "use a new key for new options")
        return job

    async def _attempt(self, job_id: str, upload: UploadedFile,
                       request: OcrRequest) -> tuple[str, list[PageResult], bool, str]:
        """One run of the job's document through the pipeline: (model id, pages, from the cache,
        the document's kind).
        """
        async with await self._admitted(job_id):
            prepared = await self.service.prepare(upload, request, request_id=f"job-{job_id}")
            async with prepared:
                pages: list[PageResult] = []
                async for page in prepared.pages():
                    pages.append(page)
                    self.jobs.update(job_id, pages_done=len(pages))
        return prepared.model_id, pages, prepared.cache_hit, prepared.doc.kind

    async def _run(self, job_id: str, upload: UploadedFile, request: OcrRequest) -> None:
        started = time.monotonic()
        try:
            async with self._running, self._counted_running():
                self.jobs.update(job_id, status="running")
                for attempt in range(JOB_ATTEMPTS):
                    try:
                        model_id, pages, cached, kind = await self._attempt(job_id, upload, request)
                        break
                    except InkstreamError as exc:  # e.g. no replica reachable before the first page
                        if not exc.transient or attempt + 1 == JOB_ATTEMPTS:
                            raise
                        log.warning("job %s: %s; retrying", job_id, exc.message)
                        await asyncio.sleep(exc.retry_after_s or 2.0 ** attempt)
            body = {"model_id": model_id, "seconds": time.monotonic() - started, "cached": cached,
                    "pages": [p.to_dict() for p in pages]}
            if request.format == "pdf":  # the source is gone after the job: write the searchable PDF now
                out = self.spool / job_id / "searchable.pdf"
                await asyncio.to_thread(write_searchable_pdf, pages, upload.path, kind, out,
                                        password=request.password)
                self.results.put_file(f"jobs/{job_id}.pdf", out)
            self.results.put(f"jobs/{job_id}.json", json.dumps(body).encode())
            self.jobs.update(job_id, status="done", pages_done=len(pages))
        except asyncio.CancelledError:
            if self._closing:
                self.jobs.update(job_id, status="failed", error=_SHUTDOWN)
            else:
                self.jobs.update(job_id, status="cancelled")
            raise
        except Exception as exc:  # a job's failure is recorded, never raised
            err = as_inkstream_error(exc)
            if not isinstance(exc, InkstreamError):
                log.exception("job %s failed", job_id)
            self.jobs.update(job_id, status="failed", error=f"{err.code_name}: {err.message}")
        finally:
            self._tasks.pop(job_id, None)
            shutil.rmtree(self.spool / job_id, ignore_errors=True)

    @contextlib.asynccontextmanager
    async def _counted_running(self) -> AsyncIterator[None]:
        """Report a running job to ``on_running`` (the gateway's in-flight autoscaling gauge)."""
        self._on_running(1)
        try:
            yield
        finally:
            self._on_running(-1)

    async def _admitted(self, job_id: str) -> Any:
        """Enter the pipeline's admission, waiting (not failing) while the gateway is full."""
        while True:
            admission = self.service.admit(f"job-{job_id}")
            try:
                await admission.__aenter__()
            except ResourceExhausted as exc:
                await asyncio.sleep(exc.retry_after_s or 1.0)
                continue
            return _Entered(admission)

    def get(self, job_id: str) -> JobRecord:
        """The job's record; NotFound (404) for an unknown or expired id."""
        job = self.jobs.get(job_id)
        if job is None:
            raise NotFound(f"no job {job_id!r} (unknown, or expired after {self.ttl_s / 3600:g} h)")
        return job

    def result(self, job_id: str) -> JobResult | JobRecord:
        """The JobResult of a done job; the record itself while it is not done (callers report the
        status). Raises NotFound (404).
        """
        job = self.get(job_id)
        if job.status != "done":
            return job
        raw = self.results.get(f"jobs/{job_id}.json")
        if raw is None:
            raise NotFound(f"the result of job {job_id!r} is no longer stored")
        body = json.loads(raw)
        return JobResult(job, body["model_id"], [PageResult.from_dict(p) for p in body["pages"]], body["seconds"],
                         bool(body.get("cached", False)))

    async def cancel(self, job_id: str) -> JobRecord:
        """Cancel a queued or running job (a finished job is returned unchanged). Raises NotFound."""
        job = self.get(job_id)
        task = self._tasks.get(job_id)
        if task is not None and job.status not in FINISHED:
            task.cancel()
            try:
                await asyncio.wait_for(asyncio.shield(task), 10.0)
            except (TimeoutError, asyncio.CancelledError):
                pass
            current = self.jobs.get(job_id)
            if current is not None and current.status not in FINISHED:
                self.jobs.update(job_id, status="cancelled")
        return self.get(job_id)

    def sweep(self) -> None:
        """Delete finished jobs (and their results) older than the TTL."""
        for job_id in self.jobs.expired(time.time() - self.ttl_s):
            self.results.delete(f"jobs/{job_id}.json")
            self.results.delete(f"jobs/{job_id}.pdf")
            self.jobs.delete(job_id)

    async def close(self) -> None:
        """Stop every unfinished job (shutdown); they are marked failed, not cancelled."""
        self._closing = True
        tasks = list(self._tasks.values())
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class _Entered:
    """Async context manager exiting an already-entered admission."""

    def __init__(self, admission: Any):
        self.admission = admission

    async def __aenter__(self) -> _Entered:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.admission.__aexit__(*exc)
