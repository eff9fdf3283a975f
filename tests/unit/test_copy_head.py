"""The pointer-generator output (models/compact/decode/copy_head.py): the mixture itself, the copy classes'
packing into vision-token columns, and the decoder half's cached serving path against a full-sequence
reference computed as training computes it, alone and after the batched KV cache merged two prefills."""

from __future__ import annotations

import json
import math
import shutil

import pytest
import torch

from decoder_service.kv import BatchedKVCache
from inkstream.errors import InvalidInput
from models.base import left_pad
from models.compact.checkpoint import COPY_PREFIX
from models.compact.decode.copy_head import (
    PointerCopy,
    advance,
    attention_rows,
    keep_confident_spike,
    past_last_spike,
    pointer_attention,
    pointer_end,
    repeated_tail,
    teacher_pointer,
    trim_overrun,
)
from models.compact.decoder_half import CompactDecoderHalf
from models.compact.export.writer import export_checkpoint
from models.compact.line.columns import copy_width, pack, peak_classes, unpack
from models.compact.model import SUPERVISED_HEADS, CompactOCR, EncoderConfig, decoder_config
from models.compact.vocab import BOS_ID, EOS_ID, SPACE_ID, build_tokenizer


def test_closed_gate_copies_the_attended_tokens_class():
    copy = PointerCopy(8, topk=2)
    with torch.no_grad():
        copy.gate.bias.fill_(-30.0)  # g ~ 0: the copy distribution alone
    q = torch.tensor([[[0.9, 0.1], [0.8, 0.2], [0.5, 0.5]]])  # [N=1, S=3, k=2]
    ids = torch.tensor([[[7, 9], [11, 12], [13, 14]]])
    attention = torch.tensor([[0.05, 0.9, 0.05]])
    with torch.no_grad():
        out = copy.mix(torch.zeros(1, 20), torch.zeros(1, 8), attention, q, ids)
    assert int(out.argmax()) == 11
    assert math.isclose(float(out.exp().sum()), 1.0, rel_tol=1e-4)


def test_covered_frames_are_not_copied_again():
    copy = PointerCopy(8, topk=1)
    with torch.no_grad():
        copy.gate.bias.fill_(-30.0)
    q, ids = torch.ones(1, 2, 1), torch.tensor([[[11], [12]]])
    attention = torch.tensor([[0.7, 0.3]])  # still mostly on the frame copied at the last step
    with torch.no_grad():
        out = copy.mix(torch.zeros(1, 20), torch.zeros(1, 8), attention, q, ids, torch.tensor([[0.95, 0.0]]))
    assert int(out.argmax()) == 12


def test_a_spread_spike_is_offered_once_and_a_doubled_character_twice():
    # frames: 5 (0.3), 5 (0.9), 5 (0.3) = one spread spike; then blank; then 5 (0.8), 5 (0.8): one more
    p = torch.tensor([[0.3], [0.9], [0.3], [0.9], [0.8], [0.8]])
    ids = torch.tensor([[40], [40], [40], [0], [40], [40]])
    kept = peak_classes(p, ids)[:, 0].tolist()
    assert kept == pytest.approx([0.0, 0.9, 0.0, 0.9, 0.8, 0.0])


def test_open_gate_is_the_decoders_softmax():
    copy = PointerCopy(8, topk=2)
    with torch.no_grad():
        copy.gate.bias.fill_(30.0)
    lm = torch.randn(2, 20)
    with torch.no_grad():
        out = copy.mix(lm, torch.zeros(2, 8), torch.ones(2, 3) / 3, torch.rand(2, 3, 2),
                       torch.randint(5, 20, (2, 3, 2)))
    torch.testing.assert_close(out, lm.log_softmax(-1), atol=1e-4, rtol=1e-4)


def test_copy_classes_survive_half_precision_wires():
    p = torch.tensor([[0.7, 0.2, 0.05, 0.05]])
    ids = torch.tensor([[7697, 0, 129, 3]])  # a high id, the blank, a two-digit id, a special id
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        q, back = unpack(pack(p, ids).to(dtype), 7698)
        assert back.tolist() == ids.tolist()
        assert q[0, 1] == 0 and q[0, 3] == 0 and abs(float(q[0, 0]) - 0.7) < 0.01
    q, back = unpack(torch.randn(5, copy_width(4)) * 1e4, 7698)  # garbage from a client stays in range
    assert int(back.min()) >= 0 and int(back.max()) < 7698 and float(q.max()) <= 1.0


