"""In-process OCR with an encoder half and a decoder half: no services, a simple batched greedy loop.

This is the slow, obviously-correct reference path next to the served stack (gateway -> encoder ->
decoder with continuous batching): all segments of a page are prefilled together (left padding,
``attention_mask`` 0 on pads, ``position_ids = cumsum(mask) - 1``) and decoded greedily until each
emits an end-of-sequence token or ``max_new_tokens``. Works with any family's halves.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch
from PIL import Image

from inkstream.decimal_marks import one_mark
from inkstream.segments import join_lines
from models.base import DecoderHalf, EncoderHalf, SegmentTokens, left_pad
from models.images import to_rgb


@dataclass
class InProcessPage:
    """Text of one page (``lines`` joined by newlines), each segment's own text (``segments``,
    stripped, in reading order), ``joins`` (how each goes on from the one before,
    :mod:`inkstream.segments`) and ``boxes`` (page pixels), and timings in seconds.
    """

    text: str
    lines: list[str]
    boxes: list[tuple[float, float, float, float]]
    n_vision_tokens: int
    encode_s: float
    decode_s: float
    extra: dict = field(default_factory=dict)
    segments: list[str] = field(default_factory=list)
    joins: list[str] = field(default_factory=list)


def greedy_segments(dec: DecoderHalf, segments: list[Any], task: str | None = None,
                    max_new_tokens: int = 256, batch_size: int = 32) -> list[list[int]]:
    """Greedy decoding of several segments' vision tokens ([n_i, H] each) in left-padded batches,
    each finished as the decoder service finishes a segment it delivers whole
    (:meth:`models.base.DecoderHalf.finish_tokens`). Returns the generated ids per segment (EOS excluded).
    """
    task = task or dec.default_task
    segments = [torch.as_tensor(t) for t in segments]  # a torch-free encoder half gives numpy arrays
    out: list[list[int]] = [[] for _ in segments]
    order = sorted(range(len(segments)), key=lambda i: segments[i].shape[0])
    for s in range(0, len(order), batch_size):
        idx = order[s: s + batch_size]
        prompts = [dec.embed_prompt(segments[i], task) for i in idx]
        x, mask, pos = left_pad(prompts)
        B, L = int(x.shape[0]), int(x.shape[1])
        cache = dec.new_cache()
        limit = min(max_new_tokens, dec.max_positions - L)
        logits = dec.forward(x, mask, pos, cache)
        done = torch.zeros(B, dtype=torch.bool)
        for _ in range(max(0, limit)):
            nxt = logits.argmax(-1)
            for j in range(B):
                if not done[j]:
                    if int(nxt[j]) in dec.eos_token_ids:
                        done[j] = True
                    else:
                        out[idx[j]].append(int(nxt[j]))
            if bool(done.all()):
                break
            mask = torch.cat([mask, torch.ones(B, 1, dtype=torch.long)], 1)
            pos = pos[:, -1:] + 1
            logits = dec.forward(dec.embed_tokens(nxt[:, None]), mask, pos, cache)
        for j, i in enumerate(idx):  # as the decoder service delivers a whole segment
            out[i] = dec.finish_tokens(dec.finish_state(prompts[j]), out[i])
    return out


def segment_texts(dec: DecoderHalf, segments: list[SegmentTokens], max_new_tokens: int = 256
                  ) -> list[tuple[str, int]]:
    """Each segment's text (stripped) and its generated tokens (end of sequence included), in order: a
    segment the encoder half read by its shape keeps its text (``SegmentTokens.pre_read``: its characters
    and an end counted as tokens, as the gateway counts them), the others are decoded greedily together
    (:func:`greedy_segments`).
    """
    todo = [i for i, s in enumerate(segments) if not s.pre_read]
    out = [(s.pre_read.strip(), len(s.pre_read) + 1) for s in segments]
    ids = greedy_segments(dec, [segments[i].vision_tokens for i in todo], max_new_tokens=max_new_tokens)
    for i, t in zip(todo, ids, strict=True):
        out[i] = (dec.decode_text(t).strip(), len(t) + 1)
    return out


def ocr_page(enc: EncoderHalf, dec: DecoderHalf, image: Image.Image, mode: str | None = None,
             max_new_tokens: int = 256) -> InProcessPage:
    """Encode one page and greedily decode all its segments (:func:`segment_texts`: those the encoder half
    read by their shape keep that text); its text is assembled as the gateway
    does it: the image converted to RGB like the encoder service does (alpha over white, 16-bit
    rescaled), prices written with the page's decimal mark (:func:`inkstream.decimal_marks.one_mark`),
    pieces of a cut line joined as marked (:func:`inkstream.segments.join_lines`), lines
    by newlines. Raises InvalidInput for an image mode a page cannot have.
    """
    t0 = time.perf_counter()
    prepared = enc.preprocess(to_rgb(image), mode or enc.default_mode)
    page = enc.encode_batch([prepared])[0]
    t1 = time.perf_counter()
    read = segment_texts(dec, page.segments, max_new_tokens=max_new_tokens)
    texts, joins = one_mark([t for t, _ in read]), [s.join for s in page.segments]
    lines = join_lines(texts, joins)
    t2 = time.perf_counter()
    return InProcessPage(text="\n".join(lines), lines=lines, boxes=[s.box for s in page.segments],
                         n_vision_tokens=page.n_vision_tokens, encode_s=t1 - t0, decode_s=t2 - t1,
                         segments=texts, joins=joins)
