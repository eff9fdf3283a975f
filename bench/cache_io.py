"""Latency of small requests alone and while a 300-page result is written to the result cache.

Usage: ``python bench/cache_io.py [--pages 300] [--small 10] [--page-s 0.5] [--rounds 3]``

One in-process gateway core (:class:`gateway.core.GatewayCore`: the embedded stores, the result
cache on the result directory) over a stand-in page pipeline that answers each page after
``--page-s`` seconds (a replica's decode) with ``--lines`` lines of text, so what is measured is the
gateway's own event loop, not a model. Each round:

1. alone: ``--small`` one-page requests (PNG images of their own, so the cache answers none of
   them) prepared and read together through :meth:`gateway.service.OcrService.prepare` and
   ``Prepared.pages``; each request's latency (seconds, prepare to last page);
2. beside: the same number of fresh one-page requests, started once a ``--pages``-page document
   has been read (all its pages yielded); 50 ms later that document's iteration is finished, which
   writes its result (``--pages`` pages) to the result cache while the small requests wait for their
   pages.

Printed: every round's median latency of both runs, then, last, ``cache_put_latency_ratio: X`` =
median latency beside / median latency alone over all rounds (goal <= 1.2: a cache write on the
event loop blocks every other request for its whole duration). Both are measured in the same run,
so machine noise affects them alike.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import pathlib
import random
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))  # run as a script from a checkout
os.environ.setdefault("OMP_NUM_THREADS", "1")

from PIL import Image

from gateway.config import GatewayConfig
from gateway.core import GatewayCore
from gateway.ingest import UploadedFile
from gateway.ingest.upload import UploadSink
from gateway.service import OcrRequest
from gateway.types import EncoderInfo, ModeInfo, PageInput, PageOutcome, PipelineOptions, SegmentText

LINE = "the quick brown fox jumps over the lazy dog while the cache writes"


class TimedPipeline:
    """A page pipeline answering each page after ``page_s`` seconds with ``lines`` line segments."""

    def __init__(self, page_s: float, lines: int):
        self.page_s, self.lines = page_s, lines

    async def encoder_info(self) -> EncoderInfo:
        """One mode, pages rasterised at 640 px."""
        return EncoderInfo("bench/timed", (ModeInfo("base", 640, 256),), "base", 8 << 20)

    def ready(self) -> tuple[bool, str]:
        """Always ready."""
        return True, ""

    async def decoder_tasks(self) -> tuple[str, ...]:
        """No task list (the request names none)."""
        return ()

    def admit(self, request_id: str) -> _Slot:
        """No admission bound."""
        return _Slot()

    async def run(self, pages: AsyncIterator[PageInput], options: PipelineOptions) -> AsyncIterator[PageOutcome]:
        """One outcome per page: a long document's pages at once, one-page requests after ``page_s``."""
        async for page in pages:
            if not options.request_id.startswith("long"):
                await asyncio.sleep(self.page_s)
            w, h = page.width or 640, page.height or 800
            segs = [SegmentText(i, f"{LINE} {i}", (10.0, 12.0 * i, w - 10.0, 12.0 * i + 10), generated_tokens=16,
                                confidence=0.93) for i in range(self.lines)]
            yield PageOutcome(page.index, "ok", text="\n".join(s.text for s in segs), segments=segs,
                              finish_reason="stop", vision_tokens=400, generated_tokens=16 * self.lines,
                              width=w, height=h)


class _Slot:
    async def __aenter__(self) -> _Slot:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


def _upload(folder: pathlib.Path, data: bytes, name: str) -> UploadedFile:
    sink = UploadSink(folder, 1 << 30, name=name)
    sink.write(data)
    return sink.finish()


def _png(seed: int) -> bytes:
    rnd = random.Random(seed)
    im = Image.new("L", (400, 300), 255)
    im.putdata([255 if rnd.random() > 0.05 else 0 for _ in range(400 * 300)])
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    return buf.getvalue()


