"""Pointer-generator output of the bilingual compact decoder: copy a character from a vision token.

The decoder of a bilingual checkpoint writes each character from a mixture of two distributions
(pointer-generator networks, See, Liu and Manning 2017, arXiv:1704.04368, section 2.2):

    p(y) = g p_lm(y) + (1 - g) p_copy(y),     g = sigmoid(w . h + b + u . stats)

``p_lm`` is the decoder's own softmax over the vocabulary; ``h`` [hidden] its final hidden state;
``stats`` four numbers of the two distributions (see :meth:`PointerCopy.mix`).
``p_copy`` is what the frames it attends to say they show: each PP-tower vision token carries, in
:func:`copy_width` extra columns after its ``hidden`` features, the ``topk`` classes of the frozen
PP-OCRv6 recogniser's own CTC posterior for its frame (:func:`pack`: per class the id as two
base-128 digits and its probability, exact in float16 and bfloat16), the same classes its posterior
embedding is built from, each kept only at the frame of its spike (:func:`peak_classes`); special
ids (the CTC blank maps to ``<pad>``) get weight 0; Latin-tower tokens,
``<s>`` and written tokens carry zeros. With ``a_s`` the attention of the last decoder layer's
supervised heads (:data:`models.compact.model.SUPERVISED_HEADS`, trained to point at the vision token
of the character being written), ``p_copy(y) = sum_s a_s q_s(y) / sum_s a_s sum_y q_s(y)``.

Why: the decoder's softmax alone learned frequent hanzi well and rare ones badly (87 % CER on lines
of random GB 2312 hanzi after 1,850 steps: each of 7,400 rows is trained from a few examples), while
the recogniser the vision tokens come from reads them; copying makes reading a rare character the
same act as reading a frequent one. The gate lets the decoder write what the frames do not hold
(spaces the recogniser drops, ``</s>``, Latin-tower lines).

**Where to copy from: the monotonic pointer** (config ``copy.pointer = "monotonic"``). A checkpoint
may copy not through the heads' soft attention but through a hard pointer
(:func:`pointer_attention`): the recogniser's CTC spikes (:func:`spike_frames`) are, in order, exactly
the characters its greedy decoding would read, so the pointer stands on the first spike not yet
copied, and moves on as an edit alignment of the text against the spikes would (:func:`advance`):
past the frame once the decoder wrote one of its classes or another character in its place, past a
false spike as well when it wrote the next spike's character, nowhere on a space. Why: on real page crops the
supervised heads attended one frame *before* each spike, where the copy mass is ~0, so the decoder's
softmax wrote instead (doubled first characters, look-alikes): 14.0 % CER on the shared Chinese page
against 2.0 % for the recogniser's own greedy reading of the same vision tokens; the pointer with the
same weights, untrained for it, gave 10.7 %. Training moves the pointer by the teacher's text
(:func:`teacher_pointer`), serving by the token it is given, so both see the same pointer.

The decoder half takes inputs ``hidden + copy_width`` wide (vision tokens as the encoder sends them,
token embeddings padded with zeros) and keeps each position's (ids, q) in one extra layer of the KV
cache (keys = ids, values = q, float32 [B, 1, S, topk]), so every batching operation on the cache (left
padding, dropping rows) keeps them aligned with their positions; padding positions hold q = 0.
"""

from __future__ import annotations

import torch
from torch import nn

from models.compact.vocab import BOS_ID, EOS_ID, SPACE_ID, SPECIALS

#: Weight floor inside the log of the mixture (float32): a target both paths give 0 costs -log(1e-9).
MIX_EPS = 1e-9
#: Inputs of the gate besides the hidden state (see :meth:`PointerCopy.mix`).
GATE_STATS = 4
#: A spike whose recogniser class holds at least this copy weight (its CTC posterior at the spike) may
#: not be skipped by writing the next spike's character (:func:`keep_confident_spike`).
NO_SKIP_WEIGHT = 0.9


