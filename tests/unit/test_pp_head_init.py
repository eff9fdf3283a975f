"""Starting the bilingual checkpoint's Chinese rows from the PP-OCRv6 recogniser's classifier
(training/compact/pp_head_init.py): at step 0 the compressor passes each trunk frame through, and the
CTC head reads the tokens exactly as the recogniser's own head reads its frames."""

from __future__ import annotations

import pathlib

import pytest
import torch
from PIL import Image, ImageDraw, ImageFont

from models.compact.export import writer
from models.compact.line.pptower import PPCompressor, PPTrunk, normalise_line_pp, pp_classifier
from models.compact.vocab import PAD_ID, build_tokenizer, decode
from models.compact.vocab_zh import ZH_CHARSET
from training.compact.pp_head_init import feature_basis, identity_compressor, init_rows_from_pp
from training.compact.render import find_zh_fonts
from training.compact.zh_model import Bilingual

LATIN = pathlib.Path(__file__).resolve().parents[2] / "models" / "compact" / "weights"
TEXT = "合同金额人民币12,500元，付款期限30天"


def _collapse(best: list[int], blank: int) -> list[int]:
    out, prev = [], -1
    for k in best:
        if k != prev and k != blank:
            out.append(k)
        prev = k
    return out


@pytest.fixture(scope="module")
def frames() -> torch.Tensor:
    fonts, held = find_zh_fonts()
    if not fonts + held:
        pytest.fail("no CJK font installed (make system-packages)")
    path, _, index = (held or fonts)[0].partition("#")
    font = ImageFont.truetype(path, 40, index=int(index or 0))
    img = Image.new("L", (int(font.getlength(TEXT)) + 40, 64), 255)
    ImageDraw.Draw(img).text((20, 8), TEXT, font=font, fill=0)
    x = normalise_line_pp(img)[None]
    return torch.from_numpy(PPTrunk().features(x))  # [1, T, 120]


def test_identity_compressor_keeps_each_frame_direction(frames):
    comp = PPCompressor(160, 256, stride=1)
    q = feature_basis(160)
    identity_compressor(comp, q, noise=0.0)
    with torch.no_grad():
        tokens = comp(frames)[0]  # [T, 160]
    want = frames[0] @ q.T
    want = want / want.norm(dim=1, keepdim=True)
    got = tokens / tokens.norm(dim=1, keepdim=True)
    assert tokens.shape == (frames.shape[1], 160)
    assert float((got * want).sum(1).min()) > 0.999  # LayerNorm(Q f) = sqrt(d) Q f / |f|


def test_ctc_head_reads_as_the_recogniser_at_step_zero(frames):
    w, b, labels = pp_classifier()
    pp_ids = _collapse((frames[0].numpy() @ w + b).argmax(1).tolist(), blank=0)
    pp_text = "".join(labels[k] for k in pp_ids)
    tok = build_tokenizer(ZH_CHARSET)
    model = Bilingual(writer.load_training_model(LATIN), tok.get_vocab(), pp_stride=1)
    q = feature_basis(model.lm.config.hidden_size)
    identity_compressor(model.pp_tower, q)
    norm = float(frames[0].norm(dim=1).mean())
    rows = init_rows_from_pp(model, tok, q, norm, build_tokenizer().get_vocab_size())
    assert rows["decoder_rows"] > 6500  # the GB 2312 hanzi the Latin checkpoint did not have
    with torch.no_grad():
        logits = model.ctc_head(model.pp_tower(frames))[0]
    ours = decode(tok, _collapse(logits.argmax(-1).tolist(), blank=PAD_ID))
    assert pp_text.replace(",", "，")[:5] == TEXT[:5]  # the recogniser reads the line ...
    assert ours == pp_text  # ... and the initialised head reads it the same way
    new = torch.as_tensor(model.lm.get_output_embeddings().weight)[build_tokenizer().get_vocab_size():]
    assert bool(torch.isfinite(new.detach()).all())


def test_class_ids_map_blank_known_and_unknown_classes():
    from models.compact.line.pptower import class_ids
    from models.compact.vocab import UNK_ID

    vocab = build_tokenizer(ZH_CHARSET).get_vocab()
    ids = class_ids(vocab, ("", "合", "A", "\u2603"), PAD_ID, UNK_ID)
    assert ids.tolist() == [PAD_ID, vocab["合"], vocab["A"], UNK_ID]


def test_posterior_tokens_carry_the_recognisers_reading(frames):
    """The top-1 class of each frame, mapped to our ids and CTC-collapsed, is the recogniser's reading;
    the embedded posterior is what the tokens add, and a saved compressor reloads with the same tokens.
    """
    from models.compact.line.pptower import attach_recogniser_head

    w, b, labels = pp_classifier()
    pp_text = "".join(labels[k] for k in _collapse((frames[0].numpy() @ w + b).argmax(1).tolist(), blank=0))
    tok = build_tokenizer(ZH_CHARSET)
    comp = PPCompressor(160, 64, stride=1, posterior_topk=4, vocab_size=tok.get_vocab_size())
    with pytest.raises(RuntimeError, match="attach_classifier"):
        comp(frames)
    attach_recogniser_head(comp, tok.get_vocab())
    p, ids = comp.top_classes(frames)
    assert p.shape == ids.shape == (1, frames.shape[1], 4)
    assert bool((p[..., :-1] >= p[..., 1:]).all()) and float(p.sum(-1).max()) <= 1.0 + 1e-5
    assert decode(tok, _collapse(ids[0, :, 0].tolist(), blank=PAD_ID)) == pp_text
    with pytest.raises(ValueError, match="stride 1"):
        PPCompressor(160, 64, stride=2, posterior_topk=4, vocab_size=10)
    with torch.no_grad():
        tokens = comp(frames)
        again = PPCompressor(160, 64, stride=1, posterior_topk=4, vocab_size=tok.get_vocab_size())
        again.load_state_dict(comp.state_dict(), strict=True)  # the frozen head is not in the state
        attach_recogniser_head(again, tok.get_vocab())
        assert torch.equal(again(frames), tokens)
        assert torch.equal(comp(frames, (p, ids)), tokens)
    assert not any(k.startswith("head_") for k in comp.state_dict())


def test_spike_align_takes_the_teachers_frames_and_places_spaces_between():
    from training.compact.zh_records import spike_align

    space = 7
    # frames: blank, 'a' x2, blank, 'b', blank, blank, 'c' (ids 10, 11, 12); text "ab c"
    top = torch.tensor([PAD_ID, 10, 10, PAD_ID, 11, PAD_ID, PAD_ID, 12])[:, None].int()
    record = {"frames": torch.zeros(8, 120), "n_tokens": 4, "top_ids": top}
    assert spike_align(record, [10, 11, space, 12], space) == [1, 4, 5, 7]
    assert spike_align(record, [10, 11], space) is None  # 3 spikes, 2 characters: not the teacher's reading
    assert spike_align({"frames": torch.zeros(8, 120), "n_tokens": 4}, [10], space) is None
