"""``inkstream ocr FILE [--gateway URL] [--format markdown|text|json] [-o OUT] [--pages 1-5,9]
[--mode M] [--task T] [--password P] [--model DIR] [--api-key K]``.

Sends FILE to a running gateway's REST API (``POST /v1/ocr`` with ``Accept: application/x-ndjson``)
and shows a per-page progress bar (tqdm, on stderr; the total comes from the ``X-Pages-Total``
response header) while the page lines stream in. Without ``--gateway`` a temporary local stack
(:class:`launcher.local_stack.LocalStack`: encoder + decoder + gateway on loopback) runs for the
duration. The document goes to ``-o OUT`` or stdout.

Exit codes: 0 every page read; 3 the document came back but some pages carry errors (listed on
stderr); 1 the request failed (the gateway's message on stderr: unreachable, overloaded, 5xx) or
the stack did not start; 2 bad command line, unreadable FILE, or the gateway refused the request's
document or options (HTTP 4xx other than 408 / 429, e.g. ``--pages 5`` of a 1-page file).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import sys
from typing import Any, Iterator

import httpx

from client.results import FORMATS, PageResult, document_json


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="inkstream ocr",
        description="OCR a document through a running gateway (--gateway URL), or through a temporary local "
        "stack started for the duration. Exit codes: 0 all pages read, 3 some pages failed, 1 request failed, "
        "2 bad arguments.")
    p.add_argument("file", help="PDF, PNG, JPEG, TIFF, WebP, BMP or GIF")
    p.add_argument("--gateway", metavar="URL", help="gateway REST URL, e.g. http://127.0.0.1:8080 "
                   "(default: start a temporary local stack)")
    p.add_argument("--format", choices=FORMATS, default="markdown", help="output format (default markdown)")
    p.add_argument("-o", "--output", metavar="OUT", help="write the document here (default stdout)")
    p.add_argument("--pages", default="", help='1-based page selection, e.g. "1-5,9" (default all)')
    p.add_argument("--mode", default="", help="encoder resolution mode (default: the encoder's default)")
    p.add_argument("--task", default="", help="what the model is asked to do: ocr (free OCR; the only task of the embedded compact model) or markdown (deepseek_ocr2: layout with boxes); default: the model's")
    p.add_argument("--password", default="", help="PDF password")
    p.add_argument("--model", metavar="DIR", help="checkpoint for the temporary local stack (default: embedded)")
    p.add_argument("--api-key", default=os.environ.get("INKSTREAM_API_KEY", ""),
                   help="API key for the gateway (default env INKSTREAM_API_KEY)")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait for the whole document")
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


def _error_message(r: httpx.Response) -> str:
    try:
        err = r.json()["error"]
        return f"{err['code']}: {err['message']}"
    except (ValueError, KeyError, TypeError):
        return f"HTTP {r.status_code}: {r.text[:300]}"


def stream_pages(url: str, path: pathlib.Path, options: dict[str, str], *, api_key: str = "",
                 timeout_s: float = 3600.0, progress: bool = True) -> tuple[list[PageResult], dict[str, Any]]:
    """POST ``path`` to ``url``/v1/ocr as NDJSON; returns (pages in order, summary dict).

    Raises GatewayRefused (a RuntimeError) with the gateway's error message for a non-200 answer,
    RuntimeError for an answer that is not HTTP (a gRPC port, say) or a stream broken off,
    httpx.HTTPError when the gateway cannot be reached.
    """
    from tqdm import tqdm

    headers = {"Accept": "application/x-ndjson"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    pages: list[PageResult] = []
    summary: dict[str, Any] | None = None
    timeout = httpx.Timeout(timeout_s, connect=10.0)
    with open(path, "rb") as f, httpx.Client(timeout=timeout) as client:
        files = {"file": (path.name, f, "application/octet-stream")}
        request = client.build_request("POST", url.rstrip("/") + "/v1/ocr", files=files, data=options, headers=headers)
        try:
            r = client.send(request, stream=True)
        except httpx.RemoteProtocolError as exc:  # no HTTP status line came back
            raise RuntimeError(f"{url} did not answer HTTP ({exc}); is it the gateway's gRPC port? "
                               "Give its REST URL, e.g. http://127.0.0.1:8080") from None
        try:
            if r.status_code != 200:
                r.read()
                raise GatewayRefused(_error_message(r), r.status_code)
            total = int(r.headers.get("x-pages-total", "0")) or None
            with tqdm(total=total, unit="page", file=sys.stderr, disable=not progress, desc=path.name) as bar:
                for line in r.iter_lines():
                    if not line.strip():
                        continue
                    item = json.loads(line)
                    if "page" in item:
                        pages.append(PageResult.from_dict(item["page"]))
                        bar.update(1)
                    elif "summary" in item:
                        summary = item["summary"]
        except httpx.RemoteProtocolError as exc:
            raise RuntimeError(f"the gateway's answer broke off after {len(pages)} page(s): {exc}") from None
        finally:
            r.close()
    if summary is None:
        raise RuntimeError("the gateway closed the stream before the summary line (incomplete result)")
    return pages, summary


@contextlib.contextmanager
def _gateway(url: str | None, model: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    from launcher.local_stack import LocalStack

    print("inkstream ocr: starting a temporary local stack (encoder, decoder, gateway) ...",
          file=sys.stderr, flush=True)
    with LocalStack(model) as stack:
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
        print(f"inkstream ocr: {path}: no such file", file=sys.stderr)
        return 2
    options = {"format": args.format, "pages": args.pages, "mode": args.mode, "task": args.task,
               "password": args.password}
    try:
        with _gateway(args.gateway, args.model) as url:
            pages, summary = stream_pages(url, path, options, api_key=args.api_key, timeout_s=args.timeout,
                                          progress=not args.no_progress)
    except (RuntimeError, FileNotFoundError) as exc:
        print(f"inkstream ocr: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, GatewayRefused) and exc.bad_request else 1
    except httpx.HTTPError as exc:
        print(f"inkstream ocr: cannot reach the gateway: {exc}", file=sys.stderr)
        return 1
    if args.format == "json":
        document = json.dumps(document_json(pages, summary.get("model_id", ""), summary.get("seconds")),
                              ensure_ascii=False, indent=1) + "\n"
    else:
        document = summary.get("document", "")
    if args.output:
        pathlib.Path(args.output).write_text(document, encoding="utf-8")
    else:
        sys.stdout.write(document)
        sys.stdout.flush()
    failed = [p for p in pages if p.status != "ok"]
    for p in failed:
        assert p.error is not None
        print(f"inkstream ocr: page {p.index}: {p.error.code}: {p.error.message}", file=sys.stderr)
    print(f"inkstream ocr: {len(pages) - len(failed)}/{len(pages)} pages read in {summary.get('seconds', 0):.1f} s "
          f"({summary.get('model_id', '')})", file=sys.stderr)
    return 3 if failed else 0
