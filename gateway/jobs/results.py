"""A job's stored result: the blob names under ``<job id>/`` and writing / reading them.

Written once every page is known, each blob whole (a reader never sees half a blob), before the
job is marked done: ``result.json`` (``{model_id, seconds, cached, pages: [...]}``, what
``GET /v1/jobs/{id}/result`` renders from), ``pages.ndjson`` (one page per line), ``document.md``,
``document.txt``, and the job's own format when it is another one (``document.hocr``,
``searchable.pdf``). ``document`` is the job's source document, when the gateway stored it.
"""

from __future__ import annotations

import json
import pathlib
from dataclasses import dataclass

from gateway.output.searchable_pdf import write_searchable_pdf
from gateway.output.stitch import render_document
from gateway.stores import JobRecord, ResultStore
from inkstream.page_result import PageResult

EXTENSIONS = {"markdown": "document.md", "text": "document.txt", "json": "result.json", "hocr": "document.hocr",
              "pdf": "searchable.pdf"}
TYPES = {"markdown": "text/markdown; charset=utf-8", "text": "text/plain; charset=utf-8", "json": "application/json",
         "hocr": "application/xhtml+xml; charset=utf-8", "pdf": "application/pdf"}


def blob(job_id: str, name: str) -> str:
    """The blob name of ``name`` (e.g. ``result.json``) of job ``job_id``."""
    return f"{job_id}/{name}"


def document_blob(job_id: str) -> str:
    """Where the gateway keeps a job's uploaded document."""
    return blob(job_id, "document")


@dataclass
class JobResult:
    """A finished job's output: ``pages`` in page order, the model that read them, the wall time
    in seconds; ``cached``: the pages came from the gateway's result cache.
    """

    job: JobRecord
    model_id: str
    pages: list[PageResult]
    seconds: float
    cached: bool = False


def write_result(store: ResultStore, job: JobRecord, pages: list[PageResult], model_id: str, seconds: float,
                 cached: bool, source: pathlib.Path, kind: str, scratch: pathlib.Path, *, password: str = "") -> None:
    """Write every result blob of ``job`` (blocking; call in a thread). ``source``: the document
    (for format=pdf), ``kind`` its sniffed kind, ``password`` its PDF password in plain (the job
    record holds it sealed), ``scratch`` a local dir for the PDF. Raises what the
    store raises (Unavailable when unreachable) and the PDF writer's InvalidInput.
    """
    fmt = job.options.get("format", "markdown")
    dicts = [p.to_dict() for p in pages]
    store.put(blob(job.job_id, "pages.ndjson"),
              "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in dicts).encode(), "application/x-ndjson")
    for f in ("markdown", "text", "hocr"):
        if f != "hocr" or fmt == "hocr":
            store.put(blob(job.job_id, EXTENSIONS[f]), render_document(pages, f, model_id).encode(), TYPES[f])
    if fmt == "pdf":
        out = scratch / "searchable.pdf"
        write_searchable_pdf(pages, source, kind, out, password=password)
        store.put_file(blob(job.job_id, "searchable.pdf"), out)
    body = {"model_id": model_id, "seconds": seconds, "cached": cached, "pages": dicts}
    store.put(blob(job.job_id, "result.json"), json.dumps(body).encode(), TYPES["json"])  # last: the marker


def read_result(store: ResultStore, job: JobRecord) -> JobResult | None:
    """The JobResult of done ``job``, or None when its result is no longer stored."""
    raw = store.get(blob(job.job_id, "result.json"))
    if raw is None:
        return None
    body = json.loads(raw)
    return JobResult(job, body["model_id"], [PageResult.from_dict(p) for p in body["pages"]], body["seconds"],
                     bool(body.get("cached", False)))


def result_url(store: ResultStore, job: JobRecord, expires_s: int) -> str:
    """A presigned GET URL of done ``job``'s document in its format ("" for a local store)."""
    return store.url(blob(job.job_id, EXTENSIONS.get(job.options.get("format", "markdown"), "result.json")),
                     expires_s)
