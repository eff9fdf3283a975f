"""Gateway ingest: upload streaming, type detection, limits, PDF rasterisation and image
normalisation, page selection. See :mod:`gateway.ingest.document` for the entry points.
"""

from gateway.ingest.document import Document, ImageDocument, close_document, open_document, page_stream
from gateway.ingest.pdf import PdfDocument
from gateway.ingest.selection import parse_pages
from gateway.ingest.sniff import MEDIA_TYPES, detect_type
from gateway.ingest.upload import UploadedFile, UploadSink, too_large, upload_too_slow

__all__ = [
    "Document", "ImageDocument", "PdfDocument", "UploadedFile", "UploadSink", "MEDIA_TYPES",
    "close_document", "detect_type", "open_document", "page_stream", "parse_pages", "too_large",
    "upload_too_slow",
]
