"""Unit tests (no model): loop detector, incremental detokenisation, sampling, batched KV cache."""

from __future__ import annotations

import pytest
import torch
from transformers import DynamicCache

from decoder_service.detok import IncrementalDetokenizer
from decoder_service.kv import BatchedKVCache
from decoder_service.repetition import NGramLoopDetector
from decoder_service.sampling import SamplingParams, make_generator, select_token
from decoder_service.stopping import FinishReason, StopCriteria
from inkstream.errors import InvalidInput


def _fires_at(det: NGramLoopDetector, seq: list[int]) -> int | None:
    for i, t in enumerate(seq):
        if det.push(t):
            return i
    return None


def test_loop_detector_fires_on_third_occurrence_of_an_ngram():
    det = NGramLoopDetector(n=3, window=30, repeats=3)
    seq = [1, 2, 3, 4] * 5  # period 4
    # (1, 2, 3) ends at indices 2, 6 and 10: its third occurrence is the first triple repeat
    assert _fires_at(det, seq) == 10


def test_loop_detector_ignores_non_repeating_and_old_repeats():
    det = NGramLoopDetector(n=2, window=6, repeats=3)
    assert _fires_at(det, list(range(100))) is None
    det = NGramLoopDetector(n=2, window=6, repeats=3)
    # (7, 8) three times but spread further apart than the window
    seq = [7, 8, 1, 2, 3, 4, 5, 7, 8, 10, 11, 12, 13, 14, 7, 8]
    assert _fires_at(det, seq) is None


def test_loop_detector_lets_runs_of_one_character_through():
    """Dot leaders / rules read one character per token: overlapping occurrences do not count, so a
    run of one token trips (n=20, repeats=3) only at 60 tokens, not at 22."""
    det = NGramLoopDetector(n=20, window=256, repeats=3)
    assert _fires_at(det, [5, 6, 7] + [46] * 40 + [8, 9]) is None
    det = NGramLoopDetector(n=20, window=256, repeats=3)
    assert _fires_at(det, [46] * 100) == 59
    det = NGramLoopDetector(n=4, window=64, repeats=3)
    assert _fires_at(det, [1, 2] * 20) == 11  # period 2: (1,2,1,2) non-overlapping at 0, 4, 8


def test_loop_detector_rejects_bad_settings():
    with pytest.raises(ValueError):
        NGramLoopDetector(n=4, window=8, repeats=3)


def test_stop_order_eos_then_repetition_then_length():
    p = SamplingParams(max_new_tokens=3, repetition_ngram=1, repetition_window=3, repetition_repeats=3)
    s = StopCriteria(p, {9}, 3)
    assert s.check(5, 1) is None
    assert s.check(9, 2) is FinishReason.STOP
    s = StopCriteria(p, {9}, 3)
    assert [s.check(5, i) for i in (1, 2, 3)] == [None, None, FinishReason.REPETITION]
    s = StopCriteria(p, {9}, 3)
    assert [s.check(t, i) for i, t in enumerate([1, 2, 3], 1)] == [None, None, FinishReason.LENGTH]


def _utf8_decode(ids):
    return bytes(ids).decode("utf-8", errors="replace")


def test_detok_emits_only_whole_characters():
    text = "né 世界 🙂 ok"
    ids = list(text.encode())
    d = IncrementalDetokenizer(_utf8_decode)
    deltas = [d.push([i]) for i in ids] + [d.flush()]
    assert "".join(deltas) == text
    assert all("\ufffd" not in x for x in deltas)
    # a 4-byte emoji is held back until its last byte arrives
    assert sum(1 for x in deltas if x) < len(ids)


def test_detok_flush_reports_a_truncated_character():
    d = IncrementalDetokenizer(_utf8_decode)
    assert d.push(list(b"a") + [0xE4, 0xB8]) == ""  # 'a' + first 2 bytes of a CJK char
    assert d.flush() == "a\ufffd"


def test_sampling_params_validation():
    with pytest.raises(InvalidInput, match="temperature"):
        SamplingParams(max_new_tokens=4, temperature=-1)
    with pytest.raises(InvalidInput, match="top_p"):
        SamplingParams(max_new_tokens=4, top_p=1.5)
    with pytest.raises(InvalidInput, match="max_new_tokens"):
        SamplingParams(max_new_tokens=0)


def test_sampling_greedy_topk1_and_seed():
    logits = torch.randn(50, generator=torch.Generator().manual_seed(1))
    g = SamplingParams(max_new_tokens=1)
    assert select_token(logits, g, None) == int(logits.argmax())
    k1 = SamplingParams(max_new_tokens=1, temperature=1.0, top_k=1, seed=3)
    assert select_token(logits, k1, make_generator(k1)) == int(logits.argmax())
    s = SamplingParams(max_new_tokens=1, temperature=1.0, seed=7)
    a = [select_token(logits, s, gen) for gen in [make_generator(s)] for _ in range(20)]
    b = [select_token(logits, s, gen) for gen in [make_generator(s)] for _ in range(20)]
    assert a == b and len(set(a)) > 1
    # top_p tiny keeps only the most likely token
    p = SamplingParams(max_new_tokens=1, temperature=1.0, top_p=1e-6, seed=5)
    gen = make_generator(p)
    assert {select_token(logits, p, gen) for _ in range(10)} == {int(logits.argmax())}


