"""The REST API's response bodies, as pydantic models for ``/openapi.json`` only.

The handlers in :mod:`gateway.apis.rest` build their answers themselves; a page and its blocks are
:meth:`inkstream.page_result.PageResult.to_dict`, which these models describe
(``tests/gateway_api/test_openapi.py`` checks real answers, and the contract's JSON form, against
them). The routes that answer with them are in :mod:`gateway.apis.rest_schema`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class TableCell(BaseModel):
    """One cell of a ``table`` block (:class:`inkstream.page_result.TableCell`)."""

    row: int = Field(ge=0, description="row in the table, 0-based, top to bottom")
    column: int = Field(ge=0, description="column in the table, 0-based")
    rowspan: int = Field(ge=1, description="rows the cell covers from its row (1 unless the model gives spans)")
    colspan: int = Field(ge=1, description="columns the cell covers from its column (1 unless the model gives spans)")
    text: str
    box: list[float] = Field(min_length=4, max_length=4, description="[x0, y0, x1, y1] in page pixels")
    confidence: float = Field(ge=0, le=1, description="as a block's, over the cell's segments: 1 - their expected "
                                                      "CER for a calibrated model, else the token-weighted "
                                                      "geometric mean of the model's token probabilities")
    warnings: list[str] = Field(description='stable codes: "low_confidence" when the cell is doubtful (a number '
                                            "with a doubtful digit)")


class Word(BaseModel):
    """One word of a block (:class:`inkstream.page_result.Word`)."""

    text: str
    box: list[float] = Field(min_length=4, max_length=4, description="[x0, y0, x1, y1] of the word in page pixels")
    confidence: float = Field(ge=0, le=1, description="the confidence of the segment the word was read from")


class Block(BaseModel):
    """A region of a page: layout type, its text and its box."""

    type: str = Field(description='layout label, e.g. "text", "title", "table", "line"')
    text: str
    box: list[float] = Field(min_length=4, max_length=4,
                             description="[x0, y0, x1, y1] in pixels of the page's width x height")
    confidence: float = Field(ge=0, le=1, description="geometric mean of the model's token probabilities over "
                                                      "the segment the block was read from (README: Confidence "
                                                      "and warnings)")
    warnings: list[str] = Field(description='stable codes: "low_confidence"')
    cells: list[TableCell] | None = Field(default=None, description='only in a "table" block: its cells')
    words: list[Word] = Field(description="the block's words in reading order with their boxes (empty when "
                                          "they were not located)")
    angle: int = Field(description="degrees counter-clockwise (0, 90, 180, 270) the text runs at on the page "
                                   "(0: left to right; 90: bottom to top, a page fed in turned clockwise)")


class PageError(BaseModel):
    """Why a page has no text."""

    code: str = Field(description='gRPC status code name, e.g. "INVALID_ARGUMENT", "UNAVAILABLE"')
    message: str = Field(description="for a person")
    reason: str | None = Field(None, description='finer cause, when there is one, e.g. "PAYLOAD_TOO_LARGE" (the page '
                               "is over a limit of the replica or gateway that read it)")


class Page(BaseModel):
    """One page of the document; every page of the document (or of the selection) is present once."""

    index: int = Field(ge=1, description="1-based page number in the document")
    status: Literal["ok", "error"]
    text: str = Field(description="the page's text (empty for an error page)")
    blocks: list[Block]
    finish_reason: str = Field(description='"stop", "length" (output cut at the token limit), "repetition" '
                                           '(stopped in a loop), "cancelled", or "" for an error page')
    vision_tokens: int = Field(ge=0, description="vision tokens the encoder made of the page")
    generated_tokens: int = Field(ge=0, description="text tokens the decoder generated")
    width: int = Field(ge=0, description="page image width, pixels (the boxes' frame)")
    height: int = Field(ge=0, description="page image height, pixels")
    error: PageError | None = Field(description="null, or why the page has no text")
    confidence: float = Field(ge=0, le=1, description="geometric mean of every token probability of the page "
                                                      "(0 for an error page or a page without text)")
    warnings: list[str] = Field(description='stable codes: "no_text_found", "unread_region", "unread_ink", '
                                            '"unsupported_script", "low_confidence", "password_unused" '
                                            '(first page only: a password was sent that the document '
                                            'did not need)')


class DocumentResult(BaseModel):
    """The JSON result (``format=json``)."""

    model_id: str = Field(description="the model that read the pages")
    pages: list[Page] = Field(description="in page order")
    pages_ok: int = Field(ge=0)
    pages_error: int = Field(ge=0)
    seconds: float | None = Field(None, description="wall time of the request, seconds")
    cached: bool | None = Field(None, description="true: the pages came from the gateway's result cache")


class ErrorDetail(BaseModel):
    """What went wrong."""

    code: str = Field(description="gRPC status code name, e.g. INVALID_ARGUMENT, FAILED_PRECONDITION")
    reason: str = Field(description="finer cause, e.g. PAYLOAD_TOO_LARGE, TOO_LONG_FOR_DEADLINE, "
                                    "UNSUPPORTED_MEDIA_TYPE, NOTHING_TO_READ, IDEMPOTENCY_CONFLICT, UPLOAD_TIMEOUT, "
                                    "JOB_CANCELLED, JOB_FAILED, METHOD_NOT_ALLOWED (else the code)")
    message: str = Field(description="for a person")


class Summary(BaseModel):
    """The last NDJSON line's ``summary``."""

    model_id: str
    pages: int
    pages_ok: int
    pages_error: int
    seconds: float
    cached: bool = Field(description="true: the pages came from the gateway's result cache")
    document: str = Field(description="the stitched document in the requested format (empty for format=json: "
                                      "the page lines are the JSON result)")
    error: ErrorDetail | None = Field(None, description="null when a page was read; when none was, the error "
                                                        "the whole-document answer and a job of the document "
                                                        "have (the pages' most common code and reason)")