def test_pointer_walks_the_spikes_in_order_and_waits_for_its_character():
    # frames: spike 11, blank (top-1 special), spike 12 (a spread repeat already zeroed), spike 13
    q = torch.tensor([[[0.9, 0.1], [0.0, 0.3], [0.8, 0.2], [0.7, 0.3]]])
    ids = torch.tensor([[[11, 21], [0, 22], [12, 23], [13, 11]]])
    covered = torch.zeros(1, 4)
    at = pointer_attention(q, covered)
    assert at.tolist() == [[1.0, 0.0, 0.0, 0.0]]
    for stay in (SPACE_ID, EOS_ID):  # a space or the end: the pointer stays
        assert pointer_attention(q, advance(at, q, ids, covered, torch.tensor([stay]))).tolist() == at.tolist()
    after = {21: 2, 30: 2, 12: 3}  # its second class; another character in its place; the next spike's
    for written, frame in after.items():
        moved = advance(at, q, ids, covered, torch.tensor([written]))
        assert int(pointer_attention(q, moved).argmax()) == frame, written
    covered = advance(at, q, ids, covered, torch.tensor([21]))
    assert pointer_end(q, at).tolist() == [0.0] and pointer_end(torch.zeros_like(q), at * 0).tolist() == [0.0]
    done = torch.ones(1, 4)  # every spike copied: the copy path offers </s>, a Latin line's (no spikes) does not
    assert pointer_end(q, pointer_attention(q, done)).tolist() == [1.0]
    steps = teacher_pointer(q, ids, torch.tensor([[1, 11, 12, 13, -1]]))  # <s>, the three, padding
    assert steps.argmax(-1).tolist() == [[0, 2, 3, 0, 0]] and steps[0, 3:].sum() == 0
    copy = PointerCopy(8, topk=2, pointer=True)
    with torch.no_grad():
        copy.gate.bias.fill_(-30.0)
        out = copy.mix(torch.zeros(1, 30), torch.zeros(1, 8), steps[:, 1], q, ids)
    assert int(out.argmax()) == 12 and copy.config()["pointer"] == "monotonic"
    with torch.no_grad():
        end = copy.mix(torch.zeros(1, 30), torch.zeros(1, 8), pointer_attention(q, done), q, ids,
                       end=pointer_end(q, pointer_attention(q, done)))
    assert int(end.argmax()) == EOS_ID


def test_a_confident_spike_is_not_skipped_by_writing_the_next_one():
    # spikes: 11 (sure, 0.95), 12 (0.6), 13; the decoder's mixture prefers the *next* spike's character
    q = torch.tensor([[[0.95, 0.05], [0.6, 0.4], [0.8, 0.2]]])
    ids = torch.tensor([[[11, 21], [12, 22], [13, 23]]])
    covered = torch.zeros(1, 3)
    logp = torch.full((1, 30), -10.0)
    logp[0, 12], logp[0, 11], logp[0, SPACE_ID] = -0.1, -2.0, -3.0
    at = pointer_attention(q, covered)
    out = keep_confident_spike(logp, q, ids, at, covered)
    assert int(out.argmax()) == 11  # 12 and 22 barred, the sure spike's own class wins
    assert out[0, 22] == float("-inf") and out[0, SPACE_ID] == -3.0 and out[0, 21] == -10.0
    ids_sp = ids.clone()
    ids_sp[0, 1, 0] = SPACE_ID  # the recogniser reads a space right after the sure character
    logp_sp = torch.full((1, 30), -10.0)
    logp_sp[0, SPACE_ID], logp_sp[0, 11] = 0.0, -2.0
    assert int(keep_confident_spike(logp_sp, q, ids_sp, at, covered).argmax()) == 11
    # On the unsure spike (0.6) the decoder may still take the next spike's character (a false spike).
    covered = advance(at, q, ids, covered, torch.tensor([11]))
    at = pointer_attention(q, covered)
    logp2 = torch.full((1, 30), -10.0)
    logp2[0, 13] = -0.1
    assert torch.equal(keep_confident_spike(logp2, q, ids, at, covered), logp2)
    # A class the current spike holds too is never barred (a doubled character across two spikes).
    q3, ids3 = torch.tensor([[[0.95, 0.0], [0.9, 0.0]]]), torch.tensor([[[11, 0], [11, 0]]])
    logp3 = torch.full((1, 30), -10.0)
    logp3[0, 11] = -0.1
    at3 = pointer_attention(q3, torch.zeros(1, 2))
    assert torch.equal(keep_confident_spike(logp3, q3, ids3, at3, torch.zeros(1, 2)), logp3)
    # Past the last spike (the pointer on none) nothing is barred.
    done = torch.ones(1, 3)
    assert torch.equal(keep_confident_spike(logp, q, ids, pointer_attention(q, done), done), logp)


