"""What a client gets back from the gateway, as plain dataclasses (no server code imported).

A page is the page-result contract shared with the gateway, :mod:`inkstream.page_result`
(:class:`PageResult` with its :class:`Block` list, a ``table`` block's :class:`TableCell` list,
:class:`PageError`), re-exported here; this module adds the rest of an answer: ``DocumentSummary``,
``RecognizeResult`` and ``JobStatus`` (the ``inkstream.gateway.v1`` ``Summary`` and ``Job``). They
are built from either the gRPC messages (:mod:`client.gateway_client`, via
:func:`inkstream.page_result_pb.page_from_pb`) or the REST NDJSON lines (:mod:`client.ocr_cli`, via
:meth:`PageResult.from_dict`), so the client library depends only on the common package, the
generated stubs and HTTP.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from inkstream.page_result import WARNING_CODES, Block, Box, PageError, PageResult, TableCell, document_json

__all__ = ["FORMATS", "WARNING_CODES", "Block", "Box", "DocumentSummary", "JobError", "JobStatus", "PageError",
           "PageResult", "RecognizeResult", "TableCell", "document_json"]

FORMATS = ("markdown", "text", "json", "hocr", "pdf")
"""Output formats the gateway renders (REST ``format`` / gRPC ``OcrOptions.format``)."""


@dataclass
class DocumentSummary:
    """The last message of a recognition: page counts, the stitched ``document``, wall time in seconds,
    whether the answer came from the gateway's result cache, and ``error`` when no page could be read
    (the :class:`JobError` a job of the same document fails with; None when a page was read).
    """

    model_id: str
    pages: int
    pages_ok: int
    pages_error: int
    document: str
    seconds: float
    cached: bool = False
    error: JobError | None = None


@dataclass
class RecognizeResult:
    """A whole recognition: page results in page order and the summary."""

    pages: list[PageResult] = field(default_factory=list)
    summary: DocumentSummary | None = None

    @property
    def document(self) -> str:
        """The stitched document in the requested format ("" before the summary arrived)."""
        return self.summary.document if self.summary else ""


@dataclass
class JobError:
    """Why a job failed: ``code`` (gRPC status name, e.g. ``"INVALID_ARGUMENT"``), ``reason`` (the finer
    cause, e.g. ``"NOTHING_TO_READ"``; the code when there is none) and ``message`` (for a person) — the
    REST job's ``error`` object.
    """

    code: str
    reason: str
    message: str


@dataclass
class JobStatus:
    """A job's state: ``status`` queued | running | done | failed | cancelled, progress in pages;
    ``error`` is set only for a failed job.
    """

    job_id: str
    status: str
    pages_done: int
    pages_total: int
    error: JobError | None = None

