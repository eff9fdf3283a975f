"""The REST API's OpenAPI description, per route.

The handlers in :mod:`gateway.apis.rest` build their answers themselves (documents, NDJSON streams,
the error body); the pydantic models of :mod:`gateway.apis.rest_bodies` mirror those answers for
``/openapi.json`` only. Each ``*_ROUTE`` dict is the keyword arguments of one route's decorator:
summary, request body and parameters (every option as a form field and as a query parameter,
headers), and every status the route can answer with its schema.
"""

from __future__ import annotations

from typing import Any

from gateway.apis.rest_bodies import DocumentResult, ErrorBody, Job, QueueState, Summary, Upload
from gateway.apis.rest_http import OPTION_NAMES
from inkstream.doc_types import accepted_list

NDJSON = "application/x-ndjson"
MARKDOWN = "text/markdown; charset=utf-8"
TEXT = "text/plain; charset=utf-8"
HOCR = "application/xhtml+xml; charset=utf-8"
PDF = "application/pdf"


# ---- request options ---------------------------------------------------------------------------

OPTIONS: dict[str, dict[str, Any]] = {
    "format": {"type": "string", "enum": ["markdown", "text", "json", "hocr", "pdf"], "default": "markdown",
               "description": "output format: markdown, text, json, hocr (hOCR 1.2 XHTML) or pdf (the document "
                              "with an invisible text layer: a searchable PDF)"},
    "pages": {"type": "string", "default": "", "examples": ["1-5,9"],
              "description": '1-based page selection, e.g. "1-5,9"; empty = all pages'},
    "mode": {"type": "string", "default": "", "examples": ["gundam", "base", "small"],
             "description": "encoder resolution mode (the model's modes); empty = the encoder's default"},
    "task": {"type": "string", "default": "", "examples": ["ocr", "markdown"],
             "description": "what the model is asked to do: ocr = free OCR, markdown = layout with grounding boxes "
                            "(deepseek_ocr2); empty = the model's default"},
    "password": {"type": "string", "default": "", "format": "password", "description": "PDF user password"},
}
assert tuple(OPTIONS) == OPTION_NAMES, "document every option gateway.apis.rest_http accepts"

SOURCE = {"source": {"type": "string", "default": "", "examples": ["s3://bucket/uploads/0f3a"],
                     "description": "instead of file: s3://BUCKET/KEY of an object in a bucket the gateway is "
                                    "configured with (see POST /v1/uploads); any other URL is refused (400)"}}
CALLBACK = {"callback_url": {"type": "string", "default": "", "examples": ["https://hooks.example.com/ocr"],
                             "description": "webhook POSTed when the job finishes (Standard Webhooks 1.0 signature "
                                            "headers webhook-id / -timestamp / -signature); "
                                            "its host must be in INKSTREAM_WEBHOOK_ALLOWED_HOSTS (400 otherwise)"}}


def _query(name: str, fields: dict[str, dict[str, Any]]) -> dict[str, Any]:
    schema = {k: v for k, v in fields[name].items() if k != "description"}
    return {"name": name, "in": "query", "required": False, "schema": schema,
            "description": fields[name]["description"] + " (also accepted as a form field; given both ways, the "
                                                         "values must agree, else 400)"}


def _upload(extra_parameters: list[dict[str, Any]], extra_fields: dict[str, dict[str, Any]]) -> dict[str, Any]:
    fields = {**OPTIONS, **extra_fields}
    form = {"file": {"type": "string", "format": "binary",
                     "description": f"the document: {accepted_list()}; the type comes from the file's magic "
                                    "bytes, never its name (or give source instead)"},
            **fields}
    return {
        "requestBody": {"required": True, "content": {
            "multipart/form-data": {"schema": {"type": "object", "properties": form, "additionalProperties": False,
                                               "anyOf": [{"required": ["file"]}, {"required": ["source"]}]}},
            "application/octet-stream": {"schema": {"type": "string", "format": "binary",
                                                    "description": "the document itself (curl --data-binary "
                                                                   "@FILE), type by magic bytes; options as query "
                                                                   "parameters"}},
        }},
        "parameters": [_query(n, fields) for n in fields] + extra_parameters,
    }


# ---- error statuses ----------------------------------------------------------------------------

