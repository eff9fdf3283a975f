"""The exception classes of inkstream's one error map, each with its gRPC status code, HTTP status,
whether it is worth retrying, and its finer ``reason``.

Import them from :mod:`inkstream.errors`, the map itself (code -> class, the gRPC status details,
the handler guard, HTTP statuses), which re-exports every class here. This module imports grpc only
for the ``StatusCode`` enum, so the model packages can raise these without google.rpc installed.
"""

from __future__ import annotations

import grpc


class InkstreamError(Exception):
    """Base class: ``message`` is shown to clients and must be understandable by a person."""

    grpc_code: grpc.StatusCode = grpc.StatusCode.INTERNAL
    http_status: int = 500
    transient: bool = False
    #: Finer cause than the gRPC code (UPPER_SNAKE, as ``google.rpc.ErrorInfo.reason``, AIP-193); ""
    #: means the code says it all.
    reason: str = ""

    def __init__(self, message: str, *, retry_after_s: float | None = None):
        super().__init__(message)
        self.message = message
        self.retry_after_s = retry_after_s

    @property
    def code_name(self) -> str:
        """GRPC status code name, e.g. ``"INVALID_ARGUMENT"``."""
        return self.grpc_code.name

    @property
    def reason_name(self) -> str:
        """:attr:`reason`, or the code name when the class has none, e.g. ``"PAYLOAD_TOO_LARGE"``."""
        return self.reason or self.code_name


class InvalidInput(InkstreamError):
    """Malformed or unacceptable input (HTTP 400, INVALID_ARGUMENT)."""

    grpc_code = grpc.StatusCode.INVALID_ARGUMENT
    http_status = 400


class PasswordRequired(InvalidInput):
    """A PDF that opens only with a user password and was sent without one (HTTP 400, INVALID_ARGUMENT,
    reason PASSWORD_REQUIRED). Its message names the option of the API the request came through
    (:func:`inkstream.errors.password_required`); this class's default message is neutral.
    """

    reason = "PASSWORD_REQUIRED"


class PayloadTooLarge(InvalidInput):
    """Input over a configured size / pixel / page limit (HTTP 413, INVALID_ARGUMENT)."""

    http_status = 413
    reason = "PAYLOAD_TOO_LARGE"


class TooLongForDeadline(PayloadTooLarge):
    """A synchronous request whose document cannot be read within its deadline at the measured rate
    (HTTP 413, INVALID_ARGUMENT, reason TOO_LONG_FOR_DEADLINE): refused before any page is read;
    the message names the jobs API, which has no such deadline (:mod:`gateway.routing.deadline_fit`).
    """

    reason = "TOO_LONG_FOR_DEADLINE"


class UnsupportedMediaType(InvalidInput):
    """File type not recognised by its magic bytes (HTTP 415, INVALID_ARGUMENT)."""

    http_status = 415
    reason = "UNSUPPORTED_MEDIA_TYPE"


class Unprocessable(InvalidInput):
    """Well-formed input that has nothing to process, e.g. zero pages (HTTP 422)."""

    http_status = 422
    reason = "NOTHING_TO_READ"


class IdempotencyConflict(Unprocessable):
    """An ``Idempotency-Key`` reused with a different document or options (HTTP 422, INVALID_ARGUMENT,
    reason IDEMPOTENCY_CONFLICT): use a new key.
    """

    reason = "IDEMPOTENCY_CONFLICT"


class MethodNotAllowed(InvalidInput):
    """A route called with a method it does not take, e.g. ``GET /v1/ocr`` (HTTP 405, INVALID_ARGUMENT)."""

    http_status = 405
    reason = "METHOD_NOT_ALLOWED"


class NotFound(InkstreamError):
    """Unknown job id or route (HTTP 404, NOT_FOUND)."""

    grpc_code = grpc.StatusCode.NOT_FOUND
    http_status = 404


class Unauthenticated(InkstreamError):
    """Missing or invalid API key (HTTP 401, UNAUTHENTICATED)."""

    grpc_code = grpc.StatusCode.UNAUTHENTICATED
    http_status = 401


class PermissionDenied(InkstreamError):
    """A valid API key without the role a route needs, e.g. admin (HTTP 403, PERMISSION_DENIED); also a
    ``source`` outside what the tenant may read.
    """

    grpc_code = grpc.StatusCode.PERMISSION_DENIED
    http_status = 403


class ResourceExhausted(InkstreamError):
    """Queue, page budget or KV cache full (HTTP 429 + Retry-After, RESOURCE_EXHAUSTED + RetryInfo)."""

    grpc_code = grpc.StatusCode.RESOURCE_EXHAUSTED
    http_status = 429
    transient = True

    def __init__(self, message: str, *, retry_after_s: float = 1.0):
        super().__init__(message, retry_after_s=retry_after_s)


class Unavailable(InkstreamError):
    """Not ready, draining, or a replica unreachable (HTTP 503, UNAVAILABLE)."""

    grpc_code = grpc.StatusCode.UNAVAILABLE
    http_status = 503
    transient = True


class WeightsMismatch(Unavailable):
    """A decoder was sent vision tokens made by other weights than its own (UNAVAILABLE, reason
    WEIGHTS_MISMATCH): another replica may serve them; the gateway re-reads this one's Info.
    """

    reason = "WEIGHTS_MISMATCH"


class DeadlineExceeded(InkstreamError):
    """A call or request ran past its deadline (HTTP 504, DEADLINE_EXCEEDED)."""

    grpc_code = grpc.StatusCode.DEADLINE_EXCEEDED
    http_status = 504


class RequestTimeout(DeadlineExceeded):
    """The client did not finish sending its request in time (HTTP 408 Request Timeout, RFC 9110
    section 15.5.9; DEADLINE_EXCEEDED on gRPC). A client-side failure, so not a 5xx.
    """

    http_status = 408
    reason = "UPLOAD_TIMEOUT"


class Cancelled(InkstreamError):
    """The client went away while its request ran (HTTP 499 as nginx logs it, CANCELLED)."""

    grpc_code = grpc.StatusCode.CANCELLED
    http_status = 499


class FailedPrecondition(InkstreamError):
    """A valid request that the resource's state does not allow (HTTP 409 Conflict, FAILED_PRECONDITION)."""

    grpc_code = grpc.StatusCode.FAILED_PRECONDITION
    http_status = 409


class JobCancelled(FailedPrecondition):
    """The result of a job that was cancelled: there is none (HTTP 409, FAILED_PRECONDITION, reason
    JOB_CANCELLED). Not CANCELLED: the call itself was not cancelled, the job it asks about was.
    """

    reason = "JOB_CANCELLED"


class JobFailed(FailedPrecondition):
    """The result of a job that failed for a reason that has passed (a replica or the gateway was
    down): retrying the call never helps, submitting the job again may (HTTP 409, FAILED_PRECONDITION,
    reason JOB_FAILED; the message carries the job's own error code and message). A job that failed on
    its document answers with that error's own status instead (:meth:`JobRecord.failure`).
    """

    reason = "JOB_FAILED"


class InternalError(InkstreamError):
    """A bug or an unexpected failure (HTTP 500, INTERNAL)."""
