"""Page selection strings: 1-based, comma-separated numbers and ranges, e.g. ``"1-5,9"`` or ``"3-"``."""

from __future__ import annotations

import re

from inkstream.errors import InvalidInput, PayloadTooLarge

_PART = re.compile(r"^\s*(\d+)\s*(?:(-)\s*(\d*)\s*)?$")


def parse_pages(spec: str, page_count: int, max_pages: int | None = None) -> list[int]:
    """0-based page indices selected by ``spec`` in document order, each once.

    ``spec``: "" or "all" = every page; ``"N"``, ``"A-B"`` (inclusive), ``"A-"`` (to the end),
    joined by commas. Raises InvalidInput (400) for malformed parts, page 0, reversed ranges and
    pages past ``page_count``; PayloadTooLarge (413) when more than ``max_pages`` are selected.
    """
    spec = (spec or "").strip()
    if spec.lower() in ("", "all"):
        chosen: range | list[int] = range(page_count)
    else:
        wanted: set[int] = set()
        for part in spec.split(","):
            m = _PART.match(part)
            if not m:
                raise InvalidInput(
                    f"invalid page selection {spec!r}: {part.strip()!r} is not a page number or range "
                    "(use e.g. \"1-5,9\" or \"3-\"; pages are numbered from 1)"
                )
            first = int(m.group(1))
            last = first if not m.group(2) else (int(m.group(3)) if m.group(3) else page_count)
            if first < 1:
                raise InvalidInput(f"invalid page selection {spec!r}: pages are numbered from 1")
            if last < first:
                raise InvalidInput(f"invalid page selection {spec!r}: range {first}-{last} is reversed")
            if first > page_count or last > page_count:
                raise InvalidInput(
                    f"invalid page selection {spec!r}: page {max(first, last)} does not exist; "
                    f"the document has {page_count} page{'s' if page_count != 1 else ''}"
                )
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
    opened (:func:`parse_pages`).
    """
    numbers = [int(n) for n in re.findall(r"\d+", spec or "")]
    parse_pages(spec, max(numbers, default=1))