def test_a_repeated_tail_written_past_the_last_spike_is_dropped():
    # spikes read 11 12 13; the decoder wrote 11 12 13, then 12 13 again past the last spike
    q = torch.tensor([[0.9, 0.0], [0.0, 0.0], [0.8, 0.0], [0.7, 0.0]])
    ids = torch.tensor([[11, 0], [0, 0], [12, 0], [13, 0]])
    written = [11, 12, 13, 12, 13]
    past = past_last_spike(q, ids, written)
    assert past == [False, False, False, True, True]
    assert trim_overrun(written, past) == [11, 12, 13]
    assert trim_overrun([11, 12, 13, 13, 13], past) == [11, 12, 13, 13, 13]  # runs of one token stay
    # text that goes on past the last spike without repeating itself stays (a correction: "TrueType")
    assert trim_overrun([11, 12, 13, 20, 21], past) == [11, 12, 13, 20, 21]
    # a repeat that began before the pointer passed the last spike is the recogniser's reading: kept
    assert trim_overrun([11, 12, 11, 12], [False, False, False, True]) == [11, 12, 11, 12]
    assert repeated_tail([11, 12, 13, 12, 13]) and not repeated_tail([11, 12, 13, 13]) and not repeated_tail([])
    assert past_last_spike(torch.zeros(4, 2), ids, written) == [False] * 5  # no spikes: a Latin line
    assert past_last_spike(q, ids, []) == []


@pytest.fixture(scope="module", params=[False, True], ids=["attention", "pointer"])
def copy_ckpt(request, tmp_path_factory):
    """A tiny random compact checkpoint with a pointer-generator output (top-3 copy classes), copying
    through the heads' attention or through the monotonic pointer."""
    torch.set_num_threads(1)
    torch.manual_seed(0)
    vocab = build_tokenizer().get_vocab_size()
    model = CompactOCR(EncoderConfig(stem_width=4, channels=(8, 16), layers=(1, 1), compressor_channels=32),
                       decoder_config(vocab, hidden=32, layers=2))
    copy = PointerCopy(32, topk=3, heads=SUPERVISED_HEADS, pointer=request.param)
    with torch.no_grad():
        model.lm.lm_head.weight.mul_(10.0)
        copy.gate.weight.normal_(0.0, 0.5)
        copy.gate.bias.zero_()
        copy.gate_stats.weight.normal_(0.0, 1.0)
    model.eval()
    path = export_checkpoint(model, tmp_path_factory.mktemp("ckpt") / "copy", revision="test",
                             extra_parts={COPY_PREFIX: copy}, extra_config={"copy": copy.config()})
    return path, model, copy


def _tokens(n: int, vocab: int) -> torch.Tensor:
    """n random vision tokens [n, 32 + 9] carrying 3 random copy classes each (some the blank)."""
    p = torch.rand(n, 3).softmax(-1)
    ids = torch.randint(0, vocab, (n, 3))
    ids[::3, 0] = 0
    ids[1::3, 0] = ids[1::3, 0].clamp(min=5)  # a character (not a special id): a spike
    return torch.cat([torch.randn(n, 32), pack(p, ids)], -1)


