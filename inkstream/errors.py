"""The one error map of inkstream: exception classes -> gRPC status codes and HTTP statuses.

The classes are defined in :mod:`inkstream.error_classes` and re-exported here: import them, and
everything else about errors, from this module.

Plain Python code raises these exceptions; gRPC handlers convert them with :func:`grpc_guard`
(server side) and :func:`from_rpc_error` (client side), REST handlers with :func:`http_status`.
Codes follow DESIGN.md: bad input -> INVALID_ARGUMENT; queue or memory full -> RESOURCE_EXHAUSTED
(with a google.rpc.RetryInfo retry hint, per https://google.aip.dev/193); not ready or draining ->
UNAVAILABLE; deadline -> DEADLINE_EXCEEDED; a state that does not allow the call (the result of a
cancelled job, or of one that failed for a transient reason) -> FAILED_PRECONDITION (HTTP 409); a bug
-> INTERNAL. Only transient codes are retried.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import grpc

from inkstream.error_classes import (
    Cancelled,
    DeadlineExceeded,
    FailedPrecondition,
    IdempotencyConflict,
    InkstreamError,
    InternalError,
    InvalidInput,
    JobCancelled,
    JobFailed,
    MethodNotAllowed,
    NotFound,
    PasswordRequired,
    PayloadTooLarge,
    PermissionDenied,
    RequestTimeout,
    ResourceExhausted,
    TooLongForDeadline,
    Unauthenticated,
    Unavailable,
    Unprocessable,
    UnsupportedMediaType,
    WeightsMismatch,
)

if TYPE_CHECKING:
    from google.rpc import status_pb2

# google.rpc (googleapis-common-protos) and grpc_status are imported where a status is built or read,
# not here: the model packages raise these exceptions and must import without them (a training
# machine that has grpcio and torch only).

log = logging.getLogger("inkstream.errors")

__all__ = [  # the classes (inkstream.error_classes), then the map
    "InkstreamError", "InvalidInput", "PayloadTooLarge", "TooLongForDeadline", "UnsupportedMediaType",
    "Unprocessable", "PasswordRequired", "IdempotencyConflict", "MethodNotAllowed", "PermissionDenied",
    "NotFound", "Unauthenticated", "ResourceExhausted", "Unavailable", "WeightsMismatch", "DeadlineExceeded",
    "RequestTimeout", "Cancelled", "FailedPrecondition", "JobCancelled", "JobFailed", "InternalError",
    "TRANSIENT_CODES", "ERROR_DOMAIN", "error_for_code", "to_status", "retry_after_of", "from_rpc_error",
    "is_transient", "abort", "as_inkstream_error", "grpc_guard", "http_status", "retry_after_header",
    "PASSWORD_OPTION", "password_required",
]


#: where each API takes a PDF's password, by the ``api`` of a request (gateway.session.OcrSession's
#: label; "cli" for ``inkstream ocr``); any other api gets the neutral wording
PASSWORD_OPTION = {
    "rest": "in the 'password' form field",
    "grpc": "in the 'password' field of the request's OcrOptions",
    "cli": "with inkstream ocr --password",
    "openai": ("through POST /v1/ocr (or /v1/jobs) with the 'password' form field: a chat completion cannot "
               "carry it"),
}


def password_required(api: str = "") -> PasswordRequired:
    """The PASSWORD_REQUIRED error (400, INVALID_ARGUMENT) of a password-protected PDF sent without its
    password through ``api`` (a key of :data:`PASSWORD_OPTION`): its message names that API's option,
    or none for an unknown ``api`` (e.g. a job's worker, which does not know the front end).
    """
    where = PASSWORD_OPTION.get(api, "with the request's 'password' option")
    return PasswordRequired(f"the PDF is password-protected; send its password {where}")


_BY_CODE: dict[grpc.StatusCode, type[InkstreamError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidInput,
    grpc.StatusCode.OUT_OF_RANGE: InvalidInput,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.CANCELLED: Cancelled,
}

TRANSIENT_CODES = frozenset(c for c, k in _BY_CODE.items() if k.transient)
_BY_REASON: dict[str, type[InkstreamError]] = {
    k.reason: k for k in (PayloadTooLarge, TooLongForDeadline, UnsupportedMediaType, Unprocessable, RequestTimeout,
                          IdempotencyConflict, PasswordRequired,
                          WeightsMismatch, JobCancelled, JobFailed)}
ERROR_DOMAIN = "inkstream"  # google.rpc.ErrorInfo.domain of inkstream's reasons


def error_for_code(code_name: str, message: str, retry_after_s: float | None = None,
                   reason: str = "") -> InkstreamError:
    """Build the exception for a gRPC status code name (``"UNAVAILABLE"``...) and, when it names one
    of inkstream's, its ``reason`` (e.g. ``"PAYLOAD_TOO_LARGE"`` -> PayloadTooLarge); unknown ->
    InternalError.
    """
    code = getattr(grpc.StatusCode, code_name, grpc.StatusCode.INTERNAL)
    cls = _BY_CODE.get(code, InternalError)
    by_reason = _BY_REASON.get(reason)
    if by_reason is not None and by_reason.grpc_code == code:
        cls = by_reason
    if cls is ResourceExhausted:
        return ResourceExhausted(message, retry_after_s=retry_after_s or 1.0)
    return cls(message, retry_after_s=retry_after_s)


#: UTF-8 bytes of a status message at most: it travels twice in the trailers (``grpc-message``,
#: percent-encoded: up to 3 bytes a byte; ``grpc-status-details-bin``, base64), which a client
#: refuses past 16 KiB with a bare RESOURCE_EXHAUSTED ("received metadata size exceeds hard limit")
#: in place of the real status -- an option of 10,000 characters echoed in its error did that.
MAX_STATUS_MESSAGE_BYTES = 2048
_CUT = " ... (cut)"


def status_message(message: str) -> str:
    """``message`` cut to :data:`MAX_STATUS_MESSAGE_BYTES` UTF-8 bytes (at a character boundary, marked)."""
    raw = message.encode("utf-8")
    if len(raw) <= MAX_STATUS_MESSAGE_BYTES:
        return message
    return raw[:MAX_STATUS_MESSAGE_BYTES - len(_CUT)].decode("utf-8", "ignore") + _CUT


def to_status(exc: InkstreamError) -> status_pb2.Status:
    """google.rpc.Status for ``exc``, with RetryInfo when it carries ``retry_after_s`` and ErrorInfo
    (``reason``, domain ``inkstream``) when its class has a :attr:`InkstreamError.reason`; the
    message cut by :func:`status_message`.
    """
    from google.protobuf import duration_pb2
    from google.rpc import code_pb2, error_details_pb2, status_pb2

    st = status_pb2.Status(code=getattr(code_pb2, exc.code_name, code_pb2.INTERNAL),
                           message=status_message(exc.message))
    if exc.reason:
        st.details.add().Pack(error_details_pb2.ErrorInfo(reason=exc.reason, domain=ERROR_DOMAIN))
    if exc.retry_after_s is not None:
        secs = max(exc.retry_after_s, 0.0)
        info = error_details_pb2.RetryInfo(
            retry_delay=duration_pb2.Duration(seconds=int(secs), nanos=int((secs % 1) * 1e9))
        )
        st.details.add().Pack(info)
    return st


def _status_details(err: grpc.RpcError) -> tuple[float | None, str]:
    """(seconds from a RetryInfo detail or None, reason from an inkstream ErrorInfo or "") of
    ``err``'s trailing metadata.
    """
    from google.rpc import error_details_pb2
    from grpc_status import rpc_status

    try:
        st = rpc_status.from_call(err)
    except Exception:  # noqa: BLE001 - malformed trailers: no details
        return None, ""
    retry, reason = None, ""
    for d in st.details if st is not None else ():
        if d.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            info = error_details_pb2.RetryInfo()
            d.Unpack(info)
            retry = info.retry_delay.seconds + info.retry_delay.nanos / 1e9
        elif d.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            ei = error_details_pb2.ErrorInfo()
            d.Unpack(ei)
            reason = ei.reason if ei.domain == ERROR_DOMAIN else ""
    return retry, reason


def retry_after_of(err: grpc.RpcError) -> float | None:
    """Seconds from a RetryInfo detail in ``err``'s trailing metadata, or None."""
    return _status_details(err)[0]


def from_rpc_error(err: grpc.RpcError) -> InkstreamError:
    """Client side: the inkstream exception for a failed call (keeps the server's message, retry
    hint and reason).
    """
    code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNAVAILABLE
    details = (err.details() if hasattr(err, "details") else None) or str(err)
    retry, reason = _status_details(err)
    return error_for_code(code.name, details, retry, reason)


def is_transient(exc: BaseException) -> bool:
    """True for errors worth retrying on another replica (UNAVAILABLE, RESOURCE_EXHAUSTED)."""
    if isinstance(exc, InkstreamError):
        return exc.transient
    if isinstance(exc, grpc.RpcError) and hasattr(exc, "code"):
        return exc.code() in TRANSIENT_CODES
    return isinstance(exc, (ConnectionError, OSError))


async def abort(context: grpc.aio.ServicerContext, exc: InkstreamError) -> None:
    """Abort an aio call with ``exc``'s code, message and RetryInfo / ErrorInfo details (raises AbortError)."""
    from grpc_status import rpc_status

    await context.abort_with_status(rpc_status.to_status(to_status(exc)))


def as_inkstream_error(exc: BaseException) -> InkstreamError:
    """Map any exception to the error map; unknown exceptions become a generic INTERNAL."""
    if isinstance(exc, InkstreamError):
        return exc
    if isinstance(exc, grpc.RpcError):
        return from_rpc_error(exc)
    if isinstance(exc, TimeoutError):
        return DeadlineExceeded("the operation timed out")
    return InternalError(f"internal error ({type(exc).__name__})")


def grpc_guard(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator for grpc.aio unary handlers and async-generator stream handlers.

    Converts :class:`InkstreamError` to its status code and any other exception to INTERNAL (logged
    with traceback, generic message to the client). ``AbortError`` / cancellation pass through.
    """

    def _handle(exc: BaseException) -> InkstreamError:
        if not isinstance(exc, InkstreamError):
            log.exception("unhandled error in %s", fn.__qualname__, exc_info=exc)
        return as_inkstream_error(exc)

    if inspect.isasyncgenfunction(fn):

        @functools.wraps(fn)
        async def gen_wrapper(self, request, context):
            try:
                async for item in fn(self, request, context):
                    yield item
            except (grpc.aio.AbortError, GeneratorExit):
                raise
            except BaseException as exc:
                if _is_cancel(exc):
                    raise
                await abort(context, _handle(exc))

        return gen_wrapper

    @functools.wraps(fn)
    async def wrapper(self, request, context):
        try:
            return await fn(self, request, context)
        except grpc.aio.AbortError:
            raise
        except BaseException as exc:
            if _is_cancel(exc):
                raise
            await abort(context, _handle(exc))

    return wrapper


def _is_cancel(exc: BaseException) -> bool:
    return isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt, SystemExit))


def http_status(exc: BaseException) -> int:
    """HTTP status for ``exc`` per the map above."""
    return as_inkstream_error(exc).http_status


def retry_after_header(exc: BaseException) -> dict[str, str]:
    """``{"Retry-After": "<whole seconds>"}`` when the error carries a retry hint, else ``{}``."""
    e = as_inkstream_error(exc)
    if e.retry_after_s is None:
        return {}
    return {"Retry-After": str(max(1, math.ceil(e.retry_after_s)))}
