"""In-process encoder server for tests: start on 127.0.0.1:0, yield a stub, stop afterwards."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterable

import grpc
from opentelemetry.sdk.metrics import MeterProvider

from encoder_service.config import EncoderConfig
from encoder_service.metrics import EncoderMetrics
from encoder_service.server import EncoderServer, build_server
from inkstream.lifecycle import client_options
from inkstream.pb import encoder_pb2, encoder_pb2_grpc
from models.base import EncoderHalf


@contextlib.asynccontextmanager
async def running_encoder(
    half: EncoderHalf, *, wait_ready: bool = True, clock: Callable[[], float] = time.perf_counter, **settings
) -> AsyncIterator[tuple[EncoderServer, encoder_pb2_grpc.VisionEncoderStub, grpc.aio.Channel]]:
    """Build + start an encoder server around ``half`` with ``settings`` (EncoderConfig fields);
    ``clock``: what it measures times with (:func:`encoder_service.server.build_server`).
    """
    config = EncoderConfig(**{"host": "127.0.0.1", "port": 0, "drain_grace_s": 5.0, **settings})
    srv = await build_server(config, half=half, metrics=EncoderMetrics(MeterProvider().get_meter("test")),
                             clock=clock)
    await srv.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}", options=client_options(config.max_message_bytes))
    try:
        if wait_ready:
            await srv.wait_ready(30)
        yield srv, encoder_pb2_grpc.VisionEncoderStub(channel), channel
    finally:
        await channel.close()
        await srv.stop(0)


def requests(pages: Iterable[tuple[int, bytes, str]]) -> list[encoder_pb2.EncodeRequest]:
    """(page_index, image bytes, mode) -> EncodeRequests."""
    return [encoder_pb2.EncodeRequest(page_index=i, image=img, mode=mode) for i, img, mode in pages]


async def encode_all(stub: encoder_pb2_grpc.VisionEncoderStub,
                     reqs: list[encoder_pb2.EncodeRequest]) -> dict[int, encoder_pb2.EncodeResponse]:
    """Send ``reqs`` on one Encode stream; responses by page_index (asserts one per page)."""
    out: dict[int, encoder_pb2.EncodeResponse] = {}
    async for resp in stub.Encode(iter(reqs)):
        assert resp.page_index not in out, f"duplicate response for page {resp.page_index}"
        out[resp.page_index] = resp
    assert sorted(out) == sorted(r.page_index for r in reqs)
    return out
