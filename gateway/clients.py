"""The gateway's gRPC clients of the encoder and decoder: the one place where protos meet plain types.

The pipeline (:mod:`gateway.pipeline`) never touches generated stubs; it calls :func:`encode_page`,
:func:`decode_segments` and :func:`fetch_encoder_info` with a ``grpc.aio`` channel and gets plain
objects back, or a :class:`CallFailure` that says how the failure may be retried.

Vision tokens are not parsed into tensors here: the gateway only forwards them, so a segment keeps
the encoder's raw little-endian bytes, shape and dtype enum (``inkstream.common.v1.Tensor``) and the
decoder receives them unchanged (no dtype conversion, no copy into torch).

Call shapes: one ``Encode`` stream per page (one request, one response), so every page is routed to
the least-loaded encoder replica on its own and retried on its own; one ``Decode`` stream per page
carrying the page's segments (a bounded window of them open at a time), so the decoder's continuous batching runs them together.
"""

from __future__ import annotations

import asyncio
import contextlib

from dataclasses import dataclass, field
from typing import Sequence

import grpc

from gateway.types import EncoderInfo, ModeInfo, SegmentText
from inkstream.errors import (DeadlineExceeded, InkstreamError, InternalError, Unavailable, WeightsMismatch,
                              error_for_code, from_rpc_error)
from inkstream.pb import decoder_pb2, decoder_pb2_grpc, encoder_pb2, encoder_pb2_grpc, tensor_pb2
from inkstream.segments import JOIN_LINE, JOINS

# Item / status codes worth retrying on another replica. CANCELLED that the gateway did not ask for
# comes from a replica cancelling work as it drains (DESIGN.md: readiness drops on drain).
TRANSIENT_CODES = frozenset({"UNAVAILABLE", "RESOURCE_EXHAUSTED", "CANCELLED"})
# Failures that may be caused by the page itself (a bug hit by this input, or a replica crash):
# a page with such failures on two different replicas is quarantined.
SUSPECT_CODES = frozenset({"INTERNAL", "UNKNOWN", "DATA_LOSS"})

_FINISH = {
    decoder_pb2.FINISH_REASON_STOP: "stop",
    decoder_pb2.FINISH_REASON_LENGTH: "length",
    decoder_pb2.FINISH_REASON_REPETITION: "repetition",
    decoder_pb2.FINISH_REASON_CANCELLED: "cancelled",
}


@dataclass(frozen=True)
class VisionSegment:
    """Vision tokens of one segment as received from the encoder.

    ``shape``: ``(n_tokens, hidden)``; ``dtype``: ``inkstream.common.v1.DType`` enum value;
    ``data``: raw little-endian row-major bytes (``n_tokens * hidden * itemsize`` bytes);
    ``box``: (x0, y0, x1, y1) in page pixels; ``index``: reading order within the page; ``join``:
    how its text goes on from the previous segment's (:data:`inkstream.segments.JOINS`).
    """

    index: int
    shape: tuple[int, ...]
    dtype: int
    data: bytes
    box: tuple[float, float, float, float]
    join: str = JOIN_LINE

    @property
    def n_tokens(self) -> int:
        """Vision tokens in this segment."""
        return int(self.shape[0]) if self.shape else 0

    @property
    def nbytes(self) -> int:
        """Bytes held by this segment's vision tokens."""
        return len(self.data)


@dataclass
class EncodedTokens:
    """One page's encoder result: segments in reading order, page size in pixels, encoder model id
    and weights ``revision`` (only a decoder of the same revision may decode the segments)."""

    page_index: int
    segments: list[VisionSegment]
    width: int
    height: int
    n_vision_tokens: int
    model_id: str = ""
    encode_seconds: float = 0.0
    revision: str = ""


@dataclass
class CallFailure(Exception):
    """A failed encode/decode attempt on one replica.

    ``error``: the inkstream error (code + message for the page error). ``transient``: retry on
    another replica. ``suspect``: counts towards quarantine (INTERNAL, or the connection was lost
    mid-call, i.e. the replica may have crashed on this page). ``unreachable``: the replica should
    get no new work until its health watch reports SERVING again. ``misrouted``: the replica cannot
    serve this page (it runs other weights); the page goes elsewhere without spending retry budget.
    """

    error: InkstreamError
    transient: bool = False
    suspect: bool = False
    unreachable: bool = False
    misrouted: bool = False

    def __str__(self) -> str:
        return f"{self.error.code_name}: {self.error.message}"


