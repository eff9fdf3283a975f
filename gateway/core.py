"""One gateway process's shared parts, used by both front ends (REST and gRPC): stores, result cache,
:class:`OcrService`, :class:`JobManager` (+ :class:`JobWorker` unless ``role: api``), sources and
uploads, metrics, the drain flag and request-scoped temp dirs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import pathlib
import shutil
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from gateway.config import GatewayConfig
from gateway.jobs.manager import JobManager
from gateway.jobs.metrics import jobs_metrics
from gateway.jobs.queue import JobQueue, LocalQueue
from gateway.jobs.sources import Sources
from gateway.jobs.webhooks import WebhookSender
from gateway.jobs.worker import JobWorker
from gateway.metrics import gateway_metrics
from gateway.service import OcrService
from gateway.stores import JobRecord
from gateway.stores.cache import BlobCache, CacheBackend, RedisCache, ResultCache
from gateway.stores.factory import open_stores
from gateway.types import PagePipeline
from inkstream.errors import Unavailable, as_inkstream_error

log = logging.getLogger("inkstream.gateway")

STORES_PROBE_S = 2.0  # readiness re-checks the stores at most this often


class GatewayCore:
    """Call :meth:`start` on the running event loop and :meth:`close` at exit.

    ``data_dir``: where the embedded SQLite job store (``jobs.sqlite``) and result directory
    (``results/``) live, and the worker's spool; a fresh temp dir (removed by :meth:`close`) when
    ``config.stores.data_dir`` is empty.
    """

    def __init__(self, config: GatewayConfig, pipeline: PagePipeline):
        st = config.stores
        self.config = config
        self.pipeline = pipeline
        self._own_dir = not st.data_dir
        self.data_dir = pathlib.Path(st.data_dir or tempfile.mkdtemp(prefix="inkstream-gateway-"))
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.temp_root = st.temp_dir or None
        self.stores = open_stores(st, self.data_dir)
        self.job_store, self.results = self.stores.jobs, self.stores.results
        self.metrics = gateway_metrics()
        backend: CacheBackend = (RedisCache(self.stores.redis) if self.stores.redis is not None
                                 else BlobCache(self.results, st.cache_max_entries))
        self.cache = ResultCache(backend, st.cache_ttl_s, lookups=self.metrics.cache) if st.cache_enabled else None
        self.service = OcrService(config, pipeline, self.cache, render_timeout_s=config.render_timeout_s)
        queue: JobQueue
        if self.stores.redis_url:
            from gateway.jobs.queue import RedisQueue
            queue = RedisQueue(self.stores.redis_url, st.job_lease_s)
        else:
            queue = LocalQueue()
        self.jobs_metrics = jobs_metrics()
        self.jobs = JobManager(self.service, self.job_store, self.results, queue, settings=st,
                               webhooks=WebhookSender(counter=self.jobs_metrics.webhooks),
                               recover=not self.stores.redis_url)
        s3 = self.results if st.result_store == "s3" else None
        self.sources = Sources(s3, st.source_buckets, st.presign_expires_s)  # type: ignore[arg-type]
        self.worker = (JobWorker(self.service, queue, self.job_store, self.results, self.sources, self.jobs.finish, st,
                                 self.data_dir / "spool", max_running=st.max_jobs_running,
                                 on_running=self.metrics.inflight.add) if config.role != "api" else None)
        if self.worker is not None:
            worker = self.worker
            self.jobs.local = worker
            self.jobs_metrics.running = lambda: worker.running
        self.draining = False
        #: set when a drain gives up waiting: open streams end with an error line instead of being cut
        self.abandoned = asyncio.Event()
        self.inflight = 0  # synchronous OCR requests being served (REST + gRPC)
        self._started = False
        self._unfinished: list[JobRecord] = []  # embedded: jobs of an earlier process, queued again at start
        self._background: list[asyncio.Task[Any]] = []
        self._stores_checked: tuple[float, dict[str, tuple[bool, str]]] = (0.0, {})

    def start(self) -> None:
        """Recover the job store (embedded: the unfinished jobs of an earlier run are queued again,
        :meth:`JobManager.resume`), start the worker and the metrics refresh (idempotent; call from
        the event loop). Unreachable stores only delay this (readiness says so meanwhile).
        """
        if not self._started:
            self._started = True
            if self.jobs.recover:  # embedded (local file): listed at once, before any submission
                self._unfinished = self.job_store.unfinished()
            self._background.append(asyncio.create_task(self._start(), name="gateway-start"))
            self._background.append(asyncio.create_task(self.jobs_metrics.refresh_loop(self.jobs.queue.depth)))

    async def _start(self) -> None:
        delay = 1.0
        while True:
            try:
                await self.jobs.start()
                if self._unfinished:
                    queued, failed = await self.jobs.resume(self._unfinished)
                    log.warning("unfinished jobs of an earlier run: %d queued again, %d failed (document no "
                                "longer stored)", queued, failed)
                break
            except Exception as exc:  # noqa: BLE001 - a store down at start: keep trying, not ready meanwhile
                log.warning("job store not reachable at start (%s); retrying in %g s", as_inkstream_error(exc).message,
                            delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)
        if self.worker is not None:
            self.worker.start()
        while True:  # expire finished jobs once a minute
            await asyncio.sleep(60.0)
            with contextlib.suppress(Exception):
                await self.jobs.sweep()

    async def stores_ready(self) -> tuple[bool, str]:
        """(reachable, reason) of the job store and the result store, checked at most every
        :data:`STORES_PROBE_S` seconds; an unreachable one is logged by name.
        """
        checks = await self.store_checks()
        failing = [reason for _, reason in checks.values() if reason]
        return not failing, failing[0] if failing else ""

    async def store_checks(self) -> dict[str, tuple[bool, str]]:
        """``{"job_store": (ok, reason), "result_store": (ok, reason)}``, each store pinged (5 s at
        most), at most every :data:`STORES_PROBE_S` seconds; never raises. ``reason`` names the
        endpoint: show it to operators only (``/readyz`` gives it to the admin role).
        """
        at, checks = self._stores_checked
        if time.monotonic() - at < STORES_PROBE_S:
            return checks
        checks = {}
        for name, store in (("job_store", self.job_store), ("result_store", self.results)):
            try:
                await asyncio.wait_for(asyncio.to_thread(store.ping), 5.0)
                checks[name] = (True, "")
            except Exception as exc:  # noqa: BLE001 - readiness never raises
                reason = as_inkstream_error(exc).message if not isinstance(exc, TimeoutError) \
                    else f"{type(store).__name__} did not answer within 5 s"
                where = getattr(store, "where", "")
                reason = f"{reason} ({where})" if where and where not in reason else reason
                checks[name] = (False, reason)
                log.warning("not ready: %s", reason)
        self._stores_checked = (time.monotonic(), checks)
        return checks

    async def close(self) -> None:
        """Stop the worker (its unfinished jobs stay unfinished: embedded, they are queued again at
        the next start; shared, another worker takes them over), close the stores, remove an owned
        data dir.
        """
        loop = asyncio.get_running_loop()
        mine = [t for t in self._background if t.get_loop() is loop]
        for t in self._background:  # tasks of another loop (a server thread's) are cancelled there
            if t.get_loop() is loop:
                t.cancel()
            elif not t.get_loop().is_closed():
                t.get_loop().call_soon_threadsafe(t.cancel)
        await _bounded(asyncio.gather(*mine, return_exceptions=True), "background tasks")
        self._background.clear()
        if self.worker is not None:
            await _bounded(self.worker.close(), "the job worker")
        await _bounded(self.jobs.close(), "webhook deliveries")
        await self.jobs.queue.close()
        if self.cache is not None:
            await _bounded(self.cache.close(), "result-cache writes")
        self.stores.close()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def check_accepting(self) -> None:
        """Raise Unavailable (503 / UNAVAILABLE) while draining: new requests go to another replica."""
        if self.draining:
            raise Unavailable("this gateway is shutting down; retry on another replica", retry_after_s=1.0)

    @contextlib.contextmanager
    def counted(self) -> Iterator[None]:
        """Count one in-flight API request for the drain and the in-flight metric."""
        self.inflight += 1
        self.metrics.inflight.add(1)
        try:
            yield
        finally:
            self.inflight -= 1
            self.metrics.inflight.add(-1)

    @contextlib.contextmanager
    def track(self) -> Iterator[None]:
        """:meth:`check_accepting`, then :meth:`counted` (gRPC handlers; REST counts in middleware)."""
        self.check_accepting()
        with self.counted():
            yield

    async def drain(self, grace_s: float) -> None:
        """Stop accepting (readiness 503) and taking queued jobs; wait up to ``grace_s`` seconds for
        in-flight requests and for the jobs running here to finish (else :meth:`close` stops them:
        embedded, they run again at the next start; shared, another worker takes them over); then set
        :attr:`abandoned` (streaming responses still open stop and say why in their last line).
        """
        self.draining = True
        if self.worker is not None:
            self.worker.stop_consuming()
        loop = asyncio.get_running_loop()
        end = loop.time() + grace_s
        while (self.inflight > 0 or (self.worker is not None and self.worker.tasks)) and loop.time() < end:
            await asyncio.sleep(0.1)
        if self.inflight > 0:  # streams still open end with an error line (gateway.apis.rest_ocr)
            self.abandoned.set()
            await asyncio.sleep(0.2)

    @contextlib.contextmanager
    def request_dir(self) -> Iterator[pathlib.Path]:
        """A request-scoped temp dir, removed with everything in it when the block exits."""
        with tempfile.TemporaryDirectory(prefix="inkstream-req-", dir=self.temp_root) as d:
            yield pathlib.Path(d)


CLOSE_STEP_S = 15.0  # a shutdown step that takes longer is abandoned: Kubernetes would SIGKILL a hung pod


async def _bounded(aw: Any, what: str, timeout_s: float = CLOSE_STEP_S) -> None:
    """Await one shutdown step for at most ``timeout_s`` seconds; past that it is abandoned (and
    cancelled) with a warning naming ``what``, so that closing the gateway never hangs.
    """
    try:
        await asyncio.wait_for(aw, timeout_s)
    except TimeoutError:
        log.warning("closing the gateway: %s did not stop within %.0f s; abandoned", what, timeout_s)
