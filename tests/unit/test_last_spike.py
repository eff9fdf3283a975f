"""A last character the decoder left out is put back from the recogniser's final spike
(models/compact/decode/last_spike.py), through the finishing chain (models/compact/decode/finish.py):
``Vermon`` -> ``Vermont`` where the spikes read ``Vermont`` (bench/table_pages.py seed 0 page 0)."""

from __future__ import annotations

import torch

from models.compact.decode.copy_head import NO_SKIP_WEIGHT
from models.compact.decode.finish import FinishRules, finish_segment, finish_state
from models.compact.decode.last_spike import restore_last_spike
from models.compact.vocab import EOS_ID, SPACE_ID, build_tokenizer
from models.compact.vocab_zh import ZH_CHARSET

VOCAB = build_tokenizer(ZH_CHARSET).get_vocab()
SERVED = FinishRules.from_vocab(VOCAB, {EOS_ID})
WORD = SERVED.word_ids


def _ids(text: str) -> list[int]:
    return [VOCAB[c] for c in text]


def _line(text: str, weights: list[float] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Copy classes (q [L, 2], ids [L, 2]) of a line whose spikes read ``text`` (no spaces), a blank
    frame after each spike; ``weights`` the copy weight of each spike (0.99 each by default)."""
    q, ids = torch.zeros(2 * len(text), 2), torch.zeros(2 * len(text), 2, dtype=torch.long)
    for i, c in enumerate(text):
        q[2 * i, 0], ids[2 * i, 0] = (weights or [0.99] * len(text))[i], VOCAB[c]
    return q, ids


def test_a_word_ended_one_spike_early_gets_its_last_letter():
    state = finish_state(*_line("Vermont"), SPACE_ID)
    assert state is not None
    assert finish_segment(state, [*_ids("Vermon"), EOS_ID], SERVED) == [*_ids("Vermont"), EOS_ID]
    state = finish_state(*_line("Utilities"), SPACE_ID)
    assert finish_segment(state, [*_ids("Utilitie"), EOS_ID], SERVED) == [*_ids("Utilities"), EOS_ID]
    state = finish_state(*_line("Grossprofit"), SPACE_ID)  # spikes carry no spaces; the text keeps its own
    assert finish_segment(state, [*_ids("Gross profi"), EOS_ID], SERVED) == [*_ids("Gross profit"), EOS_ID]


def test_what_is_left_alone():
    state = finish_state(*_line("Vermont"), SPACE_ID)
    # the in-process path delivers a segment without its EOS: the same correction
    assert finish_segment(state, _ids("Vermon"), SERVED) == _ids("Vermont")
    whole = [*_ids("Vermont"), EOS_ID]
    assert finish_segment(state, whole, SERVED) is whole
    faint = finish_state(*_line("Vermont", [0.99] * 6 + [NO_SKIP_WEIGHT - 0.2]), SPACE_ID)
    written = [*_ids("Vermon"), EOS_ID]
    assert finish_segment(faint, written, SERVED) is written  # the last spike is no sure reading
    mark = finish_state(*_line("Total."), SPACE_ID)
    written = [*_ids("Total"), EOS_ID]
    assert finish_segment(mark, written, SERVED) is written  # a speck at the edge reads as a mark
    two = finish_state(*_line("Vermonts"), SPACE_ID)
    written = [*_ids("Vermon"), EOS_ID]
    assert finish_segment(two, written, SERVED) is written  # two spikes left: not one character short
    trainer = FinishRules(eos_ids=frozenset({EOS_ID}), space_id=SPACE_ID)
    assert finish_segment(state, written, trainer) is written  # rules without word ids skip the step


def test_the_tail_before_the_left_out_spike_must_match():
    spikes = _ids("Vermont")
    assert restore_last_spike(_ids("Vermon"), spikes, lambda: 0.99, SPACE_ID, WORD, NO_SKIP_WEIGHT) == spikes
    other = _ids("Vermox")  # the decoder's last letters are not the spikes': it wrote its own text
    assert restore_last_spike(other, spikes, lambda: 0.99, SPACE_ID, WORD, NO_SKIP_WEIGHT) is other
    empty: list[int] = []
    assert restore_last_spike(empty, _ids("nt"), lambda: 0.99, SPACE_ID, WORD, NO_SKIP_WEIGHT) is empty
    hanzi = _ids("甲乙")  # a hanzi is a word character too
    assert restore_last_spike(hanzi, _ids("甲乙丙"), lambda: 0.99, SPACE_ID, WORD, NO_SKIP_WEIGHT) == _ids("甲乙丙")
    label = _ids("商")  # a two-hanzi table label written one short (seed 2 page 4: 商誉)
    assert restore_last_spike(label, _ids("商誉"), lambda: 1.0, SPACE_ID, WORD, NO_SKIP_WEIGHT) == _ids("商誉")
    alone = _ids("甲")  # one spike is no tail to align on
    assert restore_last_spike(alone, _ids("甲"), lambda: 1.0, SPACE_ID, WORD, NO_SKIP_WEIGHT) is alone