def _reference(model: CompactOCR, copy: PointerCopy, prompt: torch.Tensor, written: list[int]) -> torch.Tensor:
    """Mixed log-probabilities after the prompt and after each written token, from one eager forward
    of the whole sequence (the training path): [1 + len(written), V]."""
    vocab = model.lm.config.vocab_size
    emb = model.lm.get_input_embeddings()(torch.tensor(written, dtype=torch.long))
    x = torch.cat([prompt[:, :32], emb])[None]
    with torch.no_grad():
        out = model.lm.model(inputs_embeds=x, output_attentions=True)
        q, ids = unpack(prompt[:, 32:], vocab)
        q = torch.cat([q, torch.zeros(len(written), 3)])
        ids = torch.cat([ids, torch.zeros(len(written), 3, dtype=torch.long)])
        first = prompt.shape[0] - 1
        h = out.last_hidden_state[0, first:]
        n = h.shape[0]
        if copy.pointer:
            fed = torch.tensor([[BOS_ID, *written]])
            att = teacher_pointer(q[None], ids[None], fed)[0, :, :]
            qn, idn = q[None].expand(n, -1, -1), ids[None].expand(n, -1, -1)
            covered, cov = [], torch.zeros(1, q.shape[0])  # the coverage before each writing step
            for t in range(n):
                cov = advance(pointer_attention(q[None], cov), q[None], ids[None], cov, fed[:, t])
                covered.append(cov)
            mixed = copy.mix(model.lm.lm_head(h), h, att, qn, idn, end=pointer_end(qn, att))
            return keep_confident_spike(mixed, qn, idn, att, torch.cat(covered))
        att = attention_rows(out.attentions[-1], copy.heads)[0, first:]
        covered = att.cumsum(0) - att  # every query from <s> on writes a character
        return copy.mix(model.lm.lm_head(h), h, att, q[None].expand(n, -1, -1), ids[None].expand(n, -1, -1),
                        covered)


def test_served_steps_match_the_training_path(copy_ckpt):
    path, model, copy = copy_ckpt
    dec = CompactDecoderHalf.load(path)
    assert any(n.startswith(COPY_PREFIX) for n in dec.loaded_tensor_names())
    assert dec.hidden_size == 32 + copy_width(3)
    torch.manual_seed(2)
    prompt = dec.embed_prompt(_tokens(6, dec.vocab_size), "ocr")
    cache = dec.new_cache()
    L = prompt.shape[0]
    steps = [dec.forward(prompt[None], torch.ones(1, L, dtype=torch.long), torch.arange(L)[None], cache)[0]]
    written = []
    _, classes = unpack(prompt[:, 32:], dec.vocab_size)
    for s in range(4):  # the model's choice, a spike's class (the pointer moves), then its own choices
        written.append(int(classes[1, 0]) if s == 1 else int(steps[-1].argmax()))
        steps.append(dec.forward(dec.embed_tokens(torch.tensor([[written[-1]]])),
                                 torch.ones(1, L + s + 1, dtype=torch.long), torch.tensor([[L + s]]), cache)[0])
    ref = _reference(model, copy, prompt, written)
    torch.testing.assert_close(torch.stack(steps), ref, atol=2e-4, rtol=2e-4)
    assert len(cache.layers) == 4 and cache.layers[-1].keys.shape[-2] == L + 4
    if copy.pointer:  # token 1 is the first spike (token 0's top class is the blank): it was copied
        assert float(cache.layers[-1].keys[0, 0, 1, 0]) == 1.0


def test_the_half_finishes_a_pp_line_by_dropping_unread_repeats(copy_ckpt):
    path, _, copy = copy_ckpt
    dec = CompactDecoderHalf.load(path)
    p = torch.tensor([[0.9, 0.1, 0.0]] * 3)
    ids = torch.tensor([[11, 40, 41], [12, 42, 43], [13, 44, 45]])
    prompt = dec.embed_prompt(torch.cat([torch.randn(3, 32), pack(p, ids)], -1), "ocr")
    state = dec.finish_state(prompt)
    if not copy.pointer:  # copying through attention: no pointer, nothing to finish
        assert state is None and dec.finish_tokens(state, [11, 12, 13, 12, 13]) == [11, 12, 13, 12, 13]
        return
    assert state is not None
    assert dec.finish_tokens(state, [11, 12, 13, 12, 13, EOS_ID]) == [11, 12, 13, EOS_ID]
    assert dec.finish_tokens(state, [11, 12, 13, 12, 13]) == [11, 12, 13]  # ended by the length limit
    assert dec.finish_tokens(state, [11, 12, 13, 20, 21, EOS_ID]) == [11, 12, 13, 20, 21, EOS_ID]
    # a repeat inside the line that the recogniser read once (models/compact/decode/rereads.py)
    assert dec.finish_tokens(state, [11, 12, 11, 12, 13, EOS_ID]) == [11, 12, 13, EOS_ID]
    assert state.spike_ids == [11, 12, 13]
    latin = dec.embed_prompt(torch.cat([torch.randn(3, 32), torch.zeros(3, copy_width(3))], -1), "ocr")
    assert dec.finish_state(latin) is None  # a Latin-tower line carries no copy classes


