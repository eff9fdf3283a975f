"""Encoder server factory: gRPC server + health + batcher + model loading, warm-up and drain.

Start-up order (DESIGN.md, "Scaling and operations"): the gRPC port opens first with health
NOT_SERVING (so a startup probe sees the process while weights load), the encoder half is loaded
in a worker thread, one warm-up page runs through the full path (decode -> preprocess -> forward)
and one forward pass at ``max_batch_size`` pages, whose timings estimate the replica's seconds per
page until it has measured served pages (:mod:`encoder_service.warm_rate`), then health turns
SERVING. On drain (SIGTERM) health turns NOT_SERVING at once, new streams get
UNAVAILABLE, in-flight pages finish within ``drain_grace_s``, then the server and batcher stop.

Usage in tests::

    srv = await build_server(EncoderConfig(port=0), half=my_half)
    await srv.start(); await srv.wait_ready()
    ... grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}") ...
    await srv.stop()
"""

from __future__ import annotations

import asyncio
import io
import logging
import pathlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc
from PIL import Image, ImageDraw

from encoder_service.batch_types import BatchLimits
from encoder_service.batcher import MicroBatcher
from encoder_service.config import EncoderConfig
from encoder_service.convert import ServiceInfo
from encoder_service.metrics import EncoderMetrics
from encoder_service.servicer import VisionEncoderServicer
from encoder_service.warm_rate import warmup_seconds_per_page
from inkstream import telemetry, tls, trace_interceptors
from inkstream.errors import InvalidInput
from inkstream.lifecycle import Lifecycle, in_daemon_thread, listener_options
from inkstream.pb import encoder_pb2, encoder_pb2_grpc
from inkstream.wire_np import check_dtype_name
from models.base import EncoderHalf
from models.registry import encoder_half_class, family_of

log = logging.getLogger("inkstream.encoder.server")

SERVICE_NAME = encoder_pb2.DESCRIPTOR.services_by_name["VisionEncoder"].full_name
WARMUP_LONG_SIDE_PX = 1024  # used when the default mode does not name a page size


def load_half(config: EncoderConfig) -> EncoderHalf:
    """Load the encoder half of ``config.model_dir`` (family from its config.json).

    Raises InvalidInput for a missing / unknown checkpoint directory.
    """
    if not config.model_dir:
        raise InvalidInput("no model directory configured (--model DIR or model_dir in the config file)")
    model_dir = pathlib.Path(config.model_dir)
    cls = encoder_half_class(family_of(model_dir))
    return cls.load(model_dir, device=config.device, dtype=config.dtype, threads=config.intra_op_threads)


