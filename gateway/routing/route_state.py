"""The routing state of one replica and what the router hands out of it: :class:`Route` (owned by
:class:`gateway.routing.router.Router`, nowhere else), :class:`RouteView` (what a routing predicate
sees) and :class:`Lease` (one call's hold on a replica). Data only: the router's module docstring
says how they are used.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass

from gateway.routing.replicas import Replica
from inkstream.fair import WorkKey
from inkstream.fair_window import FairWindow, KeyedSlots

ReplicaKey = tuple[str, int]  # (address, incarnation): what "already tried" means
NO_KEY = WorkKey()  # calls made for no request in particular (Info): interactive, request id ""


@dataclass
class Route:
    """Routing state of one replica (see :mod:`gateway.routing.router`); owned by its
    :class:`~gateway.routing.router.Router`.
    """

    replica: Replica
    leases: int = 0
    window: FairWindow | None = None
    revision: str = ""
    info_incarnation: int = -1  # the incarnation whose Info was last tried
    info_ok: bool = False  # that try succeeded
    info_tried_at: float = -math.inf  # monotonic seconds
    info_task: asyncio.Task[None] | None = None
    seconds_per_page: float = 0.0  # busy seconds per page its last Info reported (encoders; 0 = not said)


@dataclass(frozen=True)
class RouteView:
    """What a routing predicate sees of a replica: ``address``, ``incarnation``, weights
    ``revision`` ("" = unknown) and ``stale`` (this incarnation's Info not read yet).
    """

    address: str
    incarnation: int
    revision: str
    stale: bool


@dataclass(frozen=True)
class Lease:
    """One call's hold on a replica: its ``replica`` (use ``lease.channel``), the ``incarnation``
    it was picked in, its weights ``revision`` and, for decoders, ``segment_slots``: the replica's
    segment window seen as this request's semaphore (None while its capacity is unknown).
    """

    replica: Replica
    incarnation: int
    revision: str
    segment_slots: KeyedSlots | None

    @property
    def channel(self):  # grpc.aio.Channel
        """The replica's channel."""
        return self.replica.channel

    @property
    def key(self) -> ReplicaKey:
        """(address, incarnation) of the leased replica."""
        return self.replica.address, self.incarnation
