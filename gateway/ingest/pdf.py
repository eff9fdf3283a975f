"""PDF pages rasterised one at a time with PDFium (pypdfium2), at the encoder's resolution.

PDFium is not thread-safe (https://pypdfium2.readthedocs.io/en/stable/python_api.html: "pdfium is
not thread-compatible"), so every PDFium call in the process runs on one dedicated thread,
:data:`PDFIUM_EXECUTOR`: documents are opened, counted, rendered and closed there, serialised by
construction. The document is read from its file by PDFium on demand, never loaded whole.
"""

from __future__ import annotations

import ctypes
import logging
import pathlib
import re
from concurrent.futures import ThreadPoolExecutor

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from gateway.ingest.images import encode_page
from gateway.types import PageError, PageInput
from inkstream.decode_errors import pdf_page_problem
from inkstream.errors import InkstreamError, InvalidInput, Unprocessable, password_required
from inkstream.page_image import check_min_side, pdf_scale, render_pdf_page
from inkstream.pdf_fonts import install_upright_fonts

log = logging.getLogger("inkstream.gateway.ingest")

#: The one thread that talks to PDFium.
PDFIUM_EXECUTOR = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pdfium")


_PAGE_OBJ = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")
_EMPTY_TREE = re.compile(rb"/Count\s+0(?![0-9])")
_SMALL_PDF_BYTES = 1024 * 1024


def _looks_pageless(path: pathlib.Path) -> bool:
    """Heuristic for a small PDF with an empty page tree (``/Count 0`` and no ``/Type /Page`` object).

    Needed because PDFium fails such documents without setting an error code: ``FPDF_GetLastError``
    then still holds the previous failure's code (it is never reset on success), observed with
    pypdfium2 5.x (PDFium 7x). Only files up to 1 MiB are scanned; a document without pages is tiny.
    """
    try:
        if path.stat().st_size > _SMALL_PDF_BYTES:
            return False
        data = path.read_bytes()
    except OSError:
        return False
    return bool(_EMPTY_TREE.search(data)) and not _PAGE_OBJ.search(data)


_NOT_A_PDF = b"%PDF-1.0 not a document"


def _reset_last_error() -> None:
    """Set PDFium's last-error code to FORMAT by failing to load a tiny non-document, so a failure
    that sets no code (see :func:`_looks_pageless`) cannot inherit an earlier request's PASSWORD.
    """
    buf = ctypes.create_string_buffer(_NOT_A_PDF)
    doc = pdfium_c.FPDF_LoadMemDocument(buf, len(_NOT_A_PDF), None)
    if doc:  # cannot happen for this input; never leak a handle
        pdfium_c.FPDF_CloseDocument(doc)


def _open_error(exc: pdfium.PdfiumError, password: str, path: pathlib.Path) -> Exception:
    if _looks_pageless(path):
        return Unprocessable("the document has no pages")
    code = getattr(exc, "err_code", None)
    if code == pdfium_c.FPDF_ERR_PASSWORD:
        if password:
            return InvalidInput("the password given for this PDF is wrong")
        return password_required()  # neutral: gateway.session.OcrSession names its API's option
    if code == pdfium_c.FPDF_ERR_SECURITY:
        return Unprocessable("the PDF uses an unsupported security handler and cannot be opened")
    log.info("PDF could not be opened: %s: %s", type(exc).__name__, exc)
    return InvalidInput("the file is not a readable PDF: it is damaged or truncated (its structure cannot be parsed)")


# Pages rendered per open PDFium document before it is reopened (see PdfDocument._maybe_reopen).
REOPEN_EVERY_PAGES = 32


