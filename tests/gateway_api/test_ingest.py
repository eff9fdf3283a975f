"""Ingest units: magic bytes, page selection, image normalisation, limits, per-page errors, lazy
rendering with a bounded look-ahead, PDF resolution, streaming multipart parsing."""

from __future__ import annotations

import asyncio
import io
import threading

import numpy as np
import pytest
from PIL import Image

from gateway.ingest import UploadSink, close_document, detect_type, open_document, page_stream, parse_pages
from gateway.ingest.images import fit, normalise
from gateway.ingest.multipart import MultipartUpload
from gateway.types import PageInput
from inkstream.errors import InvalidInput, PayloadTooLarge, UnsupportedMediaType
from tests.gateway_api.conftest import marked_page, marked_pdf, png_bytes, read_number


def _upload(tmp_path, data: bytes, limit: int = 1 << 30):
    sink = UploadSink(tmp_path, limit)
    sink.write(data)
    return sink.finish()


def _saved(im: Image.Image, fmt: str, **kw) -> bytes:
    buf = io.BytesIO()
    im.save(buf, format=fmt, **kw)
    return buf.getvalue()


@pytest.mark.parametrize("fmt,kind", [("PNG", "png"), ("JPEG", "jpeg"), ("TIFF", "tiff"), ("GIF", "gif"),
                                      ("WEBP", "webp"), ("BMP", "bmp"), ("PDF", "pdf")])
def test_detect_type_by_magic(fmt, kind):
    assert detect_type(_saved(marked_page(1, (40, 40)), fmt)[:1024]) == kind


def test_detect_type_errors():
    with pytest.raises(InvalidInput, match="empty"):
        detect_type(b"")
    with pytest.raises(UnsupportedMediaType):
        detect_type(b"<html>not a document</html>")


def test_parse_pages():
    assert parse_pages("", 3) == [0, 1, 2]
    assert parse_pages(" 3, 1-2 ,2", 5) == [0, 1, 2]
    assert parse_pages("4-", 6) == [3, 4, 5]
    with pytest.raises(PayloadTooLarge, match="at most 2"):
        parse_pages("1-3", 3, max_pages=2)


def test_a_huge_page_range_costs_nothing_before_the_document_is_opened():
    """Found by tryout7: ``pages=1-99999999999999999999`` (one REST request) made the gateway build a set of
    every page number while checking the syntax before admission: 17 GB, the gateway OOM-killed. Now the
    selection is checked range by range; a number over 12 digits is malformed (int() of 5000 raises)."""
    import time
    import tracemalloc

    from gateway.ingest.selection import check_selection

    tracemalloc.start()
    t0 = time.monotonic()
    try:
        check_selection("1-99999999999")
        check_selection("2-, 5-999999999999")
        with pytest.raises(InvalidInput, match="page 99999999999 does not exist; the document has 3 pages"):
            parse_pages("1-99999999999", 3)
        with pytest.raises(InvalidInput, match="page 9 does not exist"):
            parse_pages("9-", 3)
        with pytest.raises(InvalidInput, match="names a page number of more than 12 digits"):
            check_selection("1-99999999999999999999")
        for spec in ("9" * 5000, "0-3", "4-2", "1-x"):
            with pytest.raises(InvalidInput):
                check_selection(spec)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.monotonic() - t0 < 1.0 and peak < 1 << 20, peak