class PointerCopy(nn.Module):
    """The gate of the pointer-generator output (``gate``: Linear hidden -> 1, ``gate_stats``: Linear
    :data:`GATE_STATS` -> 1) and how it mixes (:meth:`mix`). ``topk``: classes a vision token carries;
    ``heads``: the attention heads of the last decoder layer whose mean attention points at the token
    to copy.
    """

    def __init__(self, hidden: int, topk: int = 4, heads: tuple[int, ...] = (0, 1), pointer: bool = False) -> None:
        super().__init__()
        self.topk, self.heads = int(topk), tuple(int(h) for h in heads)
        #: copy from the monotonic pointer (:func:`pointer_attention`), not from the heads' attention
        self.pointer = bool(pointer)
        self.gate = nn.Linear(hidden, 1)
        self.gate_stats = nn.Linear(GATE_STATS, 1, bias=False)
        with torch.no_grad():  # g = 0.73 at first: a new copy path starts mostly trusting the decoder
            self.gate.weight.zero_()
            self.gate.bias.fill_(1.0)
            self.gate_stats.weight.zero_()

    def config(self) -> dict:
        """The JSON-serialisable config of this module (checkpoint config.json ``"copy"``)."""
        return {"topk": self.topk, "heads": list(self.heads), **({"pointer": "monotonic"} if self.pointer else {})}

    def mix(self, lm_logits: torch.Tensor, hidden: torch.Tensor, attention: torch.Tensor, q: torch.Tensor,
            ids: torch.Tensor, coverage: torch.Tensor | None = None, end: torch.Tensor | None = None) -> torch.Tensor:
        """One mixed output per query: ``lm_logits`` [N, V], ``hidden`` [N, H] (final hidden states),
        ``attention`` [N, S] (mean over :attr:`heads`, rows sum to <= 1), ``q`` / ``ids`` [N, S, topk] of
        the positions attended to (:func:`copy_weights`: 0 where a position holds no character),
        ``coverage`` [N, S] the attention the earlier writing steps of the sequence put on each position
        (:func:`coverage`; a frame copied once is not copied again: ``a_s (1 - min(1, c_s))``, after
        the coverage of See et al. 2017, section 2.3); ``end`` [N] (0 / 1, monotonic pointer only,
        :func:`pointer_end`): the pointer has passed the recogniser's last spike, and the copy path
        offers ``</s>``. Returns log p(y) float32 [N, V] (a
        log-distribution: sampling and argmax treat it as logits).
        """
        n, v = lm_logits.shape
        a = attention.float()
        if coverage is not None:
            a = a * (1.0 - coverage.float().clamp(0.0, 1.0))
        w = (a[..., None] * q.float()).reshape(n, -1)
        copy = torch.zeros(n, v, dtype=torch.float32, device=lm_logits.device)
        copy = copy.scatter_add(1, ids.reshape(n, -1).long(), w)
        if end is not None:
            copy[:, EOS_ID] += end.float()
        mass = copy.sum(-1, keepdim=True)  # attention on character frames (not blanks, not text)
        copy = copy / (mass + 1e-6)
        p_lm = lm_logits.float().softmax(-1)
        # What the gate sees besides h: how much attention lies on characters, how sure the copy and the
        # decoder are, and how likely the decoder finds the copy's first choice (pointer-generator gates
        # read the context too: See et al. 2017, eq. 8).
        stats = torch.cat([mass, copy.max(-1, keepdim=True).values, p_lm.max(-1, keepdim=True).values,
                           p_lm.gather(1, copy.argmax(-1, keepdim=True))], -1)
        g = torch.sigmoid(self.gate(hidden).float() + self.gate_stats(stats))  # [N, 1]
        return torch.log(g * p_lm + (1.0 - g) * copy + MIX_EPS)


def attention_rows(attentions: torch.Tensor, heads: tuple[int, ...]) -> torch.Tensor:
    """Mean over ``heads`` of one layer's attention probabilities [B, heads, T, S] -> [B, T, S]."""
    return attentions[:, list(heads)].float().mean(1)


def coverage(attention: torch.Tensor, writing: torch.Tensor) -> torch.Tensor:
    """Teacher-forced coverage: ``attention`` [B, T, S] (queries x keys), ``writing`` [B, T] bool (the
    queries that write a character: ``<s>`` and the text) -> [B, T, S], for each query the sum of the
    attention rows of the writing queries before it (what serving accumulates step by step).
    """
    a = attention.float() * writing[..., None].float()
    return a.cumsum(1) - a


def spike_frames(q: torch.Tensor) -> torch.Tensor:
    """Copy weights [..., S, k] (classes sorted most likely first, :func:`copy_weights` of
    :func:`peak_classes`) -> bool [..., S]: the frames where the recogniser's most likely class is a
    character at its spike, i.e. the frames CTC greedy decoding (Graves et al. 2006) reads a character
    from; blanks, repeats of a spread spike, Latin-tower tokens and text positions are not.
    """
    return q[..., 0] > 0


