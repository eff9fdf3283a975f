r"""Document type detection by magic bytes (never by file name or declared content type).

Signatures from the format specifications: PDF 1.7 (ISO 32000-1 §7.5.2; readers accept the
``%PDF-`` header anywhere in the first 1,024 bytes), PNG (RFC 2083 §3.1), JPEG/JFIF (SOI marker
``FF D8`` + next marker ``FF``), TIFF 6.0 (``II*\0`` / ``MM\0*``; BigTIFF ``II+\0`` / ``MM\0+``),
GIF87a/89a, WebP (RIFF container with ``WEBP`` form type), BMP (``BM``), JPEG 2000 (ISO/IEC 15444-1:
the JP2 signature box ``00 00 00 0C 6A 50 20 20 0D 0A 87 0A``, Annex I.5.1, or a bare J2K codestream
starting with the SOC and SIZ markers ``FF 4F FF 51``, Annex A.4).
"""

from __future__ import annotations

from inkstream.doc_types import DOC_TYPES, accepted_list
from inkstream.errors import InvalidInput, UnsupportedMediaType

#: bytes a caller should pass to :func:`detect_type` (PDF header search window).
SNIFF_BYTES = 1024

KINDS = tuple(t.kind for t in DOC_TYPES)
_JP2_SIGNATURE = b"\x00\x00\x00\x0cjP  \r\n\x87\n"
_J2K_CODESTREAM = b"\xff\x4f\xff\x51"

MEDIA_TYPES = {t.kind: t.media_type for t in DOC_TYPES}


def detect_type(head: bytes) -> str:
    """Kind of document whose first bytes are ``head`` (at least :data:`SNIFF_BYTES` when available).

    Returns one of :data:`KINDS`. Raises InvalidInput (400) for an empty upload and
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
