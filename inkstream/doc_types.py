"""The document types the gateway accepts, in one place: the sniffer (:func:`detect_type`, by magic
bytes, used by ``gateway/ingest/sniff.py`` and by ``inkstream ocr`` before it starts a temporary stack),
its 415 message, ``inkstream ocr --help`` and the OpenAPI text all derive from :data:`DOC_TYPES`.

Each entry: ``kind`` (the sniffer's name), ``label`` (what people call it), ``media_type`` (IANA),
the usual file extensions and a ``note`` (variants read).
Types are recognised by magic bytes, never by name or declared type.
"""

from __future__ import annotations

from typing import NamedTuple

from inkstream.errors import InvalidInput, UnsupportedMediaType


class DocType(NamedTuple):
    """One accepted document type (see the module docstring)."""

    kind: str
    label: str
    media_type: str
    extensions: tuple[str, ...]
    note: str = ""


DOC_TYPES: tuple[DocType, ...] = (
    DocType("pdf", "PDF", "application/pdf", (".pdf",), "every page; password with --password"),
    DocType("png", "PNG", "image/png", (".png",)),
    DocType("jpeg", "JPEG", "image/jpeg", (".jpg", ".jpeg")),
    DocType("jp2", "JPEG 2000", "image/jp2", (".jp2", ".j2k", ".jpf", ".jpx"), "JP2 container or bare codestream"),
    DocType("tiff", "TIFF", "image/tiff", (".tif", ".tiff"), "multi-page; LZW, ZIP, JPEG, CCITT G3/G4"),
    DocType("webp", "WebP", "image/webp", (".webp",)),
    DocType("bmp", "BMP", "image/bmp", (".bmp",)),
    DocType("gif", "GIF", "image/gif", (".gif",)),
)


def accepted_list(with_extensions: bool = False) -> str:
    """``"PDF, PNG, JPEG, ..."`` (the labels in :data:`DOC_TYPES` order); with ``with_extensions``
    each followed by its extensions, e.g. ``"JPEG 2000 (.jp2 .j2k .jpf .jpx)"``.
    """
    if with_extensions:
        return ", ".join(f"{t.label} ({' '.join(t.extensions)})" for t in DOC_TYPES)
    return ", ".join(t.label for t in DOC_TYPES)


#: bytes a caller should pass to :func:`detect_type` (PDF header search window).
SNIFF_BYTES = 1024
_JP2_SIGNATURE = b"\x00\x00\x00\x0cjP  \r\n\x87\n"
_J2K_CODESTREAM = b"\xff\x4f\xff\x51"


def detect_type(head: bytes) -> str:
    """Kind of document whose first bytes are ``head`` (at least :data:`SNIFF_BYTES` when available).

    Returns the ``kind`` of one of :data:`DOC_TYPES`. Raises InvalidInput (400) for an empty upload and
    UnsupportedMediaType (415) for anything else, naming the accepted types.
    """
    if not head:
        raise InvalidInput("the upload is empty (0 bytes); send a PDF or an image file")
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if head.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if head[:4] in (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+"):
        return "tiff"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "webp"
    if head[:2] == b"BM" and len(head) >= 26:
        return "bmp"
    if head.startswith((_JP2_SIGNATURE, _J2K_CODESTREAM)):
        return "jp2"
    if b"%PDF-" in head[:SNIFF_BYTES]:
        return "pdf"
    raise UnsupportedMediaType(
        f"unsupported file type (not recognised from its first bytes); accepted: {accepted_list()}"
    )
