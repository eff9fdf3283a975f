"""Spacing of a finished segment: where a space goes and which width a punctuation mark has, from pixels.

What it is for. The bilingual checkpoint's decoder writes a line's characters well but slips on two
decisions that the recogniser's 8-pixel frames blur: a space between two characters (hanzi next to a
Latin word, a word next to punctuation) and the width of ``, : ( ) ; ! ?`` (full-width ``，`` vs
``, `` ASCII plus a space). Both are decided by a few pixel columns of gap: a space is ~0.25 em, a
full-width comma's cell leaves ~0.6 em after its ink, an ASCII comma and a space ~0.35 em. The text
around them does not decide it (business lines write ``XWDMQA0LL，ting`` between Latin words, gettext
catalogues ``时间: ms`` after hanzi).

What it does. :func:`models.compact.line.inkcolumns.column_ink` reads the normalised line (the PP
trunk's own input, [3, 48, W]) as two ink profiles per pixel column, packed 8 columns per trunk frame;
:class:`models.compact.line.spacing_head.SpacingHead`, a small
dilated 1-D convolution over the trunk frames, those profiles and the recogniser's spikes, gives each
frame two probabilities: a space after the character whose spike this frame is, and that character
being full-width. The encoder ships them as two more columns of each PP vision token; the decoder's
finishing step (:func:`respace`, the last step of :func:`models.compact.decode.finish.finish_segment`)
overrides its own choice only where the head is confident.

Trained by ``training/compact/spacing_head.py`` on rendered training lines (training fonts and texts);
the labels come from the text aligned to the recogniser's spikes.
"""

from __future__ import annotations

import torch
from rapidfuzz.distance import Levenshtein

from models.compact.line.columns import character_spikes

FULL_TO_HALF = {"，": ",", "：": ":", "（": "(", "）": ")", "；": ";", "！": "!", "？": "?"}
HALF_TO_FULL = {v: k for k, v in FULL_TO_HALF.items()}


def spike_classes(q: torch.Tensor, ids: torch.Tensor, space_id: int) -> list[int]:
    """The recogniser's class (token id) at each of a line's character spikes, in order: copy classes
    ``q`` float [T, k] / ``ids`` int64 [T, k] of one line's frames (:func:`character_spikes`).
    """
    return ids[character_spikes(q, ids, space_id)][:, 0].tolist()


def solid_opcodes(written: list[int], spike_ids: list[int], space_id: int) -> tuple[list[int], list]:
    """(index in ``written`` of each non-space token, the Levenshtein opcodes (rapidfuzz) of those tokens
    against ``spike_ids``): how written text is aligned to the spikes it reads (the spikes carry no
    spaces). Used by :func:`spike_alignment` and :func:`models.compact.decode.rereads.drop_unread_repeats`.
    """
    solid = [k for k, t in enumerate(written) if t != space_id]
    return solid, list(Levenshtein.opcodes([written[k] for k in solid], spike_ids))


def width_pairs(vocab: dict[str, int]) -> dict[int, int]:
    """Token id -> id of the same punctuation mark in the other width (``，`` <-> ``,`` etc., both
    directions) for the pairs of :data:`FULL_TO_HALF` that ``vocab`` holds.
    """
    out: dict[int, int] = {}
    for full, half in FULL_TO_HALF.items():
        if full in vocab and half in vocab:
            out[vocab[full]], out[vocab[half]] = vocab[half], vocab[full]
    return out


def spike_alignment(written: list[int], spike_ids: list[int], space_id: int) -> dict[int, int]:
    """Index in ``written`` of each non-space token -> the index of the character spike it reads, from
    an edit alignment (Levenshtein, rapidfuzz) of those tokens against the recogniser's classes at the
    spikes (``spike_ids``): a token equal to its spike's class or written in its place (a correction)
    is mapped; a token the decoder added, or a spike it left out, shifts nothing else.
    """
    solid, opcodes = solid_opcodes(written, spike_ids, space_id)
    out: dict[int, int] = {}
    for op in opcodes:
        if op.tag in ("equal", "replace") and op.src_end - op.src_start == op.dest_end - op.dest_start:
            out.update({solid[i]: op.dest_start + (i - op.src_start) for i in range(op.src_start, op.src_end)})
    return out


def respace(written: list[int], probs: torch.Tensor, spike_ids: list[int], space_id: int, pairs: dict[int, int],
            full_ids: set[int], confidence: float) -> list[int]:
    """The decoder's ``written`` token ids with the head's confident decisions applied.

    ``probs`` float [N, 2]: the head's (space after, full width) probabilities at the line's N
    character spikes (:func:`character_spikes`, in order), ``spike_ids`` the recogniser's class at
    each. Each written non-space token is matched to the spike it reads (:func:`spike_alignment`);
    between two written tokens that read consecutive spikes s and s + 1, a missing space is inserted
    where P(space after s) >= ``confidence`` and a written one removed where it is <= 1 -
    ``confidence``; a punctuation mark of ``pairs`` (:func:`width_pairs`; ``full_ids`` the full-width
    ones) takes the other width where the head says so with that confidence. The segment's last mark,
    where the head is unsure, takes the width the recogniser read at its spike: the crop ends at the
    mark's ink, so the blank after it that tells the widths apart is not there to measure (a hanzi
    label's ``其中：`` in a table cell was written ``其中:``, the head at 0.12-0.85 full width,
    ``bench/statements.py --seed 1``). Everywhere else the decoder's choice stands (the head was
    never trained on a boundary the recogniser did not read).
    Returns a new list.
    """
    at = spike_alignment(written, spike_ids, space_id)
    solid = [k for k, t in enumerate(written) if t != space_id]
    lo = 1.0 - confidence
    p = probs.float().tolist()
    out: list[int] = list(written[: solid[0]]) if solid else list(written)
    for i, k in enumerate(solid):
        t, s = written[k], at.get(k)
        if t in pairs and s is not None:
            full = t in full_ids
            if (not full and p[s][1] >= confidence) or (full and p[s][1] <= lo):
                t = pairs[t]
            elif i == len(solid) - 1 and spike_ids[s] == pairs[t] and lo < p[s][1] < confidence:
                t = pairs[t]  # a last mark: no blank after it to measure, the recogniser's width stands
        out.append(t)
        gap = written[k + 1: solid[i + 1]] if i + 1 < len(solid) else written[k + 1:]
        if i + 1 < len(solid) and s is not None and at.get(solid[i + 1]) == s + 1:
            if not gap and p[s][0] >= confidence:
                gap = [space_id]
            elif gap and p[s][0] <= lo:
                gap = []
        out.extend(gap)
    return out
