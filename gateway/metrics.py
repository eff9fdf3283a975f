"""Gateway metrics (OpenTelemetry instruments, exported on ``/metrics`` by the Prometheus reader set
up in :func:`inkstream.telemetry.setup_metrics`).

``inkstream.gateway.requests.inflight`` is the per-pod autoscaling signal (DESIGN.md: gateway HPA on
in-flight requests).
"""

from __future__ import annotations

from inkstream import telemetry

_instance: GatewayMetrics | None = None


def gateway_metrics() -> GatewayMetrics:
    """The process's GatewayMetrics (OTel instruments are process-global: created once)."""
    global _instance
    if _instance is None:
        _instance = GatewayMetrics()
    return _instance


class GatewayMetrics:
    """Instruments of one gateway process; use :func:`gateway_metrics`."""

    def __init__(self) -> None:
        telemetry.setup_metrics("inkstream-gateway")
        m = telemetry.meter("inkstream.gateway")
        self.inflight = m.create_up_down_counter(
            "inkstream.gateway.requests.inflight", unit="{request}",
            description="OCR requests being served (REST + gRPC) plus asynchronous jobs running, "
                        "the autoscaling signal")
        self.requests = m.create_counter(
            "inkstream.gateway.requests", unit="{request}", description="finished requests by api, route and status")
        self.pages = m.create_counter(
            "inkstream.gateway.pages", unit="{page}", description="pages returned, by status and finish reason")
        self.page_warnings = m.create_counter(
            "inkstream.gateway.page_warnings", unit="{warning}",
            description="warnings on returned pages, by code "
                        "(no_text_found, unread_region, unread_ink, unsupported_script, low_confidence, "
                        "password_unused)")
        self.duration = m.create_histogram(
            "inkstream.gateway.request.duration", unit="s", description="wall time of a whole OCR request",
            explicit_bucket_boundaries_advisory=[0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600])
        self.cache = m.create_counter(
            "inkstream.gateway.cache.lookups", unit="{lookup}", description="result-cache lookups by result")
        self.upload_bytes = m.create_counter(
            "inkstream.gateway.upload", unit="By", description="document bytes received")
        self.client_disconnects = m.create_counter(
            "inkstream.gateway.client_disconnects", unit="{request}",
            description="requests whose client went away (label phase: upload or answer)")
