"""Settings and counters of :mod:`gateway.pipeline` (the gateway config's ``pipeline:`` section)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

from gateway.retry import RetryCounters, RetryPolicy


@dataclass(frozen=True)
class PipelineConfig:
    """Bounds and deadlines of the data path.

    ``max_pages_in_flight``: gateway-wide page bound (admission, 429 beyond it).
    ``max_pages_per_request``: sliding-window size of one request, pages.
    ``encode_timeout_s`` / ``decode_timeout_s``: deadline of one Encode call (one page) / one Decode
    call (all segments of one page), seconds. ``info_timeout_s``: deadline of Info, seconds;
    ``info_ttl_s``: seconds the encoders' Info is cached (a rollout to new weights shows within it).
    ``decode_window_segments``: segments of one page open at once in its Decode call (the next is
    sent as one finishes); keep it <= the decoders' ``max_running + max_waiting`` (default 64 + 64).
    ``resolve_interval_s``: seconds between DNS re-resolutions of replica names (headless Services);
    ``health_retry_s``: seconds between reconnects of a broken health watch.
    ``retry``: see :class:`gateway.retry.RetryPolicy`. ``retry_budget_tokens`` /
    ``retry_budget_ratio``: see :class:`gateway.retry.RetryBudget`.
    """

    max_pages_in_flight: int = 64
    max_pages_per_request: int = 8
    encode_timeout_s: float = 120.0
    decode_timeout_s: float = 600.0
    decode_window_segments: int = 64
    info_timeout_s: float = 10.0
    info_ttl_s: float = 60.0
    resolve_interval_s: float = 10.0
    health_retry_s: float = 0.5
    retry: RetryPolicy = RetryPolicy()
    retry_budget_tokens: float = 100.0
    retry_budget_ratio: float = 0.2

    @classmethod
    def from_mapping(cls, d: Mapping[str, Any] | None) -> "PipelineConfig":
        """From a plain dict (the gateway config's ``pipeline:`` section): the fields above, plus the
        RetryPolicy fields either flat (``max_attempts: 3``) or under ``retry:``. Raises ValueError
        naming unknown keys or bad values."""
        if d is not None and not isinstance(d, Mapping):
            raise ValueError(f"the pipeline settings must be a mapping of name: value, got {d!r}")
        d = dict(d or {})
        retry_fields = {f.name for f in dataclasses.fields(RetryPolicy)}
        own = {f.name for f in dataclasses.fields(cls)} - {"retry"}
        retry_section = d.pop("retry", None) or {}
        if not isinstance(retry_section, Mapping):
            raise ValueError(f"pipeline setting retry must be a mapping of {', '.join(sorted(retry_fields))}, "
                             f"got {retry_section!r}")
        retry = dict(retry_section)
        retry.update({k: d.pop(k) for k in list(d) if k in retry_fields})
        unknown = sorted(set(d) - own) + sorted(set(retry) - retry_fields)
        if unknown:
            raise ValueError(f"unknown pipeline setting(s): {', '.join(unknown)}; known: "
                             f"{', '.join(sorted(own | retry_fields))}")
        cfg = cls(**_numbers(cls, d), retry=RetryPolicy(**_numbers(RetryPolicy, retry)))
        for name in ("max_pages_in_flight", "max_pages_per_request", "encode_timeout_s", "decode_timeout_s",
                     "decode_window_segments", "resolve_interval_s", "health_retry_s"):
            if getattr(cfg, name) <= 0:
                raise ValueError(f"pipeline setting {name} must be > 0, got {getattr(cfg, name)}")
        if cfg.retry.max_attempts < 1:
            raise ValueError("pipeline setting max_attempts must be >= 1")
        return cfg


def _numbers(kind: type, values: dict[str, Any]) -> dict[str, Any]:
    """``values`` converted to the type of ``kind``'s defaults (every setting here is an int or a
    float; YAML strings such as "30" are accepted). Raises ValueError naming the setting."""
    out = {}
    for name, value in values.items():
        want = type(getattr(kind, name))
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ValueError(f"pipeline setting {name} must be a number, got {value!r}")
        try:
            out[name] = want(value) if want is float or not isinstance(value, float) else _whole(name, value)
        except ValueError:
            raise ValueError(f"pipeline setting {name} must be {'an integer' if want is int else 'a number'}, "
                             f"got {value!r}") from None
    return out


def _whole(name: str, value: float) -> int:
    if not value.is_integer():
        raise ValueError(name)
    return int(value)


@dataclass
class PipelineStats:
    """Counters over the pipeline's life (also exported as OTel metrics): pages by status, and
    encode / decode calls, retries and quarantined pages per stage."""

    pages_ok: int = 0
    pages_error: int = 0
    encode: RetryCounters = None  # type: ignore[assignment]
    decode: RetryCounters = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        self.encode = self.encode or RetryCounters()
        self.decode = self.decode or RetryCounters()
