"""OpenTelemetry instruments of the decoder (``inkstream.telemetry.meter``), shared by all engines in a process.

Gauges (observed on scrape, one series per engine, attribute ``engine``):
``inkstream.decoder.sequences.running`` / ``.waiting`` (sequences), ``inkstream.decoder.kv_cache.used``
(tokens holding prompt + generated positions), ``.reserved`` (tokens reserved, prompt + max_new_tokens),
``.budget`` (tokens), ``.usage`` (used / budget, ratio 0..1). Histograms: ``inkstream.decoder.ttft``
(arrival to first token, s) and ``inkstream.decoder.tpot`` (mean time per output token after the
first, s). Counters: ``inkstream.decoder.generated_tokens`` (tokens; ``rate()`` gives tokens/s) and
``inkstream.decoder.sequences.finished`` (attribute ``reason``). The HPA scales on waiting
sequences and KV-cache usage (DESIGN.md).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable
from typing import Any

from opentelemetry.metrics import CallbackOptions, Observation

from inkstream.telemetry import meter

_lock = threading.Lock()
_engines: weakref.WeakSet[Any] = weakref.WeakSet()
_inst: dict[str, Any] = {}



# Histogram bucket boundaries in seconds (OTel's defaults are millisecond-scale integers 0..10,000).
# TTFT covers queueing + prefill (ms on a GPU, seconds on a loaded CPU); TPOT is one decode step.
TTFT_BUCKETS_S = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
TPOT_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


def _observe(attr: str):
    def cb(_: CallbackOptions) -> Iterable[Observation]:
        return [Observation(getattr(e, attr), {"engine": e.name}) for e in list(_engines)]

    return cb


def _instruments() -> dict[str, Any]:
    with _lock:
        if not _inst:
            m = meter("inkstream.decoder")
            for name, attr, unit, desc in [
                ("inkstream.decoder.sequences.running", "running_count", "{sequence}",
                 "sequences in the running batch"),
                ("inkstream.decoder.sequences.waiting", "waiting_count", "{sequence}",
                 "sequences in the waiting queue"),
                ("inkstream.decoder.kv_cache.used", "kv_used_tokens", "{token}",
                 "KV-cache positions holding prompt + generated tokens"),
                ("inkstream.decoder.kv_cache.reserved", "kv_reserved_tokens", "{token}",
                 "KV-cache tokens reserved (prompt + max_new_tokens)"),
                ("inkstream.decoder.kv_cache.budget", "kv_cache_budget_tokens", "{token}", "KV-cache admission budget"),
                ("inkstream.decoder.kv_cache.usage", "kv_usage", "1", "KV-cache tokens used / budget"),
            ]:
                m.create_observable_gauge(name, callbacks=[_observe(attr)], unit=unit, description=desc)
            _inst["ttft"] = m.create_histogram("inkstream.decoder.ttft", unit="s", description="arrival to first token",
                                               explicit_bucket_boundaries_advisory=list(TTFT_BUCKETS_S))
            _inst["tpot"] = m.create_histogram("inkstream.decoder.tpot", unit="s",
                                               description="mean time per output token after the first",
                                               explicit_bucket_boundaries_advisory=list(TPOT_BUCKETS_S))
            _inst["tokens"] = m.create_counter("inkstream.decoder.generated_tokens", unit="{token}",
                                               description="tokens decoded")
            _inst["finished"] = m.create_counter("inkstream.decoder.sequences.finished", unit="{sequence}",
                                                 description="sequences ended, by reason")
        return _inst


def register(engine: Any) -> None:
    """Report ``engine``'s gauges (until :func:`unregister` or garbage collection)."""
    _instruments()
    _engines.add(engine)


def unregister(engine: Any) -> None:
    """Stop observing ``engine``'s gauges (its process-wide registration ends)."""
    _engines.discard(engine)


def ttft(engine: Any, seconds: float) -> None:
    """Record one sequence's time to first token (seconds, arrival to first generated token)."""
    _instruments()["ttft"].record(seconds, {"engine": engine.name})


def generated(engine: Any, n_tokens: int) -> None:
    """Count ``n_tokens`` generated tokens of ``engine`` (one decode step's worth)."""
    _instruments()["tokens"].add(n_tokens, {"engine": engine.name})


def finished(engine: Any, reason: Any, usage: Any = None) -> None:
    """Count a finished sequence; records its TPOT when it generated two or more tokens."""
    inst = _instruments()
    inst["finished"].add(1, {"engine": engine.name, "reason": str(getattr(reason, "value", reason))})
    if usage is not None and usage.generated_tokens > 1:
        inst["tpot"].record(usage.tpot_s, {"engine": engine.name})