_STATUS: dict[int, str] = {
    400: "invalid input: damaged file, bad or unknown option or query parameter, bad page selection",
    401: "missing or wrong API key (when the gateway has keys)",
    403: "the API key lacks the admin role, or the source is not one of this tenant's uploads or read "
         "prefixes (PERMISSION_DENIED)",
    404: "unknown or expired job, or a job of another tenant",
    405: "this route does not take that HTTP method (METHOD_NOT_ALLOWED); Allow lists the methods it takes",
    408: "the upload did not finish within limits.upload_timeout_s (UPLOAD_TIMEOUT)",
    409: "the job was cancelled: it has no result (FAILED_PRECONDITION, reason JOB_CANCELLED); or it failed "
         "for a reason that has passed (a replica or the gateway was down): submit it again (reason JOB_FAILED)",
    413: "over a size / page / pixel limit (PAYLOAD_TOO_LARGE); or a document that cannot be read within "
         "the synchronous deadline at the measured rate: submit it as a job (TOO_LONG_FOR_DEADLINE)",
    415: "not a supported file type (UNSUPPORTED_MEDIA_TYPE)",
    422: "nothing to read: no pages, image too small (NOTHING_TO_READ); or an Idempotency-Key reused for "
         "another document or other options (IDEMPOTENCY_CONFLICT)",
    429: "the gateway is full; retry after the Retry-After header (RESOURCE_EXHAUSTED)",
    500: "an unexpected error (INTERNAL); the gateway's log has the details",
    503: "no encoder or decoder replica is serving, the gateway is draining, or a store (Redis, S3) fails; "
         "retry after Retry-After (UNAVAILABLE)",
    504: "the document was not finished within the request deadline (DEADLINE_EXCEEDED)",
}


def _errors(*statuses: int, **descriptions: str) -> dict[int | str, dict[str, Any]]:
    """``responses`` entries for ``statuses``, each with the error body (``descriptions``: s404="..."
    overrides a status's text).
    """
    return {s: {"model": ErrorBody, "description": descriptions.get(f"s{s}", _STATUS[s])} for s in statuses}


_SOURCE_409 = "source=s3://... given but this gateway has no object store (FAILED_PRECONDITION)"


_HEADER_CACHE = {"X-Inkstream-Cache": {
    "description": "hit: the pages came from the result cache; miss: they were read now",
    "schema": {"type": "string", "enum": ["hit", "miss"]}}}

_UPLOAD_ERRORS = (400, 401, 403, 405, 408, 409, 413, 415, 422, 429, 500, 503)
# One JSON object per line: {"page": Page} per page in page order, then {"summary": Summary}.
_NDJSON_LINE = {
    "description": 'one JSON object per line: {"page": Page} for each page in page order, then {"summary": Summary}',
    "oneOf": [
        {"type": "object", "required": ["page"], "properties": {"page": {"$ref": "#/components/schemas/Page"}}},
        {"type": "object", "required": ["summary"], "properties": {"summary": Summary.model_json_schema()}},
    ],
}
_OTHER = {"default": {"model": ErrorBody, "description": "any other error, in the same shape"}}

OCR_ROUTE: dict[str, Any] = {
    "summary": "OCR a document (whole result, or NDJSON per page)",
    "openapi_extra": _upload([{
        "name": "Accept", "in": "header", "required": False, "schema": {"type": "string", "examples": [NDJSON]},
        "description": f"{NDJSON}: one {{\"page\": …}} line per page as soon as it is ready, in page order, then "
                       "{\"summary\": …}"}], SOURCE),
    "responses": {
        200: {"model": DocumentResult,
              "description": "the document: the JSON result (format=json), markdown, plain text (pages separated by "
                             f"form feeds), or with Accept: {NDJSON} page lines then a summary line",
              "headers": {**_HEADER_CACHE,
                          "X-Model-Id": {"description": "the model that read the pages", "schema": {"type": "string"}},
                          "X-Pages-Total": {"description": "pages that will come (NDJSON only)",
                                            "schema": {"type": "integer"}}},
              "content": {MARKDOWN: {"schema": {"type": "string"}}, TEXT: {"schema": {"type": "string"}},
                          HOCR: {"schema": {"type": "string"}},
                          PDF: {"schema": {"type": "string", "format": "binary"}},
                          NDJSON: {"schema": _NDJSON_LINE}}},
        **_errors(*_UPLOAD_ERRORS, 504, s409=_SOURCE_409),
    },
}

#: OpenAPI links from a submitted job to the routes that take its id (stateful clients and fuzzers follow them).
_JOB_LINKS = {name: {"operationId": op, "parameters": {"job_id": "$response.body#/job_id"},
                     "description": desc} for name, op, desc in (
    ("GetJob", "get_job", "the job's status"), ("GetJobResult", "job_result", "the job's result"),
    ("CancelJob", "cancel_job", "cancel the job"))}

JOB_SUBMIT_ROUTE: dict[str, Any] = {
    "summary": "Submit an asynchronous OCR job",
    "operation_id": "submit_job",
    "status_code": 202,
    "response_model": None,
    "openapi_extra": _upload([{
        "name": "Idempotency-Key", "in": "header", "required": False,
        "schema": {"type": "string", "maxLength": 255},
        "description": "the same key returns the job first created with it (same document and options required, "
                       "else 422)"}], {**SOURCE, **CALLBACK}),
    "responses": {
        202: {"model": Job, "description": "the job (Location: /v1/jobs/{job_id})",
              "headers": {"Location": {"schema": {"type": "string"}}}, "links": _JOB_LINKS},
        **_errors(*_UPLOAD_ERRORS, s429="too many unfinished jobs, or the gateway is full; retry after Retry-After",
                  s409=_SOURCE_409),
    },
}

