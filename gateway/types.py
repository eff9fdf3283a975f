"""Plain data passed between the gateway's parts (ingest -> pipeline -> stitch -> API).

No generated stubs here: the REST and gRPC front ends and the replica clients convert to and from
these. Page indices are 0-based internally; APIs show 1-based page numbers (``index + 1``).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from typing import Protocol

from inkstream.errors import InvalidInput
from inkstream.page_result import PageError  # why a page has no text: the page-result contract's


@dataclass
class PageInput:
    """One rendered page ready for the encoder: ``image`` PNG/JPEG bytes of ``width`` x ``height``
    pixels, or ``error`` when the page could not be rendered (it is then reported, not dropped).
    """

    index: int
    image: bytes | None
    width: int = 0
    height: int = 0
    error: PageError | None = None


@dataclass(frozen=True)
class ModeInfo:
    """Encoder resolution mode as advertised by its Info RPC (``page_long_side_px`` in pixels)."""

    name: str
    page_long_side_px: int
    max_vision_tokens: int = 0


@dataclass(frozen=True)
class TokenColumnsInfo:
    """A run of ``count`` extra columns of every vision token (encoder ``Info.extra_columns``):
    ``name`` of what they hold and the ``unit`` of each value (e.g. "probability").
    """

    name: str
    count: int
    unit: str


@dataclass(frozen=True)
class EncoderInfo:
    """What the gateway needs from the encoders' Info: model id, modes, default mode, image limit
    (bytes), ``capacity`` (pages one replica holds before RESOURCE_EXHAUSTED: ``max_queue_pages`` +
    ``max_batch_size``; 0 when it does not say), ``window`` (pages this gateway keeps open on one
    replica: see :func:`gateway.clients.encoder.encoder_window`) and weights ``revision``;
    ``hidden_size`` (columns of a vision token, 0 = not said), of which the first ``feature_columns``
    are model features and the rest ``extra_columns``, in order; ``seconds_per_page``: the replica's
    busy seconds per page, measured or estimated at its warm-up (0.0 = not said);
    ``max_image_pixels``: the largest page image it accepts, width x height (0 = not said).
    """

    model_id: str
    modes: tuple[ModeInfo, ...]
    default_mode: str
    max_image_bytes: int = 0
    capacity: int = 0
    revision: str = ""
    window: int = 0
    hidden_size: int = 0
    feature_columns: int = 0
    extra_columns: tuple[TokenColumnsInfo, ...] = ()
    seconds_per_page: float = 0.0
    max_image_pixels: int = 0

    def mode(self, name: str | None) -> ModeInfo:
        """The named mode (default when empty), matched case-insensitively like ``format`` and ``task``
        ("GUNDAM" is "gundam"); raises InvalidInput naming the known modes.
        """
        wanted = name or self.default_mode
        for m in self.modes:
            if m.name == wanted:
                return m
        for m in self.modes:
            if m.name.casefold() == wanted.casefold():
                return m
        raise InvalidInput(f"unknown mode {wanted!r}; this model supports: {', '.join(m.name for m in self.modes)}")


@dataclass
class SegmentText:
    """Decoded text of one segment, ``box`` (x0, y0, x1, y1) in page pixels, ``join``: how it goes
    on from the previous segment's text (:data:`inkstream.segments.JOINS`); ``confidence`` in [0, 1]:
    the decoder's geometric mean of the probabilities of the ``generated_tokens`` tokens
    (``Usage.confidence``; 0.0 when none were generated); ``rotation``: degrees counter-clockwise
    (0, 90, 180, 270) that turn the segment's text upright (the encoder found the page sideways or
    upside down); ``tower``: the model's line encoder that read it (``Segment.tower``; "" when not
    said), which picks its calibration; ``words``: each word of ``text`` with its box in page pixels,
    found on the page's ink (:mod:`gateway.output.word_boxes`; empty when not found).
    """

    index: int
    text: str
    box: tuple[float, float, float, float]
    finish_reason: str = "stop"
    generated_tokens: int = 0
    join: str = "line"
    confidence: float = 0.0
    rotation: int = 0
    tower: str = ""
    words: list[tuple[str, tuple[float, float, float, float]]] = field(default_factory=list)


@dataclass
class PageOutcome:
    """Result of one page: ``status`` "ok" (segments / text) or "error" (``error`` set).

    ``finish_reason``: "stop" | "length" | "repetition" | "cancelled" (the worst over the segments).
    """

    index: int
    status: str
    text: str = ""
    segments: list[SegmentText] = field(default_factory=list)
    finish_reason: str = ""
    vision_tokens: int = 0
    generated_tokens: int = 0
    width: int = 0
    height: int = 0
    error: PageError | None = None
    unread_ink: float = 0.0  # the encoder's EncodeResponse.unread_ink (0.0 not measured)


@dataclass(frozen=True)
class PipelineOptions:
    """Per-request options: encoder ``mode`` and decoder ``task`` names ("" = service default),
    ``max_new_tokens`` per segment (0 = decoder default), ``request_id`` for logs and traces,
    ``temperature`` of the decoder's sampling (0 = greedy), ``priority`` (:data:`inkstream.fair.INTERACTIVE`
    0 for a waiting client, :data:`inkstream.fair.BATCH` 1 for an asynchronous job) and ``deadline``
    (event-loop time by which the document is due; None = none): a page waits for a replica to come
    back up to it; ``page_count``: pages the document will send (0 = unknown), which lets a
    synchronous request be refused at once when it cannot be read by its deadline.
    """

    mode: str = ""
    task: str = ""
    max_new_tokens: int = 0
    request_id: str = ""
    temperature: float = 0.0
    priority: int = 0
    deadline: float | None = None
    page_count: int = 0


class PagePipeline(Protocol):
    """The gateway's data path (implemented in :mod:`gateway.routing.pipeline`; the service calls
    exactly these methods, nothing is probed).

    ``run`` consumes pages lazily from ``pages`` (an async iterator: the ingest side renders one page
    at a time) and yields one PageOutcome per input page, in page order, each exactly once.
    ``admit`` reserves capacity for a request before its upload is processed and raises
    ResourceExhausted (429 + Retry-After) when the gateway's global page bound is reached.
    """

    async def encoder_info(self) -> EncoderInfo:
        """What the encoder replicas serve (model id, modes, limits); raises Unavailable without one."""
        ...

    def ready(self) -> tuple[bool, str]:
        """(True, "") when at least one encoder and one decoder replica are SERVING, else
        (False, reason for a person); drives ``/readyz``.
        """
        ...

    async def decoder_tasks(self) -> tuple[str, ...]:
        """The decoders' task names (e.g. ("ocr", "markdown")), so an unknown ``task`` is refused with
        400 before any page is read; () when no decoder has told (the decoder then rejects it per page).
        Never raises.
        """
        ...

    def admit(self, request_id: str) -> RequestSlot:
        """Reserve the request's slot (see the class docstring); raises ResourceExhausted when full."""
        ...

    def run(self, pages: AsyncIterator[PageInput], options: PipelineOptions) -> AsyncGenerator[PageOutcome, None]:
        """One PageOutcome per page of ``pages``, in page order (see the class docstring)."""
        ...


class RequestSlot(Protocol):
    """What :meth:`PagePipeline.admit` returns: an async context manager holding a request's slot in
    the gateway's global page bound while entered (released on exit); the pipeline's is a
    :class:`gateway.routing.admission.Ticket`.
    """

    async def __aenter__(self) -> RequestSlot: ...

    async def __aexit__(self, *exc: object) -> None: ...