def warmup_page_png(long_side_px: int, max_pixels: int) -> bytes:
    """A synthetic portrait page (A4 aspect 1:1.414) with dark text-like bars, as PNG bytes."""
    h = max(32, long_side_px)
    w = max(32, int(round(h / 1.414)))
    while w * h > max_pixels and h > 32:
        h, w = h // 2, max(16, w // 2)
    im = Image.new("RGB", (w, h), "white")
    draw = ImageDraw.Draw(im)
    line_h = max(2, h // 40)
    for i, y in enumerate(range(h // 10, h - h // 10, 2 * line_h)):
        draw.rectangle([w // 10, y, w // 10 + (w * (5 + i % 4)) // 10, y + line_h - 1], fill=(20, 20, 20))
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    return buf.getvalue()


def warm_full_batch(half: EncoderHalf, page_png: bytes, mode: str, batch_size: int,
                    clock: Callable[[], float] = time.perf_counter) -> tuple[float, float]:
    """One forward pass at ``max_batch_size`` pages before turning SERVING. Returns (seconds the
    page took to decode and preprocess, a second time: warm, unlike the warm-up page's first pass;
    seconds of the forward pass), read from ``clock`` (monotonic seconds); (0.0, 0.0) when
    ``batch_size`` <= 1: not run.

    The allocator then holds the activation memory of the largest batch from the start, so resident
    memory does not climb under the first burst of load, and a batch that does not fit in device
    memory fails at start-up rather than under traffic (the same idea as vLLM's start-up memory
    profiling run).
    """
    if batch_size <= 1:
        return 0.0, 0.0
    t0 = clock()
    with Image.open(io.BytesIO(page_png)) as im:
        prepared = half.preprocess(im.convert("RGB"), mode)
    t1 = clock()
    half.encode_batch([prepared] * batch_size)
    return t1 - t0, clock() - t1


@dataclass
class EncoderServer:
    """A built (not yet started) encoder server; ``port`` is the bound gRPC port."""

    config: EncoderConfig
    server: grpc.aio.Server
    port: int
    batcher: MicroBatcher
    lifecycle: Lifecycle
    servicer: VisionEncoderServicer
    loader: Callable[[], EncoderHalf]
    metrics_port: int | None = None
    half: EncoderHalf | None = None
    ready_task: asyncio.Task | None = field(default=None, repr=False)  # load + warm-up

    async def start(self) -> None:
        """Open the port (readiness NOT_SERVING, liveness SERVING) and begin loading + warm-up in the
        background.
        """
        await self.lifecycle.set_not_serving()
        await self.lifecycle.set_alive()
        await self.server.start()
        await self.lifecycle.start_plain_health()
        self.ready_task = asyncio.get_running_loop().create_task(self._load_and_warm_up(), name="encoder-load")

    async def wait_ready(self, timeout: float | None = None) -> None:
        """Wait until SERVING; re-raises the loading / warm-up error (e.g. InvalidInput for a bad dir)."""
        assert self.ready_task is not None, "call start() first"
        await asyncio.wait_for(asyncio.shield(self.ready_task), timeout)

    async def _load_and_warm_up(self) -> None:
        half = await in_daemon_thread(self.loader)
        self.half = half
        cfg = self.config
        modes = tuple(half.modes())
        self.servicer.info = ServiceInfo(
            model_id=half.model_id,
            revision=half.revision,
            family=half.family,
            hidden_size=half.hidden_size,
            wire_dtype=check_dtype_name(cfg.wire_dtype),
            modes=modes,
            default_mode=half.default_mode,
            max_batch_size=cfg.max_batch_size,
            max_wait_ms=cfg.max_wait_ms,
            max_queue_pages=cfg.max_queue_pages,
            max_message_bytes=cfg.max_message_bytes,
            max_image_bytes=cfg.max_image_bytes,
            extra_columns=tuple(half.extra_columns),
            max_image_pixels=cfg.max_image_pixels,
        )
        await self.batcher.start(half)
        default = next((m for m in modes if m.name == half.default_mode), None)
        long_side = default.page_long_side_px if default and default.page_long_side_px > 0 else WARMUP_LONG_SIDE_PX
        page_png = warmup_page_png(long_side, cfg.max_image_pixels)
        res = await self.batcher.submit(page_png, half.default_mode)
        log.info("encoder warm-up page done", extra={"seconds": res.seconds, "vision_tokens": res.page.n_vision_tokens})
        prep_s, batch_s = await in_daemon_thread(warm_full_batch, half, page_png, half.default_mode,
                                                 cfg.max_batch_size, self.batcher.clock)
        batch_pages = cfg.max_batch_size
        if batch_s <= 0:  # no batch ran (max_batch_size 1): the warm-up page's own (cold) timings
            prep_s, batch_s, batch_pages = res.prepare_s - res.thread_wait_s, res.forward_s, 1
        # What Info reports as seconds_per_page until pages are measured (encoder_service.warm_rate).
        on_cpu = str(getattr(half, "device", cfg.device)).startswith("cpu")
        self.batcher.warmup_s = warmup_seconds_per_page(prep_s, self.batcher.preprocess_threads, batch_s,
                                                        batch_pages, forward_on_cpu=on_cpu)
        log.info("encoder warm-up rate", extra={"seconds_per_page": self.batcher.warmup_s, "prepare_s": prep_s,
                                                "batch_forward_s": batch_s, "batch_pages": batch_pages})
        if not self.lifecycle.draining:
            await self.lifecycle.set_serving()

    async def drain(self) -> None:
        """NOT_SERVING, wait up to ``drain_grace_s`` for in-flight pages, stop server and batcher."""
        await self.lifecycle.drain(self.server, self.config.drain_grace_s)
        await self._shutdown()

    async def stop(self, grace: float | None = 0.5) -> None:
        """Stop at once (tests / load failure): in-flight calls are cancelled after ``grace`` seconds."""
        self.lifecycle.draining = True
        await self.lifecycle.set_not_serving()
        await self.server.stop(grace)
        self.lifecycle.stopped.set()
        await self._shutdown()

    async def _shutdown(self) -> None:
        if self.ready_task is not None and not self.ready_task.done():
            self.ready_task.cancel()
            try:
                await self.ready_task
            except BaseException:  # noqa: BLE001 - load was abandoned
                pass
        await self.batcher.stop()


async def build_server(
    config: EncoderConfig,
    half: EncoderHalf | None = None,
    *,
    metrics: EncoderMetrics | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> EncoderServer:
    """Create the gRPC server (bound, not started) for ``config``.

    ``half``: an already loaded EncoderHalf (tests, benchmarks); None loads ``config.model_dir`` in
    :meth:`EncoderServer.start`. ``metrics``: instruments to use (default: the process-wide meter).
    ``clock``: monotonic seconds the batcher and the warm-up measure with (tests: a fake one).
    When ``config.metrics_port`` is set, the Prometheus ``/metrics`` endpoint is started here.
    The server carries the tracing interceptors (W3C trace context + request id from metadata) and
    TLS when ``config.tls.enabled``. Must run on the event loop that will serve. Raises RuntimeError
    if the port cannot be bound, ValueError for unreadable TLS files.
    """
    metrics_port = None
    if config.metrics_port is not None:
        telemetry.setup_metrics("inkstream-encoder")
        metrics_port = telemetry.serve_metrics(config.metrics_port, config.host)
    limits = BatchLimits(
        max_batch_size=config.max_batch_size,
        max_wait_ms=config.max_wait_ms,
        max_queue_pages=config.max_queue_pages,
        max_image_bytes=config.max_image_bytes,
        max_image_pixels=config.max_image_pixels,
        preprocess_threads=config.preprocess_threads,
    )
    batcher = MicroBatcher(limits, metrics, clock=clock)
    lifecycle = Lifecycle([SERVICE_NAME])
    batcher.forward_health = lifecycle.forward_health("encoder", config.max_consecutive_failures)
    server = grpc.aio.server(options=listener_options(config.max_message_bytes),
                             interceptors=trace_interceptors.server_interceptors())
    servicer = VisionEncoderServicer(batcher, lifecycle, config.max_message_bytes)
    encoder_pb2_grpc.add_VisionEncoderServicer_to_server(servicer, server)
    lifecycle.register(server)
    address = f"{config.host}:{config.port}"
    port = tls.add_port(server, address, config.tls)
    if port == 0:
        raise RuntimeError(f"could not bind the encoder's gRPC port at {address}")
    if config.tls.enabled and config.tls.health_port:
        lifecycle.add_plain_health(f"{config.host}:{config.tls.health_port}")
    loader: Callable[[], EncoderHalf] = (lambda: half) if half is not None else (lambda: load_half(config))
    return EncoderServer(config, server, port, batcher, lifecycle, servicer, loader, metrics_port)
