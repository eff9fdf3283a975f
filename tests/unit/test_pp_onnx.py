"""A bilingual compact checkpoint's encoder half on onnxruntime (models/compact/export/pp_onnx.py, line_onnx.py):
on a tiny random bilingual copy checkpoint (the real PP-OCRv6 trunk and recogniser head), the ONNX files
export_checkpoint writes route lines as the torch script head does and give the torch modules' vision
tokens; a stale file falls back to torch; and the half then imports no torch."""

from __future__ import annotations

import json
import logging
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
from PIL import Image, ImageDraw

from models.compact import checkpoint as ckpt
from models.compact.decode.copy_head import PointerCopy
from models.compact.encoder_half import CompactEncoderHalf
from models.compact.export import writer
from models.compact.export.pp_onnx import peak_classes_traceable
from models.compact.line.columns import peak_classes
from models.compact.line.image import normalise_line_array
from models.compact.line.onnx_runtime import PP_ONNX as PP_FILE
from models.compact.line.pptower import PPCompressor
from models.compact.line.script import TOP_K, ScriptHead
from models.compact.line.spacing_head import SpacingHead
from models.compact.line.towers import script_decisions
from models.compact.model import SUPERVISED_HEADS, CompactOCR, EncoderConfig, decoder_config
from models.compact.vocab import build_tokenizer
from models.compact.vocab_zh import ZH_CHARSET

HIDDEN, TOPK = 32, 3
# the third line twice: lines of one width share a routing forward
LINES = ["Invoice 2025-06-18 total 12,500", "The quick brown fox", "Pack my box with five dozen jugs",
         "Pack my box with five dozen jugs", "Sphinx of black quartz, judge my vow", "Page 3"]


def _line(text: str) -> Image.Image:
    img = Image.new("L", (1400, 90), 255)
    draw = ImageDraw.Draw(img)
    draw.text((20, 20), text, fill=0, font_size=40)
    x0, y0, x1, y1 = draw.textbbox((20, 20), text, font_size=40)
    return img.crop((x0 - 8, y0 - 8, x1 + 8, y1 + 8))


def _page() -> Image.Image:
    page = Image.new("RGB", (1500, 100 + 110 * len(LINES)), "white")
    for i, text in enumerate(LINES):
        page.paste(_line(text).convert("RGB"), (60, 50 + 110 * i))
    return page


def _line_scores(encoder, head: ScriptHead) -> list[float]:
    """ScriptHead's line logit of each of LINES (the head's bias taken as 0)."""
    with torch.no_grad():
        out = []
        for text in LINES:
            x = torch.from_numpy(normalise_line_array(_line(text)))[None]
            feats = encoder(x)[1]
            out.append(float(head(feats, torch.tensor([feats.shape[1]]))[0] - head.linear.bias[0]))
    return out


@pytest.fixture(scope="module")
def zh_ckpt(tmp_path_factory) -> pathlib.Path:
    """A tiny random bilingual copy checkpoint (posterior top-3, copy classes, a spacing head) with its script head,
    written by export_checkpoint; the head's bias splits LINES between the towers, half-way between
    two line logits."""
    torch.set_num_threads(1)
    torch.manual_seed(0)
    vocab = build_tokenizer(ZH_CHARSET).get_vocab_size()
    model = CompactOCR(EncoderConfig(stem_width=4, channels=(8, 16), layers=(1, 1), compressor_channels=32),
                       decoder_config(vocab, hidden=HIDDEN, layers=2)).eval()
    comp = PPCompressor(HIDDEN, 16, stride=1, posterior_topk=TOPK, vocab_size=vocab)
    copy = PointerCopy(HIDDEN, topk=TOPK, heads=SUPERVISED_HEADS)
    head = ScriptHead(32)
    spacing = SpacingHead(hidden=8)
    lines = _line_scores(model.encoder, head)
    scores = sorted(set(lines))
    # One or two lines to the PP tower (three would make it a Chinese page: every line to the PP
    # tower, page_routes), at the widest such gap: the page's crops are the detector's, not _line's.
    gaps = [(scores[i + 1] - scores[i], i) for i in range(len(scores) - 1)
            if 1 <= sum(v > scores[i] for v in lines) <= 2]
    _, i = max(gaps)
    with torch.no_grad():
        head.linear.bias.fill_(-(scores[i] + scores[i + 1]) / 2)
    return writer.export_checkpoint(
        model, tmp_path_factory.mktemp("ckpt") / "zh", revision="test", charset=ZH_CHARSET,
        extra_parts={ckpt.PP_TOWER_PREFIX: comp, ckpt.SCRIPT_PREFIX: head, ckpt.COPY_PREFIX: copy,
                     ckpt.SPACING_PREFIX: spacing},
        extra_config={"pp_tower": writer.pp_tower_config(comp), "copy": copy.config(),
                      "spacing": {"hidden": 8, "confidence": 0.9}})


