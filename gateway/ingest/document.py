"""Opening an uploaded document and streaming its pages lazily to the pipeline.

:func:`open_document` validates the upload (type by magic bytes, limits) and returns a document
object (:class:`ImageDocument` or :class:`gateway.ingest.pdf.PdfDocument`); :func:`page_stream`
renders the selected pages one at a time off the event loop, at most ``lookahead`` pages ahead of
the consumer, so a long document's pixels are never all in memory.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import pathlib
from collections.abc import AsyncGenerator
from typing import Protocol

from gateway.ingest import images
from gateway.ingest.pdf import PdfDocument
from gateway.ingest.sniff import detect_type
from gateway.ingest.upload import UploadedFile
from gateway.types import PageError, PageInput
from inkstream.decode_errors import image_problem
from inkstream.errors import InkstreamError, InvalidInput, PayloadTooLarge

log = logging.getLogger("inkstream.gateway.ingest")


class Document(Protocol):
    """An opened document: ``kind`` (see :data:`gateway.ingest.sniff.KINDS`), ``page_count``,
    ``password_needed`` (it opened only with the password it was given: an encrypted PDF's user
    password), ``sizes`` (page index -> (width, height) in document pixels, filled as pages render;
    boxes in results use these), ``executor`` (None = the loop's default pool) on which
    ``render``/``close`` run.
    """

    kind: str
    page_count: int
    password_needed: bool
    sizes: dict[int, tuple[int, int]]

    @property
    def executor(self) -> concurrent.futures.Executor | None:
        """Where ``render`` / ``close`` must run (None: the event loop's default pool)."""

    def render(self, index: int) -> PageInput:
        """Page ``index`` (0-based) as encoder-ready bytes, or a PageInput carrying its error."""

    def close(self) -> None:
        """Release the file / library handles."""


class ImageDocument:
    """A raster image file: one page, or one page per frame for TIFF (GIF/WebP: first frame only).

    Pages are normalised and downscaled to ``long_side_px`` (:func:`inkstream.page_image.prepare_image`,
    as ``inkstream eval --in-process`` prepares them) and PNG-encoded.
    A single-page image is decoded in the constructor so that a damaged file is a 4xx for the whole
    request; a damaged frame of a multi-page TIFF becomes that page's error.
    """

    executor = None
    password_needed = False  # an image has no password

    def __init__(self, path: pathlib.Path, kind: str, long_side_px: int, max_pixels: int,
                 max_pages: int, min_side: int, max_image_bytes: int = 0, *, fit_pixels: int = 0):
        self.kind = kind
        self.max_image_bytes = max_image_bytes
        self.long_side_px = long_side_px
        self.max_pixels = max_pixels
        self.fit_pixels = min(fit_pixels, max_pixels) if fit_pixels > 0 else max_pixels
        self.min_side = min_side
        self.sizes: dict[int, tuple[int, int]] = {}
        self._im = images.open_image(str(path), max_pixels)
        try:
            frames = getattr(self._im, "n_frames", 1) if kind == "tiff" else 1
        except (OSError, ValueError, EOFError) as exc:
            self._im.close()
            raise InvalidInput(f"the TIFF file is damaged: {image_problem(exc, 'TIFF')}") from None
        if frames > max_pages:
            self._im.close()
            raise PayloadTooLarge(f"the TIFF has {frames} pages; at most {max_pages} pages are accepted")
        self.page_count = frames
        self._first: PageInput | None = None
        if frames == 1:
            self._first = self._render(0, strict=True)

    def _render(self, index: int, strict: bool) -> PageInput:
        try:
            if self.page_count > 1:
                self._im.seek(index)
                images.check_size(self._im.size, self.max_pixels)
            page, self.sizes[index] = images.prepare_image(images.decode(self._im), self.long_side_px,
                                                           self.fit_pixels, self.min_side)
            data = images.encode_page(page, self.max_image_bytes)
            return PageInput(index=index, image=data, width=page.width, height=page.height)
        except InkstreamError as exc:
            if strict:
                raise
            return PageInput(index, None, error=PageError(exc.code_name, f"page {index + 1}: {exc.message}",
                                                          exc.reason))
        except (OSError, ValueError, EOFError) as exc:
            if strict:
                raise InvalidInput(f"the image cannot be decoded: {image_problem(exc)}") from None
            return PageInput(index, None, error=PageError("INVALID_ARGUMENT",
                                                          f"page {index + 1} cannot be decoded: {image_problem(exc)}"))

    def render(self, index: int) -> PageInput:
        """Page ``index`` (0-based) as PNG bytes, or a PageInput carrying the page's error."""
        if index == 0 and self._first is not None:
            page, self._first = self._first, None
            return page
        return self._render(index, strict=False)

    def close(self) -> None:
        """Close the image file."""
        self._im.close()


async def open_document(upload: UploadedFile, *, long_side_px: int, max_pixels: int, max_pages: int,
                        min_side: int = 1, password: str = "", max_image_bytes: int = 0,
                        fit_pixels: int = 0) -> Document:
    """Detect the type of ``upload`` by its magic bytes and open it off the event loop.

    ``long_side_px``: target long side of rendered pages, pixels; ``max_pixels``: per-page pixel cap
    (an image over it is refused before decoding); ``fit_pixels``: the most pixels a page is scaled to
    (at most ``max_pixels``; 0 = ``max_pixels``: the encoder's limit when lower);
    ``max_image_bytes``: the encoder's per-image limit, bytes (0 = none; PNG falls back to JPEG).
    Raises InvalidInput (400), PayloadTooLarge (413), UnsupportedMediaType (415), Unprocessable (422)
    with a message for a person.
    """
    kind = detect_type(upload.head)
    fit = min(fit_pixels, max_pixels) if fit_pixels > 0 else max_pixels
    loop = asyncio.get_running_loop()
    if kind == "pdf":
        return await loop.run_in_executor(
            PdfDocument.executor, lambda: PdfDocument(upload.path, long_side_px, fit, password, max_image_bytes,
                                                       min_side))
    return await loop.run_in_executor(
        None, lambda: ImageDocument(upload.path, kind, long_side_px, max_pixels, max_pages, min_side,
                                        max_image_bytes, fit_pixels=fit))


async def close_document(doc: Document) -> None:
    """Close ``doc`` on its own executor (PDFium calls stay on the PDFium thread)."""
    await asyncio.get_running_loop().run_in_executor(doc.executor, doc.close)


async def page_stream(doc: Document, indices: list[int], lookahead: int = 2,
                      render_timeout_s: float = 120.0) -> AsyncGenerator[PageInput, None]:
    """Yield a PageInput for each of ``indices`` (0-based, in this order), rendered one at a time off
    the event loop by a producer that stays at most ``lookahead`` pages ahead of the consumer.

    A page whose rendering raises or takes longer than ``render_timeout_s`` seconds is yielded with
    ``error`` set; the stream continues. Closing the iterator stops the producer.
    """
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[PageInput | None] = asyncio.Queue(maxsize=max(1, lookahead))

    async def produce() -> None:
        """Render ``indices`` in order into the bounded queue; None marks the end."""
        for i in indices:
            fut = loop.run_in_executor(doc.executor, doc.render, i)
            # asyncio.wait, not wait_for: Python 3.11's wait_for can swallow a cancellation that
            # arrives as the render completes (gh-86296), leaving this task blocked on a full queue.
            done, _ = await asyncio.wait({fut}, timeout=render_timeout_s)
            if not done:
                fut.cancel()
                page = PageInput(i, None, error=PageError(
                    "DEADLINE_EXCEEDED", f"page {i + 1} took longer than {render_timeout_s:g} s to render"))
            elif fut.exception() is not None:  # a page's failure must not end the document
                exc = fut.exception()
                log.error("rendering page %d failed", i + 1, exc_info=exc)
                page = PageInput(i, None, error=PageError(
                    "INTERNAL", f"page {i + 1} could not be rendered (an unexpected error; the gateway's log has "
                    "the details)"))
            else:
                page = fut.result()
            await queue.put(page)
        await queue.put(None)

    producer = asyncio.create_task(produce(), name="page-render")
    try:
        while True:
            page = await queue.get()
            if page is None:
                break
            yield page
    finally:
        producer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await producer
