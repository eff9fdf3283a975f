"""Admission control: a global bound on the pages the gateway has in flight.

A page is "in flight" from the moment the pipeline pulls it from the ingest iterator until its
outcome has been handed to the caller; its image bytes and then its vision tokens are held during
that time, so this bound is what caps the gateway's memory. The bound is shared by all requests:

- :meth:`Admission.admit` (entered by the REST / gRPC layer before reading an upload) reserves ONE
  page slot for the request, so every admitted request can always make progress. When every slot is
  taken the request is refused at once with :class:`~inkstream.errors.ResourceExhausted` carrying
  ``retry_after_s`` (HTTP 429 + Retry-After) instead of queueing without bound.
- While it runs, a request borrows extra slots (up to its per-request limit) when free, and gives
  them back as its pages finish, so a single long document cannot starve newly admitted requests.

``retry_after_s`` is an estimate: the smoothed time one page spends in flight (EWMA, alpha 0.2),
clamped to [1, 30] seconds: by then every page now in flight has most likely finished, so it is a
conservative hint (with N slots busy, one frees on average every T / N).
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from inkstream.errors import ResourceExhausted

log = logging.getLogger("inkstream.gateway.admission")


class PageBudget:
    """Counting bound of ``capacity`` page slots shared by every request of one gateway."""

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError(f"max pages in flight must be >= 1, got {capacity}")
        self.capacity = capacity
        self.used = 0
        self._waiters: list[asyncio.Future] = []
        self._page_seconds = 2.0  # EWMA of seconds a page spends in flight

    @property
    def free(self) -> int:
        """Slots not taken."""
        return self.capacity - self.used

    def try_take(self, n: int = 1) -> bool:
        """Take ``n`` slots if free; never waits."""
        if self.used + n > self.capacity:
            return False
        self.used += n
        return True

    def give(self, n: int = 1) -> None:
        """Return ``n`` slots and wake requests waiting to borrow one."""
        self.used = max(0, self.used - n)
        waiters, self._waiters = self._waiters, []
        for f in waiters:
            if not f.done():
                f.set_result(None)

    def freed(self) -> asyncio.Future:
        """A future resolved at the next :meth:`give` (registered at once, so no wake-up is lost;
        the slot may be taken by someone else first: re-check with :meth:`try_take`).
        """
        f = asyncio.get_running_loop().create_future()
        self._waiters = [w for w in self._waiters if not w.done()]  # drop cancelled ones
        self._waiters.append(f)
        return f

    def observe_page_seconds(self, seconds: float) -> None:
        """Feed the in-flight time of one finished page into the retry-after estimate."""
        self._page_seconds = 0.8 * self._page_seconds + 0.2 * max(0.0, seconds)

    def retry_after_s(self) -> float:
        """Seconds a refused client should wait before retrying (see the module docstring)."""
        return min(30.0, max(1.0, self._page_seconds))


class Ticket:
    """One admitted request's share of the :class:`PageBudget`.

    ``held``: slots this request holds (>= 1 while admitted); ``inflight``: pages it has in flight.
    Used as the async context manager returned by :meth:`Admission.admit`.
    """

    def __init__(self, admission: Admission, request_id: str):
        self.admission = admission
        self.request_id = request_id
        self.held = 0
        self.inflight = 0
        self.closed = False

    async def __aenter__(self) -> Ticket:
        self.admission._enter(self)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.admission._exit(self)

    def try_start_page(self, per_request_limit: int) -> bool:
        """Claim a slot for one more page: an idle held slot, else borrow a free one (up to
        ``per_request_limit`` pages in flight for this request).
        """
        if self.closed or self.inflight >= per_request_limit:
            return False
        if self.inflight < self.held:
            self.inflight += 1
            return True
        if self.admission.budget.try_take(1):
            self.held += 1
            self.inflight += 1
            return True
        return False

    def unclaim_page(self) -> None:
        """Undo :meth:`try_start_page` when the ingest iterator had no page after all."""
        self.inflight -= 1
        self._shrink()

    def finish_page(self, seconds: float) -> None:
        """A page's outcome was delivered: free its slot (keeping one reserved for this request)."""
        self.inflight -= 1
        self.admission.budget.observe_page_seconds(seconds)
        self._shrink()

    def _shrink(self) -> None:
        if not self.closed and self.held > max(1, self.inflight):
            self.held -= 1
            self.admission.budget.give(1)


class Admission:
    """Admission controller of one gateway (see the module docstring).

    ``max_pages_in_flight``: the global bound (pages). Tickets are looked up by request id so that
    :meth:`gateway.routing.pipeline.Pipeline.run` finds the slot that :meth:`admit` reserved.
    """

    def __init__(self, max_pages_in_flight: int):
        self.budget = PageBudget(max_pages_in_flight)
        self._tickets: dict[str, Ticket] = {}

    def admit(self, request_id: str) -> Ticket:
        """Async context manager reserving one page slot for ``request_id`` while entered.

        Entering raises ResourceExhausted (with ``retry_after_s``) when no slot is free. An empty
        ``request_id`` gets a random one.
        """
        return Ticket(self, request_id or uuid.uuid4().hex)

    def ticket(self, request_id: str) -> Ticket | None:
        """The admitted ticket of ``request_id``, or None."""
        return self._tickets.get(request_id) if request_id else None

    @property
    def pages_in_flight(self) -> int:
        """Slots taken over all requests (reserved + borrowed)."""
        return self.budget.used

    def _enter(self, t: Ticket) -> None:
        if not self.budget.try_take(1):
            ra = self.budget.retry_after_s()
            log.info("request %s refused: %d pages in flight (bound %d)", t.request_id, self.budget.used,
                     self.budget.capacity)
            raise ResourceExhausted(
                f"the gateway is at its bound of {self.budget.capacity} pages in flight; retry in {ra:.0f} s",
                retry_after_s=ra,
            )
        t.held = 1
        self._tickets[t.request_id] = t

    def _exit(self, t: Ticket) -> None:
        if t.closed:
            return
        t.closed = True
        self.budget.give(t.held)
        t.held = 0
        if self._tickets.get(t.request_id) is t:
            del self._tickets[t.request_id]
