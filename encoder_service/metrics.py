"""OpenTelemetry instruments of the encoder (exported on ``/metrics`` by :mod:`inkstream.telemetry`).

Prometheus names (the exporter turns dots into underscores and appends the unit):

* ``inkstream_encoder_queue_depth`` (gauge-like up/down counter, pages): admitted pages not yet in a
  forward pass (decoding, preprocessing or queued). The HPA's scale-out metric.
* ``inkstream_encoder_inflight_pages`` (up/down counter, pages): admitted pages not yet answered.
* ``inkstream_encoder_batch_size`` (histogram, pages per forward pass).
* ``inkstream_encoder_pages_encoded_total`` (counter, pages; ``rate()`` gives pages/s).
* ``inkstream_encoder_encode_latency_seconds`` (histogram, seconds): admission to result per page
  (queue wait + decode + preprocess + forward).
* ``inkstream_encoder_forward_seconds`` (histogram, seconds): one forward pass of a batch.
* ``inkstream_encoder_rejected_pages_total`` (counter, pages, attribute ``reason``).
"""

from __future__ import annotations

from opentelemetry.metrics import Meter

from inkstream import telemetry

# Explicit histogram buckets: OTel's defaults (0..10000) suit milliseconds, not seconds / pages.
LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)


class EncoderMetrics:
    """The encoder's instruments on ``meter`` (default: the process-wide ``inkstream.encoder`` meter)."""

    def __init__(self, meter: Meter | None = None, attributes: dict[str, str] | None = None):
        m = meter or telemetry.meter("inkstream.encoder")
        self.attrs = dict(attributes or {})
        self.queue_depth = m.create_up_down_counter(
            "inkstream.encoder.queue_depth", unit="{page}", description="admitted pages waiting for a forward pass"
        )
        self.inflight = m.create_up_down_counter(
            "inkstream.encoder.inflight_pages", unit="{page}", description="admitted pages not yet answered"
        )
        self.batch_size = m.create_histogram(
            "inkstream.encoder.batch_size", unit="{page}", description="pages per forward pass",
            explicit_bucket_boundaries_advisory=list(BATCH_BUCKETS),
        )
        self.pages = m.create_counter(
            "inkstream.encoder.pages_encoded", unit="{page}", description="pages encoded successfully"
        )
        self.latency = m.create_histogram(
            "inkstream.encoder.encode_latency", unit="s", description="per-page admission-to-result time",
            explicit_bucket_boundaries_advisory=list(LATENCY_BUCKETS_S),
        )
        self.forward = m.create_histogram(
            "inkstream.encoder.forward", unit="s", description="duration of one batched forward pass",
            explicit_bucket_boundaries_advisory=list(LATENCY_BUCKETS_S),
        )
        self.rejected = m.create_counter(
            "inkstream.encoder.rejected_pages", unit="{page}", description="pages refused or failed, by reason"
        )

    def reject(self, reason: str) -> None:
        """Count one refused / failed page with ``reason`` (an error code name)."""
        self.rejected.add(1, {**self.attrs, "reason": reason})