JOB_STATUS_ROUTE: dict[str, Any] = {
    "summary": "Job status: status, pages done / total",
    "operation_id": "get_job",
    "response_model": None,
    "responses": {200: {"model": Job, "description": "the job"}, **_errors(401, 404, 500), **_OTHER},
}

JOB_RESULT_ROUTE: dict[str, Any] = {
    "summary": "Result of a done job (202 with the status while not done)",
    "operation_id": "job_result",
    "responses": {
        200: {"model": DocumentResult, "description": "the document in the job's format (or ?format=)",
              "headers": _HEADER_CACHE,
              "content": {MARKDOWN: {"schema": {"type": "string"}}, TEXT: {"schema": {"type": "string"}}}},
        202: {"model": Job, "description": "not done yet (queued or running); retry after Retry-After"},
        **_errors(400, 401, 404, 409, 500, s400="unknown format; or the job itself failed on its document"),
        "default": {"model": ErrorBody, "description": "a failed job answers with its own error's status"},
    },
}

JOB_CANCEL_ROUTE: dict[str, Any] = {
    "summary": "Cancel a job (it stays readable, with status cancelled; DELETE cancels, it does not erase)",
    "operation_id": "cancel_job",
    "response_model": None,
    "responses": {200: {"model": Job, "description": "the job (a finished job unchanged)"}, **_errors(401, 404, 500),
                  **_OTHER},
}

FORMAT_QUERY_DESCRIPTION = ("output format of the result: markdown, text, json or hocr; pdf for a job submitted with "
                            "format=pdf (default: the job's format)")

UPLOAD_ROUTE: dict[str, Any] = {
    "summary": "Presigned upload: PUT a large document straight into the object store",
    "status_code": 201,
    "response_model": None,
    "responses": {201: {"model": Upload, "description": "where to PUT the document, and its source URI"},
                  **_errors(401, 409, 500, 503, s409="no object store is configured (FAILED_PRECONDITION)"),
                  **_OTHER},
}

QUEUE_ROUTE: dict[str, Any] = {
    "response_model": None,
    "responses": {200: {"model": QueueState, "description": "the queue after the call"},
                  **_errors(401, 403, 500, 503),
                  **_OTHER},
}


def inline_defs(schema: dict[str, Any]) -> dict[str, Any]:
    """A pydantic JSON schema with its ``$defs`` references replaced by the definitions (OpenAPI reads
    ``#/$defs/...`` against the whole document, where they are not). Non-recursive models only.
    """
    defs = schema.get("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref", "")
            if ref.startswith("#/$defs/"):
                return walk(defs[ref.removeprefix("#/$defs/")])
            return {k: walk(v) for k, v in node.items() if k != "$defs"}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(schema)


def chat_route(body_schema: dict[str, Any]) -> dict[str, Any]:
    """The decorator arguments of ``POST /v1/chat/completions``: ``body_schema`` the request body's
    JSON schema (the pydantic model of :mod:`gateway.apis.openai_messages`), its answers and OpenAI-shaped
    errors.
    """
    err = {"application/json": {"schema": {"type": "object", "required": ["error"], "properties": {"error": {
        "type": "object", "required": ["message", "type", "param", "code"],
        "properties": {"message": {"type": "string"}, "type": {"type": "string"},
                       "param": {"type": ["string", "null"]}, "code": {"type": ["string", "null"]}}}}}}}
    errors = {400: "invalid request, no image, or a parameter the gateway cannot honour (n > 1, tools, "
                   "tool_choice, functions, function_call, a non-text response_format, logprobs, top_logprobs); "
                   "error.param names it",
              401: _STATUS[401], 404: "model_not_found: another model than the served one",
              405: _STATUS[405], 413: _STATUS[413], 415: _STATUS[415], 422: _STATUS[422], 429: _STATUS[429],
              500: _STATUS[500], 503: _STATUS[503], 504: _STATUS[504]}
    return {
        "summary": "Read the images of a chat request (OpenAI-compatible)",
        "openapi_extra": {"requestBody": {"required": True, "content": {"application/json": {
            "schema": inline_defs(body_schema)}}}},
        "responses": {
            200: {"description": "a chat.completion object, or with stream: true server-sent chat.completion.chunk "
                                 "events", "content": {"application/json": {"schema": {"type": "object"}},
                                                       "text/event-stream": {"schema": {"type": "string"}}}},
            **{code: {"description": text, "content": err} for code, text in errors.items()},
        },
    }
