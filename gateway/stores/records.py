"""Job records and the two store interfaces (job records; blobs by name), no engine here.

A :class:`JobRecord` carries a job's error as three fields, ``error_code`` (a gRPC status name, e.g.
``"UNAVAILABLE"``), ``error_message`` (for a person) and ``error_reason`` (the finer cause, e.g.
``"PAYLOAD_TOO_LARGE"``; "" for records written before it was kept), never as one string parsed back later.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from inkstream.errors import InkstreamError, JobFailed, error_for_code

JOB_STATUSES = ("queued", "running", "done", "failed", "cancelled")
FINISHED = ("done", "failed", "cancelled")


@dataclass
class JobRecord:
    """One asynchronous OCR job. Times are UNIX seconds; ``options`` the request options as a dict.

    ``source``: where the document is (a blob name in the result store, or ``s3://BUCKET/KEY`` of an
    uploaded source object); ``callback_url``: webhook destination ("" = none); ``webhook``: the
    delivery outcome (``""`` none yet, ``"delivered"``, ``"failed"``) after ``webhook_attempts`` tries;
    ``attempts``: runs started (a takeover by another worker is one more); ``doc_password``: an
    encrypted PDF's password, kept (never shown) until the job finishes, then cleared; ``worker``: the
    queue consumer (``host-pid-random``) that last started it; ``tenant``: whose job it is (only that
    tenant's keys see it). ``doc_password`` and ``callback_url`` are stored sealed
    (:mod:`gateway.stores.sealed`); ``idempotency_key`` as ``<tenant>/<key>``.
    """

    job_id: str
    status: str = "queued"
    pages_done: int = 0
    pages_total: int = 0
    error_code: str = ""
    error_message: str = ""
    error_reason: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    idempotency_key: str = ""
    doc_sha256: str = ""
    model_id: str = ""
    created_at: float = 0.0
    updated_at: float = 0.0
    source: str = ""
    callback_url: str = ""
    webhook: str = ""
    webhook_attempts: int = 0
    attempts: int = 0
    doc_password: str = ""
    worker: str = ""
    tenant: str = "default"

    @property
    def error(self) -> str:
        """``"CODE: message"`` for display (the gRPC Job message's string); "" without an error."""
        return f"{self.error_code}: {self.error_message}" if self.error_code else ""

    def failure(self) -> InkstreamError:
        """What asking for a failed job's result answers: the job's error as the InkstreamError of its
        code and reason (so a job refused by its worker answers the status ``/v1/ocr`` gives the same
        document: 413 PAYLOAD_TOO_LARGE, 422 NOTHING_TO_READ), without a retry hint; a transient one
        (UNAVAILABLE, RESOURCE_EXHAUSTED: 503 / 429 would invite retries of a call that can never
        succeed) as :class:`JobFailed` (409, reason JOB_FAILED) whose message names the job's code and
        message and says to submit the job again (the message's own "retry shortly", written for the
        call that failed, left out: asking for this result again answers the same).
        """
        err = error_for_code(self.error_code or "INTERNAL", self.error_message or "the job failed",
                             reason=self.error_reason)
        if err.transient:
            cause = err.message.removesuffix("; retry shortly")
            return JobFailed(f"job {self.job_id} failed: {err.code_name}: {cause}; submit the job again "
                             "(this job's result stays failed)")
        err.retry_after_s = None
        return err


#: JobRecord fields in declaration order (the stores' columns / hash fields).
FIELDS: tuple[str, ...] = tuple(JobRecord.__dataclass_fields__)


class JobStore(Protocol):
    """Persistence of job records and page checkpoints (synchronous; callers use threads).

    Engine failures raise :class:`inkstream.errors.Unavailable` (with a Retry-After hint).
    """

    def create(self, job: JobRecord) -> tuple[JobRecord, bool]:
        """Insert ``job``; when its idempotency key is already taken return (existing, False)."""

    def get(self, job_id: str) -> JobRecord | None:
        """The record, or None."""

    def get_by_key(self, idempotency_key: str) -> JobRecord | None:
        """The job created with this idempotency key, or None."""

    def update(self, job_id: str, *, unless_finished: bool = False, **fields: Any) -> bool:
        """Set ``fields`` (JobRecord attributes) and ``updated_at``; with ``unless_finished`` only while
        the job is not done / failed / cancelled (atomic). Returns whether it was written.
        """

    def put_page(self, job_id: str, index: int, page: dict[str, Any]) -> int:
        """Checkpoint one finished page (``index`` 1-based, ``page`` a PageResult dict); returns the
        number of checkpointed pages.
        """

    def pages(self, job_id: str) -> dict[int, dict[str, Any]]:
        """The checkpointed pages, by 1-based index."""

    def delete(self, job_id: str) -> None:
        """Remove the record and its checkpoints (no error when missing)."""

    def expired(self, before: float) -> list[str]:
        """Ids of finished jobs last updated before ``before`` (UNIX seconds)."""

    def unfinished(self) -> list[JobRecord]:
        """The queued and running jobs (left by an earlier process when read at start), oldest first."""

    def ping(self) -> None:
        """Raise Unavailable when the engine cannot be reached."""

    def close(self) -> None:
        """Release connections."""


class ResultStore(Protocol):
    """Blobs by name (``/``-separated, e.g. ``<job id>/result.json``); synchronous.

    Engine failures raise :class:`inkstream.errors.Unavailable`.
    """

    def put(self, name: str, data: bytes, content_type: str = "application/octet-stream") -> None:
        """Store ``data`` under ``name`` (replacing it atomically)."""

    def put_file(self, name: str, path: pathlib.Path) -> None:
        """Store the file at ``path`` under ``name`` without reading it into memory (it is consumed)."""

    def local_path(self, name: str) -> pathlib.Path | None:
        """A local file holding the blob, or None (missing, or the store is remote)."""

    def fetch_to(self, name: str, path: pathlib.Path) -> bool:
        """Copy the blob to the local file ``path`` in chunks; False when there is no such blob."""

    def chunks(self, name: str, chunk_bytes: int = 1 << 20) -> Iterator[bytes] | None:
        """The blob's bytes in chunks (never whole), or None when missing."""

    def get(self, name: str) -> bytes | None:
        """The blob, or None."""

    def delete(self, name: str) -> None:
        """Remove the blob (no error when missing)."""

    def delete_prefix(self, prefix: str) -> None:
        """Remove every blob whose name starts with ``prefix``."""

    def names(self, prefix: str) -> list[tuple[str, float]]:
        """(name, last-modified UNIX seconds) of the blobs under ``prefix``."""

    def url(self, name: str, expires_s: int) -> str:
        """A presigned GET URL of the blob valid ``expires_s`` seconds, or "" (a local store has none)."""

    def ping(self) -> None:
        """Raise Unavailable when the store cannot be reached."""