def test_normalise_modes():
    rgba = Image.new("RGBA", (4, 4), (255, 0, 0, 0))  # fully transparent red -> white
    assert normalise(rgba).getpixel((0, 0)) == (255, 255, 255)
    la = Image.new("LA", (4, 4), (0, 255))
    assert normalise(la).convert("L").getpixel((0, 0)) == 0
    cmyk = Image.new("CMYK", (4, 4), (0, 255, 255, 0))  # pure red in CMYK
    assert normalise(cmyk).getpixel((0, 0)) == (255, 0, 0)
    g16 = Image.fromarray(np.full((4, 4), 65535, np.uint16))
    out = normalise(g16)
    assert out.mode == "L" and out.getpixel((0, 0)) == 255
    pal = Image.new("P", (4, 4), 1)
    pal.putpalette([0, 0, 0, 0, 0, 255] + [0] * 762)
    pal.info["transparency"] = 1
    assert normalise(pal).getpixel((0, 0)) == (255, 255, 255)
    assert normalise(Image.new("1", (4, 4), 1)).mode == "L"


def test_exif_orientation_applied(tmp_path):
    im = marked_page(5, (300, 200))  # landscape
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise on display
    data = _saved(im, "JPEG", exif=exif.tobytes(), quality=95)

    async def run():
        doc = await open_document(_upload(tmp_path, data), long_side_px=1000, max_pixels=10**8, max_pages=5)
        page = doc.render(0)
        await close_document(doc)
        return page

    page = asyncio.run(run())
    assert (page.width, page.height) == (200, 300)  # shown upright: portrait


def test_fit_never_upscales_and_caps_pixels():
    im = Image.new("RGB", (100, 50))
    assert fit(im, 1000, 10**9).size == (100, 50)
    assert fit(Image.new("RGB", (2000, 1000)), 1000, 10**9).size == (1000, 500)
    assert fit(Image.new("RGB", (2000, 1000)), 2000, 20_000).size == (200, 100)
    # a tall page keeps its short side up to long_side / 2 (text of a tall screenshot stays readable)
    assert fit(Image.new("RGB", (1000, 15000)), 2200, 50_000_000).size == (1000, 15000)
    assert fit(Image.new("RGB", (3000, 9000)), 2200, 50_000_000).size == (1100, 3300)


async def test_tiff_page_over_limit_is_that_pages_error(tmp_path):
    frames = [marked_page(1, (300, 400), "L"), marked_page(2, (3000, 3000), "L"), marked_page(3, (300, 400), "L")]
    data = _saved(frames[0], "TIFF", save_all=True, append_images=frames[1:])
    doc = await open_document(_upload(tmp_path, data), long_side_px=400, max_pixels=1_000_000, max_pages=10)
    pages = [p async for p in page_stream(doc, [0, 1, 2])]
    await close_document(doc)
    assert [p.index for p in pages] == [0, 1, 2]
    assert read_number(pages[0].image) == 1 and read_number(pages[2].image) == 3
    assert pages[1].image is None and "9,000,000 pixels" in pages[1].error.message


async def test_tiff_page_count_limit(tmp_path):
    frames = [marked_page(i, (50, 50), "L") for i in range(4)]
    data = _saved(frames[0], "TIFF", save_all=True, append_images=frames[1:])
    with pytest.raises(PayloadTooLarge, match="4 pages"):
        await open_document(_upload(tmp_path, data), long_side_px=400, max_pixels=10**8, max_pages=3)


async def test_pdf_rendered_at_mode_resolution_and_pixel_cap(tmp_path):
    up = _upload(tmp_path, marked_pdf([9, 8], size=(600, 800)))
    doc = await open_document(up, long_side_px=1000, max_pixels=10**8, max_pages=10)
    pages = [p async for p in page_stream(doc, [1, 0])]
    await close_document(doc)
    assert [(p.width, p.height) for p in pages] == [(750, 1000), (750, 1000)]
    assert [read_number(p.image) for p in pages] == [8, 9]
    doc = await open_document(up, long_side_px=1000, max_pixels=30_000, max_pages=10)
    page = (await asyncio.get_running_loop().run_in_executor(doc.executor, doc.render, 0))
    await close_document(doc)
    assert page.width * page.height <= 30_000 and page.height == pytest.approx(200, abs=1)


