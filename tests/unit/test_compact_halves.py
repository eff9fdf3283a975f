"""Unit tests of the compact family's halves on a tiny random checkpoint (no services, CPU, fp32):
split loading, prompt embedding, left-padded batch == unbatched, encoder batch invariance, errors."""

from __future__ import annotations

import pytest
import torch
from PIL import Image, ImageDraw

from inkstream.errors import InvalidInput
from models.base import left_pad
from models.compact.decoder_half import CompactDecoderHalf
from models.compact.encoder_half import CompactEncoderHalf
from models.compact.export.writer import export_checkpoint
from models.compact.model import CompactOCR, EncoderConfig, decoder_config
from models.compact.page.unrotate import unrotate_box
from models.compact.vocab import build_tokenizer
from models.inprocess import greedy_segments
from models.registry import decoder_half_class, encoder_half_class, family_of


@pytest.fixture(scope="module")
def tiny_ckpt(tmp_path_factory):
    """A tiny random compact checkpoint; its output head is scaled so greedy choices are decisive."""
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = CompactOCR(EncoderConfig(stem_width=4, channels=(8, 16), layers=(1, 1), compressor_channels=32),
                       decoder_config(build_tokenizer().get_vocab_size(), hidden=32, layers=2))
    with torch.no_grad():
        model.lm.lm_head.weight.mul_(40.0)
    model.eval()
    return export_checkpoint(model, tmp_path_factory.mktemp("ckpt") / "tiny", revision="test")


def test_registry_and_split_loading(tiny_ckpt):
    assert family_of(tiny_ckpt) == "compact"
    enc = encoder_half_class("compact").load(tiny_ckpt)
    dec = decoder_half_class("compact").load(tiny_ckpt)
    enc_names, dec_names = enc.loaded_tensor_names(), dec.loaded_tensor_names()
    assert enc_names and dec_names and not (enc_names & dec_names)
    assert all(n.startswith("encoder.") for n in enc_names)
    assert all(n.startswith("decoder.") for n in dec_names)
    assert enc.hidden_size == dec.hidden_size == 32
    assert enc.revision == dec.revision and len(enc.revision) == 12


def test_embed_prompt_shape_and_errors(tiny_ckpt):
    dec = CompactDecoderHalf.load(tiny_ckpt)
    emb = dec.embed_prompt(torch.randn(7, 32), "ocr")
    assert emb.shape == (8, 32)
    with pytest.raises(InvalidInput, match="unknown task"):
        dec.embed_prompt(torch.randn(7, 32), "markdown")
    with pytest.raises(InvalidInput, match="vision tokens must be"):
        dec.embed_prompt(torch.randn(7, 31), "ocr")
    with pytest.raises(InvalidInput, match="exceed"):
        dec.embed_prompt(torch.randn(dec.max_vision_tokens + 1, 32), "ocr")
    with pytest.raises(InvalidInput, match="attention_mask"):
        dec.forward(torch.randn(1, 3, 32), torch.ones(1, 2, dtype=torch.long), torch.arange(3)[None], dec.new_cache())


