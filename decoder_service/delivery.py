"""Handing a decode step's results to the sequences' consumers (event-loop side of the engine).

The engine's model thread passes each step's :class:`~decoder_service.running_batch.StepResult` to
the event loop (``call_soon_threadsafe``), where :func:`publish` merges each sequence's events of the
step and :func:`deliver` puts them in its queue (a ``whole`` sequence's are held until it finishes),
recording the engine's token and finish metrics once a step.
"""

from __future__ import annotations

from typing import Any

from decoder_service import metrics
from decoder_service.running_batch import StepResult
from decoder_service.sequence import Seq, SequenceEvent
from decoder_service.stopping import FinishReason
from inkstream.errors import InternalError


def publish(engine: Any, result: StepResult) -> None:
    """Deliver a step's events (loop thread), merging each sequence's events of this step;
    ``engine``: the :class:`~decoder_service.scheduler.DecodeEngine` the metrics are recorded for.
    """
    merged: dict[Seq, list[Any]] = {}
    for s, toks, text, fin in result.events:
        m = merged.setdefault(s, [[], "", None])
        m[0].extend(toks)
        m[1] += text
        m[2] = fin or m[2]
    n_tokens = 0
    for s, (toks, text, fin) in merged.items():
        if s.closed:
            continue
        if not s.ttft_recorded:
            s.ttft_recorded = True
            metrics.ttft(engine, s.first_t - s.arrival)
        n_tokens += len(toks)
        # token_logprobs is append-only and written before the event, so this step's slice is complete.
        lps = s.token_logprobs[s.delivered:s.delivered + len(toks)]
        s.delivered += len(toks)
        if s.whole:  # held until the finish
            s.held_tokens += toks
            s.held_text.append(text)
            if fin is None:
                continue
            toks, text = s.corrected or (s.held_tokens, "".join(s.held_text))
            lps = [] if s.corrected else s.token_logprobs[:len(toks)]
        deliver(s, toks, text, fin, lps)
        if fin is not None:
            metrics.finished(engine, fin, s.usage())
    if n_tokens:
        metrics.generated(engine, n_tokens)  # once a step: an OpenTelemetry add is ~10 us
    for s in result.failed:
        if not s.closed:
            s.closed = True
            s.queue.put_nowait(
                InternalError("the decoder failed while running this sequence; retry on another replica"))
            metrics.finished(engine, "error")


def deliver(s: Seq, toks: list[int], text: str, fin: FinishReason | None,
            logprobs: list[float] | None = None) -> None:
    """Put one event in ``s``'s queue (nothing once it is closed); a finishing one closes it.
    ``logprobs``: one per token of ``toks`` (natural log), or empty.
    """
    if s.closed:
        return
    if fin is None:
        s.queue.put_nowait(SequenceEvent(toks, text, logprobs=list(logprobs or [])))
        return
    s.closed = True
    s.queue.put_nowait(SequenceEvent(toks, text, fin, s.usage(), list(logprobs or [])))
    s.queue.put_nowait(None)
