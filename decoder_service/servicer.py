"""grpc.aio ``inkstream.decoder.v1.TextDecoder`` servicer: converts messages and calls the engine.

Error policy of ``Decode`` (one bidirectional call carries one or more segments):

* a bad *segment* (wrong vision-token shape / dtype / too many tokens, NaN, unknown task, duplicate
  segment_id, prompt too long) gets one response with ``error`` = INVALID_ARGUMENT and a message naming
  the expected shape; the call and its other segments go on ("one bad page does not fail the rest");
* an engine failure while a segment runs gets a per-segment INTERNAL ``error``;
* overload (waiting queue full) aborts the whole call with RESOURCE_EXHAUSTED plus a RetryInfo hint,
  and not-ready / draining aborts it with UNAVAILABLE: both are transient, so the caller retries the
  call's segments on another replica (the gateway still holds their vision tokens);
* the client cancelling or closing the call cancels every open sequence of the call at once.

The call's ``x-request-id`` and ``x-inkstream-priority`` metadata (:func:`inkstream.fair.key_from_metadata`)
give its segments their turn in the engine's waiting queue.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc

from decoder_service import convert
from decoder_service.config import DecoderConfig
from decoder_service.engine import DecoderEngine, EngineStream
from inkstream.errors import InkstreamError, InternalError, InvalidInput, Unavailable, grpc_guard
from inkstream.fair import key_from_metadata
from inkstream.lifecycle import Lifecycle
from inkstream.pb import decoder_pb2, decoder_pb2_grpc

log = logging.getLogger("inkstream.decoder.servicer")
_END = object()  # a reader or pump task finished


class TextDecoderServicer(decoder_pb2_grpc.TextDecoderServicer):
    """``engine`` is None until weights are loaded (calls get UNAVAILABLE from ``lifecycle`` until ready)."""

    def __init__(self, cfg: DecoderConfig, lifecycle: Lifecycle, engine: DecoderEngine | None = None):
        self.cfg = cfg
        self.lifecycle = lifecycle
        self.engine = engine

    def _engine(self) -> DecoderEngine:
        self.lifecycle.check_accepting()
        if self.engine is None:
            raise Unavailable("this replica is still loading its model; retry shortly")
        return self.engine

    @grpc_guard
    async def Info(self, request: decoder_pb2.InfoRequest,
                   context: grpc.aio.ServicerContext) -> decoder_pb2.InfoResponse:
        """The loaded model and limits (UNAVAILABLE while the model loads)."""
        if self.engine is None:
            raise Unavailable("this replica is still loading its model; retry shortly")
        return convert.info_to_pb(self.engine, self.cfg)

    @grpc_guard
    async def Decode(self, request_iterator: AsyncIterator[decoder_pb2.DecodeRequest],
                     context: grpc.aio.ServicerContext) -> AsyncIterator[decoder_pb2.DecodeResponse]:
        """Segments in, text deltas out (interleaved by segment_id) as the engine decodes them, or one
        response per segment when it finishes for a request with ``whole_segment``. A bad
        segment, or one sent after a drain began, gets an item error; a full decoder aborts the call
        with RESOURCE_EXHAUSTED + retry hint; ending the call cancels its sequences.
        """
        engine = self._engine()
        key = key_from_metadata(context.invocation_metadata())  # request id + priority class (gateway)
        out: asyncio.Queue[Any] = asyncio.Queue()
        streams: list[EngineStream] = []
        tasks: list[asyncio.Task] = []

        async def pump(segment_id: int, stream: EngineStream) -> None:
            try:
                async with self.lifecycle.track():
                    async for ev in stream:  # a whole_segment sequence has one event (DecodeEngine.submit)
                        out.put_nowait(convert.event_to_pb(segment_id, ev))
            except InkstreamError as exc:
                out.put_nowait(convert.error_to_pb(segment_id, exc))
            finally:
                out.put_nowait(_END)

        async def read() -> None:
            seen: set[int] = set()
            try:
                async for req in request_iterator:
                    seg = req.segment_id
                    try:
                        if seg in seen:
                            raise InvalidInput(f"segment_id {seg} was already used in this call; ids must be unique")
                        seen.add(seg)
                        self.lifecycle.check_accepting()
                        convert.check_vision_revision(req.vision_revision, engine.half.revision)
                        vt = convert.vision_tokens_from_pb(req.vision_tokens, engine.half.hidden_size,
                                                           engine.half.max_vision_tokens)
                        params = convert.sampling_from_pb(req.sampling, self.cfg)
                        stream = await engine.submit(vt, params, req.task or None, req.prompt or None,
                                                     whole=req.whole_segment, key=key)
                    except (InvalidInput, Unavailable) as exc:
                        # Bad segment, or the replica began draining mid-call: refuse this segment
                        # only; segments already running finish (drain_grace_s) and the gateway
                        # sends the refused ones to another replica.
                        out.put_nowait(convert.error_to_pb(seg, exc))
                        continue
                    streams.append(stream)
                    tasks.append(asyncio.create_task(pump(seg, stream)))
            except InkstreamError as exc:  # overload (decoder full): abort the call
                out.put_nowait(exc)
            except (grpc.RpcError, asyncio.CancelledError):
                raise
            except Exception as exc:  # a bug: abort with INTERNAL (logged)
                log.exception("decode request reader failed")
                out.put_nowait(InternalError(f"internal error ({type(exc).__name__})"))
            finally:
                out.put_nowait(_END)

        ended = 0  # _END markers received: one per pump plus the reader's
        reader = asyncio.create_task(read())
        try:
            while True:
                item = await out.get()
                if item is _END:
                    ended += 1
                    # The reader appends every pump before putting its own _END, so once the reader
                    # is done, len(tasks) is final.
                    if reader.done() and ended == len(tasks) + 1:
                        return
                    continue
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            reader.cancel()
            for s in streams:
                s.cancel()
            for t in tasks:
                t.cancel()
