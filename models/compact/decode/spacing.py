"""Spacing head of the PP tower: where a space goes and which width a punctuation mark has, from pixels.

What it is for. The bilingual checkpoint's decoder writes a line's characters well but slips on two
decisions that the recogniser's 8-pixel frames blur: a space between two characters (hanzi next to a
Latin word, a word next to punctuation) and the width of ``, : ( ) ; ! ?`` (full-width ``，`` vs
``, `` ASCII plus a space). Both are decided by a few pixel columns of gap: a space is ~0.25 em, a
full-width comma's cell leaves ~0.6 em after its ink, an ASCII comma and a space ~0.35 em. The text
around them does not decide it (business lines write ``XWDMQA0LL，ting`` between Latin words, gettext
catalogues ``时间: ms`` after hanzi).

What it does. :func:`column_ink` reads the normalised line (the PP trunk's own input, [3, 48, W]) as
two ink profiles per pixel column, packed 8 columns per trunk frame; :class:`SpacingHead`, a small
dilated 1-D convolution over the trunk frames, those profiles and the recogniser's spikes, gives each
frame two probabilities: a space after the character whose spike this frame is, and that character
being full-width. The encoder ships them as two more columns of each PP vision token; the decoder's
finishing step (:func:`respace`) overrides its own choice only where the head is confident.

Trained by ``training/compact/spacing_head.py`` on rendered training lines (training fonts and texts);
the labels come from the text aligned to the recogniser's spikes.
"""

from __future__ import annotations

import torch
from rapidfuzz.distance import Levenshtein
from torch import nn

from inkstream.segments import is_wide
from models.compact.line.inkcolumns import PROFILE_CHANNELS, PROFILE_ROWS, SPACING_WIDTH, column_ink
from models.compact.vocab_zh import is_hanzi

__all__ = [
    "FULL_TO_HALF", "HALF_TO_FULL", "PROFILE_CHANNELS", "PROFILE_ROWS", "SPACING_WIDTH", "SPIKE_CHANNELS",
    "SpacingHead", "character_spikes", "column_ink", "head_inputs", "respace", "script_class", "script_classes",
    "solid_opcodes", "spike_alignment", "spike_channels", "spike_classes", "width_pairs",
]

SPIKE_CHANNELS = 6  #: top-1 posterior, is-spike, script of the spike's class (hanzi, Latin, wide, other)
FULL_TO_HALF = {"，": ",", "：": ":", "（": "(", "）": ")", "；": ";", "！": "!", "？": "?"}
HALF_TO_FULL = {v: k for k, v in FULL_TO_HALF.items()}


def script_class(ch: str) -> int:
    """0 hanzi (:func:`models.compact.vocab_zh.is_hanzi`), 1 Latin letter or ASCII digit, 2 other wide
    (East Asian W/F, :func:`inkstream.segments.is_wide`: full-width punctuation, kana), 3 anything else
    (ASCII punctuation, specials).
    """
    if len(ch) != 1:
        return 3
    if is_hanzi(ch):
        return 0
    if is_wide(ch):
        return 2
    return 1 if (ch.isascii() and ch.isalnum()) or ch.isalpha() else 3


def script_classes(vocab: dict[str, int]) -> torch.Tensor:
    """int64 [vocab size]: :func:`script_class` of each token id of ``vocab`` (token -> id)."""
    out = torch.full((max(vocab.values()) + 1,), 3, dtype=torch.long)
    for tok, i in vocab.items():
        out[i] = script_class(tok)
    return out


def spike_channels(q: torch.Tensor, ids: torch.Tensor, scripts: torch.Tensor, space_id: int) -> torch.Tensor:
    """The recogniser's reading as frame channels: copy classes of each frame, weights float [..., T, k]
    and ids int64 [..., T, k] (:func:`models.compact.decode.copy_head.unpack` of the token's copy columns,
    most likely first, non-zero only at a class's spike), ``scripts`` int64 [vocab] (:func:`script_class`
    of each id) -> float32 [..., T, 6]: the top class's weight, 1 at a character spike (the top class
    kept, not the space: :func:`character_spikes`), the one-hot script of that class (zero elsewhere).
    """
    spike = character_spikes(q, ids, space_id)
    onehot = nn.functional.one_hot(scripts[ids[..., 0]], 4).float() * spike[..., None]
    return torch.cat([q[..., :1].float(), spike[..., None].float(), onehot], -1)


def character_spikes(q: torch.Tensor, ids: torch.Tensor, space_id: int) -> torch.Tensor:
    """Bool [..., T]: the frames where the recogniser reads a character other than a space (its top
    copy class kept at its spike, :func:`models.compact.decode.copy_head.spike_frames`). The head's two
    probabilities are read at these frames, in order, one per written non-space character.
    """
    return (q[..., 0] > 0) & (ids[..., 0] != space_id)


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


def head_inputs(frames: torch.Tensor, columns: torch.Tensor, q: torch.Tensor, ids: torch.Tensor,
                scripts: torch.Tensor, space_id: int) -> torch.Tensor:
    """[B, T, 120] trunk frames, [B, T, 16] :func:`column_ink`, copy classes (q, ids) [B, T, k] ->
    float32 [B, T, 142], the input of :class:`SpacingHead`.
    """
    return torch.cat([frames.float(), columns.float(), spike_channels(q, ids, scripts, space_id)], -1)


class SpacingHead(nn.Module):
    """Frame inputs float [B, T, 120 + 16 + 6] (trunk features, :func:`column_ink`,
    :func:`spike_channels`) -> logits float [B, T, 2]: a space after this frame's character, this
    frame's character full-width. A width-5 convolution, then one per entry of ``dilations``
    (default 2, 4, 8: +-30 frames, ~6 em of a 48-px line, so the neighbours' advances are the
    yardstick of a gap), GELU between, a 1 x 1 output; ``hidden`` channels (96: 0.2 M parameters);
    ``dropout`` on the inputs while training (none in eval mode).
    """

    def __init__(self, features: int = 120, hidden: int = 96, dilations: tuple[int, ...] = (2, 4, 8),
                 dropout: float = 0.0) -> None:
        super().__init__()
        cin = features + PROFILE_CHANNELS + SPIKE_CHANNELS
        layers: list[nn.Module] = [nn.Dropout(dropout), nn.Conv1d(cin, hidden, 5, padding=2), nn.GELU()]
        for d in dilations:
            layers += [nn.Conv1d(hidden, hidden, 5, padding=2 * d, dilation=d), nn.GELU()]
        self.net = nn.Sequential(*layers, nn.Conv1d(hidden, 2, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """See the class docstring."""
        return self.net(x.transpose(1, 2)).transpose(1, 2)


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
    ones) takes the other width where the head says so with that confidence. Everywhere else the
    decoder's choice stands (the head was never trained on a boundary the recogniser did not read).
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
        out.append(t)
        gap = written[k + 1: solid[i + 1]] if i + 1 < len(solid) else written[k + 1:]
        if i + 1 < len(solid) and s is not None and at.get(solid[i + 1]) == s + 1:
            if not gap and p[s][0] >= confidence:
                gap = [space_id]
            elif gap and p[s][0] <= lo:
                gap = []
        out.extend(gap)
    return out
