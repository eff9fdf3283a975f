"""The gateway's client of the encoder replicas: ``VisionEncoder/Info`` and ``Encode`` to plain objects.

One ``Encode`` stream per page (one request, one response), so every page is routed to the
least-loaded encoder replica on its own and retried on its own. Vision tokens are not parsed into
tensors: the gateway only forwards them, so a :class:`VisionSegment` keeps the encoder's raw
little-endian bytes, shape and dtype enum (``inkstream.common.v1.Tensor``) for the decoder.
"""

from __future__ import annotations

from dataclasses import dataclass

import grpc

from gateway.clients.calls import CallFailure, call_metadata, classify_rpc_error, item_failure
from gateway.types import EncoderInfo, ModeInfo, TokenColumnsInfo
from inkstream.errors import InternalError
from inkstream.fair import INTERACTIVE
from inkstream.pb import encoder_pb2, encoder_pb2_grpc
from inkstream.segments import JOIN_LINE, join_from_wire


@dataclass(frozen=True)
class VisionSegment:
    """Vision tokens of one segment as received from the encoder.

    ``shape``: ``(n_tokens, hidden)``; ``dtype``: ``inkstream.common.v1.DType`` enum value;
    ``data``: raw little-endian row-major bytes (``n_tokens * hidden * itemsize`` bytes);
    ``box``: (x0, y0, x1, y1) in page pixels; ``index``: reading order within the page; ``join``:
    how its text goes on from the previous segment's (:data:`inkstream.segments.JOINS`); ``rotation``:
    degrees counter-clockwise (0, 90, 180, 270) that turn the segment's text upright; ``tower``: the
    model's line encoder that read it (``Segment.tower``: "latin" / "pp" for the compact family, "" when
    the family has one or the encoder predates the field); ``pre_read``: the segment's text when the
    encoder read it without the decoder (``Segment.pre_read``, with ``pre_read_confidence`` in [0, 1]; ""
    for a segment to decode: :func:`gateway.clients.decoder.pre_read_text`).
    """

    index: int
    shape: tuple[int, ...]
    dtype: int
    data: bytes
    box: tuple[float, float, float, float]
    join: str = JOIN_LINE
    rotation: int = 0
    tower: str = ""
    pre_read: str = ""
    pre_read_confidence: float = 0.0

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
    and weights ``revision`` (only a decoder of the same revision may decode the segments).
    """

    page_index: int
    segments: list[VisionSegment]
    width: int
    height: int
    n_vision_tokens: int
    model_id: str = ""
    encode_seconds: float = 0.0
    revision: str = ""
    unread_ink: float = 0.0  # EncodeResponse.unread_ink: unread / read text-like ink of the page


def token_columns_from_pb(resp: encoder_pb2.InfoResponse) -> tuple[int, tuple[TokenColumnsInfo, ...]]:
    """(feature columns, extra column runs) of an encoder's vision tokens. An encoder that declares
    none (``feature_columns`` 0: older than the field) has only features. Raises InternalError when
    the declared runs and features do not add up to its ``hidden_size``: the decoder would read
    features as class ids or the other way round.
    """
    extra = tuple(TokenColumnsInfo(c.name, int(c.count), c.unit) for c in resp.extra_columns)
    if not resp.feature_columns:
        return int(resp.hidden_size), ()
    declared = int(resp.feature_columns) + sum(c.count for c in extra)
    if declared != resp.hidden_size or any(c.count <= 0 for c in extra):
        raise InternalError(f"encoder {resp.model_id!r} declares {resp.feature_columns} feature columns and "
                            f"{', '.join(f'{c.count} {c.name}' for c in extra) or 'no'} extra columns, "
                            f"{declared} in all, but its vision tokens are {resp.hidden_size} wide")
    return int(resp.feature_columns), extra


def encoder_info_from_pb(resp: encoder_pb2.InfoResponse) -> EncoderInfo:
    """Encoder ``InfoResponse`` -> :class:`EncoderInfo` (modes with ``page_long_side_px``); raises
    InternalError for an inconsistent column declaration (:func:`token_columns_from_pb`).
    """
    features, extra = token_columns_from_pb(resp)
    modes = tuple(
        ModeInfo(name=m.name, page_long_side_px=int(m.page_long_side_px), max_vision_tokens=int(m.max_vision_tokens))
        for m in resp.modes
    )
    default = resp.default_mode or (modes[0].name if modes else "")
    capacity = int(resp.max_queue_pages) + int(resp.max_batch_size) if resp.max_queue_pages > 0 else 0
    return EncoderInfo(model_id=resp.model_id, modes=modes, default_mode=default,
                       max_image_bytes=int(resp.max_image_bytes), capacity=capacity, revision=resp.revision,
                       window=encoder_window(int(resp.max_batch_size), capacity, int(resp.work_window_pages)),
                       hidden_size=int(resp.hidden_size), feature_columns=features, extra_columns=extra,
                       seconds_per_page=max(0.0, float(resp.seconds_per_page)),
                       max_image_pixels=max(0, int(resp.max_image_pixels)))


def encoder_window(max_batch_size: int, capacity: int, work_window_pages: int = 0) -> int:
    """Pages the gateway keeps open on one encoder replica: the window the replica sized in time
    (``InfoResponse.work_window_pages``), or, from a replica that does not report one, two batches
    (one in the forward pass, one queued behind it, so the encoder never idles between batches);
    never more than it holds (``capacity``); 0 (no window) when the encoder gives no capacity and
    no window. Pages beyond it wait in the gateway, where :class:`inkstream.fair_window.FairWindow`
    gives them out in turn per request and cancellation and deadlines still act on them.
    """
    if work_window_pages > 0:
        return min(capacity, work_window_pages) if capacity > 0 else work_window_pages
    if capacity <= 0:
        return 0
    return max(1, min(capacity, 2 * max(1, max_batch_size)))


async def fetch_encoder_info(channel: grpc.aio.Channel, timeout_s: float) -> EncoderInfo:
    """Call ``VisionEncoder/Info``. Raises CallFailure (not transient when the replica's Info is
    inconsistent: :func:`token_columns_from_pb`; the router then sends it no page).
    """
    try:
        resp = await encoder_pb2_grpc.VisionEncoderStub(channel).Info(encoder_pb2.InfoRequest(), timeout=timeout_s)
    except grpc.RpcError as err:
        raise classify_rpc_error(err) from None
    try:
        return encoder_info_from_pb(resp)
    except InternalError as exc:
        raise CallFailure(exc) from None


def encoded_from_pb(resp: encoder_pb2.EncodeResponse) -> EncodedTokens:
    """``EncodeResponse`` (without error) -> :class:`EncodedTokens`."""
    segs = [
        VisionSegment(
            index=int(s.index),
            shape=tuple(int(d) for d in s.vision_tokens.shape),
            dtype=int(s.vision_tokens.dtype),
            data=s.vision_tokens.data,
            box=(s.box.x0, s.box.y0, s.box.x1, s.box.y1),
            join=join_from_wire(s.join, s.cell.table, s.cell.row, s.cell.column),
            rotation=int(s.rotation) % 360,
            tower=s.tower,
            pre_read=s.pre_read,
            pre_read_confidence=float(s.pre_read_confidence),
        )
        for s in resp.segments
    ]
    segs.sort(key=lambda s: s.index)
    n = int(resp.n_vision_tokens) or sum(s.n_tokens for s in segs)
    return EncodedTokens(page_index=int(resp.page_index), segments=segs, width=int(resp.width),
                         height=int(resp.height), n_vision_tokens=n, model_id=resp.model_id,
                         encode_seconds=float(resp.encode_seconds), revision=resp.revision,
                         unread_ink=float(resp.unread_ink))


async def encode_page(
    channel: grpc.aio.Channel, page_index: int, image: bytes, mode: str, *, timeout_s: float, request_id: str = "",
    priority: int = INTERACTIVE,
) -> EncodedTokens:
    """Encode one page image (PNG/JPEG bytes) on one replica; ``request_id`` and ``priority`` (an
    :mod:`inkstream.fair` class) order it in the encoder's queues. Raises CallFailure.
    """
    req = encoder_pb2.EncodeRequest(page_index=page_index, image=image, mode=mode)
    call = encoder_pb2_grpc.VisionEncoderStub(channel).Encode(
        iter([req]), timeout=timeout_s, metadata=call_metadata(request_id, priority)
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