class ErrorBody(BaseModel):
    """Every error answer: ``{"error": {"code", "reason", "message"}}``."""

    error: ErrorDetail


class Job(BaseModel):
    """An asynchronous job."""

    job_id: str
    status: Literal["queued", "running", "done", "failed", "cancelled"]
    pages_done: int = Field(ge=0)
    pages_total: int = Field(ge=0, description="pages selected; 0 until a worker has opened the document")
    error: ErrorDetail | None = Field(description="why a failed job failed ({code, reason, message}, as the "
                                                  "job's result answers it), else null")
    model_id: str = Field(description='the model reading it; "" until a worker has prepared the job')
    options: dict[str, str] = Field(description="the job's options (format, pages, mode, task; never the password)")
    created_at: float = Field(description="Unix time, seconds")
    updated_at: float = Field(description="Unix time, seconds")
    result_url: str = Field(description="a done job's document in its format as a presigned object-store GET URL "
                                        "(result_store=s3), else \"\"")
    webhook: str = Field(description='callback delivery: "" (none yet / no callback_url), "delivered", "failed"')
    webhook_attempts: int = Field(ge=0, description="webhook deliveries tried")
    attempts: int = Field(ge=0, description="runs started (a takeover after a worker died is one more)")
    worker: str = Field(description="the worker (host-pid-id) that last started the job")


class Upload(BaseModel):
    """A presigned upload: PUT the document to ``upload_url``, then submit with ``source``."""

    upload_url: str = Field(description="presigned PUT URL of a new object in the gateway's object store")
    source: str = Field(description="s3://BUCKET/KEY to pass as the source field of /v1/jobs or /v1/ocr")
    expires_in: int = Field(description="seconds the upload_url stays valid")


class QueueState(BaseModel):
    """The job queue seen by every gateway of one Redis (or this process, embedded)."""

    paused: bool = Field(description="true: workers take no new job (submissions are still accepted)")
    queued: int = Field(ge=0, description="jobs queued and not started")
    oldest_queued_age_s: float = Field(ge=0, description="age of the oldest queued job, seconds")