def _without(src: pathlib.Path, dst: pathlib.Path, *drop: str) -> pathlib.Path:
    shutil.copytree(src, dst)
    for name in drop:
        (dst / name).unlink()
    return dst


def _assert_tokens_close(a: np.ndarray, b: np.ndarray, width: int) -> None:
    """Vision tokens of one line: features within 1e-4, copy-class ids exact, copy probabilities within
    1e-5 -- except where a CTC spike spread over two neighbouring frames ties to float rounding: then the
    frame that keeps it (peak_classes) may differ, so the same probability sits one frame over."""
    assert a.shape == b.shape and a.shape[1] == width
    np.testing.assert_allclose(a[:, :HIDDEN], b[:, :HIDDEN], atol=1e-4, rtol=1e-4)
    cols_a, cols_b = a[:, HIDDEN: width - 2], b[:, HIDDEN: width - 2]
    assert np.array_equal(cols_a[:, : 2 * TOPK], cols_b[:, : 2 * TOPK])
    ids = cols_a[:, :TOPK] * 128 + cols_a[:, TOPK: 2 * TOPK]
    pa, pb = cols_a[:, 2 * TOPK:], cols_b[:, 2 * TOPK:]
    moved = np.argwhere(np.abs(pa - pb) > 1e-5)
    for t, j in moved:
        v = max(pa[t, j], pb[t, j])
        assert min(pa[t, j], pb[t, j]) == 0.0
        same = [(u, ids[u] == ids[t, j]) for u in (t - 1, t + 1) if 0 <= u < len(ids)]
        assert any(m.any() and abs(max(pa[u][m].max(), pb[u][m].max()) - v) < 1e-5 for u, m in same), (t, j)
    assert len(moved) <= max(2, 0.02 * pa.size)
    # the spacing head's probabilities: the same where its inputs are (no spike moved a frame)
    near = np.zeros(len(ids), bool)
    for t, _ in moved:
        near[max(0, t - 16): t + 17] = True
    np.testing.assert_allclose(a[~near, width - 2:], b[~near, width - 2:], atol=1e-4)


