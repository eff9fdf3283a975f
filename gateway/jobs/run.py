"""One attempt at one job: its document fetched and opened once (again for each pass over pages that
failed transiently), the pages not yet checkpointed read
through the same request-scoped object a synchronous request uses
(:class:`gateway.scope.RequestScope`), each page checkpointed as it comes, then the result blobs
written (:mod:`gateway.jobs.results`).

Everything a submission used to check before queueing (encoder mode, document type and limits, page
selection, task) is checked here, by :meth:`gateway.service.OcrService.prepare`: a job whose request
cannot be read fails with that 4xx error; ``pages_total`` and ``model_id`` are recorded once it is
prepared. A transient failure (a store or every replica unreachable, the gateway full) is retried
with backoff (1 s doubling to :data:`BACKOFF_MAX_S`) until ``job_deadline_s`` after submission, then
the job fails with it. A gateway with no replica up thus accepts jobs and runs them once one is up.

Pages: a page that came back with a transient error (UNAVAILABLE, RESOURCE_EXHAUSTED: a replica down
or full) is read again, with the same backoff, until the job's deadline; a job whose every page is
still an error then fails (:func:`inkstream.page_errors.every_page_failed`: the pages' most
common code, every page's reason in its message) rather than being ``done`` with nothing read.

Page checkpoints: a page whose outcome a retry could not change (:func:`gateway.stores.cache.cacheable`)
is checkpointed before the next page is taken. Its write is retried like any store call; when it
still fails (past the deadline, or not transient) the job fails with an error naming the page and
the store's reason, rather than going on without a checkpoint that a takeover would need.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import pathlib
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from gateway.jobs.results import write_result
from gateway.jobs.sources import Sources, file_upload
from gateway.scope import RequestScope
from gateway.service import OcrRequest, OcrService
from gateway.stores import JobRecord, JobStore, ResultStore
from gateway.stores.cache import cacheable
from gateway.stores.sealed import secret_box
from gateway.tenancy import Principal, acting_as
from inkstream.errors import DeadlineExceeded, InkstreamError, error_for_code
from inkstream.fair import BATCH
from inkstream.page_errors import every_page_failed
from inkstream.page_result import PageResult

log = logging.getLogger("inkstream.gateway.jobs")

BACKOFF_MAX_S = 30.0
T = TypeVar("T")


async def retry(job: JobRecord, deadline_s: float, what: str, fn: Callable[[], Awaitable[T]]) -> T:
    """``await fn()`` until it succeeds; a transient InkstreamError waits (its Retry-After, at least 1 s
    doubling to :data:`BACKOFF_MAX_S`) until ``deadline_s`` seconds after the job's submission, then
    is raised; any other error is raised at once. ``what`` names the step in the log.
    """
    delay = 1.0
    while True:
        try:
            return await fn()
        except InkstreamError as exc:
            left = job.created_at + deadline_s - time.time()
            if not exc.transient or left <= 0:
                raise
            wait = min(max(exc.retry_after_s or 0.0, delay), left)
            log.warning("job %s: %s failed (%s); retrying in %.1f s", job.job_id, what, exc.message, wait)
            await asyncio.sleep(wait)
            delay = min(delay * 2, BACKOFF_MAX_S)


class JobRun:
    """One attempt at ``job`` (see the module docstring) in the local folder ``folder`` (removed by
    the caller). ``deadline_s``: the job's deadline, seconds after submission; ``max_upload_bytes``:
    the limit of an ``s3://`` source. Raises what fails the job (InkstreamErrors; a bug as is).
    """

    def __init__(self, service: OcrService, jobs: JobStore, results: ResultStore, sources: Sources,
                 job: JobRecord, folder: pathlib.Path, *, deadline_s: float, max_upload_bytes: int):
        self.service, self.jobs, self.results, self.sources = service, jobs, results, sources
        self.job, self.folder, self.deadline_s, self.max_upload_bytes = job, folder, deadline_s, max_upload_bytes

    async def _retry(self, what: str, fn: Callable[[], Awaitable[T]]) -> T:
        return await retry(self.job, self.deadline_s, what, fn)

    async def _store(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """A blocking store call on a thread, retried like every step."""
        return await self._retry(getattr(fn, "__name__", "a store call"),
                                 lambda: asyncio.to_thread(fn, *args, **kwargs))

    async def execute(self) -> int:
        """Read the job and write its result; returns the number of pages (the caller marks it done)."""
        with acting_as(Principal(self.job.tenant, key_id="job")):  # the job's tenant: its cache scope
            return await self._execute()

    async def _execute(self) -> int:
        started = time.monotonic()
        doc = await self._retry("fetching the document", self._fetch)
        upload = await asyncio.to_thread(file_upload, doc)
        opts = {k: v for k, v in self.job.options.items() if k in OcrRequest.__dataclass_fields__}
        password = secret_box().open(self.job.doc_password)  # FailedPrecondition: a key this gateway lacks
        request = OcrRequest(**{**opts, "password": password}).validated()
        pages, cached, kind, model_id = await self._read(upload, request)
        if (failed := every_page_failed(pages)) is not None:
            raise failed
        seconds = time.monotonic() - started
        await self._store(write_result, self.results, self.job, pages, model_id, seconds, cached, doc, kind,
                          self.folder, password=password)
        return len(pages)

    async def _read(self, upload: Any, request: OcrRequest) -> tuple[list[PageResult], bool, str, str]:
        """:meth:`_pages`, then again over the pages that failed transiently (see the module
        docstring) while the job's deadline allows.
        """
        got = await self._retry("reading the pages", lambda: self._pages(upload, request))
        delay = 1.0
        while (again := [p for p in got[0] if retryable(p)]) and self._left() > 0:
            wait = min(delay, self._left())
            log.warning("job %s: page(s) %s failed (%s); reading them again in %.1f s", self.job.job_id,
                        ", ".join(str(p.index) for p in again), again[0].error and again[0].error.message, wait)
            await asyncio.sleep(wait)
            delay = min(delay * 2, BACKOFF_MAX_S)
            got = await self._retry("reading the pages", functools.partial(self._pages, upload, request, got[0]))
        return got

    async def _fetch(self) -> pathlib.Path:
        doc = self.folder / "document"
        if self.job.source.startswith("s3://"):
            await self.sources.fetch(self.job.source, self.folder, self.max_upload_bytes, self.job.tenant)
        elif not await asyncio.to_thread(self.results.fetch_to, self.job.source, doc):
            raise DeadlineExceeded(f"the document of job {self.job.job_id} is no longer stored")
        return doc

    def _left(self) -> float:
        """Seconds left until the job's deadline (negative past it)."""
        return self.job.created_at + self.deadline_s - time.time()

    async def _pages(self, upload: Any, request: OcrRequest,
                     earlier: Sequence[PageResult] = ()) -> tuple[list[PageResult], bool, str, str]:
        """Every selected page once: the checkpointed ones and those of ``earlier`` (a previous pass)
        that a retry could not change, then the rest read now and checkpointed; also whether they
        came from the cache, the document's kind and the model id.
        """
        job = self.job
        stored = await asyncio.to_thread(self.jobs.pages, job.job_id)
        done = {p.index: p for p in earlier if not retryable(p)}
        done.update((i, PageResult.from_dict(p)) for i, p in stored.items())
        async with RequestScope(self.service, f"job-{job.job_id}") as scope:
            await scope.admit(wait=True)  # a job waits while the gateway is full
            prepared = await scope.prepare(upload, request)  # the one opening of the document
            indices = list(prepared.indices)
            if (job.pages_total, job.model_id) != (len(indices), prepared.model_id):
                await self._store(self.jobs.update, job.job_id, pages_total=len(indices),
                                  model_id=prepared.model_id)
                job.pages_total, job.model_id = len(indices), prepared.model_id
            todo = [i for i in indices if i + 1 not in done]
            if todo:
                prepared.select(todo)
                left = max(1.0, job.created_at + self.deadline_s - time.time())
                async for page in scope.pages(left, BATCH):  # interactive requests go first
                    done[page.index] = page
                    if cacheable([page]):
                        await self._checkpoint(page)
            return [done[i + 1] for i in indices], prepared.cache_hit, prepared.doc.kind, prepared.model_id

    async def _checkpoint(self, page: PageResult) -> None:
        """Store ``page`` as the job's checkpoint and its progress; a write that keeps failing fails
        the job with the page and the store's reason (see the module docstring).
        """
        job_id = self.job.job_id
        try:
            n = await self._store(self.jobs.put_page, job_id, page.index, page.to_dict())
            await self._store(self.jobs.update, job_id, pages_done=n)
        except InkstreamError as exc:
            raise error_for_code(exc.code_name, f"the checkpoint of page {page.index} could not be stored "
                                 f"({exc.message}); the job stopped there") from exc


def retryable(page: PageResult) -> bool:
    """Whether ``page`` is an error a later try may not have (a transient code: UNAVAILABLE,
    RESOURCE_EXHAUSTED).
    """
    return page.status == "error" and page.error is not None and error_for_code(page.error.code, "").transient
