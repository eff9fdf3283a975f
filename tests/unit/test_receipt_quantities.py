"""A till receipt's quantity rows (``2 x 4.00``) as the PP tower reads them (issue 38, receipts):
the recogniser reads the letter x between two numbers as ``×`` and the decoder writes ``×``, drops
it or garbles the price (generated thermal receipts, seed 30,006); the finishing chain writes the
row from the spikes with the letter (models/compact/decode/quantities.py). No model needed."""

from __future__ import annotations

import torch

from models.compact.decode.finish import FinishRules, finish_segment, finish_state
from models.compact.decode.quantities import quantity_from_spikes, quantity_vocab
from models.compact.vocab import EOS_ID, SPACE_ID, build_tokenizer
from models.compact.vocab_zh import ZH_CHARSET

VOCAB = build_tokenizer(ZH_CHARSET).get_vocab()
SERVED = FinishRules.from_vocab(VOCAB, {EOS_ID})
TRAINER = FinishRules(eos_ids=frozenset({EOS_ID}), space_id=SPACE_ID)
TEXT = {v: k for k, v in VOCAB.items()}


def _ids(text: str) -> list[int]:
    return [VOCAB[c] for c in text]


def _finish(read: str, written: str, rules: FinishRules = SERVED) -> str:
    """The finished text of a segment whose spikes read ``read`` (a blank frame after each) and whose
    decoder wrote ``written``."""
    q, ids = torch.zeros(2 * len(read), 2), torch.zeros(2 * len(read), 2, dtype=torch.long)
    for i, c in enumerate(read):
        q[2 * i, 0], ids[2 * i, 0] = 0.95, VOCAB[c]
    out = finish_segment(finish_state(q, ids, SPACE_ID), [*_ids(written), EOS_ID], rules)
    assert out[-1] == EOS_ID
    return "".join(TEXT[t] for t in out[:-1])


def test_a_quantity_row_is_written_from_the_spikes_with_the_letter_x():
    """Seeds 30,006 and 30,030 (spikes -> decoder): each came back as written, not ``4 x 1.98`` etc."""
    for read, written, want in [("4x1.98", "4 1.9.88", "4 x 1.98"), ("2×1,87", "2 % 1,87", "2 x 1,87"),
                                ("3×14.76", "3 4 14.76", "3 x 14.76"), ("4×4.69", "4 × 4.69", "4 x 4.69"),
                                ("12×0.84", "12 x 0.84", "12 x 0.84"), ("2X7.98", "2 X 7.98", "2 X 7.98"),
                                ("3×1323", "1 ¥1323", "3 x 1323"), ("2x19.65", "2 ¥9,65", "2 x 19.65")]:
        assert _finish(read, written) == want, (read, written)
    assert _finish("4×4.69", "4 × 4.69", TRAINER) == "4 × 4.69"  # rules without the step leave it


def test_words_weights_and_other_numbers_stay_with_the_decoder():
    for read, written in [("ORGCOFFEE", "ORG COFFEE"), ("2×COLA", "2 x COLA"), ("1234×5.00", "1234 x 5.00"),
                          ("×4.00", "x 4.00"), ("2×4.00×3", "2 x 4.00 x 3"), ("2×4..00", "2 x 4..00"),
                          ("2×4.00", "2 x MILK"), ("2×4.00", "2 x 牛奶"), ("0.456kg×3.99", "0.456 kg x 3.99"),
                          ("2×.50", "2 x .50"), ("2×4.", "2 x 4.")]:
        assert _finish(read, written) == written, (read, written)
    signs, allowed = quantity_vocab(VOCAB)
    assert signs[VOCAB["×"]] == signs[VOCAB["x"]] == VOCAB["x"] and signs[VOCAB["X"]] == VOCAB["X"]
    assert quantity_vocab({"1": 5}) == ({}, frozenset())  # no letter x: no step
    same = _ids("2 x 4.00")
    assert quantity_from_spikes(same, _ids("2×4.00"), SERVED.digit_ids, SERVED.separator_ids, signs, allowed,
                                SPACE_ID) is same
