"""``inkstream ocr FILE [--gateway URL] [--format markdown|text|json|hocr|pdf] [-o OUT] [--pages 1-5,9]
[--mode M] [--task T] [--password P] [--model DIR] [--api-key K]``.

Sends FILE to a running gateway's REST API (``POST /v1/ocr`` with ``Accept: application/x-ndjson``)
and shows a per-page progress bar (tqdm, on stderr; the total comes from the ``X-Pages-Total``
response header) while the page lines stream in. Without ``--gateway`` a temporary local stack
(:class:`launcher.local_stack.LocalStack`: encoder + decoder + gateway on loopback) runs for the
duration. The document goes to ``-o OUT`` or stdout.

Exit codes: 0 every page read; 3 the document came back but some pages carry errors (listed on
stderr); when no page could be read, nothing is written and one stderr line gives the error the
gateway's whole-document answer and a job of the document have (the summary's ``error``: the pages'
most common reason, each page's reason grouped), with the exit code of that answer: 2 for a document
the gateway cannot read (4xx, e.g. NOTHING_TO_READ), 1 otherwise (e.g. UNAVAILABLE); 1 the request
failed (the gateway's message on stderr: unreachable, overloaded, 5xx) or the stack did not start;
2 bad command line, unreadable FILE, or the gateway refused the request's document or options
(HTTP 4xx other than 408 / 429, e.g. ``--pages 5`` of a 1-page file).
Pages read with warnings (``no_text_found``, ``unread_region``, ``unread_ink``, ``unsupported_script``,
``low_confidence``, ``password_unused``) are listed
on stderr with what they mean (for ``low_confidence``, which of the page's lines are doubtful, with
their confidences, and the page's confidence; :func:`inkstream.page_notes.warnings_note`) and counted
in the last line ("N/M pages read, K with warnings");
they do not change the exit code.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import sys
from collections.abc import Iterator
from typing import Any

import httpx

from client.results import FORMATS, PageResult, document_json
from inkstream.doc_types import SNIFF_BYTES, accepted_list, detect_type
from inkstream.errors import InvalidInput, PasswordRequired, error_for_code, password_required
from inkstream.page_errors import every_page_failed
from inkstream.page_notes import warnings_note

#: what each output format is (``--format``; the same names as the gateway's ``format``).
FORMAT_HELP = {"markdown": "Markdown (.md), pages marked by <!-- page N --> comments",
               "text": "plain text (.txt), pages separated by form feeds",
               "json": "the page results with lines, boxes and confidence (.json)",
               "hocr": "hOCR HTML with line boxes (.hocr)",
               "pdf": "searchable PDF: the page images with an invisible text layer (.pdf; needs -o)"}


def positive_seconds(text: str) -> float:
    """``--timeout``'s type: a number of seconds > 0 (argparse.ArgumentTypeError, exit 2, otherwise)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not a number of seconds > 0")
    return value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="inkstream ocr",
        description="OCR a document through a running gateway (--gateway URL), or through a temporary local "
        "stack started for the duration. Exit codes: 0 all pages read, 3 some pages failed, 1 request failed "
        "(unreachable, overloaded, 5xx; also no page read for a transient reason, e.g. UNAVAILABLE), 2 bad "
        "arguments or a document or option the gateway refused (4xx; also no page read because the document "
        "cannot be, e.g. NOTHING_TO_READ).")
    p.add_argument("file", help="the document; its type is recognised by its first bytes, not its name. "
                   f"Accepted: {accepted_list(with_extensions=True)}")
    p.add_argument("--gateway", metavar="URL", help="gateway REST URL, e.g. http://127.0.0.1:8080 "
                   "(default: start a temporary local stack)")
    p.add_argument("--format", choices=FORMATS, default=None,
                   help="output format (default: from -o's extension, else markdown): "
                   + "; ".join(f"{f}: {FORMAT_HELP[f]}" for f in FORMATS))
    p.add_argument("-o", "--output", metavar="OUT",
                   help="write the document here (default stdout; format=pdf needs it)")
    p.add_argument("--pages", default="", help='1-based page selection, e.g. "1-5,9" (default all)')
    p.add_argument("--mode", default="", help="encoder resolution mode (default: the encoder's default)")
    p.add_argument("--task", default="",
                   help="what the model is asked to do: ocr (free OCR; the only task of the embedded compact "
                   "model) or markdown (deepseek_ocr2: layout with boxes); default: the model's")
    p.add_argument("--password", default="", help="PDF password")
    p.add_argument("--model", metavar="DIR", help="checkpoint for the temporary local stack (default: embedded)")
    p.add_argument("--api-key", default=os.environ.get("INKSTREAM_API_KEY", ""),
                   help="API key for the gateway (default env INKSTREAM_API_KEY)")
    p.add_argument("--timeout", type=positive_seconds, default=3600.0, help="seconds to wait for the whole document")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