def _cache(length: int, fill: float) -> DynamicCache:
    c = DynamicCache()
    c.update(torch.full((1, 2, length, 4), fill), torch.full((1, 2, length, 3), fill), 0)
    return c


def test_batched_kv_left_pads_on_join_and_trims_on_leave():
    b = BatchedKVCache()
    b.add(_cache(5, 1.0), 5)
    b.add(_cache(3, 2.0), 3)
    b.add(_cache(7, 3.0), 7)
    assert (b.batch_size, b.seq_len) == (3, 7)
    assert b.mask.tolist() == [[0, 0, 1, 1, 1, 1, 1], [0, 0, 0, 0, 1, 1, 1], [1] * 7]
    assert b.next_pos.tolist() == [5, 3, 7]
    k = b.cache.layers[0].keys
    assert k.shape == (3, 2, 7, 4) and k[1, :, :4].abs().sum() == 0 and (k[1, :, 4:] == 2.0).all()
    mask, pos = b.step_inputs()
    assert mask.shape == (3, 8) and pos.tolist() == [[5], [3], [7]]
    b.keep([0, 1])  # the longest leaves: two shared padding columns are cut
    assert (b.batch_size, b.seq_len) == (2, 5)
    assert b.mask.tolist() == [[1] * 5, [0, 0, 1, 1, 1]]
    assert (b.cache.layers[0].values[0] == 1.0).all() and b.cache.layers[0].values.shape == (2, 2, 5, 3)
    b.keep([])
    assert b.batch_size == 0 and b.cache is None


def test_batched_kv_adds_a_left_padded_prefill_group_and_skips_finished_rows():
    b = BatchedKVCache()
    b.add(_cache(4, 1.0), 4)
    group = DynamicCache()  # 3 rows, 6 positions, left-padded to lengths 2, 5, 3
    keys = torch.zeros(3, 2, 6, 4)
    for row, n in enumerate((2, 5, 3)):
        keys[row, :, 6 - n:] = 10.0 + row
    group.update(keys, keys[..., :3].clone(), 0)
    mask = torch.tensor([[0, 0, 0, 0, 1, 1], [0, 1, 1, 1, 1, 1], [0, 0, 0, 1, 1, 1]])
    b.add(group, mask, rows=[0, 2])  # row 1 finished at its first token: it does not join
    assert (b.batch_size, b.seq_len) == (3, 4)  # the column that is padding in both joining rows is cut
    assert b.mask.tolist() == [[1, 1, 1, 1], [0, 0, 1, 1], [0, 1, 1, 1]]
    assert b.next_pos.tolist() == [4, 2, 3]
    k = b.cache.layers[0].keys
    assert (k[1, :, 2:] == 10.0).all() and (k[2, :, 1:] == 12.0).all() and k[1, :, :2].abs().sum() == 0


def test_prefill_groups_keep_order_and_respect_the_token_budget():
    from decoder_service.prefill import prefill_groups

    assert prefill_groups([10, 10, 10, 10], budget=30) == [[0, 1, 2], [3]]
    assert prefill_groups([5, 40, 5], budget=60) == [[0], [1], [2]]  # 2 x 40 > 60; a 40-token prompt alone
    assert prefill_groups([100], budget=50) == [[0]]  # longer than the budget: still prefilled, alone
    assert prefill_groups([]) == []


def test_batched_kv_leaves_in_place_and_keeps_decoding_like_a_fresh_cache():
    torch.manual_seed(0)
    rows = []
    for n in (6, 4, 6, 5):
        c = DynamicCache()
        c.update(torch.randn(1, 2, n, 4), torch.randn(1, 2, n, 3), 0)
        rows.append(c)
    b = BatchedKVCache()
    for c, n in zip(rows, (6, 4, 6, 5), strict=True):
        b.add(c, n)
    layer = b.cache.layers[0]
    buf = layer._kbuf
    before_k, before_v = layer.keys.clone(), layer.values.clone()
    b.keep([1, 3])  # both 6-position rows leave: one shared padding column is cut, no new buffers
    layer = b.cache.layers[0]
    assert layer._kbuf.data_ptr() == buf.data_ptr()
    assert layer.keys.shape == (2, 2, 5, 4) and layer.get_seq_length() == 5 == b.seq_len
    assert torch.equal(layer.keys, before_k[[1, 3], :, 1:]) and torch.equal(layer.values, before_v[[1, 3], :, 1:])
    new_k, new_v = torch.randn(2, 2, 1, 4), torch.randn(2, 2, 1, 3)
    k, v = layer.update(new_k, new_v)  # the next step appends after the kept positions
    assert torch.equal(k, torch.cat([before_k[[1, 3], :, 1:], new_k], dim=2))
    assert torch.equal(v, torch.cat([before_v[[1, 3], :, 1:], new_v], dim=2))
    layer.crop(-1)
    assert torch.equal(layer.keys, before_k[[1, 3], :, 1:])
    with pytest.raises(ValueError):
        layer.keep_rows([1, 0])