def _server_sent_status(err: grpc.RpcError) -> bool:
    """True when the status came from an inkstream handler (``grpc-status-details-bin`` trailer,
    written by :func:`inkstream.errors.abort`), False for transport-made statuses (connection lost)."""
    try:
        md = err.trailing_metadata() or ()  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001
        return False
    return any(k == "grpc-status-details-bin" for k, _ in md)


def classify_rpc_error(err: grpc.RpcError) -> CallFailure:
    """Map a failed call to a :class:`CallFailure` (see there for the flags)."""
    exc = from_rpc_error(err)
    code = err.code().name if hasattr(err, "code") else "UNAVAILABLE"
    if code == "UNAVAILABLE" and not _server_sent_status(err):
        details = (err.details() or "").lower() if hasattr(err, "details") else ""
        refused = "failed to connect" in details or "connection refused" in details or "dns" in details
        # Refused before the call started: the page cannot be to blame. Lost during the call: the
        # replica died while holding this page (maybe because of it), so the page becomes suspect.
        what = "replica unreachable" if refused else "connection to the replica lost"
        return CallFailure(Unavailable(f"{what} ({err.details() if hasattr(err, 'details') else err})"),
                           transient=True, suspect=not refused, unreachable=True)
    if code == "RESOURCE_EXHAUSTED" and not _server_sent_status(err) and "larger than max" in str(exc.message):
        # gRPC's own message-size check: deterministic, so retrying elsewhere cannot help.
        return CallFailure(type(exc)(f"message over the gRPC size limit; raise max_message_bytes on the gateway "
                                     f"and the replicas ({exc.message})"))
    if code == "DEADLINE_EXCEEDED":
        return CallFailure(DeadlineExceeded(f"no answer within the call deadline ({exc.message})"))
    return CallFailure(exc, transient=code in TRANSIENT_CODES, suspect=code in SUSPECT_CODES)


def item_failure(code: str, message: str, retry_after_s: float = 0.0, reason: str = "") -> CallFailure:
    """A per-item error (``ItemError`` in a stream that otherwise succeeded) as a CallFailure;
    ``retry_after_s`` (0 = none) becomes the error's retry hint; ``reason`` WEIGHTS_MISMATCH (the
    decoder runs other weights than the page's encoder) makes it ``misrouted``."""
    err = error_for_code(code or "INTERNAL", message or "no message", retry_after_s or None, reason)
    return CallFailure(err, transient=code in TRANSIENT_CODES, suspect=code in SUSPECT_CODES,
                       misrouted=isinstance(err, WeightsMismatch))


def call_metadata(request_id: str) -> list[tuple[str, str]]:
    """Outgoing metadata: ``x-request-id``. W3C trace context is added by the channel's client
    interceptors (:func:`inkstream.tracing.client_interceptors`, installed in :mod:`gateway.replicas`)."""
    return [("x-request-id", request_id)] if request_id else []


# ---------------------------------------------------------------- encoder


def encoder_info_from_pb(resp: encoder_pb2.InfoResponse) -> EncoderInfo:
    """Encoder ``InfoResponse`` -> :class:`EncoderInfo` (modes with ``page_long_side_px``)."""
    modes = tuple(
        ModeInfo(name=m.name, page_long_side_px=int(m.page_long_side_px), max_vision_tokens=int(m.max_vision_tokens))
        for m in resp.modes
    )
    default = resp.default_mode or (modes[0].name if modes else "")
    capacity = int(resp.max_queue_pages) + int(resp.max_batch_size) if resp.max_queue_pages > 0 else 0
    return EncoderInfo(model_id=resp.model_id, modes=modes, default_mode=default,
                       max_image_bytes=int(resp.max_image_bytes), capacity=capacity, revision=resp.revision)


async def fetch_encoder_info(channel: grpc.aio.Channel, timeout_s: float) -> EncoderInfo:
    """Call ``VisionEncoder/Info``. Raises CallFailure."""
    try:
        resp = await encoder_pb2_grpc.VisionEncoderStub(channel).Info(encoder_pb2.InfoRequest(), timeout=timeout_s)
    except grpc.RpcError as err:
        raise classify_rpc_error(err) from None
    return encoder_info_from_pb(resp)


