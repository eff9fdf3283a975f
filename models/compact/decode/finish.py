"""Finishing a decoded segment of the ``compact`` family: the one chain every path applies.

A segment of a bilingual checkpoint's PP tower (one whose vision tokens carry the recogniser's copy
classes, :mod:`models.compact.line.columns`) is corrected once the decoder has written all of it, in
this order:

1. **overrun trim** (:func:`models.compact.decode.copy_head.trim_overrun`): a repeated tail written
   after the monotonic pointer passed the recogniser's last spike is dropped; the pointer is replayed
   from the written tokens (:func:`models.compact.decode.copy_head.past_last_spike`), only when the
   text ends in a repeat (:func:`models.compact.decode.copy_head.repeated_tail`, the replay costs
   ~9 ms for a 60-character line on one core);
   Then a final character the decoder wrote again past the last spike (``no.:::``, ``60444`` where
   the spikes end ``44``) is dropped (:func:`models.compact.decode.rereads.drop_stuttered_marks`; the
   pointer is replayed only when the text ends in the same character twice);
2. **unread repeats** (:func:`models.compact.decode.rereads.drop_unread_repeats`): a stretch written
   twice where the recogniser read it once is replaced by its reading; then a quotation mark
   written first or last where the recogniser read none, the rest read alike, is dropped
   (:func:`models.compact.decode.rereads.drop_unread_edge_marks`: ``76.84 '`` -> ``76.84``);
3. **a last character left out** (:func:`models.compact.decode.last_spike.restore_last_spike`): a
   segment the decoder ended one character before the recogniser's last spike (``Vermon`` where the
   spikes read ``Vermont``) gets that spike's letter or digit;
4. **numbers from the spikes** (:func:`models.compact.decode.numbers.numbers_from_spikes`, rules made
   :meth:`FinishRules.from_vocab`): a segment that the spikes and the decoder both read as one number
   takes the spikes' reading (the decoder's prior adds or changes digits on short table cells);
5. **quantities from the spikes** (:func:`models.compact.decode.quantities.quantity_from_spikes`): a
   segment that the spikes read as a receipt's ``count x price`` is written so from them, the sign as
   the letter x (the recogniser reads it ``×``, the decoder drops or garbles it);
6. **spacing head** (:func:`models.compact.decode.spacing.respace`, checkpoints with a ``"spacing"``
   entry only): the head's confident spaces and punctuation widths.

:func:`finish_segment` owns the chain. The decoder half
(:meth:`models.compact.decoder_half.CompactDecoderHalf.finish_tokens`) delegates to it, so the decoder
service (``decoder_service/running_batch.py``) and the in-process path (:mod:`models.inprocess`) apply
exactly this; the trainer's held-out greedy decoding
(``training/compact/zh_model.py``) calls it directly, without the spacing head (trained afterwards).
A correction counts whatever its length: one that replaces tokens without shortening the segment is
delivered like one that drops them.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

import torch

from models.compact.decode.copy_head import NO_SKIP_WEIGHT, past_last_spike, repeated_tail, spike_frames, trim_overrun
from models.compact.decode.last_spike import restore_last_spike
from models.compact.decode.numbers import number_vocab, numbers_from_spikes
from models.compact.decode.quantities import quantity_from_spikes, quantity_vocab
from models.compact.decode.rereads import drop_stuttered_marks, drop_unread_edge_marks, drop_unread_repeats
from models.compact.decode.spacing import FULL_TO_HALF, respace, spike_classes, width_pairs
from models.compact.line.columns import character_spikes


class FinishState(NamedTuple):
    """What :func:`finish_segment` needs of a PP-tower prompt: its copy classes (``q`` float32 [L, k],
    ``ids`` int64 [L, k], L prompt positions, :func:`models.compact.line.columns.unpack`), the
    recogniser's class (token id) at each of its N character spikes (``spike_ids``, spaces excluded)
    and the spacing head's (space after, full width) probabilities there (``spacing`` float32 [N, 2];
    None without the head, or where the caller does not apply it).
    """

    q: torch.Tensor
    ids: torch.Tensor
    spacing: torch.Tensor | None
    spike_ids: list[int]


@dataclass(frozen=True)
class FinishRules:
    """The vocabulary and checkpoint settings of the chain: ``eos_ids`` (a final one stays last),
    ``space_id`` (the space token, left out of the alignment to the spikes), ``pairs`` (token id -> the
    same punctuation mark in the other width, :func:`models.compact.decode.spacing.width_pairs`),
    ``full_ids`` (the full-width ones of them) and ``spacing_confidence`` (the spacing head's override
    threshold, config ``spacing.confidence``; None: the spacing step is skipped). ``number_ids``,
    ``digit_ids``, ``number_like_ids``: the vocabulary's number characters, digits, and number
    characters in either width (:func:`models.compact.decode.numbers.number_vocab`; empty: the numbers
    step is skipped), ``separator_ids`` (the decimal and group separators). ``mark_ids``: the
    vocabulary's punctuation marks (Unicode category P*, :func:`mark_vocab`; empty: the stutter
    step is skipped, as in the trainer's rules). ``word_ids``: its one-character letters and digits
    (:func:`word_vocab`; empty: the last-character step is skipped). ``sign_ids`` (a quantity's
    sign -> the id written for it) and ``quantity_like_ids`` (what a decoder's quantity may hold):
    :func:`models.compact.decode.quantities.quantity_vocab`; empty: the quantities step is skipped.
    ``quote_ids``: the vocabulary's quotation marks (:func:`quote_vocab`; empty: the edge-quote step
    is skipped).
    """

    eos_ids: frozenset[int]
    space_id: int
    pairs: Mapping[int, int] = field(default_factory=dict)
    full_ids: frozenset[int] = frozenset()
    spacing_confidence: float | None = None
    number_ids: frozenset[int] = frozenset()
    digit_ids: frozenset[int] = frozenset()
    number_like_ids: frozenset[int] = frozenset()
    separator_ids: frozenset[int] = frozenset()
    mark_ids: frozenset[int] = frozenset()
    word_ids: frozenset[int] = frozenset()
    sign_ids: Mapping[int, int] = field(default_factory=dict)
    quantity_like_ids: frozenset[int] = frozenset()
    quote_ids: frozenset[int] = frozenset()

    @classmethod
    def from_vocab(cls, vocab: Mapping[str, int], eos_ids: Collection[int],
                   spacing_confidence: float | None = None) -> FinishRules:
        """Rules for a tokenizer's ``vocab`` (token string -> id); ``space_id`` is -1 when the vocabulary
        has no space (then no written token is taken for one).
        """
        return cls(frozenset(int(t) for t in eos_ids), vocab.get(" ", -1), width_pairs(dict(vocab)),
                   frozenset(vocab[c] for c in FULL_TO_HALF if c in vocab), spacing_confidence,
                   *number_vocab(vocab), mark_vocab(vocab), word_vocab(vocab), *quantity_vocab(vocab),
                   quote_vocab(vocab))


#: Quotation marks: the apostrophe, straight and typographic quotes, guillemets, the backtick.
QUOTES = "'\"`\u2018\u2019\u201a\u201b\u201c\u201d\u201e\u201f\u00ab\u00bb\u2039\u203a"


def quote_vocab(vocab: Mapping[str, int]) -> frozenset[int]:
    """Ids of the one-character tokens of ``vocab`` that are quotation marks (:data:`QUOTES`)."""
    return frozenset(int(i) for t, i in vocab.items() if len(t) == 1 and t in QUOTES)


def mark_vocab(vocab: Mapping[str, int]) -> frozenset[int]:
    """Ids of the one-character tokens of ``vocab`` that are punctuation (Unicode category P*: ``.``
    ``:`` ``-`` ``，`` ...; not symbols such as ``$`` or ``%``).
    """
    return frozenset(int(i) for t, i in vocab.items() if len(t) == 1 and unicodedata.category(t).startswith("P"))


def word_vocab(vocab: Mapping[str, int]) -> frozenset[int]:
    """Ids of the one-character tokens of ``vocab`` that are letters or digits (``str.isalnum``: Latin
    letters, digits, hanzi; not marks or symbols).
    """
    return frozenset(int(i) for t, i in vocab.items() if len(t) == 1 and t.isalnum())


def finish_state(q: torch.Tensor, ids: torch.Tensor, space_id: int,
                 spacing: torch.Tensor | None = None) -> FinishState | None:
    """The :class:`FinishState` of a prompt from its copy classes ``q`` float [L, k] / ``ids`` int
    [L, k] (on the host) and, optionally, the spacing head's probabilities at every position
    (``spacing`` float [L, 2]; read at the character spikes only). None for a prompt without a
    spike (a Latin-tower line, or a PP line the recogniser read nothing on): nothing to correct.
    """
    if not bool(spike_frames(q).any()):
        return None
    probs = None if spacing is None else spacing.float()[character_spikes(q, ids, space_id)]
    return FinishState(q, ids.long(), probs, spike_classes(q, ids, space_id))


def spike_weights(state: FinishState, space_id: int) -> list[float]:
    """The copy weight (the recogniser's CTC posterior, 0-1) of its class at each character spike of
    ``state``, in the order of ``state.spike_ids``.
    """
    return state.q[character_spikes(state.q, state.ids, space_id)][:, 0].tolist()


def finish_segment(state: FinishState | None, token_ids: list[int], rules: FinishRules) -> list[int]:
    """A finished segment's generated ids (a final EOS of ``rules.eos_ids`` allowed, kept last) after the
    chain of the module docstring. Returns ``token_ids`` itself when nothing changes (``state`` None,
    no tokens, or no step applied), else a new list, which may be as long as ``token_ids`` or longer
    (a replaced repeat, an inserted space): callers deliver any change, not only a shortening.
    """
    if state is None or not token_ids:
        return token_ids
    ended = int(token_ids[-1]) in rules.eos_ids
    written = [int(t) for t in (token_ids[:-1] if ended else token_ids)]
    kept = written
    if repeated_tail(written):
        kept = trim_overrun(written, past_last_spike(state.q, state.ids, written))
    if rules.mark_ids and len(kept) >= 2 and kept[-1] == kept[-2] \
            and (kept[-1] in rules.mark_ids or state.spike_ids[-2:] == kept[-2:]):
        kept = drop_stuttered_marks(kept, past_last_spike(state.q, state.ids, kept), rules.mark_ids,
                                    state.spike_ids)
    kept = drop_unread_repeats(kept, state.spike_ids, rules.space_id)
    kept = drop_unread_edge_marks(kept, state.spike_ids, rules.quote_ids, rules.space_id)
    if rules.word_ids:
        kept = restore_last_spike(kept, state.spike_ids, lambda: spike_weights(state, rules.space_id)[-1],
                                  rules.space_id, rules.word_ids, NO_SKIP_WEIGHT)
    kept = numbers_from_spikes(kept, state.spike_ids, rules.number_ids, rules.digit_ids, rules.number_like_ids,
                               rules.separator_ids)
    kept = quantity_from_spikes(kept, state.spike_ids, rules.digit_ids, rules.separator_ids, rules.sign_ids,
                                rules.quantity_like_ids, rules.space_id)
    if state.spacing is not None and rules.spacing_confidence is not None:
        kept = respace(kept, state.spacing, state.spike_ids, rules.space_id, dict(rules.pairs),
                       set(rules.full_ids), rules.spacing_confidence)
    if kept == written:
        return token_ids
    return [*kept, int(token_ids[-1])] if ended else kept
