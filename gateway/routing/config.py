"""Settings of :mod:`gateway.routing.pipeline`: the gateway config's ``pipeline:`` section (pydantic).

:class:`PipelineConfig` is nested in :class:`gateway.config.GatewayConfig` as ``pipeline``, so the
section is validated with the rest of the gateway's settings when they load (YAML ``pipeline:``,
``INKSTREAM_GATEWAY__PIPELINE__<FIELD>`` environment overrides). The :class:`RetryPolicy` fields
may be given under ``retry:`` or flat, next to the others (``max_attempts: 3``). Every error names
the setting (``pipeline setting encode_timeout_s must be a number, got 'fast'``). Sizes are pages or
segments, times seconds.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    ValidationError,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError


def _no_bool(value: Any) -> Any:
    """Refuse booleans where a number is wanted (pydantic would read YAML ``true`` as 1)."""
    if isinstance(value, bool):
        raise PydanticCustomError("bool_not_number", "a boolean is not a number")
    return value


Int = Annotated[int, BeforeValidator(_no_bool)]
Float = Annotated[float, BeforeValidator(_no_bool)]


class RetryPolicy(BaseModel):
    """Per page and stage: ``max_attempts`` calls at most; backoff ``base_s`` doubling up to ``cap_s``
    seconds; ``replica_wait_s`` seconds to wait for an eligible replica (a restart: the encoder of
    the embedded model takes ~20 s to be ready) before failing a page that has no deadline of its own;
    ``quarantine_after``: replicas a page may be suspect on before it is quarantined (see
    :mod:`gateway.routing.retry`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_attempts: Int = Field(4, ge=1, description="calls per page and stage at most")
    base_s: Float = Field(0.05, description="first backoff, seconds (doubles per retry, full jitter)")
    cap_s: Float = Field(2.0, description="longest backoff, seconds")
    replica_wait_s: Float = Field(
        300.0, description="wait for an eligible replica, counted from the start of an outage, for pages without a "
        "deadline (Info reads, direct Pipeline use), seconds; a request's pages wait up to its deadline "
        "(request_timeout_s; a job's job_deadline_s)")
    quarantine_after: Int = Field(2, description="different replicas a page may be suspect on before quarantine")

    def backoff_s(self, retry: int, hint_s: float | None = None) -> float:
        """Seconds to sleep before retry number ``retry`` (1-based); ``hint_s``: server RetryInfo."""
        if hint_s is not None and hint_s > 0:
            return min(self.cap_s, hint_s)
        return random.uniform(0.0, min(self.cap_s, self.base_s * (2 ** (retry - 1))))


class PipelineConfig(BaseModel):
    """Bounds and deadlines of the data path (see each field's description; the module docstring
    says how the section is given). ``retry``: see :class:`RetryPolicy`; ``retry_budget_tokens`` /
    ``retry_budget_ratio``: see :class:`gateway.routing.retry.RetryBudget`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_pages_in_flight: Int = Field(64, gt=0, description="gateway-wide page bound (admission, 429 beyond it)")
    max_pages_per_request: Int = Field(8, gt=0, description="sliding-window size of one request, pages")
    encode_timeout_s: Float = Field(120.0, gt=0, description="deadline of one Encode call (one page), seconds")
    decode_timeout_s: Float = Field(
        600.0, gt=0, description="deadline of one Decode call (all segments of one page), seconds")
    decode_window_segments: Int = Field(
        64, gt=0,
        description="segments of one page open at once in its Decode call (the next is sent as one finishes); "
        "keep it <= the decoders' max_running + max_waiting (default 64 + 64)")
    info_timeout_s: Float = Field(10.0, description="deadline of an Info call, seconds")
    info_ttl_s: Float = Field(
        60.0, description="seconds the encoders' Info is cached (a rollout to new weights shows within it)")
    seconds_per_page_prior: float | None = Field(
        None, gt=0, description="seconds a page is assumed to take (whole stack) until the gateway has measured "
        "it; synchronous documents that cannot be read within their deadline are refused (413) from then on. "
        "None = the encoders' reported seconds per page (their warm-up's estimate until measured; "
        "gateway.routing.deadline_fit)")
    window_refresh_s: Float = Field(
        5.0, gt=0, description="seconds between background re-reads of a replica's Info: its work window is "
        "sized in time from its measured rate, so it changes with load")
    resolve_interval_s: Float = Field(
        10.0, gt=0, description="seconds between DNS re-resolutions of replica names (headless Services)")
    health_retry_s: Float = Field(0.5, gt=0, description="seconds between reconnects of a broken health watch")
    retry: RetryPolicy = Field(default_factory=RetryPolicy, description="retries of one page's encode / decode")
    retry_budget_tokens: Float = Field(100.0, description="gateway-wide retry budget, tokens (gRFC A6)")
    retry_budget_ratio: Float = Field(0.2, description="tokens refunded per successful call")

    @model_validator(mode="before")
    @classmethod
    def _flat_retry_fields(cls, data: Any) -> Any:
        """Move RetryPolicy fields given flat (``max_attempts: 3``) under ``retry``."""
        if not isinstance(data, Mapping) or not any(k in RetryPolicy.model_fields for k in data):
            return data
        retry = data.get("retry") or {}
        if isinstance(retry, RetryPolicy):
            retry = retry.model_dump(exclude_unset=True)
        if not isinstance(retry, Mapping):
            return data  # refused below: retry must be a mapping
        flat = {k: v for k, v in data.items() if k in RetryPolicy.model_fields}
        return {**{k: v for k, v in data.items() if k not in flat}, "retry": {**retry, **flat}}

    @model_validator(mode="wrap")
    @classmethod
    def _errors_name_the_setting(cls, data: Any, handler: ModelWrapValidatorHandler[PipelineConfig]) -> PipelineConfig:
        """Validate, rewording pydantic's errors so that each names its setting."""
        try:
            return handler(data)
        except ValidationError as exc:
            details = [
                InitErrorDetails(type=PydanticCustomError("pipeline_setting", "{message}", {"message": _reworded(e)}),
                                 loc=tuple(e["loc"]), input=e["input"])
                for e in exc.errors()
            ]
            raise ValidationError.from_exception_data(cls.__name__, details) from None


def _reworded(error: Any) -> str:
    """One pydantic error of the pipeline section as a sentence naming the setting."""
    loc, kind, got = tuple(error["loc"]), error["type"], error["input"]
    name = str(loc[-1]) if loc else ""
    ctx = error.get("ctx") or {}
    if kind == "extra_forbidden":
        fields = set(RetryPolicy.model_fields)
        if loc[:1] != ("retry",):  # flat RetryPolicy fields are accepted too
            fields |= set(PipelineConfig.model_fields) - {"retry"}
        known = sorted(fields)
        return f"unknown pipeline setting {'.'.join(map(str, loc))}; known: {', '.join(known)}"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        if not loc:
            return f"the pipeline settings must be a mapping of name: value, got {got!r}"
        retry_fields = ", ".join(sorted(RetryPolicy.model_fields))
        return f"pipeline setting {name} must be a mapping of {retry_fields}, got {got!r}"
    if kind in ("int_parsing", "int_from_float", "int_type"):
        return f"pipeline setting {name} must be an integer, got {got!r}"
    if kind in ("float_parsing", "float_type", "bool_not_number"):
        return f"pipeline setting {name} must be a number, got {got!r}"
    if kind == "greater_than":
        return f"pipeline setting {name} must be > {ctx['gt']}, got {got!r}"
    if kind == "greater_than_equal":
        return f"pipeline setting {name} must be >= {ctx['ge']}, got {got!r}"
    return f"pipeline setting {'.'.join(map(str, loc))}: {error['msg']}"
