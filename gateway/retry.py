"""Retrying one page's encode or decode across replicas.

Policy (DESIGN.md: only transient codes are retried):

- A failure with UNAVAILABLE, RESOURCE_EXHAUSTED, a lost connection, or a CANCELLED the gateway did
  not ask for (a draining replica) is retried on ANOTHER replica when one is eligible (the same one
  only when it is the only choice and the failure did not make the page suspect).
- INTERNAL, or a connection lost while the replica held the page (it may have crashed on it), makes
  the page *suspect* on that replica; it is retried on a replica where it is not suspect, and when it
  is suspect on two different replicas it is quarantined: the page becomes an error and the rest of
  the document continues. This stops a "poison" page from taking down the whole fleet.
- Anything else (INVALID_ARGUMENT, DEADLINE_EXCEEDED, ...) is final for the page.
- At most ``max_attempts`` attempts per page and stage; between attempts an exponential backoff with
  full jitter (``uniform(0, min(cap, base * 2**n))``, AWS Architecture Blog "Exponential Backoff And
  Jitter", 2015), or the server's RetryInfo hint when retrying the same replica.
- A replica that cannot serve the page at all (a decoder running other weights than the encoder that
  made the page's vision tokens, during a rollout) is skipped: the page moves on without backoff,
  retry budget or an attempt spent.
- A gateway-wide retry budget (token bucket of gRPC retry throttling, gRFC A6): every retryable
  failure costs one token, every success adds ``token_ratio``; retries are allowed only while more than half of
  ``max_tokens`` remain, so a fleet-wide outage does not turn into a retry storm.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from gateway.clients.calls import CallFailure
from gateway.pipeline_config import RetryPolicy
from gateway.replicas import Replica, ReplicaSet
from inkstream.errors import InkstreamError, InternalError, Unavailable

log = logging.getLogger("inkstream.gateway.retry")
T = TypeVar("T")


class RetryBudget:
    """gRFC A6 retry throttling: ``max_tokens`` tokens, ``token_ratio`` refund per success."""

    def __init__(self, max_tokens: float = 100.0, token_ratio: float = 0.2):
        self.max_tokens = max_tokens
        self.token_ratio = token_ratio
        self.tokens = max_tokens

    def on_success(self) -> None:
        """A call succeeded: earn ``token_ratio`` tokens (at most ``max_tokens``)."""
        self.tokens = min(self.max_tokens, self.tokens + self.token_ratio)

    def on_failure(self) -> None:
        """A try failed: spend one token (not below 0)."""
        self.tokens = max(0.0, self.tokens - 1.0)

    def can_retry(self) -> bool:
        """True while more than half of the tokens remain."""
        return self.tokens > self.max_tokens / 2


class PageFailed(Exception):
    """The page's stage failed for good; ``error`` becomes the page's PageError."""

    def __init__(self, error: InkstreamError, quarantined: bool = False):
        super().__init__(error.message)
        self.error = error
        self.quarantined = quarantined


@dataclass
class RetryCounters:
    """Totals over the gateway's life: calls made, retries, quarantined pages."""

    calls: int = 0
    retries: int = 0
    quarantined: int = 0


async def with_retries(
    replicas: ReplicaSet,
    fn: Callable[[Replica], Awaitable[T]],
    *,
    policy: RetryPolicy,
    budget: RetryBudget,
    counters: RetryCounters,
    what: str,
    accept: Callable[[Replica], bool] | None = None,
    unaccepted: str = "",
) -> T:
    """Run ``fn(replica)`` until it succeeds, following the module's policy.

    ``fn`` raises :class:`CallFailure` on failure. ``what`` names the work in errors ("page 3 decode").
    ``accept``: only replicas for which it is true are picked (``unaccepted`` says why the others
    were not, for the error when none is left). A ``misrouted`` failure (the replica turned out not
    to be acceptable) moves the page to another replica without spending retry budget.
    Raises :class:`PageFailed` with the error the page should report.
    """
    tried: set[str] = set()
    suspects: dict[str, str] = {}  # replica address -> failure
    last: CallFailure | None = None
    attempt, misroutes = 0, 0
    while attempt < policy.max_attempts:
        replica = replicas.pick(tried, accept) or replicas.pick(set(suspects), accept)
        if replica is None:
            try:
                replica = await replicas.wait_pick(set(suspects), policy.replica_wait_s, accept, unaccepted)
            except Unavailable as exc:
                if last is not None:
                    raise PageFailed(_reword(last.error, f"{what}: {last.error.message} (and {exc.message})")) from None
                raise PageFailed(_reword(exc, f"{what}: {exc.message}")) from None
        if last is not None and last.misrouted and misroutes <= len(replicas.replicas):
            pass  # the last replica ran other weights: no backoff, and it does not count as an attempt
        else:
            attempt += 1
            if attempt > 1:
                counters.retries += 1
                same = replica.address in tried
                hint = last.error.retry_after_s if (last and same) else None
                await asyncio.sleep(policy.backoff_s(attempt - 1, hint))
        counters.calls += 1
        async with replicas.lease(replica):
            try:
                result = await fn(replica)
            except CallFailure as f:
                last = f
            else:
                budget.on_success()
                return result
        if (last.transient or last.suspect) and not last.misrouted:  # gRFC A6: only retryable failures drain the budget
            budget.on_failure()
        tried.add(replica.address)
        misroutes += last.misrouted
        if last.unreachable:
            replica.mark_unreachable()
        log.info("%s failed on %s: %s", what, replica.address, last)
        if last.suspect:
            suspects[replica.address] = str(last)
            if len(suspects) >= policy.quarantine_after:
                counters.quarantined += 1
                detail = "; ".join(f"{a}: {m}" for a, m in suspects.items())
                msg = f"{what} quarantined after failing on {len(suspects)} replicas ({detail})"
                raise PageFailed(InternalError(msg), quarantined=True)
        if not (last.transient or last.suspect):
            raise PageFailed(_reword(last.error, f"{what}: {last.error.message}"))
        if not last.misrouted and not budget.can_retry():
            raise PageFailed(_reword(last.error, f"{what}: {last.error.message} (gateway retry budget exhausted)"))
    assert last is not None
    msg = f"{what}: {last.error.message} (gave up after {policy.max_attempts} attempts)"
    raise PageFailed(_reword(last.error, msg))


def _reword(err: InkstreamError, message: str) -> InkstreamError:
    """Same error class and retry hint as ``err`` with a new message."""
    return type(err)(message, retry_after_s=err.retry_after_s)