def pointer_attention(q: torch.Tensor, covered: torch.Tensor) -> torch.Tensor:
    """Monotonic pointer (hard monotonic attention, Raffel et al. 2017, with the recogniser's CTC spikes
    as the only places it can stop): ``q`` [B, S, k], ``covered`` [B, S] (1 = copied) -> float32
    [B, S], one-hot on the first spike frame (:func:`spike_frames`) not yet copied, all 0 when none is
    left (the mixture is then the decoder's softmax alone, which writes ``</s>``).
    """
    open_ = spike_frames(q) & (covered < 0.5)
    return (open_ & (open_.long().cumsum(-1) == 1)).float()


def pointer_end(q: torch.Tensor, pointer: torch.Tensor) -> torch.Tensor:
    """float32 [B]: 1 where the sequence's copy classes ``q`` [B, S, k] hold spikes but the pointer
    [B, S] (:func:`pointer_attention`) stands on none: the recogniser's reading is used up, so the copy
    path offers ``</s>`` (the end of the line is the last thing the recogniser reads). 0 for a
    sequence without spikes (a Latin-tower line: the decoder alone decides where it ends).
    """
    return (spike_frames(q).any(-1) & (pointer.sum(-1) == 0)).float()


def advance(pointer: torch.Tensor, q: torch.Tensor, ids: torch.Tensor, covered: torch.Tensor,
            written: torch.Tensor) -> torch.Tensor:
    """Coverage after a step, the pointer moved as an edit alignment of the text against the spikes would.

    ``pointer`` [B, S] the one-hot of that step (:func:`pointer_attention`), ``covered`` [B, S],
    ``written`` int [B] the token the step wrote. Returns a new ``covered`` [B, S] float32:

    - the token is one of the frame's classes (positive weight): copied, the frame is covered;
    - else it is one of the *next* spike's classes: the frame was a false spike the decoder left out,
      both are covered;
    - else it is a character (not a special id, not the space :data:`SPACE_ID`): the decoder wrote it in
      place of the frame's reading (a correction), the frame is covered;
    - else (a space, ``</s>``, no pointer): nothing moves.
    """
    def holds(at: torch.Tensor) -> torch.Tensor:
        return ((ids == written[:, None, None]) & (q > 0) & (at[..., None] > 0)).any(-1).any(-1)

    nxt = pointer_attention(q, torch.maximum(covered.float(), pointer))
    char = (written >= len(SPECIALS)) & (written != SPACE_ID)
    here, there = holds(pointer), holds(nxt)
    take_here = (here | there | char)[:, None] & (pointer > 0)
    take_next = (~here & there)[:, None] & (nxt > 0)
    return torch.maximum(covered.float(), (take_here | take_next).float())


def keep_confident_spike(logp: torch.Tensor, q: torch.Tensor, ids: torch.Tensor, pointer: torch.Tensor,
                         covered: torch.Tensor, min_weight: float = NO_SKIP_WEIGHT) -> torch.Tensor:
    """Decoding constraint of the monotonic pointer: while the pointer stands on a spike the recogniser
    is sure of (top class weight >= ``min_weight``), the next spike's characters are barred (-inf)
    unless the current spike holds them too, so the decoder cannot leave out a character the
    recogniser clearly read by writing the one after it (:func:`advance` would take such a step as
    "the current spike was false"). ``logp`` [N, V] (the mixture of :meth:`PointerCopy.mix`), ``q`` /
    ``ids`` [N, S, k], ``pointer`` [N, S] (:func:`pointer_attention`), ``covered`` [N, S]; returns
    ``logp`` with those entries masked (a new tensor); a space the recogniser reads right after the
    sure character is barred as well (it belongs after that character, not before it). Rows whose
    pointer stands on no spike, or on an unsure one, are unchanged.

    Why: the decoder's softmax, trained under teacher forcing, sometimes outvotes a confident copy at
    a spike right next to the previous one (``70.22%`` -> ``7.22%``, ``-111.96%`` -> ``-11.96%`` on
    rendered statement cells the recogniser reads right). On the 1,000 held-out synthetic lines
    (checkpoint ``zh-gpu-step601``, greedy) 3.10 -> 2.87 % CER: 51 lines better, 12 worse; the 0.9
    floor was set once, before measuring, not tuned on those lines.
    """
    sure = (pointer.float() * q[..., 0].float()).sum(-1) >= min_weight  # [N]
    nxt = pointer_attention(q, torch.maximum(covered.float(), pointer.float()))
    rows = (sure & (nxt.sum(-1) > 0)).nonzero()[:, 0]
    if rows.numel() == 0:
        return logp
    here, there = pointer[rows].argmax(-1), nxt[rows].argmax(-1)  # the two spikes' frames
    cur_q, cur_ids = q[rows, here], ids[rows, here].long()  # [R, k]
    nxt_q, nxt_ids = q[rows, there], ids[rows, there].long()
    shared = ((nxt_ids[:, :, None] == cur_ids[:, None, :]) & (cur_q[:, None, :] > 0)).any(-1)
    barred = (nxt_q > 0) & ~shared  # [R, k]
    out = logp.clone()
    out[rows[:, None].expand_as(nxt_ids)[barred], nxt_ids[barred]] = float("-inf")
    return out