def test_left_padded_batch_matches_unbatched(tiny_ckpt):
    dec = CompactDecoderHalf.load(tiny_ckpt)
    torch.manual_seed(1)
    prompts = [dec.embed_prompt(torch.randn(n, 32), "ocr") for n in (3, 9, 5)]
    alone = []
    for p in prompts:
        cache = dec.new_cache()
        L = p.shape[0]
        logits = dec.forward(p[None], torch.ones(1, L, dtype=torch.long), torch.arange(L)[None], cache)
        nxt = logits.argmax(-1)
        step = dec.forward(dec.embed_tokens(nxt[:, None]), torch.ones(1, L + 1, dtype=torch.long),
                           torch.tensor([[L]]), cache)
        alone.append((logits[0], step[0]))
    x, mask, pos = left_pad(prompts)
    cache = dec.new_cache()
    logits = dec.forward(x, mask, pos, cache)
    nxt = logits.argmax(-1)
    mask = torch.cat([mask, torch.ones(3, 1, dtype=torch.long)], 1)
    step = dec.forward(dec.embed_tokens(nxt[:, None]), mask, pos[:, -1:] + 1, cache)
    for i, (l0, s0) in enumerate(alone):
        torch.testing.assert_close(logits[i], l0, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(step[i], s0, atol=1e-4, rtol=1e-4)
    segs = [torch.randn(n, 32) for n in (4, 11, 6, 2)]
    one_by_one = [greedy_segments(dec, [s], max_new_tokens=6)[0] for s in segs]
    assert greedy_segments(dec, segs, max_new_tokens=6) == one_by_one


def _page() -> Image.Image:
    img = Image.new("RGB", (900, 400), "white")
    d = ImageDraw.Draw(img)
    for i, text in enumerate(["First line of the page", "second line, a bit longer than the first", "3rd"]):
        d.text((60, 60 + 90 * i), text, fill="black", font_size=40)
    return img


def test_encoder_page_segments_and_batch_invariance(tiny_ckpt):
    enc = CompactEncoderHalf.load(tiny_ckpt)
    prepared = enc.preprocess(_page(), "lines")
    assert len(prepared.meta["n_tokens"]) == 3
    one = enc.encode_batch([prepared])[0]
    both = enc.encode_batch([prepared, enc.preprocess(_page().resize((450, 200)), "lines")])
    assert [tuple(s.vision_tokens.shape) for s in one.segments] == [(n, 32) for n in prepared.meta["n_tokens"]]
    for a, b in zip(one.segments, both[0].segments, strict=True):
        torch.testing.assert_close(a.vision_tokens, b.vision_tokens, atol=1e-5, rtol=1e-5)
    ys = [s.box[1] for s in one.segments]
    assert ys == sorted(ys) and all(0 <= s.box[0] < s.box[2] <= 900 for s in one.segments)
    with pytest.raises(InvalidInput, match="unknown mode"):
        enc.preprocess(_page(), "gundam")
    with pytest.raises(InvalidInput, match="too small"):
        enc.preprocess(Image.new("RGB", (4, 4), "white"), "lines")
    assert enc.encode_batch([enc.preprocess(Image.new("RGB", (300, 300), "white"), "lines")])[0].segments == []


def testunrotate_box_roundtrip():
    w, h = 300, 200
    page = Image.new("L", (w, h), 0)
    page.putpixel((250, 30), 255)  # a marked pixel in the received page
    for rot in (90, 180, 270):
        up = page.rotate(rot, expand=True)
        x, y = next((x, y) for y in range(up.height) for x in range(up.width) if up.getpixel((x, y)) > 0)
        x0, y0, x1, y1 = unrotate_box((x, y, x + 1, y + 1), rot, w, h)
        assert x0 <= 250 + 1 and x1 >= 250 and y0 <= 30 + 1 and y1 >= 30, rot


def _copy_without(src, dst, drop: str = ""):
    import shutil

    shutil.copytree(src, dst)
    if drop:
        (dst / drop).unlink()
    return dst


def test_line_encoder_on_onnxruntime_gives_the_torch_modules_tokens(tiny_ckpt, tmp_path):
    """export_checkpoint wrote encoder.onnx; the half runs it (no torch) and reads the same tokens as
    the torch module (a copy of the checkpoint without the file), and the same tensor names."""
    onnx_half = CompactEncoderHalf.load(tiny_ckpt)
    torch_half = CompactEncoderHalf.load(_copy_without(tiny_ckpt, tmp_path / "no-onnx", "encoder.onnx"))
    assert (onnx_half.runtime, torch_half.runtime) == ("onnxruntime", "torch")
    assert onnx_half.loaded_tensor_names() == torch_half.loaded_tensor_names()
    page = onnx_half.preprocess(_page(), "lines")
    a, b = onnx_half.encode_batch([page])[0], torch_half.encode_batch([page])[0]
    assert len(a.segments) == len(b.segments) == 3
    for x, y in zip(a.segments, b.segments, strict=True):
        assert str(x.vision_tokens.dtype) == str(y.vision_tokens.dtype) == "float32"
        torch.testing.assert_close(torch.as_tensor(x.vision_tokens), torch.as_tensor(y.vision_tokens),
                                   atol=1e-4, rtol=1e-4)


def test_stale_encoder_onnx_is_not_used(tiny_ckpt, tmp_path):
    """An encoder.onnx exported from other weights (its stamped revision differs) falls back to torch."""
    import json

    copy = _copy_without(tiny_ckpt, tmp_path / "other")
    cfg = json.loads((copy / "config.json").read_text())
    cfg["revision"] = "other-weights"
    (copy / "config.json").write_text(json.dumps(cfg))
    assert CompactEncoderHalf.load(copy).runtime == "torch"
    assert CompactEncoderHalf.load(tiny_ckpt, dtype=torch.bfloat16).runtime == "torch"  # ONNX is float32 only
