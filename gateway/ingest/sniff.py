r"""Document type detection by magic bytes (never by file name or declared content type):
:func:`inkstream.doc_types.detect_type`, re-exported here with the kinds and their media types.

Signatures from the format specifications: PDF 1.7 (ISO 32000-1 §7.5.2; readers accept the
``%PDF-`` header anywhere in the first 1,024 bytes), PNG (RFC 2083 §3.1), JPEG/JFIF (SOI marker
``FF D8`` + next marker ``FF``), TIFF 6.0 (``II*\0`` / ``MM\0*``; BigTIFF ``II+\0`` / ``MM\0+``),
GIF87a/89a, WebP (RIFF container with ``WEBP`` form type), BMP (``BM``), JPEG 2000 (ISO/IEC 15444-1:
the JP2 signature box ``00 00 00 0C 6A 50 20 20 0D 0A 87 0A``, Annex I.5.1, or a bare J2K codestream
starting with the SOC and SIZ markers ``FF 4F FF 51``, Annex A.4).
"""

from __future__ import annotations

from inkstream.doc_types import DOC_TYPES, SNIFF_BYTES, detect_type

__all__ = ["KINDS", "MEDIA_TYPES", "SNIFF_BYTES", "detect_type"]

KINDS = tuple(t.kind for t in DOC_TYPES)
MEDIA_TYPES = {t.kind: t.media_type for t in DOC_TYPES}
