"""The trainer's held-out greedy decoding finishes each line with the decoder service's rules (the same
vocabulary sets, so the numbers, last-character and edge-quote steps run there too), without the spacing
head: held-out CER during training is the CER the service will give."""

from __future__ import annotations

import pathlib

from models.compact.decode.finish import FinishRules
from models.compact.export import writer
from models.compact.vocab import EOS_ID, build_tokenizer
from models.compact.vocab_zh import ZH_CHARSET
from training.compact.zh_model import Bilingual

LATIN = pathlib.Path(__file__).resolve().parents[2] / "models" / "compact" / "weights"


def test_the_trainers_finishing_rules_are_the_services_without_spacing():
    vocab = build_tokenizer(ZH_CHARSET).get_vocab()
    model = Bilingual(writer.load_training_model(LATIN), vocab, pp_stride=1)
    served = FinishRules.from_vocab(vocab, {EOS_ID})
    assert model.finish_rules == served
    assert model.finish_rules.spacing_confidence is None
    for step_ids in (served.number_ids, served.word_ids, served.quote_ids, served.mark_ids, served.sign_ids):
        assert step_ids  # every step of the chain has its vocabulary, so none is skipped
