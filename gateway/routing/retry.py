"""Retrying one page's encode or decode across replicas.

Policy (DESIGN.md: only transient codes are retried):

- A failure with UNAVAILABLE, RESOURCE_EXHAUSTED, a lost connection, or a CANCELLED the gateway did
  not ask for (a draining replica) is retried on ANOTHER replica incarnation when one is eligible
  (the same one only when it is the only choice and the failure did not make the page suspect). A
  replica restarted behind the same address is a new incarnation, so a page waits for it and is
  retried there (:mod:`gateway.routing.router`).
- INTERNAL, or a connection lost while the replica held the page (it may have crashed on it), makes
  the page *suspect* on that replica; it is retried on a replica where it is not suspect, and when it
  is suspect on two different replicas it is quarantined: the page becomes an error and the rest of
  the document continues. This stops a "poison" page from taking down the whole fleet.
- Anything else (INVALID_ARGUMENT, DEADLINE_EXCEEDED, ...) is final for the page.
- At most ``max_attempts`` attempts per page and stage; between attempts an exponential backoff with
  full jitter (``uniform(0, min(cap, base * 2**n))``, AWS Architecture Blog "Exponential Backoff And
  Jitter", 2015), or the server's RetryInfo hint when it gave one.
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
from gateway.routing.config import RetryPolicy
from gateway.routing.router import NO_KEY, Lease, ReplicaKey, Router, RouteView
from inkstream.errors import InkstreamError, InternalError, Unavailable
from inkstream.fair import WorkKey

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
    router: Router,
    stage: str,
    fn: Callable[[Lease], Awaitable[T]],
    *,
    policy: RetryPolicy,
    budget: RetryBudget,
    counters: RetryCounters,
    what: str,
    told: str = "",
    key: WorkKey = NO_KEY,
    deadline: float | None = None,
    accept: Callable[[RouteView], bool] | None = None,
    unaccepted: str = "",
) -> T:
    """Run ``fn(lease)`` on a leased replica of ``stage`` until it succeeds, following the module's
    policy.

    ``fn`` raises :class:`CallFailure` on failure. ``what`` names the work in the log by its step
    ("page 3 decode"); ``told`` in the error's message, which reaches the client, in a user's words
    ("page 3: its text could not be written"; default ``what``).
    ``key``: the request's turn in the replicas' windows; ``deadline``: event-loop time up to which
    the page may wait for a replica (None: ``replica_wait_s`` of an outage). ``accept``: only
    replicas for which it is true are leased (``unaccepted`` says why the others were not, for the
    error when none is left). A ``misrouted`` failure (the replica turned out not to be acceptable)
    moves the page to another replica without spending retry budget. Incarnations already tried
    are avoided and those the page is suspect on excluded, so a replica restarted behind the same
    address is tried again. The backoff sleep comes before the next lease, never between choosing
    a replica and calling it. Raises :class:`PageFailed` with the error the page should report.
    """
    said = told or what
    tried: set[ReplicaKey] = set()
    suspects: dict[ReplicaKey, str] = {}  # (address, incarnation) -> failure
    last: CallFailure | None = None
    attempt, misroutes = 0, 0
    while attempt < policy.max_attempts:
        if last is not None and last.misrouted and misroutes <= len(router.stages[stage].replicas):
            pass  # the last replica ran other weights: no backoff, and it does not count as an attempt
        else:
            attempt += 1
            if attempt > 1:
                counters.retries += 1
                await asyncio.sleep(policy.backoff_s(attempt - 1, last.error.retry_after_s if last else None))
        try:
            async with router.lease(stage, key=key, avoid=tried, exclude=set(suspects), accept=accept,
                                    unaccepted=unaccepted, deadline=deadline) as lease:
                counters.calls += 1
                try:
                    result = await fn(lease)
                except CallFailure as f:
                    last = f
                else:
                    budget.on_success()
                    return result
        except Unavailable as exc:
            if last is not None:
                raise PageFailed(_reword(last.error, f"{said}: {last.error.message} (and {exc.message})")) from None
            raise PageFailed(_reword(exc, f"{said}: {exc.message}")) from None
        assert last is not None
        if (last.transient or last.suspect) and not last.misrouted:  # gRFC A6: only retryable failures drain the budget
            budget.on_failure()
        tried.add(lease.key)
        misroutes += last.misrouted
        if last.misrouted:
            router.invalidate(lease.replica)
        if last.unreachable:
            lease.replica.mark_unreachable()
        log.info("%s failed on %s (incarnation %d): %s%s", what, lease.replica.address, lease.incarnation, last,
                 f" ({last.detail})" if last.detail else "")
        if last.suspect:
            suspects[lease.key] = str(last)
            if len(suspects) >= policy.quarantine_after:
                counters.quarantined += 1
                log.warning("%s quarantined: %s", what,
                            "; ".join(f"{a} (incarnation {i}): {m}" for (a, i), m in suspects.items()))
                # the client's message says what failed, not where (replica addresses stay in the log)
                causes = "; ".join(dict.fromkeys(suspects.values()))
                msg = f"{said}: quarantined after failing on {len(suspects)} replicas ({causes})"
                raise PageFailed(InternalError(msg), quarantined=True)
        if not (last.transient or last.suspect):
            raise PageFailed(_reword(last.error, f"{said}: {last.error.message}"))
        if not last.misrouted and not budget.can_retry():
            raise PageFailed(_reword(last.error, f"{said}: {last.error.message} (gateway retry budget exhausted)"))
    assert last is not None
    msg = f"{said}: {last.error.message} (gave up after {policy.max_attempts} attempts)"
    raise PageFailed(_reword(last.error, msg))


def _reword(err: InkstreamError, message: str) -> InkstreamError:
    """Same error class and retry hint as ``err`` with a new message."""
    return type(err)(message, retry_after_s=err.retry_after_s)
