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
refused with :class:`~inkstream.errors.TooLongForDeadline` (HTTP 413), whose message names the
jobs API. Before the rate is measured (no page finished yet) nothing is refused unless a prior rate
is configured (``pipeline.seconds_per_page_prior``).
"""

from __future__ import annotations

from inkstream.errors import TooLongForDeadline
from inkstream.pace import ServiceRate


class DocumentLoad:
    """Pages left of the synchronous documents being read, and the check of a new one's deadline.

    ``pace``: the gateway's measured seconds per page (one owner: the pipeline). Single event loop.
    """

    def __init__(self, pace: ServiceRate):
        self.pace = pace
        self._left: dict[str, int] = {}  # request id -> pages not yet finished

    def estimate_s(self, pages: int, request_id: str = "") -> float | None:
        """Seconds to read ``pages`` more pages beside the other documents (module docstring);
        None while the rate is unknown.
        """
        per_page = self.pace.seconds_per_unit
        if per_page is None:
            return None
        beside = sum(min(left, pages) for rid, left in self._left.items() if rid != request_id)
        return (pages + beside) * per_page

    def check(self, request_id: str, pages: int, time_left_s: float) -> None:
        """Raise TooLongForDeadline when ``pages`` pages cannot be read within ``time_left_s``
        seconds at the measured rate; do nothing while the rate is unknown.
        """
        need = self.estimate_s(pages, request_id)
        if need is None or need <= time_left_s:
            return
        per_page = self.pace.seconds_per_unit or 0.0
        beside = " beside the documents being read" if any(r != request_id for r in self._left) else ""
        raise TooLongForDeadline(
            f"this document's {pages} pages need about {need:.0f} s at the measured {per_page:.2f} s a page{beside}, "
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