def test_a_spacing_checkpoint_finishes_with_the_heads_confident_spaces(copy_ckpt, tmp_path):
    """With config "spacing", PP tokens carry two more columns (P(space after), P(full width)) that
    the half reads at the character spikes when it finishes a segment: a confident space is inserted,
    an unsure one leaves the decoder's choice; text positions carry zeros there."""
    path, _, copy = copy_ckpt
    if not copy.pointer:
        return
    spaced = tmp_path / "spaced"
    shutil.copytree(path, spaced)
    cfg = json.loads((spaced / "config.json").read_text())
    cfg["spacing"] = {"hidden": 8, "confidence": 0.9}
    (spaced / "config.json").write_text(json.dumps(cfg))
    dec = CompactDecoderHalf.load(spaced)
    assert dec.hidden_size == CompactDecoderHalf.load(path).hidden_size + 2 == 32 + copy_width(3) + 2
    assert dec.embed_tokens(torch.tensor([[11]]))[0, 0, -2:].abs().sum() == 0
    p = torch.tensor([[0.0, 0.0, 0.0], [0.9, 0.1, 0.0], [0.0, 0.0, 0.0], [0.9, 0.1, 0.0], [0.8, 0.0, 0.0]])
    ids = torch.tensor([[0, 0, 0], [11, 40, 41], [0, 0, 0], [12, 42, 43], [13, 44, 45]])
    spacing = torch.tensor([[0.0, 0.0], [0.97, 0.1], [0.0, 0.0], [0.6, 0.1], [0.0, 0.0]])  # after 11: a space
    prompt = dec.embed_prompt(torch.cat([torch.randn(5, 32), pack(p, ids), spacing], -1), "ocr")
    state = dec.finish_state(prompt)
    assert state is not None and state.spacing is not None and state.spacing.shape == (3, 2)
    assert dec.finish_tokens(state, [11, 12, 13, EOS_ID]) == [11, SPACE_ID, 12, 13, EOS_ID]
    assert state.spike_ids == [11, 12, 13]
    assert dec.finish_tokens(state, [11, 12, 20, 13]) == [11, SPACE_ID, 12, 20, 13]  # 20: the decoder's own
    assert dec.finish_tokens(state, [11, SPACE_ID, 12, 13]) == [11, SPACE_ID, 12, 13]
    with pytest.raises(InvalidInput, match="vision tokens must be"):
        dec.embed_prompt(torch.cat([torch.randn(5, 32), pack(p, ids)], -1), "ocr")  # a checkpoint without the head


def test_batched_cache_keeps_copy_classes_with_their_positions(copy_ckpt):
    path, _, _ = copy_ckpt
    dec = CompactDecoderHalf.load(path)
    torch.manual_seed(3)
    prompts = [dec.embed_prompt(_tokens(n, dec.vocab_size), "ocr") for n in (3, 8, 5)]
    alone = []
    for p in prompts:
        cache, L = dec.new_cache(), p.shape[0]
        first = dec.forward(p[None], torch.ones(1, L, dtype=torch.long), torch.arange(L)[None], cache)
        nxt = first.argmax(-1)
        alone.append(dec.forward(dec.embed_tokens(nxt[:, None]), torch.ones(1, L + 1, dtype=torch.long),
                                 torch.tensor([[L]]), cache)[0])
    kv = BatchedKVCache()
    firsts = []
    for group in ([prompts[0], prompts[1]], [prompts[2]]):  # two prefills joined into one running batch
        x, mask, pos = left_pad(group)
        cache = dec.new_cache()
        firsts.append(dec.forward(x, mask, pos, cache))
        kv.add(cache, mask)
    nxt = torch.cat(firsts).argmax(-1)
    mask, pos = kv.step_inputs()
    step = dec.forward(dec.embed_tokens(nxt[:, None]), mask, pos, kv.cache)
    for i, ref in enumerate(alone):
        torch.testing.assert_close(step[i], ref, atol=2e-4, rtol=2e-4)


