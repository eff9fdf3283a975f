"""Fake encoder / decoder replicas for pipeline tests: real grpc.aio servers implementing the real
protos, computing their output from their input so order, duplication and routing are checkable.

- Encoder: page image bytes -> ``n_segments`` segments (first image byte % 3 + 1), each
  ``[TOKENS, HIDDEN]`` float32 whose first element encodes (page digest, segment index).
- Decoder: text of a segment = ``expected_text(image, segment)``, computed from the vision tokens
  it received, streamed in two deltas with a short sleep between (so streams interleave).
Both count calls per page digest and can be told to fail (per digest or for every call).
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import struct

import grpc

from inkstream import errors
from inkstream.lifecycle import Lifecycle, server_options
from inkstream.pb import decoder_pb2, decoder_pb2_grpc, encoder_pb2, encoder_pb2_grpc, tensor_pb2

HIDDEN = 4
TOKENS = 3


def digest(image: bytes) -> int:
    """24-bit digest of a page image (exactly representable in float32)."""
    return int.from_bytes(hashlib.sha256(image).digest()[:3], "little")


def n_segments(image: bytes) -> int:
    return image[0] % 3 + 1


def expected_page_text(image: bytes) -> str:
    """What the pipeline must return for a page image (segments joined by newlines)."""
    d = digest(image)
    return "\n".join(f"page-{d:06x}-seg{i}" for i in range(n_segments(image)))


def _tokens(d: int, seg: int, shape: tuple[int, int] = (TOKENS, HIDDEN)) -> tensor_pb2.Tensor:
    """float32 ``shape`` tensor whose first two elements are (digest, segment index)."""
    head = struct.pack("<2f", float(d), float(seg))
    data = head + struct.pack("<f", 0.5) * (shape[0] * shape[1] - 2)
    return tensor_pb2.Tensor(shape=list(shape), dtype=tensor_pb2.DTYPE_FLOAT32, data=data)


class FakeEncoder(encoder_pb2_grpc.VisionEncoderServicer):
    def __init__(self, delay_s: float = 0.01):
        self.delay_s = delay_s
        self.calls: collections.Counter[int] = collections.Counter()  # page digest -> Encode requests
        self.fail_digests: dict[int, str] = {}  # digest -> status code name to abort with
        self.fail_all: str | None = None
        self.active = 0
        self.max_active = 0
        self.metadata: list[dict] = []  # invocation metadata of each Encode call
        self.tokens_shape = (TOKENS, HIDDEN)  # [n_tokens, hidden] of every segment
        self.revision = ""  # weights revision put on every EncodeResponse
        self.pre_read: dict[int, str] = {}  # segment index -> the text it was read as by its shape (Segment.pre_read)
        self.max_queue_pages = self.max_batch_size = 0  # capacity reported by Info (0: none)
        self.work_window_pages = 0  # window sized in time reported by Info (0: none)
        self.seconds_per_page = 0.0  # busy seconds per page reported by Info (0: unknown)
        self.info_calls = 0
        self.info_delay_s = 0.0  # seconds each Info call takes

    async def Info(self, request, context):
        self.info_calls += 1
        await asyncio.sleep(self.info_delay_s)
        return encoder_pb2.InfoResponse(
            model_id="fake/encoder", family="fake", hidden_size=HIDDEN, wire_dtype=tensor_pb2.DTYPE_FLOAT32,
            modes=[encoder_pb2.ModeInfo(name="base", page_long_side_px=1024, max_vision_tokens=9),
                   encoder_pb2.ModeInfo(name="small", page_long_side_px=640, max_vision_tokens=9)],
            default_mode="base", max_image_bytes=1 << 20, revision=self.revision,
            max_queue_pages=self.max_queue_pages, max_batch_size=self.max_batch_size,
            work_window_pages=self.work_window_pages, seconds_per_page=self.seconds_per_page)

    async def Encode(self, request_iterator, context):
        self.metadata.append(dict(context.invocation_metadata()))
        async for req in request_iterator:
            d = digest(req.image)
            self.calls[d] += 1
            self.active += 1
            self.max_active = max(self.max_active, self.active)
            try:
                await asyncio.sleep(self.delay_s)
            finally:
                self.active -= 1
            code = self.fail_all or self.fail_digests.get(d)
            if code == "ITEM_INVALID":
                yield encoder_pb2.EncodeResponse(page_index=req.page_index,
                                                 error={"code": "INVALID_ARGUMENT", "message": "not an image"})
                continue
            if code == "ITEM_TOO_LARGE":  # over this replica's pixel limit, as encoder_service.images says
                yield encoder_pb2.EncodeResponse(page_index=req.page_index, error={
                    "code": "INVALID_ARGUMENT", "reason": "PAYLOAD_TOO_LARGE",
                    "message": "page image is 9000x9000 = 81000000 pixels; the limit is 50000000 pixels"})
                continue
            if code:
                await errors.abort(context, errors.error_for_code(code, f"fake encoder fails with {code}"))
            yield encoder_pb2.EncodeResponse(
                page_index=req.page_index, width=100, height=200,
                n_vision_tokens=self.tokens_shape[0] * n_segments(req.image),
                model_id="fake/encoder", revision=self.revision,
                segments=[encoder_pb2.Segment(index=i, vision_tokens=_tokens(d, i, self.tokens_shape),
                                              box={"x0": 0, "y0": i, "x1": 100, "y1": i + 1},
                                              pre_read=self.pre_read.get(i, ""),
                                              pre_read_confidence=0.9 if i in self.pre_read else 0.0,
                                              tower="shape" if i in self.pre_read else "")
                          for i in reversed(range(n_segments(req.image)))])


class FakeDecoder(decoder_pb2_grpc.TextDecoderServicer):
    def __init__(self, delay_s: float = 0.01):
        self.delay_s = delay_s
        self.calls: collections.Counter[int] = collections.Counter()  # page digest -> Decode calls
        self.segments_per_call: list[int] = []
        self.fail_digests: dict[int, str] = {}
        self.fail_first: dict[int, tuple[str, int]] = {}  # digest -> (code, how many first calls fail)
        self.fail_all: str | None = None
        self.fail_delay_s = 0.0  # seconds before a failing call aborts
        self.hang_digests: set[int] = set()  # never answer (to kill the server mid-call)
        self.item_error: str | None = None  # per-segment ItemError code for segment 0
        self.slow_digests: dict[int, float] = {}  # extra seconds before answering these pages
        self.started = asyncio.Event()
        self.info_calls = 0
        self.info_fails = False
        self.max_running = self.max_waiting = 0  # capacity reported by Info (0: none)
        self.revision = ""  # weights revision reported by Info and checked like the real decoder does
        self.vision_revisions: list[str] = []  # DecodeRequest.vision_revision of every segment
        self.metadata: list[dict] = []  # invocation metadata of each Decode call

    async def Info(self, request, context):
        self.info_calls += 1
        if self.info_fails:
            await errors.abort(context, errors.error_for_code("UNAVAILABLE", "fake decoder Info fails"))
        return decoder_pb2.InfoResponse(model_id="fake/decoder", hidden_size=HIDDEN, tasks=["ocr"], default_task="ocr",
                                        max_running=self.max_running, max_waiting=self.max_waiting,
                                        revision=self.revision)

    async def Decode(self, request_iterator, context):
        self.metadata.append(dict(context.invocation_metadata()))
        reqs = [r async for r in request_iterator]
        self.vision_revisions += [r.vision_revision for r in reqs]
        vals = [struct.unpack_from("<2f", r.vision_tokens.data) for r in reqs]
        d = int(vals[0][0])
        self.calls[d] += 1
        self.segments_per_call.append(len(reqs))
        self.started.set()
        code = self.fail_all or self.fail_digests.get(d)
        if d in self.fail_first and self.calls[d] <= self.fail_first[d][1]:
            code = code or self.fail_first[d][0]
        if code:
            await asyncio.sleep(self.fail_delay_s)
            await errors.abort(context, errors.error_for_code(code, f"fake decoder fails with {code}"))
        if d in self.hang_digests:
            await asyncio.sleep(3600)
        await asyncio.sleep(self.slow_digests.get(d, 0.0))
        for r, (dd, seg) in zip(reqs, vals, strict=True):
            if r.vision_revision and self.revision and r.vision_revision != self.revision:
                yield decoder_pb2.DecodeResponse(segment_id=r.segment_id, error={
                    "code": "UNAVAILABLE", "message": "other weights", "reason": "WEIGHTS_MISMATCH"})
                continue
            if self.item_error and int(seg) == 0:
                yield decoder_pb2.DecodeResponse(segment_id=r.segment_id,
                                                 error={"code": self.item_error, "message": "bad segment"})
                continue
            yield decoder_pb2.DecodeResponse(segment_id=r.segment_id, text_delta=f"page-{int(dd):06x}")
        await asyncio.sleep(self.delay_s)
        for r, (_, seg) in zip(reqs, vals, strict=True):
            other_weights = r.vision_revision and self.revision and r.vision_revision != self.revision
            if (self.item_error and int(seg) == 0) or other_weights:
                continue
            yield decoder_pb2.DecodeResponse(segment_id=r.segment_id, text_delta=f"-seg{int(seg)}",
                                             finish_reason=decoder_pb2.FINISH_REASON_STOP,
                                             usage=decoder_pb2.Usage(generated_tokens=2))


async def start_server(servicer, kind: str) -> tuple[grpc.aio.Server, str]:
    """Start ``servicer`` (FakeEncoder / FakeDecoder) with a SERVING health service on 127.0.0.1:0."""
    server = grpc.aio.server(options=server_options())
    if kind == "encoder":
        encoder_pb2_grpc.add_VisionEncoderServicer_to_server(servicer, server)
        name = "inkstream.encoder.v1.VisionEncoder"
    else:
        decoder_pb2_grpc.add_TextDecoderServicer_to_server(servicer, server)
        name = "inkstream.decoder.v1.TextDecoder"
    lc = Lifecycle([name])
    lc.register(server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    await lc.set_serving()
    servicer.lifecycle = lc
    return server, f"127.0.0.1:{port}"