def test_onnx_half_routes_and_encodes_as_the_torch_half(zh_ckpt, tmp_path):
    """export_checkpoint wrote encoder.onnx (with script logits) and pp_tokens.onnx; the half runs them
    and routes the page's lines, and reads each line's tokens (both towers), as the torch modules do."""
    onnx_half = CompactEncoderHalf.load(zh_ckpt)
    torch_half = CompactEncoderHalf.load(_without(zh_ckpt, tmp_path / "torch", "encoder.onnx", PP_FILE))
    assert (onnx_half.runtime, torch_half.runtime) == ("onnxruntime", "torch")
    assert onnx_half.hidden_size == torch_half.hidden_size == HIDDEN + 3 * TOPK + 2  # copy classes, spacing
    assert onnx_half.loaded_tensor_names() == torch_half.loaded_tensor_names()
    page = _page()
    a, b = onnx_half.preprocess(page, "lines"), torch_half.preprocess(page, "lines")
    assert a.meta["towers"] == b.meta["towers"] and set(a.meta["towers"]) == {"pp", "latin"}, a.meta["towers"]
    assert a.meta["n_tokens"] == b.meta["n_tokens"]
    assert a.tensors.keys() == b.tensors.keys()
    assert [k.partition("_")[0] for k in a.tensors] == ["tokens" if t == "latin" else "pp" for t in a.meta["towers"]]
    for key in a.tensors:  # PP lines as prepared; Latin lines as the routing forward encoded them
        if key.startswith("tokens_"):
            np.testing.assert_allclose(a.tensors[key], b.tensors[key], atol=1e-4, rtol=1e-4)
        else:
            np.testing.assert_array_equal(np.asarray(a.tensors[key]), np.asarray(b.tensors[key]))
    x, y = onnx_half.encode_batch([a])[0], torch_half.encode_batch([a])[0]
    assert len(x.segments) == len(y.segments) == len(LINES)
    for s, t, tower in zip(x.segments, y.segments, a.meta["towers"], strict=True):
        assert isinstance(s.vision_tokens, np.ndarray) and s.vision_tokens.dtype == np.float32
        _assert_tokens_close(s.vision_tokens, torch.as_tensor(t.vision_tokens).float().numpy(), onnx_half.hidden_size)
        if tower == "latin":
            assert not s.vision_tokens[:, HIDDEN:].any()  # Latin tokens carry no copy classes


