"""The document types the gateway accepts, in one place: the sniffer (``gateway/ingest/sniff.py``),
its 415 message, ``inkstream ocr --help`` and the OpenAPI text all derive from :data:`DOC_TYPES`.

Each entry: ``kind`` (the sniffer's name), ``label`` (what people call it), ``media_type`` (IANA),
the usual file extensions and a ``note`` (variants read).
Types are recognised by magic bytes, never by name or declared type.
"""

from __future__ import annotations

from typing import NamedTuple


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
