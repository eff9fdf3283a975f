"""What every gateway call to a replica shares: outgoing metadata and the classification of failures.

A failed encode / decode / Info call becomes a :class:`CallFailure` whose flags tell
:mod:`gateway.routing.retry` what to do with the page: retry it on another replica (``transient``), count it
towards quarantine (``suspect``), keep new work off the replica (``unreachable``) or send the page
elsewhere without spending retry budget (``misrouted``).
"""

from __future__ import annotations

from dataclasses import dataclass

import grpc

from inkstream.errors import (
    DeadlineExceeded,
    InkstreamError,
    Unavailable,
    WeightsMismatch,
    error_for_code,
    from_rpc_error,
)
from inkstream.fair import INTERACTIVE, WorkKey, key_metadata

# Codes after which the gateway retries a page on ANOTHER replica. Not inkstream.errors.TRANSIENT_CODES
# (the error map's transient errors: UNAVAILABLE, RESOURCE_EXHAUSTED): here CANCELLED is rerouted too,
# because a CANCELLED the gateway did not ask for comes from a replica cancelling work as it drains
# (DESIGN.md: readiness drops on drain), whereas in the error map CANCELLED is a client that went
# away, which no retry can help.
REROUTE_CODES = frozenset({"UNAVAILABLE", "RESOURCE_EXHAUSTED", "CANCELLED"})
# Failures that may be caused by the page itself (a bug hit by this input, or a replica crash):
# a page with such failures on two different replicas is quarantined.
SUSPECT_CODES = frozenset({"INTERNAL", "UNKNOWN", "DATA_LOSS"})


@dataclass
class CallFailure(Exception):
    """A failed encode/decode attempt on one replica.

    ``error``: the inkstream error (code + message for the page error). ``transient``: retry on
    another replica. ``suspect``: counts towards quarantine (INTERNAL, or the connection was lost
    mid-call, i.e. the replica may have crashed on this page). ``unreachable``: the replica should
    get no new work until its health watch reports SERVING again. ``misrouted``: the replica cannot
    serve this page (it runs other weights); the page goes elsewhere without spending retry budget.
    ``detail``: for the gateway's log only (gRPC's own words for a lost connection, which name the
    replica's address: a client's page error never names an endpoint).
    """

    error: InkstreamError
    transient: bool = False
    suspect: bool = False
    unreachable: bool = False
    misrouted: bool = False
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.error.code_name}: {self.error.message}"


def _server_sent_status(err: grpc.RpcError) -> bool:
    """True when the status came from an inkstream handler (``grpc-status-details-bin`` trailer,
    written by :func:`inkstream.errors.abort`), False for transport-made statuses (connection lost).
    """
    try:
        md = err.trailing_metadata() or ()
    except Exception:  # noqa: BLE001 - no readable trailers: not a status our handlers sent
        return False
    return any(k == "grpc-status-details-bin" for k, _ in md)


def classify_rpc_error(err: grpc.RpcError) -> CallFailure:
    """Map a failed call to a :class:`CallFailure` (see there for the flags)."""
    exc = from_rpc_error(err)
    code = err.code().name if hasattr(err, "code") else "UNAVAILABLE"
    if code == "UNAVAILABLE" and not _server_sent_status(err):
        details = (err.details() or "").lower() if hasattr(err, "details") else ""
        refused = "failed to connect" in details or "connection refused" in details or "dns" in details
        # Refused before the call started: the page cannot be to blame. Lost during the call: the
        # replica died while holding this page (maybe because of it), so the page becomes suspect.
        what = "replica unreachable" if refused else "connection to the replica lost"
        return CallFailure(Unavailable(what), transient=True, suspect=not refused, unreachable=True,
                           detail=str(err.details() if hasattr(err, "details") else err))
    if code == "RESOURCE_EXHAUSTED" and not _server_sent_status(err) and "larger than max" in str(exc.message):
        # gRPC's own message-size check: deterministic, so retrying elsewhere cannot help.
        return CallFailure(type(exc)(f"message over the gRPC size limit; raise max_message_bytes on the gateway "
                                     f"and the replicas ({exc.message})"))
    if code == "DEADLINE_EXCEEDED":
        return CallFailure(DeadlineExceeded(f"no answer within the call deadline ({exc.message})"))
    return CallFailure(exc, transient=code in REROUTE_CODES, suspect=code in SUSPECT_CODES)


def item_failure(code: str, message: str, retry_after_s: float = 0.0, reason: str = "") -> CallFailure:
    """A per-item error (``ItemError`` in a stream that otherwise succeeded) as a CallFailure;
    ``retry_after_s`` (0 = none) becomes the error's retry hint; ``reason`` WEIGHTS_MISMATCH (the
    decoder runs other weights than the page's encoder) makes it ``misrouted``.
    """
    err = error_for_code(code or "INTERNAL", message or "no message", retry_after_s or None, reason)
    return CallFailure(err, transient=code in REROUTE_CODES, suspect=code in SUSPECT_CODES,
                       misrouted=isinstance(err, WeightsMismatch))


def call_metadata(request_id: str, priority: int = INTERACTIVE) -> list[tuple[str, str]]:
    """Outgoing metadata: ``x-request-id`` and ``x-inkstream-priority`` (:func:`inkstream.fair.key_metadata`),
    by which the replicas queue the call's work fairly. W3C trace context is added by the channel's
    client interceptors (:func:`inkstream.tracing.client_interceptors`, installed in :mod:`gateway.routing.replicas`).
    """
    return key_metadata(WorkKey(request_id, priority))
