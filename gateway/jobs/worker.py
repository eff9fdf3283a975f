"""Running queued jobs: take one from the queue, hold its lease, continue from its checkpoints.

A worker runs at most ``max_jobs_running`` jobs at once. For each delivery: the record is read (a
finished or cancelled job is acknowledged and dropped), marked ``running`` (``attempts`` + 1; past
``job_max_attempts`` it fails), and run by :class:`gateway.jobs.run.JobRun` (document fetched and
opened once, the pages not yet checkpointed read, the result written), then marked done — in that
order, so a job is never done with a half-written result. While it runs a heartbeat renews the lease
and polls the record, so a cancel made on any gateway stops it within a second. So does a takeover: an
attempt whose lease lapsed (its store or queue unreachable for longer than ``job_lease_s``, say) while
another attempt took the job over (the record's ``attempts`` past its own; finished since or not) stops
without acknowledging the delivery or touching the record, instead of reading the pages again beside
the new attempt and checkpointing over its finished job.

A job that fails is marked ``failed`` with its error. When even that cannot be recorded (the job
store stays unreachable for :data:`RECORD_TRIES` tries) the failure is logged as an error with the
job's id and reason, and the delivery is left unacknowledged: a shared queue delivers the job again
once its lease lapses; the embedded one queues it again at the next start.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import pathlib
import shutil
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from gateway.config import Stores
from gateway.jobs.queue import Delivery, JobQueue
from gateway.jobs.run import JobRun, retry
from gateway.jobs.sources import Sources
from gateway.service import OcrService
from gateway.stores import FINISHED, JobRecord, JobStore, ResultStore
from inkstream.errors import InkstreamError, as_inkstream_error

log = logging.getLogger("inkstream.gateway.jobs")

POLL_S = 0.5
RECORD_TRIES = 3  #: tries (1 s apart) to record a job's failure before leaving it to the queue
BEAT_LOG_EVERY_S = 30.0  #: while a job's heartbeat keeps failing, one warning per this many seconds


class Finish(Protocol):
    """:meth:`gateway.jobs.manager.JobManager.finish`: move an unfinished job to ``status`` with
    ``fields`` (and send its webhook); False when it had finished already.
    """

    def __call__(self, job_id: str, status: str, **fields: Any) -> Awaitable[bool]:
        """See the class docstring."""


class JobWorker:
    """Consumes ``queue`` (see the module docstring): records in ``jobs``, documents and results in
    ``results`` (``s3://`` sources through ``sources``), pages through ``service``; ``finish`` records
    a job's end. ``settings``: the gateway's ``stores`` section (deadline, attempts, lease);
    ``spool``: local dir for documents of running jobs; ``on_running(+1 / -1)`` as a job starts /
    stops running. The worker owns its running jobs' tasks (:meth:`stop` cancels one).
    """

    def __init__(self, service: OcrService, queue: JobQueue, jobs: JobStore, results: ResultStore,
                 sources: Sources, finish: Finish, settings: Stores, spool: pathlib.Path, *, max_running: int,
                 on_running: Callable[[int], None] | None = None):
        self.service, self.queue, self.jobs, self.results, self.sources = service, queue, jobs, results, sources
        self.finish, self.st, self.spool = finish, settings, spool
        self.spool.mkdir(parents=True, exist_ok=True)
        self.running = 0
        self.tasks: dict[str, asyncio.Task[None]] = {}  # jobs running in this process
        self._slots = asyncio.Semaphore(max_running)
        self._on_running = on_running or (lambda _d: None)
        self._loop_task: asyncio.Task[None] | None = None
        self._closing = False

    def start(self) -> None:
        """Start consuming (on the running event loop); nothing once :meth:`close` was called."""
        if self._closing:
            return
        self._loop_task = asyncio.create_task(self._consume(), name="job-worker")

    def stop_consuming(self) -> None:
        """Take no new job from the queue (drain); jobs already running here go on to the end."""
        self._closing = True
        if self._loop_task is not None:
            self._loop_task.cancel()

    async def stop(self, job_id: str, timeout_s: float = 10.0) -> None:
        """Cancel job ``job_id`` if it runs here and wait up to ``timeout_s`` seconds for it to stop."""
        task = self.tasks.get(job_id)
        if task is not None:
            task.cancel()
            await asyncio.wait({task}, timeout=timeout_s)

    async def _consume(self) -> None:
        while True:
            await self._slots.acquire()
            try:
                delivery = await self.queue.take()
            except BaseException:
                self._slots.release()
                raise
            task = asyncio.create_task(self._run(delivery), name=f"job-{delivery.job_id}")
            self.tasks[delivery.job_id] = task
            task.add_done_callback(functools.partial(self._done, delivery))

    def _done(self, delivery: Delivery, task: asyncio.Task[None]) -> None:
        if self.tasks.get(delivery.job_id) is task:  # not a later attempt's entry (a takeover in this process)
            del self.tasks[delivery.job_id]
        self._slots.release()

    async def _read(self, job_id: str) -> JobRecord | None:
        return await asyncio.to_thread(self.jobs.get, job_id)

    async def _run(self, d: Delivery) -> None:
        job_id = d.job_id
        try:
            job = await retry_record(self._read, job_id, self.st.job_deadline_s)
        except InkstreamError as exc:
            log.warning("job %s: its record cannot be read (%s); left to a later delivery", job_id, exc.message)
            return  # not acknowledged: the lease lapses and someone takes it over later
        if job is None or job.status in FINISHED:
            await self._ack(d)
            return
        if job.attempts >= self.st.job_max_attempts:
            await self._fail(d, "INTERNAL", f"the job was started {job.attempts} times without finishing")
            return
        self.running += 1
        self._on_running(1)
        superseded = asyncio.Event()
        beat = asyncio.create_task(self._heartbeat(d, asyncio.current_task(), job.attempts + 1, superseded))
        folder = self.spool / job_id
        try:
            await self.queue.started(d)
            await asyncio.to_thread(self.jobs.update, job_id, unless_finished=True, status="running",
                                    attempts=job.attempts + 1, worker=getattr(self.queue, "consumer", "local"))
            await asyncio.to_thread(folder.mkdir, parents=True, exist_ok=True)
            run = JobRun(self.service, self.jobs, self.results, self.sources, job, folder,
                         deadline_s=self.st.job_deadline_s,
                         max_upload_bytes=self.service.config.limits.max_upload_bytes)
            pages = await run.execute()
            await self.finish(job_id, "done", pages_done=pages)
            await self._ack(d)
        except asyncio.CancelledError:
            if not self._closing and not superseded.is_set():  # cancelled by a user (the record says so already)
                await self._ack(d)
            raise
        except Exception as exc:  # a job's failure is recorded, never raised
            err = as_inkstream_error(exc)
            if not isinstance(exc, InkstreamError):
                log.exception("job %s failed", job_id)
            await self._fail(d, err.code_name, err.message, err.reason)
        finally:
            beat.cancel()
            self.running -= 1
            self._on_running(-1)
            await asyncio.to_thread(shutil.rmtree, folder, ignore_errors=True)

    async def _fail(self, d: Delivery, code: str, message: str, reason: str = "") -> None:
        """Record the job failed and acknowledge it; when the record cannot be written, log it and
        leave the delivery unacknowledged (see the module docstring).
        """
        for attempt in range(RECORD_TRIES):
            try:
                await self.finish(d.job_id, "failed", error_code=code, error_message=message, error_reason=reason)
                await self._ack(d)
                return
            except Exception as exc:  # noqa: BLE001 - reported below, never hidden
                if attempt + 1 == RECORD_TRIES:
                    log.error("job %s failed (%s: %s) and the failure could not be recorded (%s); the job is "
                              "left to the queue", d.job_id, code, message, as_inkstream_error(exc).message)
                    return
                await asyncio.sleep(1.0)

    async def _ack(self, d: Delivery) -> None:
        """Acknowledge ``d``; an unreachable queue is logged (the delivery then comes back later)."""
        try:
            await self.queue.ack(d)
        except InkstreamError as exc:
            log.warning("job %s: acknowledging the delivery failed (%s)", d.job_id, exc.message)

    async def _heartbeat(self, d: Delivery, task: asyncio.Task[Any] | None, attempt: int = 0,
                         superseded: asyncio.Event | None = None) -> None:
        """Renew the lease every third of it; cancel ``task`` when the record says cancelled, and also
        (setting ``superseded`` first) when it shows a later attempt than ``attempt`` (this run's
        number, 1-based: a takeover, which marks the job running with ``attempts`` + 1 before it reads
        a page, whether it has finished since or not; see the module docstring). A failed
        renewal or poll is tried again at the next beat; it is logged when it starts failing, then at
        most every :data:`BEAT_LOG_EVERY_S` while it goes on (not every beat: 2 lines a second per job
        through a store outage), and once when it recovers.
        """
        last_renew = time.monotonic()
        failing_since: float | None = None
        logged = 0.0
        while True:
            await asyncio.sleep(POLL_S)
            try:
                if time.monotonic() - last_renew >= self.st.job_lease_s / 3:
                    await self.queue.renew(d)
                    last_renew = time.monotonic()
                job = await self._read(d.job_id)
            except InkstreamError as exc:
                now = time.monotonic()
                if failing_since is None or now - logged >= BEAT_LOG_EVERY_S:
                    failing_since = now if failing_since is None else failing_since
                    log.warning("job %s: heartbeat failed (%s)%s", d.job_id, exc.message,
                                f" for {now - failing_since:.0f} s" if now > failing_since else "")
                    logged = now
                continue
            if failing_since is not None:
                log.warning("job %s: heartbeat works again after %.0f s", d.job_id, time.monotonic() - failing_since)
                failing_since = None
            if job is not None and job.status == "cancelled" and task is not None:
                task.cancel()
                return
            if job is not None and task is not None and attempt and job.attempts > attempt:
                log.warning("job %s: attempt %d stops: the job was taken over (attempt %d, %s) after its lease "
                            "lapsed", d.job_id, attempt, job.attempts, job.status)
                if superseded is not None:
                    superseded.set()
                task.cancel()
                return

    async def close(self) -> None:
        """Stop consuming and stop running jobs (shutdown): with a shared queue another worker takes
        them over once their leases lapse; embedded, they are queued again at the next start.
        """
        self._closing = True
        if self._loop_task is not None:
            self._loop_task.cancel()
        tasks = list(self.tasks.values())
        for t in tasks:
            t.cancel()
        loop = asyncio.get_running_loop()  # tasks of a loop that is gone (a test's server thread) are over
        pending = [t for t in [*([self._loop_task] if self._loop_task else []), *tasks] if t.get_loop() is loop]
        if pending:
            await asyncio.wait(pending, timeout=10.0)


async def retry_record(read: Callable[[str], Awaitable[JobRecord | None]], job_id: str,
                       deadline_s: float) -> JobRecord | None:
    """``read(job_id)`` retried like a job's steps (:func:`gateway.jobs.run.retry`) for up to
    ``deadline_s`` seconds from now.
    """
    stub = JobRecord(job_id, created_at=time.time())
    return await retry(stub, deadline_s, "reading the record", lambda: read(job_id))