def _pdf(pages: int, seed: int) -> bytes:
    frames = [Image.new("L", (300, 400), 255) for _ in range(pages)]
    frames[0].putpixel((seed % 300, 0), 0)  # a document of its own each round (not a cache hit)
    buf = io.BytesIO()
    frames[0].save(buf, format="PDF", save_all=True, append_images=frames[1:], resolution=72.0)
    return buf.getvalue()


async def _one(core: GatewayCore, upload: UploadedFile, rid: str) -> float:
    t0 = time.perf_counter()
    prepared = await core.service.prepare(upload, OcrRequest(format="json"), request_id=rid)
    async with prepared:
        async for _ in prepared.pages(60.0):
            pass
    return time.perf_counter() - t0


async def _round(core: GatewayCore, folder: pathlib.Path, long_pages: int, small: int,
                 seed: int) -> tuple[float, float]:
    long_doc = _upload(folder, _pdf(long_pages, seed), f"long{seed}.pdf")
    alone = [_upload(folder, _png(seed * 1000 + i), f"a{seed}-{i}.png") for i in range(small)]
    beside = [_upload(folder, _png(seed * 1000 + 500 + i), f"b{seed}-{i}.png") for i in range(small)]
    t_alone = await asyncio.gather(*(_one(core, u, f"a{seed}-{i}") for i, u in enumerate(alone)))
    prepared = await core.service.prepare(long_doc, OcrRequest(format="json"), request_id=f"long{seed}")
    pages = prepared.pages(600.0)
    n = 0
    async for _ in pages:
        n += 1
        if n == prepared.page_count:
            break  # every page yielded; the generator's next step writes the cache
    tasks = [asyncio.create_task(_one(core, u, f"b{seed}-{i}")) for i, u in enumerate(beside)]
    await asyncio.sleep(0.05)
    t_put = time.perf_counter()
    async for _ in pages:
        pass
    put_s = time.perf_counter() - t_put
    t_beside = await asyncio.gather(*tasks)
    await prepared.close()
    print(f"round {seed}: alone median {statistics.median(t_alone):.3f} s, beside median "
          f"{statistics.median(t_beside):.3f} s (max {max(t_beside):.3f} s); the {prepared.page_count}-page "
          f"cache write took {put_s:.3f} s of the long request", flush=True)
    return statistics.median(t_alone), statistics.median(t_beside)


async def main_async(args: argparse.Namespace) -> float:
    with tempfile.TemporaryDirectory(prefix="bench-cache-io-") as d:
        folder = pathlib.Path(d)
        cfg = GatewayConfig()
        cfg.stores.data_dir = str(folder / "data")
        core = GatewayCore(cfg, TimedPipeline(args.page_s, args.lines))  # type: ignore[arg-type]
        await _one(core, _upload(folder, _png(-1), "warm.png"), "warm")
        rounds = [await _round(core, folder, args.pages, args.small, r + 1) for r in range(args.rounds)]
        await core.close()
    alone = statistics.median(a for a, _ in rounds)
    beside = statistics.median(b for _, b in rounds)
    print(f"small requests: alone {alone:.3f} s, beside a {args.pages}-page cache write {beside:.3f} s "
          f"(median over {args.rounds} rounds of {args.small})")
    print(f"cache_put_latency_ratio: {beside / alone:.3f}")
    return beside / alone


def main(argv: list[str] | None = None) -> int:
    """Run the bench (see the module docstring); returns 0."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, default=300, help="pages of the result written to the cache")
    ap.add_argument("--lines", type=int, default=60, help="text lines per page of that result")
    ap.add_argument("--small", type=int, default=10, help="one-page requests per run")
    ap.add_argument("--page-s", type=float, default=0.5, help="seconds the stand-in replica takes per page")
    ap.add_argument("--rounds", type=int, default=3)
    asyncio.run(main_async(ap.parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
