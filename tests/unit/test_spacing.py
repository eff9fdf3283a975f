"""The spacing head's pieces (models/compact/decode/spacing.py, inkcolumns.py): ink columns, the frame
channels of the recogniser's spikes, and the decoder's confident overrides (respace)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models.compact.decode.spacing import respace, width_pairs
from models.compact.line.columns import character_spikes
from models.compact.line.inkcolumns import PROFILE_CHANNELS, column_ink
from models.compact.line.spacing_head import SpacingHead, head_inputs, script_class, script_classes
from models.compact.vocab import build_tokenizer
from models.compact.vocab_zh import ZH_CHARSET

VOCAB = build_tokenizer(ZH_CHARSET).get_vocab()
SPACE = VOCAB[" "]
PAIRS = width_pairs(VOCAB)
FULL = {VOCAB[c] for c in "，：（）；！？"}


def _ids(text: str) -> list[int]:
    return [VOCAB[c] for c in text]


def _text(ids: list[int]) -> str:
    inv = {i: c for c, i in VOCAB.items()}
    return "".join(inv[i] for i in ids)


def test_column_ink_reads_each_pixel_column_per_frame():
    line = np.ones((3, 48, 64), np.float32)  # paper
    line[:, 12:36, 10:13] = -1.0  # ink in columns 10-12, middle rows only
    line[:, 0:4, 40] = -1.0  # a stroke of the line above, outer rows only
    cols = column_ink(line)
    assert cols.shape == (8, PROFILE_CHANNELS) and cols.dtype == np.float32
    full, middle = cols[:, :8].reshape(-1), cols[:, 8:].reshape(-1)  # per pixel column
    assert np.allclose(full[10:13], 0.5) and np.allclose(middle[10:13], 1.0)
    assert full[40] == pytest.approx(4 / 48) and middle[40] == 0.0
    assert full.sum() == pytest.approx(3 * 0.5 + 4 / 48)
    assert np.array_equal(column_ink(line[0].astype(np.float16)), cols)  # one channel, the encoder's float16
    with pytest.raises(ValueError, match="multiple of 8"):
        column_ink(np.ones((3, 48, 60), np.float32))


def test_scripts_and_width_pairs():
    assert [script_class(c) for c in "汉aZ7，。,:é"] == [0, 1, 1, 1, 2, 2, 3, 3, 1]
    assert script_class("<pad>") == 3
    s = script_classes(VOCAB)
    assert s.shape == (max(VOCAB.values()) + 1,) and int(s[VOCAB["汉"]]) == 0 and int(s[VOCAB["a"]]) == 1
    assert PAIRS[VOCAB["，"]] == VOCAB[","] and PAIRS[VOCAB[","]] == VOCAB["，"] and len(PAIRS) == 14


def test_character_spikes_skip_blanks_and_the_space():
    q = torch.tensor([[0.0, 0.0], [0.9, 0.1], [0.8, 0.0], [0.7, 0.2], [0.0, 0.0]])
    ids = torch.tensor([[0, 0], [VOCAB["汉"], 7], [SPACE, 7], [VOCAB["a"], 0], [VOCAB["b"], 0]])
    assert character_spikes(q, ids, SPACE).tolist() == [False, True, False, True, False]
    x = head_inputs(torch.zeros(1, 5, 120), torch.zeros(1, 5, 16), q[None], ids[None], script_classes(VOCAB), SPACE)
    assert x.shape == (1, 5, 142)
    assert x[0, :, 137].tolist() == [0.0, 1.0, 0.0, 1.0, 0.0]  # is-spike channel
    assert x[0, 1, 138:].tolist() == [1.0, 0.0, 0.0, 0.0] and x[0, 3, 138:].tolist() == [0.0, 1.0, 0.0, 0.0]
    assert SpacingHead(hidden=8)(x).shape == (1, 5, 2)


def _probs(space: list[float], full: list[float]) -> torch.Tensor:
    return torch.tensor(list(zip(space, full, strict=True)))


def test_respace_applies_only_confident_decisions():
    written = _ids("使用Python编写，支持")  # 13 characters, one per spike
    n = 13
    space = [0.5] * n
    space[1], space[7] = 0.97, 0.99  # after 用 and after n: a space the decoder left out
    full = [0.5] * n
    out = respace(written, _probs(space, full), written, SPACE, PAIRS, FULL, 0.9)
    assert _text(out) == "使用 Python 编写，支持"
    space[1] = 0.8  # not confident: the decoder's choice stands
    assert _text(respace(written, _probs(space, full), written, SPACE, PAIRS, FULL, 0.9)) == "使用Python 编写，支持"
    full[10] = 0.02  # the comma: half width, and a space after it
    space[10] = 0.95
    assert _text(respace(written, _probs(space, full), written, SPACE, PAIRS, FULL, 0.9)) == "使用Python 编写, 支持"


def test_respace_removes_spaces_and_widens_punctuation():
    written = _ids("执行 时间: ms")
    space = [0.5, 0.03, 0.5, 0.5, 0.05, 0.5, 0.5]  # no space after 行; none after the colon
    full = [0.5, 0.5, 0.5, 0.5, 0.95, 0.5, 0.5]
    spikes = _ids("执行时间：ms")  # the recogniser read the full-width colon; the decoder wrote ASCII
    assert _text(respace(written, _probs(space, full), spikes, SPACE, PAIRS, FULL, 0.9)) == "执行时间：ms"


def test_respace_aligns_the_written_characters_to_the_spikes_they_read():
    spikes = _ids("abXcd")  # the recogniser read an X the decoder left out, and no y
    written = _ids("abcyd")
    space = [0.99, 0.99, 0.99, 0.99, 0.5]
    probs = _probs(space, [0.5] * 5)
    # a|b read spikes 0|1: space; b|c read 1|3 (X left out): unchanged; c|y: y is the decoder's own
    # (no spike): unchanged; y|d: unchanged
    assert _text(respace(written, probs, spikes, SPACE, PAIRS, FULL, 0.9)) == "a bcyd"
    written = _ids("aQcd")  # Q written in place of b (a correction): still reads spike 1
    assert _text(respace(written, _probs([0.99, 0.99, 0.5, 0.5], [0.5] * 4), _ids("abcd"), SPACE, PAIRS, FULL,
                         0.9)) == "a Q cd"
    assert respace([], probs[:0], [], SPACE, PAIRS, FULL, 0.9) == []
    assert respace(_ids("  "), probs[:0], [], SPACE, PAIRS, FULL, 0.9) == _ids("  ")
    two_spaces = _ids("a  b")  # the decoder's own double space stays when the head does not object
    assert respace(two_spaces, _probs([0.5, 0.5], [0.5, 0.5]), _ids("ab"), SPACE, PAIRS, FULL, 0.9) == two_spaces


def test_a_last_mark_takes_the_recognisers_width_where_the_head_is_unsure():
    written = _ids("其中:")  # a table cell's label; the recogniser read the full-width colon
    spikes = _ids("其中：")
    space = [0.5, 0.5, 0.5]
    for p_full in (0.12, 0.5, 0.85):  # unsure: no blank after the last mark to measure
        assert _text(respace(written, _probs(space, [0.5, 0.5, p_full]), spikes, SPACE, PAIRS, FULL, 0.9)) == "其中："
    assert _text(respace(written, _probs(space, [0.5, 0.5, 0.05]), spikes, SPACE, PAIRS, FULL, 0.9)) == "其中:"
    assert _text(respace(written, _probs(space, [0.5, 0.5, 0.5]), _ids("其中:"), SPACE, PAIRS, FULL, 0.9)) == "其中:"
    mid = _ids("时间: ms")  # not the last mark: the decoder's choice stands
    assert _text(respace(mid, _probs([0.5] * 5, [0.5] * 5), _ids("时间：ms"), SPACE, PAIRS, FULL, 0.9)) == "时间: ms"
