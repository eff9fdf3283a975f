"""Deadlines that fit the work: a synchronous document that cannot be read in time is refused at once.

A synchronous request has one deadline for the whole document (``request_timeout_s``, 600 s). Read
page after page, a document that is too long for it loses its last pages as DEADLINE_EXCEEDED after
all the others were read, the client's wait and the stack's work wasted. :class:`DocumentLoad`
answers before any page is sent: at the gateway's measured seconds per page (busy seconds per page
finished while at least one request's window of pages was in flight, i.e. the stack's throughput;
:class:`inkstream.pace.ServiceRate`), a document of ``N`` pages beside the synchronous documents
already being read needs about

    ``(N + sum over the others of min(their pages left, N)) x seconds per page``

because the replicas' windows are shared round-robin (:mod:`inkstream.fair`): until it is done each
other document gets one page per round, at most its pages left. Asynchronous jobs are not counted
(interactive pages go first). When that is more than the time left to the deadline, the request is
refused with :class:`~inkstream.errors.TooLongForDeadline` (HTTP 413, gRPC INVALID_ARGUMENT, reason
``TOO_LONG_FOR_DEADLINE``), whose message names the jobs API.

Before the gateway has measured its rate (a fresh stack, or a gateway that only read small
requests, which never fill a window), the seconds per page are, in this order: the configured prior
(``pipeline.seconds_per_page_prior``), else the encoder replicas' own rates from their ``Info``
(``InfoResponse.seconds_per_page``: measured on the pages they served while kept full, or estimated
from their warm-up, :mod:`encoder_service.warm_rate`) combined over the replicas
(:func:`stage_seconds_per_page`). That is the encoder stage alone, a lower bound of the stack's time
(the decoders' share is not known before pages are read): a document refused on it could not be
read in time even if decoding cost nothing. Only when no replica reports a rate is nothing refused.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from inkstream.errors import TooLongForDeadline
from inkstream.pace import ServiceRate


def stage_seconds_per_page(reported: Sequence[float], replicas: int) -> float | None:
    """Seconds per page of a stage of ``replicas`` replicas working side by side, of which some
    reported their own busy seconds per page (``reported``, > 0; the others are assumed to be like
    them): ``1 / (mean(1 / s_i) x replicas)``, i.e. their mean pages per second times the replica
    count, inverted. None when no rate is reported or ``replicas`` < 1.
    """
    rates = [s for s in reported if s > 0]
    if not rates or replicas < 1:
        return None
    pages_per_s = sum(1.0 / s for s in rates) / len(rates) * max(replicas, len(rates))
    return 1.0 / pages_per_s


class DocumentLoad:
    """Pages left of the synchronous documents being read, and the check of a new one's deadline.

    ``pace``: the gateway's measured seconds per page (one owner: the pipeline; its ``prior_s`` is
    the configured prior); ``replicas_rate``: the seconds per page the replicas report, None when
    they report none (the pipeline's :func:`stage_seconds_per_page` of the encoders), asked only
    while ``pace`` knows none. Single event loop.
    """

    def __init__(self, pace: ServiceRate, replicas_rate: Callable[[], float | None] = lambda: None):
        self.pace = pace
        self.replicas_rate = replicas_rate
        self._left: dict[str, int] = {}  # request id -> pages not yet finished

    def seconds_per_page(self) -> tuple[float | None, str]:
        """(seconds per page, where it comes from: "the measured", "the configured" or "the
        encoders' reported"), in the module docstring's order; (None, "") while nothing knows it.
        """
        per_page = self.pace.seconds_per_unit
        if per_page is not None:
            return per_page, "the measured" if self.pace.measured else "the configured"
        reported = self.replicas_rate()
        return (reported, "the encoders' reported") if reported is not None else (None, "")

    def estimate_s(self, pages: int, request_id: str = "") -> float | None:
        """Seconds to read ``pages`` more pages beside the other documents (module docstring);
        None while the rate is unknown.
        """
        per_page, _ = self.seconds_per_page()
        if per_page is None:
            return None
        beside = sum(min(left, pages) for rid, left in self._left.items() if rid != request_id)
        return (pages + beside) * per_page

    def check(self, request_id: str, pages: int, time_left_s: float) -> None:
        """Raise TooLongForDeadline when ``pages`` pages cannot be read within ``time_left_s``
        seconds at the rate of :meth:`seconds_per_page`; do nothing while the rate is unknown.
        """
        need = self.estimate_s(pages, request_id)
        if need is None or need <= time_left_s:
            return
        per_page, source = self.seconds_per_page()
        beside = " beside the documents being read" if any(r != request_id for r in self._left) else ""
        raise TooLongForDeadline(
            f"this document's {pages} pages need about {need:.0f} s at {source} {per_page or 0.0:.2f} s a page"
            f"{beside}, "
            f"more than the {time_left_s:.0f} s a synchronous request may take; submit it as a job instead "
            "(POST /v1/jobs, then GET /v1/jobs/{id}/result; no deadline of its own), or ask for fewer pages")

    def begin(self, request_id: str, pages: int) -> None:
        """A synchronous document of ``pages`` pages starts being read."""
        self._left[request_id] = pages

    def page_done(self, request_id: str) -> None:
        """One of its pages finished."""
        if request_id in self._left:
            self._left[request_id] = max(0, self._left[request_id] - 1)

    def end(self, request_id: str) -> None:
        """It finished, failed or was cancelled."""
        self._left.pop(request_id, None)
