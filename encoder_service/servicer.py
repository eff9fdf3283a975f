"""grpc.aio ``inkstream.encoder.v1.VisionEncoder`` servicer: converts messages, calls the batcher.

``Encode`` (bidi stream): every incoming page is submitted to :class:`MicroBatcher` at once, so the
pages of one stream are batched with each other and with other streams' pages; each EncodeResponse
is written as soon as its page is done (completion order, matched by ``page_index``). A failed page
gets a response with ``error`` set and the stream goes on.

Call-level vs page-level errors:

* The whole call fails (status + message, RetryInfo where it applies) when the replica is not
  ready or draining (UNAVAILABLE), or when its queue is already full as the stream opens
  (RESOURCE_EXHAUSTED + ``google.rpc.RetryInfo``, read by :func:`inkstream.errors.retry_after_of`).
* Per page (``EncodeResponse.error``): bad image / mode (INVALID_ARGUMENT), queue full for this page
  (RESOURCE_EXHAUSTED; the message says "retry after X s"), page arriving after drain started
  (UNAVAILABLE), model failure (INTERNAL).

Per-stream flow control: one stream may hold at most ``max_queue_pages`` pages that are admitted
but whose responses are not yet written (so one stream alone is slowed down, never rejected); beyond
that the servicer stops reading the stream's requests until the client reads responses (HTTP/2
back-pressure, no unbounded buffering of finished vision tokens).

When the client cancels the stream (or its deadline passes), the stream's queued pages are removed.
The call's ``x-request-id`` and ``x-inkstream-priority`` metadata (:func:`inkstream.fair.key_from_metadata`)
give its pages their turn in the encoder's fair queues.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc

from encoder_service.batcher import MicroBatcher
from encoder_service.convert import ServiceInfo, encode_response, error_response, info_response, page_request
from inkstream import refused_stream, tracing
from inkstream.errors import InkstreamError, InternalError, InvalidInput, Unavailable, as_inkstream_error, grpc_guard
from inkstream.fair import WorkKey, key_from_metadata
from inkstream.lifecycle import Lifecycle
from inkstream.pb import encoder_pb2, encoder_pb2_grpc

log = logging.getLogger("inkstream.encoder.servicer")

_READER_DONE = object()
# Bytes of a response besides the tensor payloads (page fields, segment boxes, tags); generous.
_RESPONSE_OVERHEAD_BYTES = 64 * 1024
#: Longest wait, seconds, for the pages a refused stream's client is still writing (refused_stream):
#: the gateway writes a document's pages at once, so they arrive within milliseconds.
REFUSAL_DRAIN_S = 1.0


class VisionEncoderServicer(encoder_pb2_grpc.VisionEncoderServicer):
    """``info`` is None until the model is loaded (then Info answers UNAVAILABLE)."""

    def __init__(self, batcher: MicroBatcher, lifecycle: Lifecycle, max_message_bytes: int):
        self.batcher = batcher
        self.lifecycle = lifecycle
        self.max_message_bytes = max_message_bytes
        self.info: ServiceInfo | None = None

    @grpc_guard
    async def Info(self, request: encoder_pb2.InfoRequest,
                   context: grpc.aio.ServicerContext) -> encoder_pb2.InfoResponse:
        """Model id / revision / family / hidden size / wire dtype / modes, the service limits and
        the work window sized in time; UNAVAILABLE until the model is loaded.
        """
        if self.info is None:
            raise Unavailable("the encoder is still loading its model; retry shortly")
        return info_response(self.info, self.batcher.work_window_pages(), self.batcher.seconds_per_page())

    @grpc_guard
    async def Encode(
        self, request_iterator: AsyncIterator[encoder_pb2.EncodeRequest], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[encoder_pb2.EncodeResponse]:
        """Bidi stream of pages -> one EncodeResponse per page in completion order (module docstring)."""
        try:
            self.lifecycle.check_accepting()
            self.batcher.check_admission()
        except InkstreamError:  # the client may still be writing pages: read them first (refused_stream)
            await refused_stream.discard(request_iterator, REFUSAL_DRAIN_S, self.max_message_bytes,
                                         lambda msg: msg.ByteSize())
            raise
        info = self.info
        if info is None:  # ready implies loaded; keep the invariant explicit
            raise Unavailable("the encoder is still loading its model; retry shortly")
        out: asyncio.Queue[Any] = asyncio.Queue()
        tasks: set[asyncio.Task] = set()
        outstanding = 0  # pages submitted whose response is not yet in `out`
        stream_id = object()
        key = key_from_metadata(context.invocation_metadata())  # request id + priority class (gateway)
        # Per-stream flow control (module docstring): at most `max_queue_pages` pages of this stream
        # admitted and not yet written back, so a lone stream never trips the admission bound (which
        # also counts pages still being decoded) and unread responses cannot pile up.
        window = asyncio.Semaphore(self.batcher.limits.max_queue_pages)

        def deliver(resp: encoder_pb2.EncodeResponse) -> None:
            nonlocal outstanding
            outstanding -= 1
            out.put_nowait(resp)

        async def one(index: int, image: bytes, mode: str) -> None:
            async with self.lifecycle.track(1):
                resp = await self._page(index, image, mode, info, stream_id, key)
            deliver(resp)

        async def read() -> None:
            nonlocal outstanding
            try:
                async for msg in request_iterator:
                    req = page_request(msg)
                    await window.acquire()
                    outstanding += 1
                    task = asyncio.create_task(one(req.page_index, req.image, req.mode))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # noqa: BLE001 - the client side of the stream broke
                out.put_nowait(exc)
                return
            out.put_nowait(_READER_DONE)

        reader = asyncio.create_task(read())
        reader_done = False
        try:
            while not (reader_done and outstanding == 0 and out.empty()):
                item = await out.get()
                if item is _READER_DONE:
                    reader_done = True
                elif isinstance(item, BaseException):
                    raise item
                else:
                    yield item
                    window.release()
        finally:
            reader.cancel()
            for task in list(tasks):
                task.cancel()
            self.batcher.cancel_stream(stream_id)

    async def _page(self, index: int, image: bytes, mode: str, info: ServiceInfo,
                    stream_id: object, key: WorkKey) -> encoder_pb2.EncodeResponse:
        """Encode one page into its EncodeResponse; any failure becomes a per-page ``error``."""
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        with tracing.tracer().start_as_current_span("encoder.page", attributes={"inkstream.page_index": index}) as span:
            try:
                if index < 0:
                    raise InvalidInput(f"page_index must be >= 0, got {index}")
                if self.lifecycle.draining:
                    raise Unavailable("this replica started draining; retry this page on another replica")
                res = await self.batcher.submit(image, mode, stream_id=stream_id, key=key)
                resp = await asyncio.to_thread(
                    encode_response, index, res.page, wire_dtype=info.wire_dtype, model_id=info.model_id,
                    seconds=res.seconds, revision=info.revision
                )
                size = resp.ByteSize()
                if size + _RESPONSE_OVERHEAD_BYTES > self.max_message_bytes:
                    raise InternalError(
                        f"page {index}: its vision tokens need {size} bytes on the wire, above this encoder's "
                        f"max_message_bytes ({self.max_message_bytes}); raise max_message_bytes or use a 2-byte "
                        "wire_dtype"
                    )
                span.set_attributes({"inkstream.n_vision_tokens": res.page.n_vision_tokens,
                                     "inkstream.prepare_s": res.prepare_s, "inkstream.queue_s": res.queue_s,
                                     "inkstream.thread_wait_s": res.thread_wait_s,
                                     "inkstream.forward_s": res.forward_s, "inkstream.batch_pages": res.batch_pages})
                return resp
            except Exception as exc:  # converted into a per-page error (CancelledError passes)
                err = as_inkstream_error(exc)
                if not isinstance(exc, InkstreamError):
                    log.error("page %d failed", index, exc_info=exc)
                span.set_attribute("inkstream.error_code", err.code_name)
                return error_response(index, err, model_id=info.model_id, seconds=loop.time() - t0)
