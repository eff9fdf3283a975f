"""The one place where decoder protobuf messages meet plain Python objects (wire <-> engine)."""

from __future__ import annotations

import torch

from decoder_service.config import DecoderConfig
from decoder_service.engine import DecoderEngine
from decoder_service.sampling import SamplingParams
from decoder_service.sequence import SequenceEvent
from decoder_service.stopping import FinishReason
from inkstream.errors import InkstreamError, InvalidInput, WeightsMismatch
from inkstream.pb import decoder_pb2, tensor_pb2
from inkstream.revision import known_different
from inkstream.wire import DTYPE_TO_WIRE, from_wire, item_error

FINISH_TO_PB = {
    FinishReason.STOP: decoder_pb2.FINISH_REASON_STOP,
    FinishReason.LENGTH: decoder_pb2.FINISH_REASON_LENGTH,
    FinishReason.REPETITION: decoder_pb2.FINISH_REASON_REPETITION,
    FinishReason.CANCELLED: decoder_pb2.FINISH_REASON_CANCELLED,
}


def vision_tokens_from_pb(msg: tensor_pb2.Tensor, hidden: int, max_vision_tokens: int) -> torch.Tensor:
    """Wire tensor -> CPU tensor ``[n_tokens, hidden]`` (wire dtype). Raises InvalidInput naming the
    expected shape ``[n_tokens <= max_vision_tokens, hidden]`` or the accepted dtypes.
    """
    t = from_wire(msg, expect_last_dim=hidden, max_rows=max_vision_tokens, name="vision_tokens")
    if not bool(torch.isfinite(t).all()):
        raise InvalidInput(f"vision_tokens [{t.shape[0]}, {hidden}] contain NaN or infinite values")
    return t


def check_vision_revision(vision_revision: str, own_revision: str) -> None:
    """Refuse vision tokens made by other weights (``DecodeRequest.vision_revision`` vs this decoder's
    ``InfoResponse.revision``, compared by :func:`inkstream.revision.known_different`: empty or
    differently-tagged revisions pass). During a rollout of new weights, encoders and decoders of
    both revisions run side by side; decoding tokens of the other revision gives wrong text without
    any error. Raises WeightsMismatch (UNAVAILABLE), so the gateway tries another replica.
    """
    if known_different(vision_revision, own_revision):
        raise WeightsMismatch(f"vision tokens come from encoder weights revision {vision_revision}, but this decoder "
                          f"serves revision {own_revision}; send them to a decoder of the same checkpoint")


def sampling_from_pb(msg: decoder_pb2.SamplingParams, cfg: DecoderConfig) -> SamplingParams:
    """Request sampling fields -> SamplingParams; zeros take the server defaults, max_new_tokens is
    capped at ``cfg.max_new_tokens_cap``. Raises InvalidInput for out-of-range values (a negative
    max_new_tokens is a client mistake, not "default": it reaches SamplingParams' check).
    """
    max_new = msg.max_new_tokens if msg.max_new_tokens != 0 else cfg.max_new_tokens
    return SamplingParams(
        max_new_tokens=min(max_new, cfg.max_new_tokens_cap),
        temperature=msg.temperature,
        top_p=msg.top_p,
        top_k=msg.top_k,
        seed=msg.seed,
        repetition_ngram=msg.repetition_ngram or cfg.repetition_ngram,
        repetition_window=msg.repetition_window or cfg.repetition_window,
        repetition_repeats=cfg.repetition_repeats,
        repetition_guard=not msg.disable_repetition_guard,
    )


def event_to_pb(segment_id: int, ev: SequenceEvent) -> decoder_pb2.DecodeResponse:
    """Engine event -> DecodeResponse (finish_reason and usage only on the last one)."""
    resp = decoder_pb2.DecodeResponse(segment_id=segment_id, text_delta=ev.text, token_ids=ev.token_ids)
    if ev.finish_reason is not None:
        resp.finish_reason = FINISH_TO_PB[ev.finish_reason]
    if ev.usage is not None:
        u = ev.usage
        resp.usage.CopyFrom(decoder_pb2.Usage(
            prompt_tokens=u.prompt_tokens, vision_tokens=u.vision_tokens, generated_tokens=u.generated_tokens,
            ttft_seconds=u.ttft_s, tpot_seconds=u.tpot_s, confidence=u.confidence,
        ))
    return resp


def error_to_pb(segment_id: int, exc: InkstreamError) -> decoder_pb2.DecodeResponse:
    """Per-segment rejection: the segment's only response, with ``error`` (code name, message, retry hint)."""
    return decoder_pb2.DecodeResponse(segment_id=segment_id, error=item_error(exc))


def info_to_pb(engine: DecoderEngine, cfg: DecoderConfig) -> decoder_pb2.InfoResponse:
    """InfoResponse from the loaded half, the settings (``max_new_tokens`` reports the cap) and the
    engine's work window sized in time (:meth:`DecodeEngine.work_window_segments`).
    """
    h = engine.half
    return decoder_pb2.InfoResponse(
        model_id=h.model_id, revision=h.revision, family=h.family, hidden_size=h.hidden_size,
        accepted_dtypes=list(DTYPE_TO_WIRE.values()), max_vision_tokens=h.max_vision_tokens,
        max_new_tokens=cfg.max_new_tokens_cap, kv_cache_budget_tokens=engine.kv_cache_budget_tokens,
        max_running=engine.max_running, max_waiting=engine.max_waiting, tasks=list(h.tasks),
        default_task=h.default_task, max_message_bytes=cfg.max_message_bytes,
        work_window_segments=engine.work_window_segments(),
    )
