"""The one place where the encoder service converts between protobuf messages and Python objects.

Vision tokens leave the service as ``inkstream.common.v1.Tensor`` at the configured wire dtype
(:func:`inkstream.wire_np.array_to_wire`: raw little-endian bytes, bf16 by default = 2 bytes per
element). Torch-free, so that an encoder half without torch keeps the process without it.
"""

from __future__ import annotations

from dataclasses import dataclass

from inkstream.errors import InkstreamError
from inkstream.pb import encoder_pb2, tensor_pb2
from inkstream.segments import join_to_wire
from inkstream.wire_np import NAME_TO_WIRE, array_to_wire, as_float32_array, item_error
from models.base import EncodedPage, ModeSpec, TokenColumns, feature_columns


@dataclass(frozen=True)
class PageRequest:
    """One page of an Encode stream: index in the document, image bytes (PNG/JPEG), mode name."""

    page_index: int
    image: bytes
    mode: str


@dataclass(frozen=True)
class ServiceInfo:
    """What ``Info`` reports: the loaded model and the service limits (bytes, pages, ms);
    ``wire_dtype`` is a dtype name ("bfloat16", :data:`inkstream.wire_np.NAME_TO_WIRE`).
    """

    model_id: str
    revision: str
    family: str
    hidden_size: int
    wire_dtype: str
    modes: tuple[ModeSpec, ...]
    default_mode: str
    max_batch_size: int
    max_wait_ms: float
    max_queue_pages: int
    max_message_bytes: int
    max_image_bytes: int
    extra_columns: tuple[TokenColumns, ...] = ()  # the half's non-feature token columns, in order
    max_image_pixels: int = 0  # largest page image, width x height pixels (0 = not said)


def page_request(msg: encoder_pb2.EncodeRequest) -> PageRequest:
    """EncodeRequest -> PageRequest (no validation here; the batcher validates the image)."""
    return PageRequest(page_index=int(msg.page_index), image=bytes(msg.image), mode=msg.mode)


def encode_response(
    page_index: int, page: EncodedPage, *, wire_dtype: str, model_id: str, seconds: float, revision: str = ""
) -> encoder_pb2.EncodeResponse:
    """EncodedPage -> EncodeResponse; each segment's vision tokens [n_tokens, H] cast to ``wire_dtype``;
    ``revision``: the weights fingerprint, which decoders check (DecodeRequest.vision_revision).
    """
    resp = encoder_pb2.EncodeResponse(
        page_index=page_index,
        width=page.width,
        height=page.height,
        n_vision_tokens=page.n_vision_tokens,
        tile_rows=page.tile_rows,
        tile_cols=page.tile_cols,
        model_id=model_id,
        revision=revision,
        encode_seconds=seconds,
        unread_ink=float(page.unread_ink),
    )
    for i, seg in enumerate(page.segments):
        x0, y0, x1, y1 = (float(v) for v in seg.box)
        join, cell = join_to_wire(seg.join)
        resp.segments.append(
            encoder_pb2.Segment(
                index=i,
                vision_tokens=array_to_wire(as_float32_array(seg.vision_tokens), wire_dtype),
                box=tensor_pb2.Box(x0=x0, y0=y0, x1=x1, y1=y1),
                join=join,
                rotation=int(seg.rotation),
                tower=seg.tower,
                pre_read=seg.pre_read,
                pre_read_confidence=float(seg.pre_read_confidence),
                cell=encoder_pb2.TableCell(table=cell.table, row=cell.row, column=cell.column) if cell else None,
            )
        )
    return resp


def error_response(page_index: int, exc: InkstreamError, *, model_id: str,
                   seconds: float = 0.0) -> encoder_pb2.EncodeResponse:
    """A per-page failure: ``error`` = (code name, message, retry hint); no segments."""
    return encoder_pb2.EncodeResponse(
        page_index=page_index,
        model_id=model_id,
        encode_seconds=seconds,
        error=item_error(exc),
    )


def info_response(info: ServiceInfo, work_window_pages: int = 0,
                  seconds_per_page: float | None = None) -> encoder_pb2.InfoResponse:
    """ServiceInfo + the measured figures (``work_window_pages``: pages; ``seconds_per_page``:
    busy seconds per page, measured or the warm-up's estimate, None = unknown;
    :meth:`MicroBatcher.work_window_pages`, :meth:`MicroBatcher.seconds_per_page`) -> InfoResponse.
    """
    return encoder_pb2.InfoResponse(
        model_id=info.model_id,
        revision=info.revision,
        family=info.family,
        hidden_size=info.hidden_size,
        wire_dtype=NAME_TO_WIRE[info.wire_dtype],
        modes=[
            encoder_pb2.ModeInfo(
                name=m.name,
                page_long_side_px=m.page_long_side_px,
                base_size=m.base_size,
                image_size=m.image_size,
                crop=m.crop,
                max_vision_tokens=m.max_vision_tokens,
            )
            for m in info.modes
        ],
        default_mode=info.default_mode,
        max_batch_size=info.max_batch_size,
        max_wait_ms=int(round(info.max_wait_ms)),
        max_queue_pages=info.max_queue_pages,
        max_message_bytes=info.max_message_bytes,
        max_image_bytes=info.max_image_bytes,
        max_image_pixels=info.max_image_pixels,
        feature_columns=feature_columns(info.hidden_size, info.extra_columns),
        extra_columns=[encoder_pb2.TokenColumns(name=c.name, count=c.count, unit=c.unit, description=c.description)
                       for c in info.extra_columns],
        work_window_pages=work_window_pages,
        seconds_per_page=seconds_per_page or 0.0,
    )
