"""Running queued jobs: take one from the queue, hold its lease, continue from its checkpoints.

A worker runs at most ``max_jobs_running`` jobs at once. For each delivery: the record is read (a
finished or cancelled job is acknowledged and dropped), marked ``running`` (``attempts`` + 1; past
``job_max_attempts`` it fails), and its document fetched from the result store (or the ``source``
object) to a local spool. Pages already checkpointed (by this or an earlier worker that died) are
not read again: only the remaining pages go through the pipeline, each page checkpointed as it
comes (pages whose outcome a retry could change, e.g. UNAVAILABLE, are not). Then the result blobs
are written (:mod:`gateway.jobs.results`) and the job is marked done — in that order, so a job is
never done with a half-written result. While it runs a heartbeat renews the lease and polls the
record, so a cancel made on any gateway stops it within a second. A transient failure (a store
or every replica unreachable, the gateway full) is retried with backoff (1 s doubling to 30 s) until
``job_deadline_s`` after the job was submitted; then the job fails with that error.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import pathlib
import shutil
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gateway.jobs.queue import Delivery
from gateway.jobs.results import write_result
from gateway.jobs.sources import Sources, file_upload
from gateway.output.page import PageResult
from gateway.routing.fair import BATCH
from gateway.service import OcrRequest
from gateway.stores import FINISHED, JobRecord
from gateway.stores.cache import cacheable
from inkstream.errors import DeadlineExceeded, InkstreamError, ResourceExhausted, as_inkstream_error

if TYPE_CHECKING:
    from gateway.jobs.manager import JobManager

log = logging.getLogger("inkstream.gateway.jobs")

POLL_S = 0.5
BACKOFF_MAX_S = 30.0


class JobWorker:
    """Consumes ``manager.queue`` (see the module docstring). ``spool``: local dir for documents of
    running jobs; ``on_running(+1 / -1)`` as a job starts / stops running; ``sources`` reads
    ``s3://`` sources.
    """

    def __init__(self, manager: JobManager, spool: pathlib.Path, sources: Sources, *, max_running: int,
                 on_running: Callable[[int], None] | None = None):
        self.m = manager
        self.st = manager.settings
        self.spool = spool
        self.spool.mkdir(parents=True, exist_ok=True)
        self.sources = sources
        self.running = 0
        self._slots = asyncio.Semaphore(max_running)
        self._on_running = on_running or (lambda _d: None)
        self._loop_task: asyncio.Task[None] | None = None
        self._closing = False

    def start(self) -> None:
        """Start consuming (on the running event loop); nothing once :meth:`close` was called."""
        if self._closing:
            return
        self._loop_task = asyncio.create_task(self._consume(), name="job-worker")

    async def _consume(self) -> None:
        while True:
            await self._slots.acquire()
            try:
                delivery = await self.m.queue.take()
            except BaseException:
                self._slots.release()
                raise
            task = asyncio.create_task(self._run(delivery), name=f"job-{delivery.job_id}")
            self.m.local_tasks[delivery.job_id] = task
            task.add_done_callback(functools.partial(self._done, delivery))

    def _done(self, delivery: Delivery, _task: asyncio.Task[None]) -> None:
        self.m.local_tasks.pop(delivery.job_id, None)
        self._slots.release()

    async def _retry(self, job: JobRecord, what: str, fn: Callable[[], Any]) -> Any:
        """``await fn()`` until it succeeds; transient errors wait with backoff until the job's deadline."""
        delay = 1.0
        while True:
            try:
                return await fn()
            except InkstreamError as exc:
                left = job.created_at + self.st.job_deadline_s - time.time()
                if not exc.transient or left <= 0:
                    raise
                wait = min(max(exc.retry_after_s or 0.0, delay), left)
                log.warning("job %s: %s failed (%s); retrying in %.1f s", job.job_id, what, exc.message, wait)
                await asyncio.sleep(wait)
                delay = min(delay * 2, BACKOFF_MAX_S)

    async def _run(self, d: Delivery) -> None:
        job_id = d.job_id
        stub = JobRecord(job_id, created_at=time.time())
        try:
            job = await self._retry(stub, "reading the record", lambda: self.m.call(self.m.jobs.get, job_id))
        except InkstreamError:
            return  # not acknowledged: the lease lapses and someone takes it over later
        if job is None or job.status in FINISHED:
            await self._ack(d)
            return
        if job.attempts >= self.st.job_max_attempts:
            await self.m.finish(job_id, "failed", error_code="INTERNAL",
                                error_message=f"the job was started {job.attempts} times without finishing")
            await self._ack(d)
            return
        self.running += 1
        self._on_running(1)
        beat = asyncio.create_task(self._heartbeat(d, asyncio.current_task()))
        folder = self.spool / job_id
        try:
            await self.m.queue.started(d)
            await self.m.call(self.m.jobs.update, job_id, unless_finished=True, status="running",
                              attempts=job.attempts + 1, worker=getattr(self.m.queue, "consumer", "local"))
            folder.mkdir(parents=True, exist_ok=True)
            await self._execute(job, folder)
            await self._ack(d)
        except asyncio.CancelledError:
            if not self._closing:  # cancelled by a user (the record says so already)
                await self._ack(d)
            raise
        except Exception as exc:  # a job's failure is recorded, never raised
            err = as_inkstream_error(exc)
            if not isinstance(exc, InkstreamError):
                log.exception("job %s failed", job_id)
            with contextlib.suppress(Exception):
                await self.m.finish(job_id, "failed", error_code=err.code_name, error_message=err.message)
                await self._ack(d)
        finally:
            beat.cancel()
            self.running -= 1
            self._on_running(-1)
            shutil.rmtree(folder, ignore_errors=True)

    async def _ack(self, d: Delivery) -> None:
        with contextlib.suppress(InkstreamError):
            await self.m.queue.ack(d)

    async def _heartbeat(self, d: Delivery, task: asyncio.Task[Any] | None) -> None:
        """Renew the lease every third of it; cancel ``task`` when the record says cancelled."""
        last_renew = time.monotonic()
        while True:
            await asyncio.sleep(POLL_S)
            with contextlib.suppress(InkstreamError):
                if time.monotonic() - last_renew >= self.st.job_lease_s / 3:
                    await self.m.queue.renew(d)
                    last_renew = time.monotonic()
                job = await self.m.call(self.m.jobs.get, d.job_id)
                if job is not None and job.status == "cancelled" and task is not None:
                    task.cancel()
                    return

    async def _fetch(self, job: JobRecord, folder: pathlib.Path) -> pathlib.Path:
        doc = folder / "document"
        if job.source.startswith("s3://"):
            await self.sources.fetch(job.source, folder, self.m.service.config.limits.max_upload_bytes)
        elif not await self.m.call(self.m.results.fetch_to, job.source, doc):
            raise DeadlineExceeded(f"the document of job {job.job_id} is no longer stored")
        return doc

    async def _execute(self, job: JobRecord, folder: pathlib.Path) -> None:
        started = time.monotonic()
        doc = await self._retry(job, "fetching the document", lambda: self._fetch(job, folder))
        upload = await asyncio.to_thread(file_upload, doc)
        opts = {k: v for k, v in job.options.items() if k in OcrRequest.__dataclass_fields__}
        request = OcrRequest(**{**opts, "password": job.doc_password}).validated()
        pages, cached, kind, model_id = await self._retry(job, "reading the pages",
                                                          lambda: self._pages(job, upload, request))
        seconds = time.monotonic() - started
        await self._retry(job, "writing the result", lambda: self.m.call(
            write_result, self.m.results, job, pages, model_id, seconds, cached, doc, kind, folder))
        await self.m.finish(job.job_id, "done", pages_done=len(pages))

    async def _pages(self, job: JobRecord, upload: Any, request: OcrRequest) -> tuple[list[PageResult], bool, str, str]:
        """Every selected page once: the checkpointed ones, then the rest read now and checkpointed."""
        done = {i: PageResult.from_dict(p) for i, p in (await self.m.call(self.m.jobs.pages, job.job_id)).items()}
        svc = self.m.service
        full = await svc.prepare(upload, request, request_id=f"job-{job.job_id}")
        indices, kind, model_id = full.indices, full.doc.kind, full.model_id
        await full.close()
        todo = [i for i in indices if i + 1 not in done]
        cached = False
        if todo:
            sub = request if len(todo) == len(indices) else OcrRequest(
                request.format, ",".join(str(i + 1) for i in todo), request.mode, request.task, request.password,
                request.max_new_tokens, request.temperature)
            async with await self._admitted(job.job_id):
                prepared = await svc.prepare(upload, sub, request_id=f"job-{job.job_id}")
                async with prepared:
                    left = max(1.0, job.created_at + self.st.job_deadline_s - time.time())
                    async for page in prepared.pages(left, BATCH):  # interactive requests go first
                        done[page.index] = page
                        if cacheable([page]):
                            n = await self.m.call(self.m.jobs.put_page, job.job_id, page.index, page.to_dict())
                            await self.m.call(self.m.jobs.update, job.job_id, pages_done=n)
                cached = prepared.cache_hit
        return [done[i + 1] for i in indices], cached, kind, model_id

    async def _admitted(self, job_id: str) -> Any:
        """Enter the pipeline's admission, waiting (not failing) while the gateway is full."""
        while True:
            admission = self.m.service.admit(f"job-{job_id}")
            try:
                await admission.__aenter__()
            except ResourceExhausted as exc:
                await asyncio.sleep(exc.retry_after_s or 1.0)
                continue
            return _Entered(admission)

    async def close(self) -> None:
        """Stop consuming and stop running jobs (shutdown): with a shared queue another worker takes
        them over once their leases lapse; embedded, they are marked failed.
        """
        self._closing = True
        if self._loop_task is not None:
            self._loop_task.cancel()
        tasks = list(self.m.local_tasks.values())
        for t in tasks:
            t.cancel()
        loop = asyncio.get_running_loop()  # tasks of a loop that is gone (a test's server thread) are over
        pending = [t for t in [*([self._loop_task] if self._loop_task else []), *tasks] if t.get_loop() is loop]
        if pending:
            await asyncio.wait(pending, timeout=10.0)


class _Entered:
    """Async context manager exiting an already-entered admission."""

    def __init__(self, admission: Any):
        self.admission = admission

    async def __aenter__(self) -> _Entered:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.admission.__aexit__(*exc)
