"""Plain data of the encoder's micro-batcher: its limits, what a page's submit returns, its counters."""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

from inkstream.page_image import ENCODER_MAX_IMAGE_PIXELS
from models.base import EncodedPage


@dataclass(frozen=True)
class BatchLimits:
    """Batching and admission limits (see :class:`encoder_service.config.EncoderConfig`)."""

    max_batch_size: int = 8  # pages per forward pass
    max_wait_ms: float = 10.0  # longest a page waits for batch-mates, milliseconds
    max_queue_pages: int = 64  # admitted pages not yet in a forward pass
    max_image_bytes: int = 20 * 1024 * 1024  # bytes per page image
    max_image_pixels: int = ENCODER_MAX_IMAGE_PIXELS  # width x height per page image
    preprocess_threads: int | None = None  # None: the half's own (EncoderHalf.preprocess_threads)


@dataclass
class TimedPage:
    """What :meth:`MicroBatcher.submit` returns: the EncodedPage (its vision-token segments), its
    admission-to-result time (seconds) and where that time went (seconds each; they add up to
    ``seconds``): ``prepare_s`` waiting for a preprocessing thread (``thread_wait_s`` of it) and
    preprocessing, ``queue_s`` queued for a forward pass (including the forward in progress),
    ``forward_s`` its own forward pass, which held ``batch_pages`` pages.
    """

    page: EncodedPage
    seconds: float
    prepare_s: float = 0.0
    queue_s: float = 0.0
    forward_s: float = 0.0
    batch_pages: int = 1
    thread_wait_s: float = 0.0


@dataclass
class BatcherStats:
    """Counters for tests and benchmarks: recent batch sizes (pages) and totals."""

    batch_sizes: collections.deque = field(default_factory=lambda: collections.deque(maxlen=4096))
    batches: int = 0
    pages_encoded: int = 0
    forward_seconds: float = 0.0
