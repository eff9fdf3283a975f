"""What is wrong with an image or PDF that a library could not decode, in plain words.

Pillow's and PDFium's exception texts name their internals ("Decompressed data too large for
PngImagePlugin.MAX_TEXT_CHUNK", "Failed to load page.", "broken data stream when reading image
file"); a client is told what is wrong with its file instead, and the precise cause (exception
class and text) goes to the log at INFO, without the file's name or content. Used by the gateway's
ingest (:mod:`gateway.ingest`) and the encoder's page decoding (:mod:`encoder_service.images`).
"""

from __future__ import annotations

import logging

log = logging.getLogger("inkstream.decode")

# (needles in the library's message, lower case) -> the problem with the file, in words.
_IMAGE_PROBLEMS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("max_text_chunk", "decompressed data too large"),
     "a compressed text (metadata) chunk of the image expands to more than 1 MB, which is refused as a "
     "possible decompression bomb; save the image without that metadata"),
    (("max_text_memory", "too much memory used in text chunks"),
     "the image's text (metadata) chunks are larger than 64 MB in all; save the image without that metadata"),
    (("truncated", "end of file", "premature end", "unexpected end"),
     "the file ends before its image data does (it is truncated)"),
    (("crc", "checksum", "broken png"),
     "the image data is corrupt (a checksum does not match)"),
    (("cannot identify", "not a png", "not a jpeg", "not a tiff", "not a gif", "not a bmp", "invalid header",
      "unrecognized", "unrecognised"),
     "its header is invalid or damaged"),
    (("decoder", "not supported", "unsupported", "unknown compression", "cannot handle"),
     "it uses an encoding or compression that cannot be decoded here; convert it to PNG or JPEG"),
)

IMAGE_DEFAULT = "its data is damaged or uses a feature that cannot be decoded; convert it to PNG or JPEG"
PDF_PAGE_DEFAULT = "the page's content is damaged or uses a feature that cannot be drawn"


def image_problem(exc: BaseException, what: str = "image") -> str:
    """Plain words for why an image could not be opened or decoded (``exc`` from Pillow); the
    exception itself is logged. ``what`` names the thing for the log line only.
    """
    log.info("%s could not be decoded: %s: %s", what, type(exc).__name__, exc)
    text = str(exc).lower()
    for needles, words in _IMAGE_PROBLEMS:
        if any(n in text for n in needles):
            return words
    return IMAGE_DEFAULT


def pdf_page_problem(exc: BaseException) -> str:
    """Plain words for why a PDF page could not be loaded or drawn (``exc`` from pypdfium2 / PDFium,
    or Pillow converting its bitmap); the exception itself is logged.
    """
    log.info("PDF page could not be rendered: %s: %s", type(exc).__name__, exc)
    text = str(exc).lower()
    if "load page" in text:
        return "the page could not be loaded (the PDF's page tree or page object is damaged)"
    return PDF_PAGE_DEFAULT
