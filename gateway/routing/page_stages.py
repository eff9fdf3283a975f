"""One page's way through the replicas: encoded on an encoder replica, then all of its segments
decoded in one ``Decode`` stream on a decoder replica.

Each stage is retried across replicas by :func:`gateway.routing.retry.with_retries` (policy, budget and
counters shared with :class:`gateway.routing.pipeline.Pipeline`). During a weights rollout a page goes only
to an encoder whose vision tokens some ready decoder can decode, and its vision tokens only to a
decoder running the same weights revision. Which replica, and the work windows that bound what all
pages of this gateway send a replica at once (shared fairly between requests), are the router's
(:mod:`gateway.routing.router`).
"""

from __future__ import annotations

import asyncio
import logging

from opentelemetry import trace

from gateway.clients.calls import CallFailure
from gateway.clients.decoder import DecodeAttempt, decode_segments, pre_read_text
from gateway.clients.encoder import EncodedTokens, encode_page
from gateway.output.word_boxes import locate_segment_words
from gateway.routing.config import PipelineConfig
from gateway.routing.metrics import PipelineStats
from gateway.routing.retry import PageFailed, RetryBudget, with_retries
from gateway.routing.router import Lease, Router, RouteView
from gateway.types import PageError, PageInput, PageOutcome, PipelineOptions, SegmentText
from inkstream.errors import InternalError, as_inkstream_error
from inkstream.fair import WorkKey
from inkstream.revision import known_different

log = logging.getLogger("inkstream.gateway.pipeline")
# Spans per page stage; their W3C context goes to the replicas in gRPC metadata (clients.calls.call_metadata).
_tracer = trace.get_tracer("inkstream.gateway.pipeline")

_FINISH_RANK = {"stop": 0, "length": 1, "repetition": 2, "cancelled": 3}


class PageStages:
    """Encode + decode of single pages through ``router`` (see the module docstring)."""

    def __init__(self, router: Router, config: PipelineConfig, budget: RetryBudget, stats: PipelineStats):
        self.router = router
        self.config = config
        self.budget = budget
        self.stats = stats

    async def run_page(self, page: PageInput, options: PipelineOptions) -> PageOutcome:
        """Encode + decode one page; never raises (except cancellation): failures become errors."""
        index = page.index
        if page.error is not None:
            return PageOutcome(index=index, status="error", error=page.error, width=page.width, height=page.height)
        if not page.image:
            return PageOutcome(index=index, status="error", width=page.width, height=page.height,
                               error=PageError("INVALID_ARGUMENT", f"page {index + 1} has no image"))
        attrs: dict[str, str | int] = {"inkstream.page": index + 1, "inkstream.request_id": options.request_id}
        try:
            with _tracer.start_as_current_span("gateway.encode", attributes=attrs):
                encoded = await self._encode(page, options)
            image = page.image  # kept (compressed) to find the words of the segments on the ink
            del page
            with _tracer.start_as_current_span("gateway.decode", attributes=attrs):
                segments = await self._decode(encoded, options) if encoded.segments else []
            if segments and image:
                await asyncio.to_thread(locate_segment_words, image, segments, encoded.width, encoded.height)
            del image
        except PageFailed as exc:
            return PageOutcome(index=index, status="error", error=PageError(exc.error.code_name, exc.error.message,
                                                                                  exc.error.reason))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug must not lose the page: report it
            log.exception("page %d failed unexpectedly", index + 1)
            err = as_inkstream_error(exc)
            return PageOutcome(index=index, status="error", error=PageError(err.code_name, err.message, err.reason))
        segments.sort(key=lambda s: s.index)
        finish = max((s.finish_reason for s in segments), key=lambda r: _FINISH_RANK.get(r, 0), default="stop")
        return PageOutcome(
            index=index, status="ok", text="\n".join(s.text for s in segments), segments=segments,
            finish_reason=finish, vision_tokens=encoded.n_vision_tokens,
            generated_tokens=sum(s.generated_tokens for s in segments),
            width=encoded.width, height=encoded.height, unread_ink=encoded.unread_ink,
        )

    async def _encode(self, page: PageInput, options: PipelineOptions) -> EncodedTokens:
        async def call(lease: Lease) -> EncodedTokens:
            return await encode_page(lease.channel, page.index, page.image or b"", options.mode,
                                     timeout_s=self.config.encode_timeout_s, request_id=options.request_id,
                                     priority=options.priority)

        return await with_retries(self.router, "encoder", call, policy=self.config.retry, budget=self.budget,
                                  counters=self.stats.encode, what=f"page {page.index + 1} encode",
                                  told=f"page {page.index + 1}: its image could not be read",
                                  key=_key(options), deadline=options.deadline, accept=self._decodable,
                                  unaccepted="whose weights no ready decoder serves yet")

    def _decodable(self, encoder: RouteView) -> bool:
        """Whether some ready decoder may decode what ``encoder`` makes: during a weights rollout
        the first new encoders are often ready before any new decoder; pages then go to the old
        encoders instead of failing at the decode step. True while revisions are unknown.
        """
        if not encoder.revision:
            return True
        decoders = self.router.eligible_views("decoder")
        return not decoders or any(d.stale or not known_different(encoder.revision, d.revision) for d in decoders)

    async def _decode(self, encoded: EncodedTokens, options: PipelineOptions) -> list[SegmentText]:
        # a segment the encoder read by its shape (a nil dash) is finished as it came: no decoder reads it
        attempt = DecodeAttempt(done={s.index: pre_read_text(s) for s in encoded.segments if s.pre_read})
        if attempt.done and len(attempt.done) == len(encoded.segments):
            return list(attempt.done.values())

        def same_weights(r: RouteView) -> bool:
            # The decoder must run the weights of the encoder that made these vision tokens (they
            # differ while a rollout replaces one checkpoint by another); unknown revisions pass,
            # and so does a replica whose Info is to be read (the router reads it, then asks again).
            return r.stale or not known_different(encoded.revision, r.revision)

        async def call(lease: Lease) -> list[SegmentText]:
            remaining = [s for s in encoded.segments if s.index not in attempt.done]
            attempt.failed.clear()
            await decode_segments(lease.channel, remaining, task=options.task, max_new_tokens=options.max_new_tokens,
                                  timeout_s=self.config.decode_timeout_s, request_id=options.request_id,
                                  priority=options.priority,
                                  attempt=attempt, max_segments_in_flight=self.config.decode_window_segments,
                                  replica_slots=lease.segment_slots, vision_revision=encoded.revision,
                                  temperature=options.temperature)
            if attempt.failed:
                raise _worst(attempt.failed.values())
            return list(attempt.done.values())

        return await with_retries(self.router, "decoder", call, policy=self.config.retry, budget=self.budget,
                                  counters=self.stats.decode, what=f"page {encoded.page_index + 1} decode",
                                  told=f"page {encoded.page_index + 1}: its text could not be written",
                                  key=_key(options), deadline=options.deadline, accept=same_weights,
                                  unaccepted=f"serving other weights than revision {encoded.revision} "
                                  "of the page's encoder")


def _key(options: PipelineOptions) -> WorkKey:
    """The request's turn in the replicas' windows."""
    return WorkKey(options.request_id, options.priority)


def _worst(failures) -> CallFailure:
    """The failure deciding what happens to a page with several failed segments: a final one
    first, then a suspect one, then a transient one.
    """
    fs = list(failures)
    for pred in (lambda f: not (f.transient or f.suspect), lambda f: f.suspect):
        for f in fs:
            if pred(f):
                return f
    return fs[0] if fs else CallFailure(InternalError("decode failed"))