def _script_lines(half: CompactEncoderHalf, crops: list[Image.Image]) -> tuple[list[bool], list[np.ndarray]]:
    assert half._pp is not None
    frames = [normalise_line_array(c).shape[-1] // 8 for c in crops]
    cjk, tokens, doubts = half._pp.script_lines(half.prepare_lines(crops), frames)
    assert doubts is None  # no read head in this checkpoint: routing by script alone
    return cjk, tokens


def test_routing_of_lines_matches_the_script_head(zh_ckpt, tmp_path):
    """The ONNX frame logits are the torch head's on the torch features, both routes decide alike for
    lines alone and batched by width, and the routing forward's Latin tokens are the ones encode_lines
    gives (a Latin line is not encoded twice)."""
    onnx_half = CompactEncoderHalf.load(zh_ckpt)
    torch_half = CompactEncoderHalf.load(_without(zh_ckpt, tmp_path / "torch", "encoder.onnx"))
    crops = [_line(t) for t in LINES]
    want, _ = _script_lines(torch_half, crops)
    got, tokens = _script_lines(onnx_half, crops)
    assert got == want and [_script_lines(onnx_half, [c])[0][0] for c in crops] == want
    assert True in want and False in want
    lines = onnx_half.prepare_lines(crops)
    for t, e in zip(tokens, onnx_half.encode_lines(lines, [x.shape[-1] // 16 for x in lines]), strict=True):
        np.testing.assert_allclose(t, e, atol=1e-5, rtol=1e-5)
    x = np.stack([normalise_line_array(crops[2]), normalise_line_array(crops[3])])
    head = ScriptHead(32)
    head.load_state_dict({k: v.float() for k, v in ckpt.load_prefixed(zh_ckpt, ckpt.SCRIPT_PREFIX)[0].items()})
    with torch.no_grad():
        latin, feats = torch_half._runner.module(torch.from_numpy(x))
        got_tokens, logits = onnx_half._runner.tokens_and_script(x)
        np.testing.assert_allclose(logits, head.linear(feats)[..., 0].numpy(), atol=1e-4, rtol=1e-4)
        np.testing.assert_allclose(got_tokens, latin.numpy(), atol=1e-4, rtol=1e-4)


def test_script_decisions_are_the_script_heads():
    from models.compact.line import towers

    assert towers.TOP_K == TOP_K
    torch.manual_seed(3)
    head = ScriptHead(8)
    for t in (1, 2, TOP_K, 9, 40):
        feats = torch.randn(6, t, 8) * 3
        n = torch.tensor([t, 1, max(0, t - 2), 0, t // 2, min(t, 2)])
        with torch.no_grad():
            want = (head(feats, n) > 0).numpy()
            logits = head.linear(feats)[..., 0].numpy()
        assert script_decisions(logits, n.numpy()).tolist() == want.tolist()
    logits = np.array([[0.5, -3.0, 0.2, 9.0], [0.1, 0.2, 0.3, -9.0]], dtype=np.float32)
    assert script_decisions(logits, np.array([3, 3])).tolist() == [False, True]  # 9.0 is padding


def test_traceable_peak_classes_equal_copy_heads():
    g = torch.Generator().manual_seed(0)
    for shape in ((1, 1, 4), (1, 2, 4), (3, 7, 4), (2, 40, 3), (5, 4)):
        for _ in range(20):
            p = torch.rand(shape, generator=g).round(decimals=1)  # many ties
            ids = torch.randint(0, 3, shape, generator=g)
            assert torch.equal(peak_classes_traceable(p, ids), peak_classes(p, ids))


def test_stale_or_incomplete_onnx_files_fall_back_to_torch(zh_ckpt, tmp_path, caplog):
    import onnx

    other = _without(zh_ckpt, tmp_path / "other")
    cfg = json.loads((other / "config.json").read_text())
    cfg["revision"] = "other-weights"
    (other / "config.json").write_text(json.dumps(cfg))
    with caplog.at_level(logging.WARNING, logger="inkstream.models.compact"):
        assert CompactEncoderHalf.load(other).runtime == "torch"
    assert "pp_tokens.onnx" in caplog.text
    stale = _without(zh_ckpt, tmp_path / "stale")  # only pp_tokens.onnx from other weights
    model = onnx.load(str(stale / PP_FILE))
    onnx.helper.set_model_props(model, {"inkstream_revision": "0" * 12})
    onnx.save(model, str(stale / PP_FILE))
    assert CompactEncoderHalf.load(stale).runtime == "torch"
    assert CompactEncoderHalf.load(_without(zh_ckpt, tmp_path / "no-pp", PP_FILE)).runtime == "torch"
    assert CompactEncoderHalf.load(zh_ckpt, dtype=torch.bfloat16).runtime == "torch"  # ONNX is float32 only


def test_the_cli_writes_every_onnx_file_of_a_checkpoint(zh_ckpt, tmp_path):
    from models.compact.export.onnx import main

    bare = _without(zh_ckpt, tmp_path / "bare", "encoder.onnx", PP_FILE)
    assert CompactEncoderHalf.load(bare).runtime == "torch"
    assert main([str(bare)]) == 0
    assert (bare / "encoder.onnx").is_file() and (bare / PP_FILE).is_file()
    assert CompactEncoderHalf.load(bare).runtime == "onnxruntime"


def test_bilingual_encoder_half_imports_no_torch(zh_ckpt, tmp_path):
    _page().save(tmp_path / "page.png")
    code = (
        "import sys\n"
        "from PIL import Image\n"
        "from models.compact.encoder_half import CompactEncoderHalf\n"
        f"h = CompactEncoderHalf.load({str(zh_ckpt)!r})\n"
        f"p = h.preprocess(Image.open({str(tmp_path / 'page.png')!r}).convert('RGB'), 'lines')\n"
        "page = h.encode_batch([p])[0]\n"
        "print(h.runtime, sorted(set(p.meta['towers'])), len(page.segments), 'torch' in sys.modules)\n"
    )
    root = pathlib.Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True,
                         cwd=root)
    assert out.stdout.split() == ["onnxruntime", "['latin',", "'pp']", str(len(LINES)), "False"], \
        out.stdout + out.stderr[-2000:]
