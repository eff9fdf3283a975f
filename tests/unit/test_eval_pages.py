"""``inkstream eval --in-process`` reads the very pixels the gateway sends the encoder: a large image
is shrunk to the mode's long side (before, it was read at full size, so in-process figures differed
from the stack's), a tall one bounded by its short side, a PDF page rendered alike."""

from __future__ import annotations

import asyncio
import io
import pathlib

import numpy as np
import pytest
from PIL import Image

from evaluation.engines import iter_pages
from gateway.ingest import UploadSink, close_document, open_document
from inkstream.page_image import MAX_PAGE_PIXELS
from models.images import to_rgb
from tests.gateway_api.conftest import marked_page, marked_pdf

LONG_SIDE = 640


def _gateway_pages(path: pathlib.Path, tmp_path: pathlib.Path) -> list[np.ndarray]:
    """The page images the gateway sends the encoder for ``path``, as the encoder converts them."""

    async def run() -> list[np.ndarray]:
        (tmp_path / "up").mkdir(exist_ok=True)
        sink = UploadSink(tmp_path / "up", 1 << 30)
        sink.write(path.read_bytes())
        upload = sink.finish()
        doc = await open_document(upload, long_side_px=LONG_SIDE, max_pixels=MAX_PAGE_PIXELS, max_pages=100)
        try:
            pages = [doc.render(i) for i in range(doc.page_count)]
        finally:
            await close_document(doc)
        assert all(p.image is not None for p in pages), pages
        return [np.asarray(to_rgb(Image.open(io.BytesIO(p.image)))) for p in pages]

    return asyncio.run(run())


@pytest.mark.parametrize("size", [(2400, 3200), (700, 4200), (300, 400)], ids=["large", "tall", "small"])
def test_an_image_is_prepared_as_the_gateway_prepares_it(tmp_path, size):
    path = tmp_path / "page.png"
    marked_page(7, size).save(path)
    [mine] = [np.asarray(p) for p in iter_pages(path, LONG_SIDE)]
    [gateway] = _gateway_pages(path, tmp_path)
    assert mine.shape == gateway.shape and np.array_equal(mine, gateway)
    w, h = size
    if size == (2400, 3200):
        assert mine.shape[:2] == (LONG_SIDE, 480)  # shrunk: the long side is the mode's
    elif size == (700, 4200):
        assert mine.shape[1] == LONG_SIDE // 2  # a tall page: bounded by its short side
    else:
        assert mine.shape[:2] == (h, w)  # never enlarged


def test_a_pdf_page_is_rendered_as_the_gateway_renders_it(tmp_path):
    path = tmp_path / "doc.pdf"
    path.write_bytes(marked_pdf([3, 4], size=(1200, 1600)))
    mine = [np.asarray(p) for p in iter_pages(path, LONG_SIDE)]
    gateway = _gateway_pages(path, tmp_path)
    assert len(mine) == len(gateway) == 2
    assert all(a.shape == b.shape and np.array_equal(a, b) for a, b in zip(mine, gateway, strict=True))
    assert max(mine[0].shape[:2]) == LONG_SIDE


def test_a_page_over_the_encoders_pixel_limit_is_scaled_as_the_served_stack_scales_it(tmp_path):
    """Found by the breaker: the served stack fits pages to the encoder's ``max_image_pixels`` (40 M by
    default, Info field 15) under the gateway's 50 M, but ``eval --in-process`` fitted them to 50 M
    only, so a 60,000 x 800 px page (48 M: the mode's long side bounds a wide page by its short side)
    was read at 60,000 x 800 in-process and at 54,772 x 730 through the stack."""
    from encoder_service.config import EncoderConfig
    from inkstream.page_image import fit_pixels

    long_side = 2200  # the compact model's mode
    path = tmp_path / "wide.png"
    Image.new("L", (60_000, 800), 255).save(path)
    [mine] = list(iter_pages(path, long_side))

    async def served() -> tuple[int, int]:
        (tmp_path / "up").mkdir(exist_ok=True)
        sink = UploadSink(tmp_path / "up", 1 << 30)
        sink.write(path.read_bytes())
        doc = await open_document(sink.finish(), long_side_px=long_side, max_pixels=MAX_PAGE_PIXELS, max_pages=1,
                                  fit_pixels=fit_pixels(EncoderConfig().max_image_pixels, MAX_PAGE_PIXELS))
        try:
            page = doc.render(0)
        finally:
            await close_document(doc)
        assert page.image is not None
        return Image.open(io.BytesIO(page.image)).size

    size = asyncio.run(served())
    assert mine.size == size and size[0] * size[1] <= EncoderConfig().max_image_pixels, (mine.size, size)
