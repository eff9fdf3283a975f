"""The gateway's router: the one owner of routing state, and the lease through which every call goes.

Each replica's routing state (:class:`gateway.routing.route_state.Route`: pages leased on it, its
work window, the capacity and weights revision its Info reported, which incarnation that Info
belongs to) is held here and nowhere else; :class:`gateway.routing.replicas.Replica` is only a
channel and its health. A call to a replica is made inside :meth:`Router.lease`, which in one step

1. picks a replica of the stage (``"encoder"`` / ``"decoder"``): eligible (SERVING, not retired),
   not excluded, accepted by the caller's predicate; the one with the fewest leases ("least
   outstanding requests"), ties at random; untried incarnations before ones already tried;
2. counts the lease on it at once (no await between the choice and the count, so a DNS refresh can
   never close the channel of a replica that was chosen: it is closed when its last lease ends);
3. reads its Info if this incarnation's is not known yet (single-flight: one Info call in flight
   per replica, every lease waiting on it shares the answer), and re-checks the predicate with the
   weights revision it learned: a replica running other weights is skipped, without a call;
4. for the encoder, takes one slot of its page window in fair order (:mod:`inkstream.fair_window`); for the
   decoder, hands the caller the segment window to take one slot per open segment;

and releases all of it on exit. With no replica to pick, the lease waits for one to become
eligible (any replica SERVING again, the same address after a restart included) up to the page's
deadline, or ``replica_wait_s`` counted from the start of the outage when the page has none.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import AsyncIterator, Callable, Set

from gateway.clients.calls import CallFailure
from gateway.clients.decoder import DecoderInfo, fetch_decoder_info
from gateway.clients.encoder import fetch_encoder_info
from gateway.routing.config import PipelineConfig
from gateway.routing.replicas import Replica, ReplicaSet
from gateway.routing.route_state import NO_KEY, Lease, ReplicaKey, Route, RouteView
from gateway.types import EncoderInfo
from inkstream.errors import Unavailable
from inkstream.fair import WorkKey
from inkstream.fair_window import FairWindow

log = logging.getLogger("inkstream.gateway.router")

# Express slots of each encoder's page window (inkstream.fair_window): an interactive request with no page on the
# replica sends one at once, beyond the window, so it waits only for the work in progress there.
ENCODER_EXPRESS_PAGES = 1


class Router:
    """Owner of routing state for the ``encoders`` and ``decoders`` replica sets (module docstring).

    ``config``: ``info_timeout_s`` / ``info_ttl_s`` for Info reads, ``retry.replica_wait_s`` for the
    wait of a page without deadline. The replica sets ask it whether a replica is busy before closing
    a retired one.
    """

    def __init__(self, encoders: ReplicaSet, decoders: ReplicaSet, config: PipelineConfig):
        self.stages = {"encoder": encoders, "decoder": decoders}
        self.config = config
        self._routes: dict[int, Route] = {}  # id(replica) -> route
        self._outage_since: dict[str, float | None] = {"encoder": None, "decoder": None}
        for rs in self.stages.values():
            rs.busy = lambda r: self._route(r).leases > 0

    def _route(self, replica: Replica) -> Route:
        route = self._routes.get(id(replica))
        if route is None or route.replica is not replica:
            for key in [k for k, r in self._routes.items() if r.replica.closed]:  # replicas gone from DNS
                del self._routes[key]
            route = self._routes[id(replica)] = Route(replica)
        return route

    def view(self, replica: Replica) -> RouteView:
        """The :class:`RouteView` of ``replica``."""
        r = self._route(replica)
        stale = r.info_incarnation != replica.incarnation or not r.info_ok
        return RouteView(replica.address, replica.incarnation, r.revision, stale)

    def leases(self, replica: Replica) -> int:
        """Leases now held on ``replica`` (pages sent to it and not finished)."""
        return self._route(replica).leases

    def capacity(self, replica: Replica) -> int:
        """Its work window's size (0 while unknown)."""
        w = self._route(replica).window
        return w.capacity if w is not None else 0

    def eligible_views(self, stage: str) -> list[RouteView]:
        """Views of the stage's eligible replicas."""
        return [self.view(r) for r in self.stages[stage].eligible()]

    def reported_seconds_per_page(self, stage: str) -> tuple[list[float], int]:
        """(the seconds per page that the stage's eligible replicas reported in their current
        incarnation's Info, > 0 only; how many replicas are eligible). Encoders report it
        (``InfoResponse.seconds_per_page``: measured, or estimated at warm-up); decoders do not.
        """
        eligible = self.stages[stage].eligible()
        rates = []
        for r in eligible:
            route = self._route(r)
            if route.info_ok and route.info_incarnation == r.incarnation and route.seconds_per_page > 0:
                rates.append(route.seconds_per_page)
        return rates, len(eligible)

    def invalidate(self, replica: Replica) -> None:
        """Forget ``replica``'s Info (it refused work as running other weights): read it again."""
        self._route(replica).info_incarnation = -1

    def _candidates(self, stage: str, avoid: Set[ReplicaKey], exclude: Set[ReplicaKey],
                    accept: Callable[[RouteView], bool] | None, skipped: Set[int]) -> list[Replica]:
        ok = [r for r in self.stages[stage].eligible()
              if (r.address, r.incarnation) not in exclude and id(r) not in skipped
              and (accept is None or accept(self.view(r)))]
        fresh = [r for r in ok if (r.address, r.incarnation) not in avoid]
        return fresh or ok

    def _pick(self, candidates: list[Replica]) -> Replica:
        least = min(self._route(r).leases for r in candidates)
        return random.choice([r for r in candidates if self._route(r).leases == least])

    @contextlib.asynccontextmanager
    async def lease(self, stage: str, *, key: WorkKey = NO_KEY, avoid: Set[ReplicaKey] = frozenset(),
                    exclude: Set[ReplicaKey] = frozenset(), accept: Callable[[RouteView], bool] | None = None,
                    unaccepted: str = "", deadline: float | None = None) -> AsyncIterator[Lease]:
        """Lease a replica of ``stage`` for one call (see the module docstring).

        ``key``: whose turn it is in the replica's window. ``avoid``: incarnations already tried
        (picked only when nothing else is eligible); ``exclude``: never picked (the page is suspect
        there). ``accept(view)``: routing predicate (``unaccepted`` says, for the error, why a
        serving replica was refused). ``deadline``: event-loop time up to which to wait for a
        replica (None: ``replica_wait_s`` from the start of the outage). Raises Unavailable when no
        replica becomes available in time.
        """
        rs = self.stages[stage]
        skipped: set[int] = set()  # replicas found, once their Info was read, to run other weights
        wait_end = deadline
        while True:
            candidates = self._candidates(stage, avoid, exclude, accept, skipped)
            if not candidates:
                if wait_end is None:
                    wait_end = self._outage_end(stage)
                await self._wait(stage, avoid | exclude, exclude, accept, unaccepted, wait_end)
                skipped.clear()  # something changed: look at every replica again
                continue
            self._outage_since[stage] = None
            replica = self._pick(candidates)
            route = self._route(replica)
            route.leases += 1
            try:
                await self._ensure_info(stage, route)
                if accept is not None and not accept(self.view(replica)):
                    skipped.add(id(replica))
                    continue
                window = route.window
                if stage == "encoder" and window is not None:
                    await window.acquire(key)
                    try:
                        yield Lease(replica, replica.incarnation, route.revision, None)
                    finally:
                        window.release(key)
                else:
                    slots = window.for_request(key) if window is not None else None
                    yield Lease(replica, replica.incarnation, route.revision, slots)
                return
            finally:
                route.leases -= 1
                if replica.retired:
                    await rs.discard_if_idle(replica)
                rs.notify()

    def _outage_end(self, stage: str) -> float:
        """When a page without deadline stops waiting: ``replica_wait_s`` after the start of the
        outage (no replica SERVING; pages queued behind the first fail together, not each after a
        wait of its own), or after now when replicas serve but none takes the page.
        """
        loop = asyncio.get_running_loop()
        if any(r.healthy and not r.retired for r in self.stages[stage].replicas.values()):
            return loop.time() + self.config.retry.replica_wait_s
        since = self._outage_since[stage]
        if since is None:
            since = self._outage_since[stage] = loop.time()
        return since + self.config.retry.replica_wait_s

    async def _wait(self, stage: str, tried: Set[ReplicaKey], exclude: Set[ReplicaKey],
                    accept: Callable[[RouteView], bool] | None, unaccepted: str, deadline: float) -> None:
        """Wait for a change of the stage's replicas; raise Unavailable past ``deadline`` (loop time)."""
        rs = self.stages[stage]
        loop = asyncio.get_running_loop()
        changed = rs.changed()
        left = deadline - loop.time()
        # Serving replicas refused only because the page is suspect there (they answered INTERNAL,
        # say): a restart is not coming, so waiting would only hold the page until its deadline.
        only_suspect = [r for r in rs.eligible() if (r.address, r.incarnation) in exclude]
        if only_suspect:
            left = 0.0
        if left <= 0:
            changed.cancel()
            names = ", ".join(f"{a} (incarnation {i})" for a, i in sorted(tried))
            refused = [f"{v.address} (revision {v.revision or 'unknown'})" for v in self.eligible_views(stage)
                       if accept is not None and not accept(v)]
            log.warning("no %s replica is available (known: %s%s%s)", rs.name, rs.describe(),
                        f"; already tried: {names}" if tried else "",
                        f"; {unaccepted}: {', '.join(refused)}" if refused and unaccepted else "")
            # the client's message counts replicas; their addresses stay in the log above
            tried_s = f"; {len(tried)} already tried" if tried else ""
            revisions = sorted({v.revision or "unknown" for v in self.eligible_views(stage)
                                if accept is not None and not accept(v)})
            why = f"; {len(refused)} {unaccepted}: revision {', '.join(revisions)}" if refused and unaccepted else ""
            raise Unavailable(f"no {rs.name} replica is available ({len(rs.eligible())} of {len(rs.replicas)} "
                              f"serving{tried_s}{why})")
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(changed, timeout=left)

    async def ensure_info(self, stage: str, replica: Replica) -> None:
        """Read ``replica``'s Info now unless this incarnation's is known (what a lease does first)."""
        await self._ensure_info(stage, self._route(replica))

    async def _ensure_info(self, stage: str, route: Route) -> None:
        """Read the replica's Info when this incarnation's is unknown (single-flight; a failed read
        is tried again after ``info_ttl_s``, so pages do not each wait ``info_timeout_s`` for it);
        a known one is read again in the background every ``window_refresh_s`` (its work window).
        """
        r = route.replica
        age = time.monotonic() - route.info_tried_at
        if route.info_incarnation == r.incarnation and route.info_ok:
            if age >= self.config.window_refresh_s and (route.info_task is None or route.info_task.done()):
                # Its work window follows its measured rate: read it again in the background.
                route.info_task = asyncio.get_running_loop().create_task(self._read_info(stage, route))
            return
        if route.info_incarnation == r.incarnation and age < self.config.info_ttl_s:
            return
        if route.info_task is None or route.info_task.done():
            route.info_task = asyncio.get_running_loop().create_task(self._read_info(stage, route))
        await asyncio.shield(route.info_task)

    async def _read_info(self, stage: str, route: Route) -> None:
        r = route.replica
        incarnation = r.incarnation
        fetch = fetch_encoder_info if stage == "encoder" else fetch_decoder_info
        try:
            info: EncoderInfo | DecoderInfo = await fetch(r.channel, self.config.info_timeout_s)
        except CallFailure as exc:
            log.warning("replica %s Info failed: %s", r.address, exc)
            route.info_incarnation, route.info_ok, route.info_tried_at = incarnation, False, time.monotonic()
            return
        route.revision = info.revision
        # Only an encoder reports a rate (busy seconds per page); a decoder's Info has none.
        route.seconds_per_page = info.seconds_per_page if isinstance(info, EncoderInfo) else 0.0
        route.info_incarnation, route.info_ok, route.info_tried_at = incarnation, True, time.monotonic()
        if info.window:
            # Express pages only where the replica holds more than its window (its queue would refuse them).
            express = ENCODER_EXPRESS_PAGES if stage == "encoder" and info.capacity > info.window else 0
            if route.window is None:
                route.window = FairWindow(info.window, express=express)
            elif route.window.capacity != info.window:
                log.info("replica %s window %d -> %d", r.address, route.window.capacity, info.window)
                route.window.resize(info.window)
            route.window.express = express
        self.stages[stage].notify()
