"""Starting the bilingual checkpoint's Chinese rows from the PP-OCRv6 recogniser's classifier
(training/compact/pp_head_init.py): at step 0 the compressor passes each trunk frame through, and the
CTC head reads the tokens exactly as the recogniser's own head reads its frames."""

from __future__ import annotations

import pathlib

import pytest
import torch
from PIL import Image, ImageDraw, ImageFont

from models.compact import checkpoint as ckpt
from models.compact.pptower import PPCompressor, PPTrunk, normalise_line_pp
from models.compact.vocab import PAD_ID, build_tokenizer, decode
from models.compact.vocab_zh import ZH_CHARSET
from training.compact.pp_head_init import feature_basis, identity_compressor, init_rows_from_pp, pp_classifier
from training.compact.train_zh import Bilingual
from training.compact.zh_features import find_zh_fonts

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
    model = Bilingual(ckpt.load_training_model(LATIN), tok.get_vocab_size(), pp_stride=1)
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
