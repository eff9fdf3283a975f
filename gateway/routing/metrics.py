"""The gateway pipeline's counters and their OTel instruments (Prometheus:
``inkstream_gateway_pipeline_*``, ``inkstream_gateway_replica_*``); pages by status are counted by
:mod:`gateway.metrics`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from opentelemetry.metrics import Observation

from gateway.routing.admission import Admission
from gateway.routing.retry import RetryCounters
from gateway.routing.router import Router
from inkstream.telemetry import meter


@dataclass
class PipelineStats:
    """Counters over the pipeline's life (also exported as OTel metrics): pages by status, and
    encode / decode calls, retries and quarantined pages per stage.
    """

    pages_ok: int = 0
    pages_error: int = 0
    encode: RetryCounters = field(default_factory=RetryCounters)
    decode: RetryCounters = field(default_factory=RetryCounters)


def register_pipeline_metrics(stats: PipelineStats, admission: Admission, router: Router) -> None:
    """Observable instruments reading ``stats``, ``admission`` and the replicas and leases of
    ``router`` whenever metrics are collected.
    """
    replica_sets = list(router.stages.values())

    def per_stage(attr: str):
        return lambda _o: [Observation(getattr(stats.encode, attr), {"stage": "encode"}),
                           Observation(getattr(stats.decode, attr), {"stage": "decode"})]

    def per_replica(value):
        return lambda _o: [Observation(value(r), {"service": rs.name, "replica": r.address})
                           for rs in replica_sets for r in list(rs.replicas.values())]

    m = meter("inkstream.gateway.pipeline")
    m.create_observable_gauge(
        "inkstream.gateway.pipeline.pages_in_flight", unit="{page}",
        description="pages held by the gateway (being encoded or decoded, or waiting to be returned)",
        callbacks=[lambda _o: [Observation(admission.pages_in_flight)]])
    m.create_observable_counter("inkstream.gateway.pipeline.calls", unit="{call}",
                                description="encode / decode calls made to replicas",
                                callbacks=[per_stage("calls")])
    m.create_observable_counter("inkstream.gateway.pipeline.retries", unit="{call}",
                                description="encode / decode calls that were retries",
                                callbacks=[per_stage("retries")])
    m.create_observable_counter("inkstream.gateway.pipeline.quarantined", unit="{page}",
                                description="pages quarantined after failing on two replicas",
                                callbacks=[per_stage("quarantined")])
    m.create_observable_gauge("inkstream.gateway.replica.outstanding", unit="{page}",
                              description="pages sent to a replica and not finished",
                              callbacks=[per_replica(router.leases)])
    m.create_observable_gauge("inkstream.gateway.replica.serving", unit="1",
                              description="1 while the replica is eligible for new work (health SERVING)",
                              callbacks=[per_replica(lambda r: int(r.healthy and not r.retired))])