class _SlowDoc:
    """A Document whose pages take 20 ms to render; page 2 raises."""

    kind = "fake"
    executor = None

    def __init__(self, n: int):
        self.page_count = n
        self.sizes: dict[int, tuple[int, int]] = {}
        self.rendered: list[int] = []
        self.lock = threading.Lock()

    def render(self, index: int) -> PageInput:
        import time

        time.sleep(0.02)
        with self.lock:
            self.rendered.append(index)
        if index == 2:
            raise RuntimeError("boom")
        return PageInput(index, png_bytes(marked_page(index, (20, 20))), 20, 20)

    def close(self) -> None:
        pass


async def test_page_stream_lookahead_is_bounded_and_errors_are_per_page():
    doc = _SlowDoc(10)
    stream = page_stream(doc, list(range(10)), lookahead=2)
    got = []
    async for page in stream:
        await asyncio.sleep(0.1)  # slow consumer
        ahead = len(doc.rendered) - (len(got) + 1)
        assert ahead <= 3, ahead  # queue of 2 + one being rendered
        got.append(page)
        if len(got) == 4:
            break
    await stream.aclose()
    await asyncio.sleep(0.1)
    assert len(doc.rendered) <= 4 + 3  # stopped rendering after the consumer left
    assert [p.index for p in got] == [0, 1, 2, 3]
    assert got[2].error is not None and got[2].error.code == "INTERNAL" and got[2].image is None


def test_multipart_streaming(tmp_path):
    body = (b"--XyZ\r\nContent-Disposition: form-data; name=\"format\"\r\n\r\ntext\r\n"
            b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.pdf\"\r\n"
            b"Content-Type: application/pdf\r\n\r\n%PDF-1.7 data\r\n--XyZ--\r\n")
    sink = UploadSink(tmp_path, 1000)
    mp = MultipartUpload("multipart/form-data; boundary=XyZ", sink)
    for i in range(0, len(body), 7):  # arbitrary chunk boundaries
        mp.write(body[i:i + 7])
    mp.close()
    up = sink.finish()
    assert mp.fields == {"format": "text"} and up.path.read_bytes() == b"%PDF-1.7 data" and up.size == 13
    sink2 = UploadSink(tmp_path, 5, name="small")
    mp2 = MultipartUpload("multipart/form-data; boundary=XyZ", sink2)
    with pytest.raises(PayloadTooLarge):
        mp2.write(body)
    assert not sink2.path.exists()
    mp3 = MultipartUpload("multipart/form-data; boundary=XyZ", UploadSink(tmp_path, 1000, name="c"))
    mp3.write(body[:60])
    with pytest.raises(InvalidInput, match="ended before"):
        mp3.close()


def test_encode_page_falls_back_to_jpeg_under_the_encoder_limit():
    from gateway.ingest.images import encode_page

    noise = Image.fromarray(np.random.default_rng(0).integers(0, 256, (300, 300, 3), dtype=np.uint8))
    png = encode_page(noise)
    assert png.startswith(b"\x89PNG")
    jpg = encode_page(noise, max_bytes=len(png) // 2)
    assert jpg.startswith(b"\xff\xd8") and len(jpg) <= len(png) // 2
    with pytest.raises(PayloadTooLarge, match="lower-resolution mode"):
        encode_page(noise, max_bytes=1000)


async def test_pdf_errors_do_not_leak_between_documents(shared_dir, tmp_path):
    """PDFium keeps its last error code across calls; a later failure must not inherit PASSWORD."""
    corpus = shared_dir / "bad_inputs"
    sequence = [("encrypted_user_password.pdf", "password"), ("zero_pages.pdf", "no pages"),
                ("encrypted_user_password.pdf", "password"), ("invalid_header_eof_only.pdf", "not a readable")]
    for name, needle in sequence:
        with pytest.raises(InvalidInput, match=needle):
            await open_document(_upload(tmp_path, (corpus / name).read_bytes()), long_side_px=500,
                                max_pixels=10**8, max_pages=10)
