"""One gateway process's shared parts, used by both front ends (REST and gRPC): stores, result cache,
:class:`OcrService`, :class:`JobManager`, metrics, the drain flag and request-scoped temp dirs.
"""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import shutil
import tempfile
from collections.abc import Iterator

from gateway.cache import ResultCache
from gateway.config import GatewayConfig
from gateway.jobs import JobManager
from gateway.metrics import gateway_metrics
from gateway.service import OcrService
from gateway.stores import DirResultStore, SqliteJobStore
from gateway.types import PagePipeline
from inkstream.errors import Unavailable


class GatewayCore:
    """Build with :meth:`create`; call :meth:`start` on the running event loop and :meth:`close` at exit.

    ``data_dir``: where the SQLite job store (``jobs.sqlite``) and the result store (``results/``)
    live; a fresh temp dir (removed by :meth:`close`) when ``config.stores.data_dir`` is empty.
    """

    def __init__(self, config: GatewayConfig, pipeline: PagePipeline):
        st = config.stores
        self.config = config
        self.pipeline = pipeline
        self._own_dir = not st.data_dir
        self.data_dir = pathlib.Path(st.data_dir or tempfile.mkdtemp(prefix="inkstream-gateway-"))
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.temp_root = st.temp_dir or None
        self.job_store = SqliteJobStore(self.data_dir / "jobs.sqlite")
        self.results = DirResultStore(self.data_dir / "results")
        self.metrics = gateway_metrics()
        self.cache = (ResultCache(self.results, st.cache_ttl_s, st.cache_max_entries, self.metrics.cache)
                      if st.cache_enabled else None)
        self.service = OcrService(config, pipeline, self.cache, render_timeout_s=config.render_timeout_s)
        self.jobs = JobManager(self.service, self.job_store, self.results, self.data_dir / "spool",
                               max_running=st.max_jobs_running, max_queued=st.max_jobs_queued, ttl_s=st.job_ttl_s,
                               on_running=self.metrics.inflight.add)
        self.draining = False
        self.inflight = 0  # synchronous OCR requests being served (REST + gRPC)
        self._started = False

    def start(self) -> None:
        """Recover the job store (idempotent; call from the event loop)."""
        if not self._started:
            self._started = True
            self.jobs.start()

    async def close(self) -> None:
        """Fail unfinished jobs (shutdown), close the stores, remove an owned data dir."""
        await self.jobs.close()
        self.job_store.close()
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
        """Stop accepting (readiness 503), wait up to ``grace_s`` seconds for in-flight requests."""
        self.draining = True
        loop = asyncio.get_running_loop()
        end = loop.time() + grace_s
        while self.inflight > 0 and loop.time() < end:
            await asyncio.sleep(0.1)

    @contextlib.contextmanager
    def request_dir(self) -> Iterator[pathlib.Path]:
        """A request-scoped temp dir, removed with everything in it when the block exits."""
        with tempfile.TemporaryDirectory(prefix="inkstream-req-", dir=self.temp_root) as d:
            yield pathlib.Path(d)