@dataclass(frozen=True)
class DecoderInfo:
    """What the gateway uses of a decoder's ``Info``: task names and its sequence capacity
    (``max_running`` + ``max_waiting``: segments it accepts at once without RESOURCE_EXHAUSTED;
    0 when the decoder does not say); ``revision``: its weights fingerprint ("" when unknown)."""

    tasks: tuple[str, ...]
    capacity: int
    revision: str = ""


async def fetch_decoder_info(channel: grpc.aio.Channel, timeout_s: float) -> DecoderInfo:
    """Call ``TextDecoder/Info``. Raises CallFailure."""
    try:
        resp = await decoder_pb2_grpc.TextDecoderStub(channel).Info(decoder_pb2.InfoRequest(), timeout=timeout_s)
    except grpc.RpcError as err:
        raise classify_rpc_error(err) from None
    return DecoderInfo(tuple(resp.tasks), max(0, int(resp.max_running) + int(resp.max_waiting)), resp.revision)


def encoded_from_pb(resp: encoder_pb2.EncodeResponse) -> EncodedTokens:
    """``EncodeResponse`` (without error) -> :class:`EncodedTokens`."""
    segs = [
        VisionSegment(
            index=int(s.index),
            shape=tuple(int(d) for d in s.vision_tokens.shape),
            dtype=int(s.vision_tokens.dtype),
            data=s.vision_tokens.data,
            box=(s.box.x0, s.box.y0, s.box.x1, s.box.y1),
            join=JOINS[s.join] if 0 <= s.join < len(JOINS) else JOIN_LINE,
        )
        for s in resp.segments
    ]
    segs.sort(key=lambda s: s.index)
    n = int(resp.n_vision_tokens) or sum(s.n_tokens for s in segs)
    return EncodedTokens(page_index=int(resp.page_index), segments=segs, width=int(resp.width),
                         height=int(resp.height), n_vision_tokens=n, model_id=resp.model_id,
                         encode_seconds=float(resp.encode_seconds), revision=resp.revision)


async def encode_page(
    channel: grpc.aio.Channel, page_index: int, image: bytes, mode: str, *, timeout_s: float, request_id: str = ""
) -> EncodedTokens:
    """Encode one page image (PNG/JPEG bytes) on one replica. Raises CallFailure."""
    req = encoder_pb2.EncodeRequest(page_index=page_index, image=image, mode=mode)
    call = encoder_pb2_grpc.VisionEncoderStub(channel).Encode(
        iter([req]), timeout=timeout_s, metadata=call_metadata(request_id)
    )
    result: EncodedTokens | None = None
    finished = False
    try:
        # call.read() to the end of the stream rather than ``async for`` + break: a call left
        # unfinished keeps its C-core state (and, through the channel's interceptors, its Python
        # wrappers) alive until garbage collection, which showed as RSS growing with page count.
        while (resp := await call.read()) is not grpc.aio.EOF:
            if resp.page_index != page_index or result is not None:
                continue
            if resp.HasField("error") and resp.error.code:
                raise item_failure(resp.error.code, resp.error.message, resp.error.retry_after_s, resp.error.reason)
            result = encoded_from_pb(resp)
        finished = True
    except grpc.RpcError as err:
        raise classify_rpc_error(err) from None
    finally:
        if not finished:
            call.cancel()
    if result is not None:
        return result
    raise CallFailure(InternalError(f"encoder closed the stream without a result for page {page_index + 1}"),
                      suspect=True)


# ---------------------------------------------------------------- decoder


def decode_request(seg: VisionSegment, *, task: str, max_new_tokens: int, vision_revision: str = "") -> decoder_pb2.DecodeRequest:
    """One segment -> ``DecodeRequest`` (``segment_id`` = segment index; vision tokens forwarded as is;
    ``vision_revision``: the encoder's weights revision, checked by the decoder)."""
    return decoder_pb2.DecodeRequest(
        segment_id=seg.index,
        vision_tokens=tensor_pb2.Tensor(shape=list(seg.shape), dtype=seg.dtype, data=seg.data),
        task=task,
        sampling=decoder_pb2.SamplingParams(max_new_tokens=max_new_tokens),
        vision_revision=vision_revision,
    )