class PdfDocument:
    """A PDF opened by PDFium. Construct and call every method on :data:`PDFIUM_EXECUTOR` only.

    ``long_side_px``: pixels of the rendered page's long side (``EncoderInfo.mode().page_long_side_px``);
    ``max_pixels``: cap on width x height of a rendered page (the scale is lowered to fit);
    ``max_image_bytes``: the encoder's limit per page image (see :func:`images.encode_page`);
    ``min_side``: a page rendered smaller than this many pixels on a side (a page of 1000 x 0.5 pt)
    is a page error 422 NOTHING_TO_READ, as such an image or TIFF frame is, not sent to an encoder;
    ``password``: tried only when the document does not open without one (``password_needed``
    then says it was used; a password for a PDF that opens without one is not needed, and ignored).
    Raises InvalidInput (400: damaged, password), Unprocessable (422: no pages) from the constructor.
    """

    kind = "pdf"
    executor = PDFIUM_EXECUTOR

    def __init__(self, path: pathlib.Path, long_side_px: int, max_pixels: int, password: str = "",
                 max_image_bytes: int = 0, min_side: int = 1):
        self.long_side_px, self.min_side = long_side_px, min_side
        self.max_pixels = max_pixels
        self.max_image_bytes = max_image_bytes
        self.sizes: dict[int, tuple[int, int]] = {}
        self._path, self._password = path, ""
        self._rendered_since_open = 0
        self.password_needed = False
        install_upright_fonts()  # before PDFium loads a page's fonts (on this, the PDFium thread)
        _reset_last_error()
        try:
            self._pdf = pdfium.PdfDocument(str(path))
        except pdfium.PdfiumError as exc:
            if not password or getattr(exc, "err_code", None) != pdfium_c.FPDF_ERR_PASSWORD:
                raise _open_error(exc, "", path) from None
            _reset_last_error()
            try:
                self._pdf = pdfium.PdfDocument(str(path), password=password)
            except pdfium.PdfiumError as exc2:
                raise _open_error(exc2, password, path) from None
            self._password, self.password_needed = password, True
        self.page_count = len(self._pdf)
        if self.page_count <= 0:
            self._pdf.close()
            raise Unprocessable("the document has no pages")

    def scale_for(self, width_pt: float, height_pt: float) -> float:
        """Render scale (pixels per PDF point, 1 pt = 1/72 inch): long side = ``long_side_px``,
        lowered so that width x height stays within ``max_pixels`` (:func:`inkstream.page_image.pdf_scale`).
        """
        return pdf_scale(width_pt, height_pt, self.long_side_px, self.max_pixels)

    def render(self, index: int) -> PageInput:
        """Page ``index`` (0-based) as PNG bytes; a page PDFium cannot load or draw becomes
        ``PageInput.error`` (INVALID_ARGUMENT) instead of failing the document.
        """
        self._maybe_reopen()
        page = None
        try:
            page = self._pdf[index]
            image = render_pdf_page(page, self.long_side_px, self.max_pixels)  # as eval --in-process does
            self.sizes[index] = image.size
            check_min_side(image.size, self.min_side)
            data = encode_page(image, self.max_image_bytes)
            return PageInput(index=index, image=data, width=image.width, height=image.height)
        except InkstreamError as exc:
            return PageInput(index, None, error=PageError(exc.code_name, f"page {index + 1}: {exc.message}",
                                                          exc.reason))
        except (pdfium.PdfiumError, ValueError, OSError) as exc:
            return PageInput(index=index, image=None, error=PageError(
                "INVALID_ARGUMENT", f"page {index + 1} could not be rendered: {pdf_page_problem(exc)}"))
        finally:
            if page is not None:
                page.close()

    def _maybe_reopen(self) -> None:
        """Close and reopen the document every :data:`REOPEN_EVERY_PAGES` pages.

        PDFium keeps per-page parsed data (content streams, fonts, images) for the document's life,
        so resident memory would grow with the page count of a long PDF; reopening bounds it
        (measured: 400 pages 65 -> 91 MiB without, 65 -> 71 MiB with a reopen every 50 pages).
        """
        self._rendered_since_open += 1
        if self._rendered_since_open <= REOPEN_EVERY_PAGES:
            return
        self._pdf.close()
        self._pdf = pdfium.PdfDocument(str(self._path), password=self._password or None)
        self._rendered_since_open = 1

    def close(self) -> None:
        """Release PDFium's document (idempotent)."""
        self._pdf.close()