class GatewayRefused(RuntimeError):
    """A non-200 answer of the gateway; ``status`` is its HTTP status."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status

    @property
    def bad_request(self) -> bool:
        """True for the client's own fault (4xx except 408 Request Timeout and 429 Too Many Requests)."""
        return 400 <= self.status < 500 and self.status not in (408, 429)


class NotAGateway(RuntimeError):
    """The server at the URL answered, but not as an inkstream gateway's REST API does (another
    service's port: an encoder's or decoder's gRPC or metrics port, the gateway's gRPC port, another
    web server).
    """


#: what a NotAGateway message ends with: where the right URL is found
_GIVE_REST_URL = "give the gateway's REST URL ('inkstream up' prints it), e.g. http://127.0.0.1:8080"


def _gateway_error(r: httpx.Response) -> dict[str, Any] | None:
    """The ``{"code", "reason", "message"}`` of a gateway's error answer, None when ``r`` is not one."""
    try:
        err = r.json()["error"]
    except (ValueError, KeyError, TypeError):
        return None
    return err if isinstance(err, dict) and "code" in err and "message" in err else None


def _refusal(r: httpx.Response, url: str) -> RuntimeError:
    """The exception for a non-200 answer ``r`` (body read) of ``url``: GatewayRefused with ``REASON:
    message`` (the reason is the finer cause, e.g. NOTHING_TO_READ where the code is
    INVALID_ARGUMENT; the code when there is none) for a gateway's JSON error, else NotAGateway.
    """
    err = _gateway_error(r)
    if err is None:
        server = r.headers.get("server", "")
        return NotAGateway(f"{url} is not an inkstream gateway: it answered HTTP {r.status_code} "
                           f"{r.reason_phrase}{f' ({server})' if server else ''} to POST /v1/ocr without a "
                           f"gateway's JSON error; {_GIVE_REST_URL}")
    message = password_required("cli").message if err.get("reason") == PasswordRequired.reason else err["message"]
    return GatewayRefused(f"{err.get('reason') or err['code']}: {message}", r.status_code)


def _check_media(r: httpx.Response, url: str, media: str) -> None:
    """Raise NotAGateway when the 200 answer ``r`` of ``url`` is not of ``media`` (what a gateway sends)."""
    got = r.headers.get("content-type", "").split(";")[0].strip().lower()
    if got != media:
        raise NotAGateway(f"{url} is not an inkstream gateway: POST /v1/ocr answered {got or 'no content type'}"
                          f", not {media}; {_GIVE_REST_URL}")


BAR_WAITING = "{desc}: waiting for the first page [{elapsed}]"
"""The progress line before the gateway has answered (the page count is not known yet)."""
BAR_UNCOUNTED = "{desc}: {n_fmt} pages read [{elapsed}, {rate_fmt}]"
"""The progress line of an answer without ``X-Pages-Total``."""


