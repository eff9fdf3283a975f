"""Read a page in this process as the served stack does, keeping what the gateway learns of each line:
its text, its confidence (the decoder service's ``Usage.confidence``), its generated tokens, its box
and the tower that read it; and match those lines to a generated document's printed pieces.

Used to fit and check the confidence calibration (:mod:`training.compact.fit_confidence`,
``bench/calibration.py``). Greedy decoding as :func:`models.inprocess.greedy_segments`; the confidence
is computed as :func:`decoder_service.sampling.token_logprobs` does it (log-softmax of the logits at
temperature 1, float32), over the generated tokens and the end-of-sequence token, before the
segment is finished (:meth:`models.base.DecoderHalf.finish_tokens`), as the decoder service reports it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from PIL import Image

from models.base import DecoderHalf, EncoderHalf, left_pad
from models.images import to_rgb

Box = tuple[float, float, float, float]


@dataclass
class ScoredLine:
    """One segment as the gateway sees it (``text``, ``confidence`` in [0, 1], ``tokens`` generated
    including the end of sequence, ``box`` in page pixels) plus the ``tower`` that read it
    ("latin" | "pp") and, once matched, its ``truth`` ("" when it matches no printed piece).
    """

    text: str
    confidence: float
    tokens: int
    box: Box
    tower: str
    truth: str = ""
    logprobs: tuple[float, ...] = ()


def read_scored(enc: EncoderHalf, dec: DecoderHalf, image: Image.Image, max_new_tokens: int = 256,
                batch_size: int = 32) -> list[ScoredLine]:
    """Encode ``image`` and decode every segment greedily -> one :class:`ScoredLine` per segment, in
    reading order (see the module docstring for the confidence).
    """
    prepared = enc.preprocess(to_rgb(image), enc.default_mode)
    towers = prepared.meta.get("towers") or ["latin"] * len(prepared.meta.get("n_tokens", []))
    page = enc.encode_batch([prepared])[0]
    segs = [torch.as_tensor(s.vision_tokens) for s in page.segments]
    ids: list[list[int]] = [[] for _ in segs]
    lps: list[list[float]] = [[] for _ in segs]
    order = sorted(range(len(segs)), key=lambda i: segs[i].shape[0])
    task = dec.default_task
    for s in range(0, len(order), batch_size):
        idx = order[s: s + batch_size]
        prompts = [dec.embed_prompt(segs[i], task) for i in idx]
        x, mask, pos = left_pad(prompts)
        cache = dec.new_cache()
        logits = dec.forward(x, mask, pos, cache)
        done = [False] * len(idx)
        for _ in range(max(0, min(max_new_tokens, dec.max_positions - int(x.shape[1])))):
            lsm = torch.log_softmax(logits.float(), dim=-1)
            nxt = logits.argmax(-1)
            for j, i in enumerate(idx):
                if done[j]:
                    continue
                lps[i].append(float(lsm[j, nxt[j]]))
                if int(nxt[j]) in dec.eos_token_ids:
                    done[j] = True
                else:
                    ids[i].append(int(nxt[j]))
            if all(done):
                break
            mask = torch.cat([mask, torch.ones(len(idx), 1, dtype=torch.long)], 1)
            pos = pos[:, -1:] + 1
            logits = dec.forward(dec.embed_tokens(nxt[:, None]), mask, pos, cache)
        for j, i in enumerate(idx):
            ids[i] = dec.finish_tokens(dec.finish_state(prompts[j]), ids[i])
    return [ScoredLine(dec.decode_text(ids[i]).strip(), math.exp(sum(lps[i]) / len(lps[i])) if lps[i] else 0.0,
                       len(lps[i]), tuple(float(v) for v in page.segments[i].box), towers[i],  # type: ignore[arg-type]
                       logprobs=tuple(lps[i]))
            for i in range(len(segs))]


def _overlap(a: Box, b: Box) -> float:
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    return max(0.0, w) * max(0.0, h)


def match_truth(lines: list[ScoredLine], pieces: list[tuple[str, Box]]) -> list[str]:
    """Set each line's ``truth``: the printed pieces (text, box) whose box lies at least half inside
    the line's box (the line covering most of it when several do), in left-to-right order joined by
    a space. Returns the texts of the pieces no line covers (missed text).
    """
    owned: list[list[tuple[float, str]]] = [[] for _ in lines]
    missed = []
    for text, box in pieces:
        area = max(1e-6, (box[2] - box[0]) * (box[3] - box[1]))
        cover = [_overlap(ln.box, box) / area for ln in lines]
        best = max(range(len(lines)), key=cover.__getitem__) if lines else -1
        if best < 0 or cover[best] < 0.5:
            missed.append(text)
        else:
            owned[best].append((box[0], text))
    for ln, own in zip(lines, owned, strict=True):
        ln.truth = " ".join(t for _, t in sorted(own))
    return missed


def load_halves(model_dir: Any = None, threads: int = 1) -> tuple[EncoderHalf, DecoderHalf]:
    """The encoder and decoder halves of ``model_dir`` (default: the embedded checkpoint)."""
    from models.compact import default_checkpoint_dir
    from models.registry import decoder_half_class, encoder_half_class, family_of

    torch.set_num_threads(threads)
    path = model_dir or default_checkpoint_dir()
    fam = family_of(path)
    return encoder_half_class(fam).load(path), decoder_half_class(fam).load(path)
