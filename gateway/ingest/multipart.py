"""Streaming ``multipart/form-data`` parsing (RFC 7578) for uploads: the ``file`` part goes straight
into an :class:`UploadSink` (temp file, running byte count), the other parts are small text fields.

Built on python-multipart's push parser (``python_multipart.MultipartParser``), which sees the body
chunk by chunk, so nothing is buffered beyond one chunk and a 413 is raised as soon as the file part
passes the limit.
"""

from __future__ import annotations

import logging

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header

from gateway.ingest.upload import UploadSink
from inkstream.doc_types import DOC_TYPES, detect_type
from inkstream.errors import InkstreamError, InvalidInput, PayloadTooLarge

log = logging.getLogger("inkstream.gateway.ingest")

FILE_FIELD = "file"


def given_twice(name: str, first: str, second: str, what: str) -> str:
    """The message for an option ``name`` given twice with different values (``what``: "form field"
    or "query parameter"): refused, since taking either one would silently drop the other.
    """
    return f"option {name!r} given twice as a {what} with different values ({first!r}, {second!r}); give it once"


def unknown_option(name: str, known: tuple[str, ...], what: str) -> str:
    """The message for an unexpected option ``name`` (``what``: "form field" or "query parameter");
    a name over :data:`NAME_SHOWN` characters is cut there, so the message never carries a body's bytes.
    """
    shown = name if len(name) <= NAME_SHOWN else name[:NAME_SHOWN] + "..."
    return (f"unknown {what} {shown!r}: send the document as the multipart field '{FILE_FIELD}' "
            f"(or as the raw body), and options among: {', '.join(known)}")


#: characters of an unknown option's name that its message repeats.
NAME_SHOWN = 40


def document_sent_as_form(head: bytes) -> str | None:
    """The message for a document sent as ``application/x-www-form-urlencoded`` (``curl --data-binary
    @scan.pdf URL`` without a ``Content-Type`` header sends that), or None when ``head`` (the body's
    first :data:`inkstream.doc_types.SNIFF_BYTES` bytes) is no document type's start.
    """
    try:
        kind = detect_type(head)
    except InkstreamError:
        return None
    label = next(t.label for t in DOC_TYPES if t.kind == kind)
    return (f"the body is a {label} document sent as form data (Content-Type: application/x-www-form-urlencoded, "
            "what curl --data-binary sends unless told otherwise); send it as the raw body with "
            f"Content-Type: application/octet-stream, or as the multipart field '{FILE_FIELD}'")


class MultipartUpload:
    """Feed body chunks with :meth:`write`, then :meth:`close`. Afterwards ``fields`` holds the text
    fields (str) and ``sink`` the finished file part (None when the body had no ``file`` part).

    Raises InvalidInput (400) for a malformed body, a second file part, a field not in
    ``known_fields`` (when given; a misnamed file field or a misspelt option would otherwise be
    ignored) or an oversized text field (over ``max_field_bytes``); PayloadTooLarge (413) from the sink.
    """

    def __init__(self, content_type: str, sink: UploadSink, max_field_bytes: int = 16 * 1024,
                 known_fields: tuple[str, ...] | None = None):
        _, params = parse_options_header(content_type)
        boundary = params.get(b"boundary")
        if not boundary:
            raise InvalidInput("multipart/form-data body without a boundary parameter")
        self.sink = sink
        self.fields: dict[str, str] = {}
        self.has_file = False
        self._max_field = max_field_bytes
        self._known = known_fields
        self._header_name = b""
        self._header_value = b""
        self._headers: dict[bytes, bytes] = {}
        self._name = ""
        self._is_file = False
        self._buf = bytearray()
        self._done = False
        self._parser = MultipartParser(boundary, {
            "on_part_begin": self._part_begin,
            "on_header_field": lambda d, s, e: self._add("_header_name", d[s:e]),
            "on_header_value": lambda d, s, e: self._add("_header_value", d[s:e]),
            "on_header_end": self._header_end,
            "on_headers_finished": self._headers_finished,
            "on_part_data": self._part_data,
            "on_part_end": self._part_end,
            "on_end": self._end,
        }, max_header_count=16)

    def _add(self, attr: str, data: bytes) -> None:
        setattr(self, attr, getattr(self, attr) + data)

    def _part_begin(self) -> None:
        self._headers, self._buf = {}, bytearray()
        self._name, self._is_file = "", False

    def _header_end(self) -> None:
        self._headers[self._header_name.strip().lower()] = self._header_value.strip()
        self._header_name = self._header_value = b""

    def _headers_finished(self) -> None:
        disp, params = parse_options_header(self._headers.get(b"content-disposition", b""))
        if disp != b"form-data" or b"name" not in params:
            raise InvalidInput("a multipart part lacks 'Content-Disposition: form-data; name=...'")
        self._name = params[b"name"].decode("utf-8", "replace")
        if self._known is not None and self._name != FILE_FIELD and self._name not in self._known:
            raise InvalidInput(unknown_option(self._name, self._known, "form field"))
        if self._name == FILE_FIELD:
            if self.has_file:
                raise InvalidInput("send exactly one 'file' part per request")
            self.has_file = self._is_file = True

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        if self._is_file:
            self.sink.write(data[start:end])
            return
        self._buf += data[start:end]
        if len(self._buf) > self._max_field:
            raise InvalidInput(f"form field {self._name!r} is longer than {self._max_field} bytes")

    def _part_end(self) -> None:
        if not self._is_file:
            value = self._buf.decode("utf-8", "replace")
            if self.fields.get(self._name, value) != value:
                raise InvalidInput(given_twice(self._name, self.fields[self._name], value, "form field"))
            self.fields[self._name] = value

    def _end(self) -> None:
        self._done = True

    def write(self, chunk: bytes) -> None:
        """Parse the next body bytes."""
        try:
            self._parser.write(chunk)
        except MultipartParseError as exc:
            log.info("malformed multipart body: %s", exc)  # the parser's own words: for the log only
            raise InvalidInput("malformed multipart/form-data body: its parts do not follow the boundary given in "
                               "Content-Type; send the document as the part 'file' (curl -F file=@doc.pdf) or as "
                               "the raw body (Content-Type: application/octet-stream)") from None
        except PayloadTooLarge:
            raise

    def close(self) -> None:
        """Finish parsing; raises InvalidInput for a body cut short. A body without a file part is the
        caller's to judge (:attr:`has_file`): ``source=s3://...`` may name the document instead, as a
        field or as a query parameter.
        """
        if not self._done:
            raise InvalidInput("the multipart/form-data body ended before its closing boundary")
