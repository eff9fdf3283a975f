"""Decoder server factory: gRPC ``TextDecoder`` + ``grpc.health.v1`` + drain, one engine per process.

Start-up order: the gRPC server starts at once with health NOT_SERVING (so startup probes see the
process), then weights load (on a worker thread), the engine starts, one warm-up sequence runs
(random vision tokens, greedy, 2 new tokens), and only then health turns SERVING. SIGTERM (via
:meth:`DecoderServer.install_signal_handlers`) turns health NOT_SERVING, refuses new calls with
UNAVAILABLE and lets in-flight sequences finish within ``drain_grace_s``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import torch

from decoder_service.config import DecoderConfig
from decoder_service.engine import DecoderEngine, make_engine
from decoder_service.engine import drain as drain_engine
from decoder_service.sampling import SamplingParams
from decoder_service.servicer import TextDecoderServicer
from inkstream import telemetry, tls, trace_interceptors
from inkstream.errors import InvalidInput
from inkstream.lifecycle import Lifecycle, in_daemon_thread, listener_options
from inkstream.pb import decoder_pb2, decoder_pb2_grpc
from inkstream.wire import dtype_from_name
from models.base import DecoderHalf
from models.registry import decoder_half_class, family_of

log = logging.getLogger("inkstream.decoder.server")
SERVICE_NAME = decoder_pb2.DESCRIPTOR.services_by_name["TextDecoder"].full_name


def load_half(cfg: DecoderConfig) -> DecoderHalf:
    """Load the decoder half of ``cfg.model_dir`` (family from its config.json). Raises InvalidInput."""
    if not cfg.model_dir:
        raise InvalidInput("no model directory given (--model DIR or model_dir in the config)")
    cls = decoder_half_class(family_of(cfg.model_dir))
    return cls.load(cfg.model_dir, device=cfg.device, dtype=dtype_from_name(cfg.dtype))


@dataclass
class DecoderServer:
    """A started decoder server. Unpacks as ``server, port, engine = await build_server(...)``.

    ``engine`` is None until weights are loaded when the half is loaded in the background;
    ``ready`` completes after warm-up (health SERVING) and raises if loading or warm-up failed.
    """

    server: grpc.aio.Server
    port: int  # bound gRPC port
    engine: DecoderEngine | None
    lifecycle: Lifecycle
    servicer: TextDecoderServicer
    cfg: DecoderConfig
    ready: asyncio.Task = field(repr=False)
    metrics_port: int | None = None

    def __iter__(self) -> Iterator[Any]:
        return iter((self.server, self.port, self.engine))

    def install_signal_handlers(self) -> None:
        """SIGTERM / SIGINT start a drain (call from the running loop)."""
        self.lifecycle.install_signal_handlers(self.server, self.cfg.drain_grace_s)

    async def drain(self) -> None:
        """NOT_SERVING, refuse new work, wait up to ``drain_grace_s`` for in-flight sequences, stop."""
        await self.lifecycle.drain(self.server, self.cfg.drain_grace_s)
        if self.engine is not None:  # calls are gone; let sequences the engine still holds end
            await drain_engine(self.engine, min(1.0, self.cfg.drain_grace_s))
        await self._stop_engine()

    async def stop(self, grace_s: float | None = 0.5) -> None:
        """Stop at once (tests): cancel in-flight calls and sequences."""
        if not self.ready.done():
            self.ready.cancel()
        await self.server.stop(grace_s)
        await self._stop_engine()

    async def _stop_engine(self) -> None:
        if self.engine is not None:
            await self.engine.stop()


async def warm_up(engine: DecoderEngine) -> None:
    """Run one short greedy sequence through the engine (compiles kernels, allocates caches)."""
    h = engine.half
    n = max(1, min(16, h.max_vision_tokens))
    vt = torch.randn(n, h.hidden_size, generator=torch.Generator().manual_seed(0)) * 0.02
    stream = await engine.submit(vt, SamplingParams(max_new_tokens=2, repetition_guard=False))
    async for _ in stream:
        pass


async def build_server(cfg: DecoderConfig, half: DecoderHalf | None = None, *, wait_ready: bool = True,
                       loader: Callable[[DecoderConfig], DecoderHalf] = load_half,
                       engine: DecoderEngine | None = None) -> DecoderServer:
    """Create, bind (``cfg.host:cfg.port``; port 0 = free port) and start the decoder server.

    ``engine``: an engine made (and possibly started) before the server, as ``inkstream serve
    decoder`` does for ``vllm`` (its engine core process must start before gRPC's threads);
    ``half``: an already loaded DecoderHalf (tests); with neither, it loads ``cfg.model_dir`` with ``loader`` on a
    worker thread after the server started. With ``wait_ready`` the call returns after warm-up
    (health SERVING); otherwise at once, with ``ready`` still running (it raises if loading fails).
    The server carries the tracing interceptors (W3C trace context + request id from metadata), TLS
    when ``cfg.tls.enabled`` and, with ``cfg.metrics_port`` set, a Prometheus ``/metrics`` endpoint.
    Raises RuntimeError when the port cannot be bound, ValueError for unreadable TLS files.
    """
    metrics_port = None
    if cfg.metrics_port is not None:
        telemetry.setup_metrics("inkstream-decoder")
        metrics_port = telemetry.serve_metrics(cfg.metrics_port, cfg.host)
    server = grpc.aio.server(options=listener_options(cfg.max_message_bytes),
                             interceptors=trace_interceptors.server_interceptors())
    lifecycle = Lifecycle([SERVICE_NAME])
    lifecycle.register(server)
    await lifecycle.set_not_serving()
    await lifecycle.set_alive()  # liveness: the process answers (readiness waits for warm-up)
    servicer = TextDecoderServicer(cfg, lifecycle)
    decoder_pb2_grpc.add_TextDecoderServicer_to_server(servicer, server)
    port = tls.add_port(server, f"{cfg.host}:{cfg.port}", cfg.tls)
    if port == 0:
        raise RuntimeError(f"cannot bind the decoder to {cfg.host}:{cfg.port}")
    if cfg.tls.enabled and cfg.tls.health_port:
        lifecycle.add_plain_health(f"{cfg.host}:{cfg.tls.health_port}")
    await server.start()
    await lifecycle.start_plain_health()

    def new_engine(h: DecoderHalf) -> DecoderEngine:
        engine = make_engine(cfg, h, name=f"decoder:{port}")
        engine.forward_health = lifecycle.forward_health("decoder", cfg.max_consecutive_failures)
        return engine

    async def get_ready() -> None:  # runs once the loop next gets control, after ``bundle`` is bound below
        if bundle.engine is None:
            h = await in_daemon_thread(loader, cfg)
            bundle.engine = new_engine(h)
        await bundle.engine.start()
        await warm_up(bundle.engine)
        servicer.engine = bundle.engine
        await lifecycle.set_serving()
        log.info("decoder ready", extra={"port": port, "model_id": bundle.engine.half.model_id, "engine": cfg.engine,
                                         "max_running": cfg.max_running,
                                         "kv_cache_budget_tokens": cfg.kv_cache_budget_tokens})

    if engine is not None:
        engine.forward_health = lifecycle.forward_health("decoder", cfg.max_consecutive_failures)
    elif half is not None:
        engine = new_engine(half)
    bundle = DecoderServer(server, port, engine, lifecycle, servicer, cfg,
                           ready=asyncio.create_task(get_ready(), name="decoder-ready"), metrics_port=metrics_port)
    if wait_ready:
        try:
            await bundle.ready
        except BaseException:
            await server.stop(None)
            raise
    return bundle