def teacher_pointer(q: torch.Tensor, ids: torch.Tensor, fed: torch.Tensor) -> torch.Tensor:
    """The monotonic pointer of each writing step of whole sequences, as serving moves it step by step:
    ``q`` / ``ids`` [B, S, k] of the positions, ``fed`` int64 [B, T] the token given at each writing
    step (``<s>`` first, then the text; -1 past a row's end) -> float32 [B, T, S]. Before step t the
    pointer's frame counts as copied if ``fed[:, t]`` is one of its classes (:func:`advance`).
    """
    covered = q.new_zeros(q.shape[:2])
    rows = []
    for t in range(fed.shape[1]):
        covered = advance(pointer_attention(q, covered), q, ids, covered, fed[:, t])
        rows.append(pointer_attention(q, covered))
    return torch.stack(rows, 1)


def past_last_spike(q: torch.Tensor, ids: torch.Tensor, written: list[int]) -> list[bool]:
    """For each token of ``written`` (a sequence's generated ids, ``</s>`` excluded), whether the
    monotonic pointer stood past the recogniser's last spike when it was written (:func:`pointer_end`),
    the pointer moved by the tokens before it as serving moves it (:func:`teacher_pointer`). ``q`` /
    ``ids`` [S, k]: the copy classes of the sequence's prompt positions. All False for a prompt without
    spikes (a Latin-tower line).
    """
    if not written:
        return []
    fed = torch.tensor([[BOS_ID, *written[:-1]]], dtype=torch.long)
    rows = teacher_pointer(q[None].float(), ids[None].long(), fed)[0]  # [T, S]: the pointer at each step
    return [bool(x) for x in pointer_end(q[None].float().expand(rows.shape[0], -1, -1), rows).tolist()]


def repeated_tail(written: list[int], min_len: int = 2) -> bool:
    """True when ``written`` ends in two equal runs of >= ``min_len`` tokens (``...XX``): the only case
    :func:`trim_overrun` can change, checked first because :func:`past_last_spike` replays the pointer
    (~9 ms for a 60-character line on one core).
    """
    return any(written[-n:] == written[-2 * n: -n] for n in range(min_len, len(written) // 2 + 1))


def trim_overrun(written: list[int], past: list[bool], min_len: int = 2) -> list[int]:
    """``written`` without the repeats the decoder wrote after the recogniser's reading was used up:
    while the sequence ends in two equal runs of >= ``min_len`` tokens (``...XX``) and the second run
    was written entirely past the last spike (``past``, from :func:`past_last_spike`), the second run is
    dropped. Returns a new list (``written`` itself when nothing is dropped).

    Why: past the last spike the copy path offers only ``</s>``, and a decoder that outvotes it often
    writes the line's tail again (``fehlgeschl`` -> ``fehlgeschlgeschl``, ``2015-10-10-10``,
    ``只要，只要``); text that really continues past the last spike (a correction that moved the
    pointer early, ``TrueType`` after ``True``) is no repeat and is kept. Runs of one token are left
    alone (a digit the recogniser merged, ``1000``). On the 1,000 held-out synthetic lines
    (``zh-gpu-step601``) 7-9 lines better, none worse (-0.12 points of CER).
    """
    first = next((i for i, p in enumerate(past) if p), None)
    if first is None:
        return written
    out = list(written)
    while True:
        for n in range(min_len, len(out) // 2 + 1):
            if len(out) - n >= first and out[-n:] == out[-2 * n: -n]:
                out = out[:-n]
                break
        else:
            return out if len(out) < len(written) else written
