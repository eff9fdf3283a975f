"""The gateway's client of the decoder replicas: ``TextDecoder/Info`` and ``Decode`` to plain objects.

One ``Decode`` stream per page carries the page's segments (a bounded window of them open at a
time), so the decoder's continuous batching runs them together; the vision tokens are sent on
exactly as the encoder made them (no dtype conversion, no copy into torch).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import grpc

from gateway.clients.calls import CallFailure, call_metadata, classify_rpc_error, item_failure
from gateway.clients.encoder import VisionSegment
from gateway.types import SegmentText
from inkstream.errors import InternalError, Unavailable
from inkstream.fair import INTERACTIVE
from inkstream.pb import decoder_pb2, decoder_pb2_grpc, tensor_pb2

_FINISH = {
    decoder_pb2.FINISH_REASON_STOP: "stop",
    decoder_pb2.FINISH_REASON_LENGTH: "length",
    decoder_pb2.FINISH_REASON_REPETITION: "repetition",
    decoder_pb2.FINISH_REASON_CANCELLED: "cancelled",
}


@dataclass(frozen=True)
class DecoderInfo:
    """What the gateway uses of a decoder's ``Info``: task names and its sequence capacity
    (``max_running`` + ``max_waiting``: segments it accepts at once without RESOURCE_EXHAUSTED;
    0 when the decoder does not say); ``revision``: its weights fingerprint ("" when unknown);
    ``window``: segments this gateway keeps open on it (:func:`decoder_window`).
    """

    tasks: tuple[str, ...]
    capacity: int
    revision: str = ""
    window: int = 0


async def fetch_decoder_info(channel: grpc.aio.Channel, timeout_s: float) -> DecoderInfo:
    """Call ``TextDecoder/Info``. Raises CallFailure."""
    try:
        resp = await decoder_pb2_grpc.TextDecoderStub(channel).Info(decoder_pb2.InfoRequest(), timeout=timeout_s)
    except grpc.RpcError as err:
        raise classify_rpc_error(err) from None
    running, waiting = max(0, int(resp.max_running)), max(0, int(resp.max_waiting))
    return DecoderInfo(tuple(resp.tasks), running + waiting, resp.revision,
                       decoder_window(running, waiting, int(resp.work_window_segments)))


def decoder_window(max_running: int, max_waiting: int, work_window_segments: int = 0) -> int:
    """Segments the gateway keeps open on one decoder replica: the window the replica sized in time
    (``InfoResponse.work_window_segments``), or, from a replica that does not report one, its
    running batch plus a quarter of it queued (so a finished row is replaced at the next step);
    never more than it accepts (``max_running + max_waiting``); 0 (no window) when it does not say.
    The rest wait in the
    gateway's fair window rather than in the decoder's FIFO waiting queue, where a small request's
    segments would queue behind a long document's.
    """
    if max_running <= 0:
        return 0
    if work_window_segments > 0:
        return min(max_running + max_waiting, work_window_segments)
    return min(max_running + max_waiting, max_running + max(1, max_running // 4))


def pre_read_text(seg: VisionSegment) -> SegmentText:
    """The finished text of a segment the encoder read without the decoder (``seg.pre_read``, a
    table's nil dash read by its shape): its characters and an end counted as generated tokens, its
    ``pre_read_confidence`` as confidence, finish reason "stop". Such a segment is never sent to a
    decoder (:meth:`gateway.routing.page_stages.PageStages._decode`).
    """
    return SegmentText(index=seg.index, text=seg.pre_read, box=seg.box, join=seg.join, finish_reason="stop",
                       rotation=seg.rotation, tower=seg.tower, generated_tokens=len(seg.pre_read) + 1,
                       confidence=min(1.0, max(0.0, float(seg.pre_read_confidence))))


def decode_request(
    seg: VisionSegment, *, task: str, max_new_tokens: int, vision_revision: str = "", temperature: float = 0.0
) -> decoder_pb2.DecodeRequest:
    """One segment -> ``DecodeRequest`` (``segment_id`` = segment index; vision tokens forwarded as is;
    ``vision_revision``: the encoder's weights revision, checked by the decoder; ``temperature``
    0 = greedy). Asks for each segment's text in one response when it finishes (``whole_segment``):
    the gateway uses only finished segments, and a response per decode step cost both processes
    CPU (~3,000 messages a letter page).
    """
    return decoder_pb2.DecodeRequest(
        segment_id=seg.index,
        vision_tokens=tensor_pb2.Tensor(shape=list(seg.shape), dtype=seg.dtype, data=seg.data),
        task=task,
        sampling=decoder_pb2.SamplingParams(max_new_tokens=max_new_tokens, temperature=temperature),
        vision_revision=vision_revision,
        whole_segment=True,
    )


class Slots(Protocol):
    """A replica's shared segment window as the caller's semaphore (``asyncio.Semaphore`` or
    :class:`inkstream.fair_window.KeyedSlots`): ``await acquire()`` one slot, ``release()`` it.
    """

    async def acquire(self) -> Any:
        """Take one slot (waits for one)."""
        ...

    def release(self) -> None:
        """Give one slot back."""
        ...


@dataclass
class DecodeAttempt:
    """Outcome of one Decode call: ``done`` finished segments by index, ``failed`` per-segment
    item errors by index (segments neither done nor failed were cut off by a call failure).
    """

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
    priority: int = INTERACTIVE,
    attempt: DecodeAttempt | None = None,
    max_segments_in_flight: int = 64,
    replica_slots: Slots | None = None,
    vision_revision: str = "",
    temperature: float = 0.0,
) -> DecodeAttempt:
    """Decode ``segments`` of one page on one replica in one ``Decode`` stream, at most
    ``max_segments_in_flight`` of this page open at a time and, when given, one of the replica's
    ``replica_slots`` held per open segment (shared by every page sent to that replica, sized to its
    ``max_running + max_waiting``), so the decoder's continuous batching runs them together without
    its waiting queue ever overflowing (RESOURCE_EXHAUSTED). The next segment is sent as one finishes.

    Requests are written by a task of their own, which is cancelled and awaited on every exit, and
    the response stream is read to its end, so neither a failed call nor a finished one leaves
    a task or a half-open call behind. Fills and returns ``attempt`` (finished segments survive a
    later call failure, so a retry only re-sends the unfinished ones). ``request_id`` and ``priority``
    (an :mod:`inkstream.fair` class) order the segments in the decoder's admission. Raises CallFailure when the
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

    call = decoder_pb2_grpc.TextDecoderStub(channel).Decode(timeout=timeout_s,
                                                            metadata=call_metadata(request_id, priority))

    async def writer() -> None:
        nonlocal held
        for s in segments:
            await window.acquire()
            if replica_slots is not None:
                await replica_slots.acquire()
                held += 1
            await call.write(
                decode_request(s, task=task, max_new_tokens=max_new_tokens, vision_revision=vision_revision,
                               temperature=temperature))
        await call.done_writing()

    def writer_failed(task: asyncio.Task[None]) -> None:
        # A writer that fails (a request that cannot be built or written) would otherwise leave the
        # reader waiting for answers to segments never sent, until the call's deadline: end the call
        # now, so the read below returns and the failure is raised at once.
        if not task.cancelled() and task.exception() is not None:
            call.cancel()

    writing = asyncio.create_task(writer())
    writing.add_done_callback(writer_failed)
    open_ids = set(want)
    finished = False
    try:
        while (resp := await call.read()) is not grpc.aio.EOF:  # not ``async for``: see encoder.encode_page
            sid = int(resp.segment_id)
            if sid not in open_ids:
                continue
            if resp.HasField("error") and resp.error.code:
                attempt.failed[sid] = item_failure(resp.error.code, resp.error.message, resp.error.retry_after_s,
                                                   resp.error.reason)
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
                        attempt.done[sid] = SegmentText(index=sid, text="".join(text[sid]), box=seg.box,
                                                        join=seg.join, finish_reason=reason,
                                                        rotation=seg.rotation, tower=seg.tower,
                                                        generated_tokens=int(resp.usage.generated_tokens),
                                                        confidence=float(resp.usage.confidence))
                    open_ids.discard(sid)
                    release()
        finished = True
    except grpc.RpcError as err:
        _raise_writer_failure(writing)
        raise classify_rpc_error(err) from None
    except asyncio.CancelledError:
        if writing.done():  # cancelled by writer_failed, not by our caller
            _raise_writer_failure(writing)
        raise
    finally:
        writing.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):  # its failure is raised above
            await writing
        if not finished:
            call.cancel()
        if replica_slots is not None:
            for _ in range(held):
                replica_slots.release()
            held = 0
    _raise_writer_failure(writing)
    if open_ids:
        raise CallFailure(InternalError(f"decoder closed the stream with {len(open_ids)} segment(s) unfinished"),
                          suspect=True)
    return attempt


def _raise_writer_failure(writing: asyncio.Task[None]) -> None:
    """Raise the request writer's failure, if it failed, as a CallFailure (transient: the page may
    be retried on another replica at once; a stream that broke under the writer is classified as
    the RPC error it was).
    """
    if not writing.done() or writing.cancelled() or writing.exception() is None:
        return
    exc = writing.exception()
    if isinstance(exc, grpc.RpcError):
        raise classify_rpc_error(exc) from None
    raise CallFailure(Unavailable(f"sending the segments to the decoder failed: {exc!r}"), transient=True) from exc
