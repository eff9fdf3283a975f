"""Fixtures for the gateway front-end tests: a fake PagePipeline that really reads the page image,
marked test documents, and app / server factories (all in-process, loopback, free ports).

The fake pipeline reads a page number printed on each test page as a 10-bit bar code (black bar =
1) across the top quarter of the page, so a page rendered from the wrong source page, twice, or in
the wrong order produces visibly wrong text. Pages without bars (real-world files) read as 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
from collections.abc import AsyncIterator

import httpx
import numpy as np
import pytest
from PIL import Image

os.environ.setdefault("OMP_NUM_THREADS", "1")

from gateway.apis.rest import create_app
from gateway.config import GatewayConfig
from gateway.core import GatewayCore
from gateway.types import (
    EncoderInfo,
    ModeInfo,
    PageError,
    PageInput,
    PageOutcome,
    PipelineOptions,
    SegmentText,
)
from inkstream.errors import ResourceExhausted

BITS = 10
MODEL_ID = "fake/bars-v1"


def marked_page(number: int, size: tuple[int, int] = (600, 800), mode: str = "RGB") -> Image.Image:
    """A white page with ``number`` as BITS black/white bars across the top quarter."""
    w, h = size
    arr = np.full((h, w), 255, np.uint8)
    for k in range(BITS):
        if (number >> (BITS - 1 - k)) & 1:
            arr[: h // 4, k * w // BITS:(k + 1) * w // BITS] = 0
    return Image.fromarray(arr, "L").convert(mode)


def read_number(png: bytes) -> int:
    """Inverse of :func:`marked_page` on a decoded (possibly rescaled, JPEG-compressed) page."""
    im = Image.open(io.BytesIO(png)).convert("L")
    arr = np.asarray(im)
    h, w = arr.shape
    n = 0
    for k in range(BITS):
        x = int((k + 0.5) * w / BITS)
        n = (n << 1) | int(arr[h // 8, x] < 128)
    return n


def marked_pdf(numbers: list[int], size: tuple[int, int] = (600, 800)) -> bytes:
    """A PDF whose page i shows ``numbers[i]`` (Pillow's PDF writer, one image per page)."""
    pages = [marked_page(n, size) for n in numbers]
    buf = io.BytesIO()
    pages[0].save(buf, format="PDF", save_all=True, append_images=pages[1:], resolution=72.0)
    return buf.getvalue()


def marked_tiff(numbers: list[int]) -> bytes:
    pages = [marked_page(n, mode="L") for n in numbers]
    buf = io.BytesIO()
    pages[0].save(buf, format="TIFF", save_all=True, append_images=pages[1:], compression="tiff_lzw")
    return buf.getvalue()


def png_bytes(im: Image.Image) -> bytes:
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    return buf.getvalue()


def expected_text(number: int) -> str:
    return f"# Page {number}\n\nbody of page {number}"


class FakePipeline:
    """A PagePipeline that reads the bar-coded number from each page image.

    Output per page, DeepSeek-OCR grounding markup: a title block at grid [100,50,899,150] and a
    text block at [100,300,899,899]. ``line_mode``: instead one segment per "line" (two segments in
    the page's top and bottom halves, no markup). ``delay_s``: seconds per page; ``finish``: number ->
    finish reason; ``fail``: numbers whose page fails with UNAVAILABLE; ``capacity``: admitted
    requests before ResourceExhausted; ``healthy``: what ``ready()`` says; ``tasks``: what
    ``decoder_tasks()`` says; ``raise_on_run``: raised before the first page (e.g. no replica reachable);
    ``raise_after``: (n, exc) after n pages raises exc, or with exc None hangs (a decoder crash-looping).
    """

    def __init__(self, *, delay_s: float = 0.0, capacity: int = 64, line_mode: bool = False):
        self.delay_s = delay_s
        self.capacity = capacity
        self.line_mode = line_mode
        self.finish: dict[int, str] = {}
        self.fail: set[int] = set()
        self.healthy = True
        self.admitted = 0
        self.pages_run = 0
        self.options_seen: list[PipelineOptions] = []
        self.long_sides: list[int] = []
        self.raise_on_run: Exception | None = None
        self.raise_after: tuple[int, Exception | None] | None = None
        self.tasks: tuple[str, ...] = ()  # decoder_tasks(): () = not known

    async def encoder_info(self) -> EncoderInfo:
        return EncoderInfo(MODEL_ID, (ModeInfo("base", 640, 256), ModeInfo("small", 320, 64)), "base", 8 << 20)

    def ready(self) -> tuple[bool, str]:
        return self.healthy, "" if self.healthy else "no SERVING decoder replica"

    async def decoder_tasks(self) -> tuple[str, ...]:
        return self.tasks

    @contextlib.asynccontextmanager
    async def _admission(self) -> AsyncIterator[FakePipeline]:
        if self.admitted >= self.capacity:
            raise ResourceExhausted("the gateway is at its page limit", retry_after_s=3.0)
        self.admitted += 1
        try:
            yield self
        finally:
            self.admitted -= 1

    def admit(self, request_id: str):
        return self._admission()

    async def run(self, pages: AsyncIterator[PageInput], options: PipelineOptions) -> AsyncIterator[PageOutcome]:
        self.options_seen.append(options)
        if self.raise_on_run is not None:
            raise self.raise_on_run
        async for page in pages:
            if page.error is not None:
                yield PageOutcome(page.index, "error", error=page.error)
                continue
            assert page.image is not None
            if self.raise_after is not None and self.pages_run >= self.raise_after[0]:
                if self.raise_after[1] is not None:
                    raise self.raise_after[1]
                await asyncio.sleep(3600)
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            self.pages_run += 1
            self.long_sides.append(max(page.width, page.height))
            n = read_number(page.image)
            if n in self.fail:
                yield PageOutcome(page.index, "error", error=PageError("UNAVAILABLE", "no decoder replica answered"))
                continue
            w, h = page.width, page.height
            if self.line_mode:
                segs = [SegmentText(0, f"line one of page {n}", (0.0, 0.0, float(w), h / 2), generated_tokens=5),
                        SegmentText(1, f"line two of page {n}", (0.0, h / 2, float(w), float(h)), generated_tokens=5)]
                text = "\n".join(s.text for s in segs)
            else:
                text = (f"<|ref|>title<|/ref|><|det|>[[100, 50, 899, 150]]<|/det|>\n# Page {n}\n\n"
                        f"<|ref|>text<|/ref|><|det|>[[100, 300, 899, 899]]<|/det|>\nbody of page {n}")
                segs = [SegmentText(0, text, (0.0, 0.0, float(w), float(h)), generated_tokens=12)]
            finish = self.finish.get(n, "stop")
            for s in segs:
                s.finish_reason = finish
            yield PageOutcome(page.index, "ok", text=text, segments=segs, finish_reason=finish,
                              vision_tokens=256, generated_tokens=sum(s.generated_tokens for s in segs),
                              width=w, height=h)


@pytest.fixture
def gw_config(tmp_path) -> GatewayConfig:
    cfg = GatewayConfig()
    cfg.stores.data_dir = str(tmp_path / "data")
    cfg.request_timeout_s = 30.0
    return cfg


@pytest.fixture
def fake() -> FakePipeline:
    return FakePipeline()


@pytest.fixture
async def rest_client(gw_config, fake) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client on the REST app of a :class:`GatewayCore` over ``fake`` (not started: no job
    workers), closed after the test."""
    core = GatewayCore(gw_config, fake)
    app = create_app(gw_config, fake, core)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as c:
        yield c
    await core.close()
