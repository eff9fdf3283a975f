"""The columns a PP-tower vision token carries after its ``hidden`` features for the decoder: the
recogniser's top-k copy classes of its frame (:func:`pack` / :func:`unpack`: per class the id as two
base-128 digits and its probability, exact in float16 and bfloat16; kept only at the class's spike,
:func:`peak_classes`), and which frames are character spikes. Written by the encoder
(:class:`models.compact.line.pptower.PPTokens`), read by the decoder
(:mod:`models.compact.decode.copy_head`); see that module for why.
"""

from __future__ import annotations

import torch

from models.compact.vocab import SPECIALS


def copy_width(topk: int) -> int:
    """Extra columns of a vision token that carries ``topk`` copy classes (3 per class)."""
    return 3 * int(topk)


def pack(p: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """(posterior float [..., k], ids int [..., k]) -> float32 [..., 3k]: per class ``id // 128``,
    ``id % 128`` and ``p`` (integers below 256 are exact in float16 and bfloat16).
    """
    ids = ids.long()
    return torch.cat([torch.div(ids, 128, rounding_mode="floor").float(), (ids % 128).float(), p.float()], -1)


def unpack(cols: torch.Tensor, vocab_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """[..., 3k] (any float dtype) -> (q float32 [..., k], special ids and non-positive weights set to 0;
    ids int64 [..., k], clamped into ``[0, vocab_size)``). Rounds, so a token that went through a
    lower-precision wire dtype (or carries arbitrary values) still gives valid ids.
    """
    k = cols.shape[-1] // 3
    hi, lo, p = cols[..., :k].float(), cols[..., k: 2 * k].float(), cols[..., 2 * k:].float()
    ids = (hi.round() * 128 + lo.round()).long().clamp(0, vocab_size - 1)
    return copy_weights(p, ids), ids


def peak_classes(p: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Posterior [..., T, k] of T consecutive frames -> the same with a class's probability set to 0
    where a neighbouring frame (t - 1 or t + 1) holds the same class with a higher probability (on a
    tie, the earlier frame keeps it). A CTC spike is often spread over two or three frames; once the
    decoder has copied a character from one of them, its neighbours must not offer it again (a
    character the recogniser reads twice has a blank frame between its spikes, and keeps both).
    """
    pf = p.float()
    keep = torch.ones_like(pf, dtype=torch.bool)
    t = pf.shape[-2]
    for d in (-1, 1):  # neighbour frame t + d
        lo, hi = max(0, -d), t - max(0, d)  # frames that have that neighbour
        mine_p, mine_ids = pf[..., lo:hi, :, None], ids[..., lo:hi, :, None]
        their_p, their_ids = pf[..., lo + d: hi + d, None, :], ids[..., lo + d: hi + d, None, :]
        beaten = (mine_ids == their_ids) & ((their_p > mine_p) | ((their_p == mine_p) & (d < 0)))
        keep[..., lo:hi, :] &= ~beaten.any(-1)
    return pf * keep


def copy_weights(p: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Posterior [..., k] -> copy weights float32: 0 for special ids (the blank) and outside [0, 1]."""
    return p.float().clamp(0.0, 1.0) * (ids >= len(SPECIALS)).float()


def character_spikes(q: torch.Tensor, ids: torch.Tensor, space_id: int) -> torch.Tensor:
    """Bool [..., T]: the frames where the recogniser reads a character other than a space (its top
    copy class kept at its spike, :func:`models.compact.decode.copy_head.spike_frames`). The head's two
    probabilities are read at these frames, in order, one per written non-space character.
    """
    return (q[..., 0] > 0) & (ids[..., 0] != space_id)
