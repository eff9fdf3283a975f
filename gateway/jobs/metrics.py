"""Job and queue metrics of a gateway, exported on ``/metrics``.

* ``inkstream_gateway_jobs_queued`` (gauge, jobs): jobs queued and not started (the whole queue,
  the same figure on every gateway of one Redis; the worker HPA's signal);
* ``inkstream_gateway_jobs_oldest_queued_age_seconds`` (gauge, s): age of the oldest queued job;
* ``inkstream_gateway_jobs_running`` (gauge, jobs): jobs this process is running;
* ``inkstream_gateway_webhook_deliveries_total`` (counter, by ``outcome``: delivered, retried, failed).

The queue figures are read every :data:`REFRESH_S` seconds by :meth:`JobsMetrics.refresh_loop`
(a scrape never waits on Redis). Instruments are process-global, created once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from opentelemetry.metrics import Observation

from inkstream import telemetry

REFRESH_S = 2.0
_instance: JobsMetrics | None = None


def jobs_metrics() -> JobsMetrics:
    """The process's JobsMetrics (created on first use)."""
    global _instance
    if _instance is None:
        _instance = JobsMetrics()
    return _instance


class JobsMetrics:
    """Holds the last queue figures and the instruments reading them; use :func:`jobs_metrics`."""

    def __init__(self) -> None:
        self.queued = 0
        self.oldest_age_s = 0.0
        self.running: Callable[[], int] = lambda: 0
        telemetry.setup_metrics("inkstream-gateway")
        m = telemetry.meter("inkstream.gateway.jobs")
        m.create_observable_gauge("inkstream.gateway.jobs.queued", unit="{job}",
                                  description="jobs queued and not started (whole queue)",
                                  callbacks=[lambda _o: [Observation(self.queued)]])
        m.create_observable_gauge("inkstream.gateway.jobs.oldest_queued_age", unit="s",
                                  description="age of the oldest queued job, seconds",
                                  callbacks=[lambda _o: [Observation(self.oldest_age_s)]])
        m.create_observable_gauge("inkstream.gateway.jobs.running", unit="{job}",
                                  description="jobs this gateway process is running",
                                  callbacks=[lambda _o: [Observation(self.running())]])
        self.webhooks = m.create_counter("inkstream.gateway.webhook.deliveries", unit="{delivery}",
                                         description="webhook delivery attempts by outcome")

    async def refresh_loop(self, depth: Callable[[], Any]) -> None:
        """Every REFRESH_S seconds: ``(queued, oldest age) = await depth()``; errors keep the last figures."""
        while True:
            with contextlib.suppress(Exception):
                self.queued, self.oldest_age_s = await depth()
            await asyncio.sleep(REFRESH_S)
