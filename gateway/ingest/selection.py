"""Page selection strings: 1-based, comma-separated numbers and ranges, e.g. ``"1-5,9"`` or ``"3-"``."""

from __future__ import annotations

import re

from inkstream.errors import InvalidInput, PayloadTooLarge

_PART = re.compile(r"^\s*(\d+)\s*(?:(-)\s*(\d*)\s*)?$")


_MAX_DIGITS = 12  #: a page number longer than this is refused as such (int() of 5000 digits raises)


def _ranges(spec: str, page_count: int | None) -> list[tuple[int, int]]:
    """The (first, last) 1-based inclusive ranges of ``spec`` (not "" / "all"), checked: InvalidInput for
    a malformed part, page 0, a reversed range and, with ``page_count``, a page past it (``"A-"`` ends
    at ``page_count``; without it, at ``A``). Never builds the pages, so a range's size costs nothing.
    """
    out: list[tuple[int, int]] = []
    for part in spec.split(","):
        m = _PART.match(part)
        if m and max(len(m.group(1)), len(m.group(3) or "")) > _MAX_DIGITS:
            raise InvalidInput(f"invalid page selection {spec[:100]!r}: {part.strip()[:40]!r} names a page number "
                               f"of more than {_MAX_DIGITS} digits; no document has that many pages")
        if not m:
            raise InvalidInput(
                f"invalid page selection {spec[:100]!r}: {part.strip()[:40]!r} is not a page number or range "
                "(use e.g. \"1-5,9\" or \"3-\"; pages are numbered from 1)"
            )
        first = int(m.group(1))
        open_end = first if page_count is None else page_count
        last = first if not m.group(2) else (int(m.group(3)) if m.group(3) else max(open_end, first))
        if first < 1:
            raise InvalidInput(f"invalid page selection {spec[:100]!r}: pages are numbered from 1")
        if last < first:
            raise InvalidInput(f"invalid page selection {spec[:100]!r}: range {first}-{last} is reversed")
        if page_count is not None and (first > page_count or last > page_count):
            raise InvalidInput(
                f"invalid page selection {spec[:100]!r}: page {max(first, last)} does not exist; "
                f"the document has {page_count} page{'s' if page_count != 1 else ''}"
            )
        out.append((first, last))
    return out


def parse_pages(spec: str, page_count: int, max_pages: int | None = None) -> list[int]:
    """0-based page indices selected by ``spec`` in document order, each once.

    ``spec``: "" or "all" = every page; ``"N"``, ``"A-B"`` (inclusive), ``"A-"`` (to the end),
    joined by commas. Raises InvalidInput (400) for malformed parts (a number of more than 12
    digits included), page 0, reversed ranges and pages past ``page_count``; PayloadTooLarge (413)
    when more than ``max_pages`` are selected. Memory: O(selected pages), at most ``page_count``.
    """
    spec = (spec or "").strip()
    if spec.lower() in ("", "all"):
        chosen: range | list[int] = range(page_count)
    else:
        wanted: set[int] = set()
        for first, last in _ranges(spec, page_count):
            wanted.update(range(first - 1, last))
        chosen = sorted(wanted)
    out = list(chosen)
    if max_pages is not None and len(out) > max_pages:
        raise PayloadTooLarge(
            f"{len(out)} pages selected; at most {max_pages} pages per document are accepted "
            "(select fewer with the pages option or split the document)"
        )
    return out


def check_selection(spec: str) -> None:
    """Raise InvalidInput (400) when ``spec`` is malformed whatever the document (a part that is not a
    page or range, page 0, a reversed range); pages past the end are found only once the document is
    opened (:func:`parse_pages`). Builds no page list: ``"1-99999999999"`` costs what ``"1-2"`` does.
    """
    spec = (spec or "").strip()
    if spec.lower() not in ("", "all"):
        _ranges(spec, None)
