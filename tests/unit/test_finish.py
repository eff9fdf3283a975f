"""The one finishing function of a decoded segment (models/compact/decode/finish.py): what it changes,
that a change may keep the segment's length (the decoder service used to drop such corrections), and
that the trainer's rules (no spacing head) leave the head's decisions out."""

from __future__ import annotations

import torch

from models.compact.decode.finish import FinishRules, finish_segment, finish_state
from models.compact.vocab import EOS_ID, SPACE_ID, build_tokenizer
from models.compact.vocab_zh import ZH_CHARSET

VOCAB = build_tokenizer(ZH_CHARSET).get_vocab()
JIA, COMMA, YI, HALF_COMMA = VOCAB["甲"], VOCAB["，"], VOCAB["乙"], VOCAB[","]
SERVED = FinishRules.from_vocab(VOCAB, {EOS_ID}, spacing_confidence=0.9)
TRAINER = FinishRules(eos_ids=frozenset({EOS_ID}), space_id=SPACE_ID)


def _line(classes: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Copy classes (q float32 [L, 2], ids int64 [L, 2]) of a line whose spikes read ``classes``, a
    blank frame after each."""
    q, ids = torch.zeros(2 * len(classes), 2), torch.zeros(2 * len(classes), 2, dtype=torch.long)
    for i, c in enumerate(classes):
        q[2 * i, 0], ids[2 * i, 0] = 0.95, c
    return q, ids


def test_a_line_without_spikes_has_nothing_to_finish():
    q, ids = torch.zeros(4, 2), torch.zeros(4, 2, dtype=torch.long)
    assert finish_state(q, ids, SPACE_ID) is None
    written = [JIA, JIA, YI, YI, EOS_ID]
    assert finish_segment(None, written, SERVED) is written


def test_a_width_swap_is_a_correction_of_the_same_length():
    q, ids = _line([JIA, COMMA, YI])
    spacing = torch.zeros(q.shape[0], 2)  # per frame: P(space after), P(full width); 0.02: half width
    spacing[2, 1] = 0.02
    state = finish_state(q, ids, SERVED.space_id, spacing)
    assert state is not None and state.spike_ids == [JIA, COMMA, YI] and state.spacing is not None
    assert state.spacing.shape == (3, 2)
    written = [JIA, COMMA, YI, EOS_ID]
    finished = finish_segment(state, written, SERVED)
    assert finished == [JIA, HALF_COMMA, YI, EOS_ID]
    assert len(finished) == len(written) and finished != written
    assert finish_segment(state, written, TRAINER) is written  # the trainer's chain has no spacing head


def test_the_chain_trims_an_overrun_and_an_unread_repeat_and_keeps_eos_last():
    q, ids = _line([JIA, YI, COMMA])
    state = finish_state(q, ids, SPACE_ID)
    assert state is not None and state.spacing is None
    assert finish_segment(state, [JIA, YI, COMMA, YI, COMMA, EOS_ID], TRAINER) == [JIA, YI, COMMA, EOS_ID]
    assert finish_segment(state, [JIA, YI, JIA, YI, COMMA], TRAINER) == [JIA, YI, COMMA]  # ended by length
    unchanged = [JIA, YI, COMMA, EOS_ID]
    assert finish_segment(state, unchanged, SERVED) is unchanged
