"""OpenTelemetry set-up shared by the services: metrics on a Prometheus endpoint and device memory
gauges. Traces and W3C trace-context propagation live in :mod:`inkstream.tracing`.

Metrics: an OTel ``MeterProvider`` with the Prometheus reader (opentelemetry-exporter-prometheus),
served by prometheus_client on ``/metrics`` of a small HTTP server per gRPC service (the gateway
mounts the same registry in FastAPI). OTel instrument names use dots (``inkstream.encoder.queue_depth``);
the Prometheus exporter turns them into ``inkstream_encoder_queue_depth`` plus a unit suffix.
"""

from __future__ import annotations

import atexit
import os
import resource
import sys
import threading
from collections.abc import Iterable
from typing import Any

from opentelemetry import metrics
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import start_http_server

from inkstream import tracing

_lock = threading.Lock()
_metrics_ready = False
_http_servers: dict[int, Any] = {}


def setup_metrics(service_name: str) -> None:
    """Install the global MeterProvider with a Prometheus reader once per process (idempotent)."""
    global _metrics_ready
    with _lock:
        if _metrics_ready:
            return
        provider = MeterProvider(
            metric_readers=[PrometheusMetricReader()],
            resource=Resource.create({"service.name": service_name}),
        )
        metrics.set_meter_provider(provider)
        _metrics_ready = True
    _register_process_memory(metrics.get_meter("inkstream.process"))


def serve_metrics(port: int, host: str = "127.0.0.1") -> int:
    """Start prometheus_client's HTTP server for ``/metrics`` on ``host:port``; returns the bound port
    (``port=0`` picks a free one).
    """
    server, _thread = start_http_server(port, addr=host)
    bound = server.server_port
    _http_servers[bound] = server
    # The SDK shuts the MeterProvider down at interpreter exit, which unregisters the Prometheus
    # collector: a scrape after that would read an empty exposition (every counter gone, as if reset).
    # atexit runs last-registered first, so closing the listener here happens before that.
    atexit.register(_close_http_server, bound)
    return bound


def _close_http_server(port: int) -> None:
    """Stop answering ``/metrics`` on ``port`` (at exit, before the MeterProvider shuts down)."""
    server = _http_servers.pop(port, None)
    if server is not None:
        server.shutdown()
        server.server_close()


def meter(name: str) -> metrics.Meter:
    """A meter from the global provider (set up by :func:`setup_metrics`)."""
    return metrics.get_meter(name)


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _register_process_memory(m: metrics.Meter) -> None:
    """Device memory in use and its high-water mark: CUDA allocator when a GPU is used, RSS on CPU."""

    def in_use(_: CallbackOptions) -> Iterable[Observation]:
        try:
            torch = sys.modules.get("torch")  # never imported for this: a torch-free encoder stays so
            if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
                return [Observation(torch.cuda.memory_allocated(), {"device": "cuda"})]
        except Exception:  # noqa: BLE001 - no torch or no usable CUDA: report the process RSS
            pass
        return [Observation(_rss_bytes(), {"device": "cpu"})]

    def high_water(_: CallbackOptions) -> Iterable[Observation]:
        try:
            torch = sys.modules.get("torch")
            if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
                return [Observation(torch.cuda.max_memory_allocated(), {"device": "cuda"})]
        except Exception:  # noqa: BLE001 - no torch or no usable CUDA: report the peak RSS
            pass
        # ru_maxrss is in KiB on Linux (getrusage(2)).
        return [Observation(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, {"device": "cpu"})]

    m.create_observable_gauge("inkstream.device.memory.used", callbacks=[in_use], unit="By",
                              description="device memory in use (GPU allocator, or process RSS on CPU)")
    m.create_observable_gauge("inkstream.device.memory.peak", callbacks=[high_water], unit="By",
                              description="high-water mark of device memory (GPU allocator, or peak RSS on CPU)")


def setup_tracing(service_name: str, provider: TracerProvider | None = None) -> TracerProvider:
    """Install the process's TracerProvider once (delegates to :func:`inkstream.tracing.setup_tracing`,
    which also adds the exporter chosen by ``INKSTREAM_TRACES_EXPORTER`` / ``INKSTREAM_TRACES_FILE``).
    """
    return tracing.setup_tracing(service_name, provider=provider)
