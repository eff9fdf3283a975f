"""A document whose every page failed, as one error: the answer of a job (:mod:`gateway.jobs.run`) and
of a synchronous whole-document request (``POST /v1/ocr``, :mod:`gateway.apis.rest_ocr`) alike, so the
same document gets the same status and reason by either route (a document of pages too small to read:
422 NOTHING_TO_READ, as one such image; every page's replica down: 503 UNAVAILABLE). The streams'
summaries (NDJSON, gRPC ``Summary.error``) carry it as :func:`error_body`, and the command line
(:mod:`client.ocr_cli`) reports it, so every route says the same of the same pages.
"""

from __future__ import annotations

from inkstream.errors import InkstreamError, error_for_code
from inkstream.page_result import PageError, PageResult

MAX_REASONS = 10  #: distinct page errors the message lists (then how many more)


def every_page_failed(pages: list[PageResult]) -> InkstreamError | None:
    """The error of a document whose every page in ``pages`` is an error, None when a page was read
    (or there are none): the code and finer reason most pages have (the first page's on a tie), so
    the same cause answers the same status as a one-page document's (pages of a TIFF all too small:
    422 NOTHING_TO_READ, as one such image), and a message giving each page's reason, pages with the
    same reason together ("pages 1-2, 5: UNAVAILABLE: no decoder replica answered"; each page's own
    number left out of its reason, :meth:`PageError.detail`), at most :data:`MAX_REASONS` reasons then
    how many more.
    """
    if not pages or any(p.status != "error" for p in pages):
        return None
    groups: dict[tuple[str, str, str], list[int]] = {}
    for p in sorted(pages, key=lambda p: p.index):
        err = p.error or PageError("INTERNAL", "the page failed without a reason")
        groups.setdefault((err.code, err.reason, err.detail(p.index)), []).append(p.index)
    codes: dict[str, int] = {}
    finer: dict[tuple[str, str], int] = {}
    for (c, r, _), indices in groups.items():
        codes[c] = codes.get(c, 0) + len(indices)
        finer[c, r] = finer.get((c, r), 0) + len(indices)
    code = max(codes, key=lambda c: codes[c])  # dicts keep order: the first page's code wins a tie
    reason = max((r for c, r in finer if c == code), key=lambda r: finer[code, r])  # then the reason, likewise
    reasons = [f"{page_list(indices)}: {c}: {m}" for (c, _, m), indices in groups.items()]
    more = f"; and {len(reasons) - MAX_REASONS} more" if len(reasons) > MAX_REASONS else ""
    return error_for_code(code, f"no page could be read ({len(pages)} of {len(pages)} failed): "
                          + "; ".join(reasons[:MAX_REASONS]) + more, reason=reason)


def error_body(pages: list[PageResult]) -> dict[str, str] | None:
    """``{"code", "reason", "message"}`` of :func:`every_page_failed` (a job's ``error``, the REST error
    body's fields), None when a page was read or there are none.
    """
    err = every_page_failed(pages)
    return None if err is None else {"code": err.code_name, "reason": err.reason_name, "message": err.message}


def page_list(indices: list[int]) -> str:
    """``page 3`` / ``pages 1-2, 5`` for sorted 1-based page numbers."""
    runs: list[list[int]] = []
    for i in indices:
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    text = ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)
    return f"page {text}" if len(indices) == 1 else f"pages {text}"