@dataclass
class DecodeAttempt:
    """Outcome of one Decode call: ``done`` finished segments by index, ``failed`` per-segment
    item errors by index (segments neither done nor failed were cut off by a call failure)."""

    done: dict[int, SegmentText] = field(default_factory=dict)
    failed: dict[int, CallFailure] = field(default_factory=dict)


async def decode_segments(
    channel: grpc.aio.Channel,
    segments: Sequence[VisionSegment],
    *,
    task: str,
    max_new_tokens: int,
    timeout_s: float,
    request_id: str = "",
    attempt: DecodeAttempt | None = None,
    max_segments_in_flight: int = 64,
    replica_slots: asyncio.Semaphore | None = None,
    vision_revision: str = "",
) -> DecodeAttempt:
    """Decode ``segments`` of one page on one replica in one ``Decode`` stream, at most
    ``max_segments_in_flight`` of this page open at a time and, when given, one of the replica's
    ``replica_slots`` held per open segment (shared by every page sent to that replica, sized to its
    ``max_running + max_waiting``), so the decoder's continuous batching runs them together without
    its waiting queue ever overflowing (RESOURCE_EXHAUSTED). The next segment is sent as one finishes.

    Requests are written by a task of their own, which is cancelled and awaited on every exit, and
    the response stream is read to its end, so neither a failed call nor a finished one leaves
    a task or a half-open call behind. Fills and returns ``attempt`` (finished segments survive a
    later call failure, so a retry only re-sends the unfinished ones). Raises CallFailure when the
    call itself fails; a segment whose finish reason is CANCELLED (the replica drained) is reported
    in ``failed`` as transient.
    """
    attempt = attempt if attempt is not None else DecodeAttempt()
    want = {s.index: s for s in segments}
    text: dict[int, list[str]] = {i: [] for i in want}
    window = asyncio.Semaphore(max(1, max_segments_in_flight))
    held = 0  # replica slots held by this call

    def release() -> None:
        nonlocal held
        window.release()
        if replica_slots is not None and held > 0:
            held -= 1
            replica_slots.release()

    call = decoder_pb2_grpc.TextDecoderStub(channel).Decode(timeout=timeout_s, metadata=call_metadata(request_id))

    async def writer() -> None:
        nonlocal held
        for s in segments:
            await window.acquire()
            if replica_slots is not None:
                await replica_slots.acquire()
                held += 1
            await call.write(decode_request(s, task=task, max_new_tokens=max_new_tokens, vision_revision=vision_revision))
        await call.done_writing()

    writing = asyncio.create_task(writer())
    open_ids = set(want)
    finished = False
    try:
        while (resp := await call.read()) is not grpc.aio.EOF:  # not ``async for``: see encode_page
            sid = int(resp.segment_id)
            if sid not in open_ids:
                continue
            if resp.HasField("error") and resp.error.code:
                attempt.failed[sid] = item_failure(resp.error.code, resp.error.message, resp.error.retry_after_s, resp.error.reason)
                open_ids.discard(sid)
                release()
            else:
                if resp.text_delta:
                    text[sid].append(resp.text_delta)
                if resp.finish_reason != decoder_pb2.FINISH_REASON_UNSPECIFIED:
                    reason = _FINISH.get(resp.finish_reason, "stop")
                    if reason == "cancelled":
                        attempt.failed[sid] = item_failure(
                            "CANCELLED", "the decoder replica cancelled the segment (draining)")
                    else:
                        seg = want[sid]
                        attempt.done[sid] = SegmentText(index=sid, text="".join(text[sid]), box=seg.box, join=seg.join,
                                                        finish_reason=reason,
                                                        generated_tokens=int(resp.usage.generated_tokens))
                    open_ids.discard(sid)
                    release()
        finished = True
    except grpc.RpcError as err:
        raise classify_rpc_error(err) from None
    finally:
        writing.cancel()
        with contextlib.suppress(BaseException):
            await writing
        if not finished:
            call.cancel()
        if replica_slots is not None:
            for _ in range(held):
                replica_slots.release()
            held = 0
    if open_ids:
        raise CallFailure(InternalError(f"decoder closed the stream with {len(open_ids)} segment(s) unfinished"),
                          suspect=True)
    return attempt