def stream_pages(url: str, path: pathlib.Path, options: dict[str, str], *, api_key: str = "",
                 timeout_s: float = 3600.0, progress: bool = True) -> tuple[list[PageResult], dict[str, Any]]:
    """POST ``path`` to ``url``/v1/ocr as NDJSON; returns (pages in order, summary dict).

    Raises GatewayRefused (a RuntimeError) with the gateway's error message for a non-200 answer,
    NotAGateway (a RuntimeError) for an answer that is not a gateway's (not HTTP/1.1: a gRPC port;
    an error without the gateway's JSON, or a 200 that is not NDJSON: another web server), RuntimeError
    for a stream broken off, or a stream
    that ends with the gateway's ``{"error": ...}`` line (its message included),
    httpx.HTTPError when the gateway cannot be reached.
    """
    from tqdm import tqdm  # heavy: tqdm, only once a document is on its way

    headers = {"Accept": "application/x-ndjson"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    pages: list[PageResult] = []
    summary: dict[str, Any] | None = None
    timeout = httpx.Timeout(timeout_s, connect=10.0)
    # The bar exists before the request is sent, so its clock (elapsed, page/s) counts the whole
    # request: upload, and the wait for the first page, which comes with the response headers. Its
    # total is unknown until X-Pages-Total arrives: until then it says what it waits for (tqdm's own
    # line for an unknown total read "0page [00:00, ?page/s]"). A bar of a refused request is cleared on close.
    with open(path, "rb") as f, httpx.Client(timeout=timeout) as client, \
            tqdm(total=None, unit=" page", file=sys.stderr, disable=not progress, desc=path.name,
                 bar_format=BAR_WAITING) as bar:
        files = {"file": (path.name, f, "application/octet-stream")}
        request = client.build_request("POST", url.rstrip("/") + "/v1/ocr", files=files, data=options, headers=headers)
        try:
            r = client.send(request, stream=True)
        except httpx.RemoteProtocolError as exc:  # no HTTP/1.1 status line came back
            bar.leave = False
            raise NotAGateway(f"{url} is not an inkstream gateway's REST API: it did not answer HTTP/1.1 ({exc}), "
                              "as a gRPC port does (an encoder's, a decoder's or the gateway's own gRPC port); "
                              f"{_GIVE_REST_URL}") from None
        except BaseException:
            bar.leave = False
            raise
        try:
            if r.status_code != 200:
                bar.leave = False
                r.read()
                raise _refusal(r, url)
            _check_media(r, url, "application/x-ndjson")
            total = int(r.headers.get("x-pages-total", "0")) or None
            bar.total = total
            bar.bar_format = None if total is not None else BAR_UNCOUNTED  # None: tqdm's "2/5 [..., 0.7 page/s]"
            bar.refresh()
            for line in r.iter_lines():
                if not line.strip():
                    continue
                item = json.loads(line)
                if "page" in item:
                    pages.append(PageResult.from_dict(item["page"]))
                    bar.update(1)
                elif "summary" in item:
                    summary = item["summary"]
                elif "error" in item:  # the gateway's stack failed mid-stream: say what happened
                    err = item["error"] if isinstance(item["error"], dict) else {"message": str(item["error"])}
                    raise RuntimeError(f"the gateway stopped after {len(pages)} page(s): "
                                       f"{err.get('reason') or err.get('code', 'ERROR')}: {err.get('message', '')}")
        except httpx.RemoteProtocolError as exc:
            raise RuntimeError(f"the gateway's answer broke off after {len(pages)} page(s): {exc}") from None
        finally:
            r.close()
    if summary is None:
        raise RuntimeError("the gateway closed the stream before the summary line (incomplete result)")
    return pages, summary


def fetch_document(url: str, path: pathlib.Path, options: dict[str, str], out: pathlib.Path, *,
                   api_key: str = "", timeout_s: float = 3600.0) -> None:
    """POST ``path`` to ``url``/v1/ocr and stream the answer (a binary document: format=pdf) into
    ``out``. Raises GatewayRefused for a gateway's non-200 answer, NotAGateway for an answer that is not
    a gateway's (see :func:`stream_pages`), httpx.HTTPError when unreachable.
    """
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    with open(path, "rb") as f, httpx.Client(timeout=httpx.Timeout(timeout_s, connect=10.0)) as client:
        files = {"file": (path.name, f, "application/octet-stream")}
        with client.stream("POST", url.rstrip("/") + "/v1/ocr", files=files, data=options, headers=headers) as r:
            if r.status_code != 200:
                r.read()
                raise _refusal(r, url)
            _check_media(r, url, "application/pdf")
            with open(out, "wb") as sink:
                for chunk in r.iter_bytes():
                    sink.write(chunk)


def format_for(output: str | None) -> str:
    """The output format an ``-o`` file name asks for by its extension (markdown when it says none)."""
    suffix = pathlib.Path(output).suffix.lower() if output else ""
    return _FORMAT_OF_SUFFIX.get(suffix, "markdown")


_FORMAT_OF_SUFFIX = {".pdf": "pdf", ".hocr": "hocr", ".html": "hocr", ".xhtml": "hocr", ".json": "json",
                     ".txt": "text", ".text": "text", ".md": "markdown", ".markdown": "markdown"}


def unknown_suffix_note(output: str) -> str | None:
    """The stderr line for an ``-o`` whose extension names no output format (``out.docx``: markdown
    is written, which the name does not say), or None (a known extension, or none at all).
    """
    suffix = pathlib.Path(output).suffix.lower()
    if not suffix or suffix in _FORMAT_OF_SUFFIX:
        return None
    return (f"inkstream ocr: -o {output}: {suffix!r} is no output format's extension (.md .txt .json .hocr .pdf); "
            "writing markdown (--format picks another)")


def _http_failure(url: str, exc: httpx.HTTPError, timeout_s: float) -> str:
    """What went wrong talking to the gateway at ``url``, in words (the URL it tried included)."""
    if isinstance(exc, httpx.ConnectTimeout):
        return f"cannot reach the gateway at {url}: no answer to the connection within 10 s"
    if isinstance(exc, httpx.ConnectError):
        text = str(exc).lower()
        if "refused" in text:
            why = "connection refused (is the gateway running there? 'inkstream up' prints its URL)"
        elif "name or service not known" in text or "nodename nor servname" in text or "getaddrinfo" in text:
            why = "unknown host name"
        else:
            why = f"cannot connect ({exc})"
        return f"cannot reach the gateway at {url}: {why}"
    if isinstance(exc, httpx.TimeoutException):
        return f"the gateway at {url} did not finish the document within {timeout_s:g} s (--timeout)"
    return f"the request to the gateway at {url} failed: {exc}"


def nothing_read(pages: list[PageResult], summary: dict[str, Any]) -> GatewayRefused | None:
    """The error of an answer whose every page failed (None when a page was read): the summary's
    ``error`` (what the whole-document answer and a job of the document say), else the same built from
    the pages (a gateway from before the summary had it); its ``status`` is that answer's HTTP status.
    """
    err = summary.get("error")
    if isinstance(err, dict) and err.get("code"):
        exc = error_for_code(str(err["code"]), str(err.get("message", "")), reason=str(err.get("reason", "")))
        reason = str(err.get("reason") or err["code"])
    elif (built := every_page_failed(pages)) is not None:
        exc, reason = built, built.reason_name
    else:
        return None
    return GatewayRefused(f"{reason}: {exc.message}", exc.http_status)


def _unwritable(out: pathlib.Path) -> str:
    """Why the document cannot be written to ``out`` ("" when it can, as far as can be told before)."""
    folder = out.parent
    if out.is_dir():
        return "is a directory; give a file name"
    if not folder.is_dir():
        return f"no such folder {folder}" if not folder.exists() else f"{folder} is not a folder"
    if not os.access(folder, os.W_OK) or (out.exists() and not os.access(out, os.W_OK)):
        return "not writable"
    return ""


@contextlib.contextmanager
def _gateway(url: str | None, model: str | None, timeout_s: float = 3600.0) -> Iterator[str]:
    """``url``, or the URL of a temporary local stack of ``model`` for the duration. That stack's
    gateway gives a synchronous request as long as this command waits (``timeout_s``, ``--timeout``),
    unless ``INKSTREAM_GATEWAY__REQUEST_TIMEOUT_S`` is set: a fresh stack otherwise refuses a long
    document at once when its encoder's warm-up rate says it cannot be read in the gateway's default
    600 s (``gateway.routing.deadline_fit``), though nothing else is waiting for this stack.
    """
    if url:
        yield url
        return
    from launcher.local_stack import LocalStack  # lazy: launcher code only without --gateway

    print("inkstream ocr: starting a temporary local stack (encoder, decoder, gateway) ...",
          file=sys.stderr, flush=True)
    key = "INKSTREAM_GATEWAY__REQUEST_TIMEOUT_S"
    env = {} if key in os.environ else {key: f"{timeout_s:g}"}
    with LocalStack(model, env=env) as stack:
        yield stack.gateway_url


def main(argv: list[str]) -> int:
    """Entry point of ``inkstream ocr``; returns the exit code (see the module docstring)."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    if args.gateway and not args.gateway.lower().startswith(("http://", "https://")):
        print(f"inkstream ocr: --gateway {args.gateway!r}: give the gateway's REST URL with its scheme, "
              "e.g. http://127.0.0.1:8080", file=sys.stderr)
        return 2
    path = pathlib.Path(args.file)
    if not path.is_file():
        what = "is a directory, not a document: give one file" if path.is_dir() else "no such file"
        print(f"inkstream ocr: {path}: {what}", file=sys.stderr)
        return 2
    if args.output and (why := _unwritable(pathlib.Path(args.output))):
        print(f"inkstream ocr: -o {args.output}: {why}", file=sys.stderr)  # refused before the pages are read
        return 2
    if not args.gateway:
        # no stack reads it: refused now, not after a temporary stack started (tens of seconds)
        try:
            with path.open("rb") as f:
                detect_type(f.read(SNIFF_BYTES))
        except InvalidInput as exc:
            print(f"inkstream ocr: {exc.reason_name}: {exc}", file=sys.stderr)
            return 2
        if args.model is not None:
            from launcher.model_dir import check_model_dir  # lazy: launcher code only without --gateway

            try:
                check_model_dir(args.model)
            except FileNotFoundError as exc:
                print(f"inkstream ocr: {exc}", file=sys.stderr)
                return 2
    fmt = args.format or format_for(args.output)
    note = None if args.format or not args.output else unknown_suffix_note(args.output)
    if note:
        print(note, file=sys.stderr)
    if fmt == "pdf" and not args.output:
        print("inkstream ocr: format pdf is a binary document: give the output file with -o OUT.pdf", file=sys.stderr)
        return 2
    # A searchable PDF is fetched after the page stream (which shows progress and page errors); the
    # second request is answered from the gateway's result cache, so the pages are read once.
    options = {"format": "json" if fmt == "pdf" else fmt, "pages": args.pages, "mode": args.mode,
               "task": args.task, "password": args.password}
    url = args.gateway or "the temporary local stack"
    try:
        with _gateway(args.gateway, args.model, args.timeout) as url:
            pages, summary = stream_pages(url, path, options, api_key=args.api_key, timeout_s=args.timeout,
                                          progress=not args.no_progress)
            if fmt == "pdf":
                fetch_document(url, path, {**options, "format": "pdf"}, pathlib.Path(args.output),
                               api_key=args.api_key, timeout_s=args.timeout)
    except (RuntimeError, FileNotFoundError) as exc:
        print(f"inkstream ocr: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, GatewayRefused) and exc.bad_request else 1
    except httpx.HTTPError as exc:
        print(f"inkstream ocr: {_http_failure(url, exc, args.timeout)}", file=sys.stderr)
        return 1
    if (none_read := nothing_read(pages, summary)) is not None:  # no document of error placeholders
        print(f"inkstream ocr: {none_read}", file=sys.stderr)
        return 2 if none_read.bad_request else 1
    if fmt == "pdf":
        document = ""
    elif fmt == "json":
        document = json.dumps(document_json(pages, summary.get("model_id", ""), summary.get("seconds"),
                                            summary.get("cached")), ensure_ascii=False, indent=1) + "\n"
    else:
        document = summary.get("document", "")
    if fmt == "pdf":
        pass  # written by fetch_document
    elif args.output:
        pathlib.Path(args.output).write_text(document, encoding="utf-8")
    else:
        sys.stdout.write(document)
        sys.stdout.flush()
    failed = [p for p in pages if p.status != "ok"]
    for p in failed:
        assert p.error is not None
        print(f"inkstream ocr: page {p.index}: {p.error.code}: {p.error.detail(p.index)}", file=sys.stderr)
    warned = [p for p in pages if p.status == "ok" and p.warnings]
    for p in warned:
        print(f"inkstream ocr: page {p.index}: {warnings_note(p)}", file=sys.stderr)
    cached = " (cached)" if summary.get("cached") else ""
    with_warnings = f", {len(warned)} with warnings" if warned else ""
    print(f"inkstream ocr: {len(pages) - len(failed)}/{len(pages)} pages read{with_warnings} in "
          f"{summary.get('seconds', 0):.1f} s ({summary.get('model_id', '')}){cached}", file=sys.stderr)
    return 3 if failed else 0