def test_a_latin_tower_line_is_read_by_the_decoder_alone(copy_ckpt):
    """Vision tokens without copy classes (a Latin-tower line): a pointer checkpoint gives the decoder's
    own log-softmax, as training reads such lines, also when batched beside a PP line."""
    path, model, copy = copy_ckpt
    if not copy.pointer:
        pytest.skip("the soft-attention copy mixes every row")
    dec = CompactDecoderHalf.load(path)
    torch.manual_seed(3)
    latin = torch.cat([torch.randn(5, 32), torch.zeros(5, copy_width(3))], -1)
    pp = _tokens(7, dec.vocab_size)
    x, mask, pos = left_pad([dec.embed_prompt(latin, "ocr"), dec.embed_prompt(pp, "ocr")])
    got = dec.forward(x, mask, pos, dec.new_cache())
    with torch.no_grad():
        plain = model.lm(inputs_embeds=x[..., :32], attention_mask=mask, position_ids=pos).logits[:, -1]
    torch.testing.assert_close(got[0], plain[0].float().log_softmax(-1), atol=2e-4, rtol=2e-4)
    assert not torch.allclose(got[1], plain[1].float().log_softmax(-1), atol=1e-2)  # the PP row is mixed


def test_a_bilingual_decoder_writes_a_latin_tower_line_in_latin_characters(tmp_path):
    """With the bilingual vocabulary, a Latin-tower row gets the decoder's log-softmax over the Latin
    characters only (the first LATIN_ROWS ids; -inf beyond), alone or beside a PP row, while the PP row
    is mixed over the whole vocabulary exactly as when it is read alone."""
    from models.compact.decoder_half import LATIN_ROWS
    from models.compact.vocab_zh import ZH_CHARSET

    torch.manual_seed(4)
    vocab = build_tokenizer(ZH_CHARSET).get_vocab_size()
    model = CompactOCR(EncoderConfig(stem_width=4, channels=(8, 16), layers=(1, 1), compressor_channels=32),
                       decoder_config(vocab, hidden=32, layers=2)).eval()
    copy = PointerCopy(32, topk=3, heads=SUPERVISED_HEADS, pointer=True)
    path = export_checkpoint(model, tmp_path / "zh", revision="test", charset=ZH_CHARSET,
                             extra_parts={COPY_PREFIX: copy}, extra_config={"copy": copy.config()})
    dec = CompactDecoderHalf.load(path)
    assert LATIN_ROWS == 256 < dec.vocab_size
    latin = dec.embed_prompt(torch.cat([torch.randn(5, 32), torch.zeros(5, copy_width(3))], -1), "ocr")
    pp = dec.embed_prompt(_tokens(7, dec.vocab_size), "ocr")
    x, mask, pos = left_pad([latin, pp])
    both = dec.forward(x, mask, pos, dec.new_cache())
    alone = [dec.forward(p[None], torch.ones(1, p.shape[0], dtype=torch.long), torch.arange(p.shape[0])[None],
                         dec.new_cache())[0] for p in (latin, pp)]
    with torch.no_grad():
        plain = model.lm(inputs_embeds=latin[None, :, :32]).logits[0, -1, :LATIN_ROWS].float().log_softmax(-1)
    for got in (both[0], alone[0]):
        torch.testing.assert_close(got[:LATIN_ROWS], plain, atol=2e-4, rtol=2e-4)
        assert torch.isinf(got[LATIN_ROWS:]).all() and (got[LATIN_ROWS:] < 0).all()
    torch.testing.assert_close(both[1], alone[1], atol=2e-4, rtol=2e-4)
    assert torch.isfinite(both[1]).all() and float(both[1].exp().sum()) == pytest.approx(1.0, abs=1e-3)
