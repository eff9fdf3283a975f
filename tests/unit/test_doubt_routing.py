"""Doubt routing (models/compact/line/doubt.py): the read head's per-frame output gives a line's doubt,
doubtful lines and scan-like pages go to the PP tower, the ONNX and torch runtimes agree, and a
checkpoint without a read head routes by script alone."""

from __future__ import annotations

import math
import pathlib
import shutil

import numpy as np
import pytest
import torch
from PIL import Image, ImageDraw

from models.compact import checkpoint as ckpt
from models.compact.encoder_half import CompactEncoderHalf
from models.compact.export import writer
from models.compact.line.doubt import doubt_routes, line_doubt
from models.compact.line.image import normalise_line_array
from models.compact.line.pptower import PPCompressor
from models.compact.line.script import ScriptHead
from models.compact.model import CompactOCR, EncoderConfig, decoder_config
from models.compact.vocab import build_tokenizer
from models.compact.vocab_zh import ZH_CHARSET

HIDDEN = 32
TEXTS = ["Invoice 2025-06-18 total 12,500", "The quick brown fox", "Page 3", "Sphinx of black quartz"]


def test_line_doubt_is_the_mean_nll_of_spike_frames():
    top = np.log(np.array([0.9, 0.5, 0.8, 0.4]))
    blank = np.log(np.array([0.05, 0.1, 0.9, 0.3]))  # frame 2: the blank wins, no spike
    x = np.stack([top, blank], axis=1)
    x[2, 0] = x[2, 1]  # a blank frame: the top class is the blank
    want = -(math.log(0.9) + math.log(0.5) + math.log(0.4)) / 3
    assert line_doubt(x, 4) == pytest.approx(want, rel=1e-5)
    assert line_doubt(x, 2) == pytest.approx(-(math.log(0.9) + math.log(0.5)) / 2, rel=1e-5)  # padding ignored
    assert line_doubt(x[2:3], 1) == 0.0 and line_doubt(x, 0) == 0.0


def test_doubt_routes_sends_doubtful_lines_and_scan_pages_to_pp():
    script = [False, False, True, False, False, False, False, False, False, False, False]
    clean = [0.05] * 11
    assert doubt_routes(script, clean, 0.2, 0.2) == script  # a clean page keeps the script's routes
    one = [0.05, 0.5] + [0.05] * 9  # one doubtful Latin line of ten: not a scan; alone only when asked
    assert doubt_routes(script, one, 0.2, 0.2) == script
    assert doubt_routes(script, one, 0.2, 0.2, alone_above=0.4) == [False, True, True] + [False] * 8
    scan = [0.3, 0.3, 0.05] + [0.05] * 8  # two of ten Latin lines doubtful: the page is a scan
    assert doubt_routes(script, scan, 0.2, 0.2) == [True] * 11
    assert doubt_routes([], [], 0.2, 0.2) == []
    faint = [45.0] * 11  # a faded receipt: every line at 45 gray levels
    assert doubt_routes(script, clean, 0.2, 0.2, contrasts=faint, faint_below=120) == [True] * 11
    assert doubt_routes(script, clean, 0.2, 0.2, contrasts=[255.0] * 11, faint_below=120) == script
    with pytest.raises(ValueError):
        doubt_routes([False], [0.1, 0.2], 0.2, 0.2)


def test_doubt_routes_sends_gray_doubtful_pages_to_pp():
    """The scan rule: gray print (median contrast below the bar) whose Latin lines' median doubt is
    above the bar goes to the PP tower whole; black print at the same doubts (a rendered page), or gray
    print read with little doubt, keeps the script's routes."""
    script = [False] * 6 + [True]
    doubtful = [0.13, 0.12, 0.15, 0.05, 0.14, 0.11, 0.9]  # median of the Latin six: 0.125; none above 0.2
    gray, black = [200.0] * 7, [255.0] * 7
    kw = {"faint_below": 120.0, "scan_below": 230.0, "scan_doubt_above": 0.1}
    assert doubt_routes(script, doubtful, 0.2, 0.2, contrasts=gray, **kw) == [True] * 7
    assert doubt_routes(script, doubtful, 0.2, 0.2, contrasts=black, **kw) == script
    assert doubt_routes(script, [0.06] * 6 + [0.9], 0.2, 0.2, contrasts=gray, **kw) == script
    assert doubt_routes(script, doubtful, 0.2, 0.2, contrasts=gray, faint_below=120.0) == script  # off by default
    assert doubt_routes([True] * 3, [0.3] * 3, 0.2, 0.2, contrasts=[200.0] * 3, **kw) == [True] * 3  # no Latin line


def test_default_scan_bars_send_gray_print_read_with_some_doubt_to_pp():
    """The served scan bars (:data:`SCAN_CONTRAST_BELOW` 250, :data:`SCAN_DOUBT_ABOVE` 0.03): a dot-matrix
    receipt in gray print (contrast 240) read at a median doubt of 0.05 goes to the PP tower whole; the
    same doubts on black print (255, every rendered eval page) or a page read without doubt do not."""
    from models.compact.line.doubt import SCAN_CONTRAST_BELOW, SCAN_DOUBT_ABOVE

    script = [False] * 5
    kw = {"faint_below": 120.0, "scan_below": SCAN_CONTRAST_BELOW, "scan_doubt_above": SCAN_DOUBT_ABOVE}
    assert doubt_routes(script, [0.05] * 5, 0.2, 0.2, contrasts=[240.0] * 5, **kw) == [True] * 5
    assert doubt_routes(script, [0.05] * 5, 0.2, 0.2, contrasts=[255.0] * 5, **kw) == script
    assert doubt_routes(script, [0.01] * 5, 0.2, 0.2, contrasts=[240.0] * 5, **kw) == script


def _line(text: str) -> Image.Image:
    img = Image.new("L", (1400, 90), 255)
    draw = ImageDraw.Draw(img)
    draw.text((20, 20), text, fill=0, font_size=40)
    x0, y0, x1, y1 = draw.textbbox((20, 20), text, font_size=40)
    return img.crop((x0 - 8, y0 - 8, x1 + 8, y1 + 8))


@pytest.fixture(scope="module")
def read_ckpt(tmp_path_factory) -> pathlib.Path:
    """A tiny random bilingual checkpoint with a script head that sends no line to the PP tower and
    the model's own CTC head as its read head; bars in config.json."""
    torch.set_num_threads(1)
    torch.manual_seed(1)
    vocab = build_tokenizer(ZH_CHARSET).get_vocab_size()
    model = CompactOCR(EncoderConfig(stem_width=4, channels=(8, 16), layers=(1, 1), compressor_channels=32),
                       decoder_config(vocab, hidden=HIDDEN, layers=2)).eval()
    comp = PPCompressor(HIDDEN, 16, stride=1)
    head = ScriptHead(32)
    with torch.no_grad():
        head.linear.bias.fill_(-1e3)  # every line Latin by script
    return writer.export_checkpoint(
        model, tmp_path_factory.mktemp("ckpt") / "zh", revision="test", charset=ZH_CHARSET,
        extra_parts={ckpt.PP_TOWER_PREFIX: comp, ckpt.SCRIPT_PREFIX: head, ckpt.READ_PREFIX: model.ctc_head},
        extra_config={"pp_tower": writer.pp_tower_config(comp),
                      "read_head": {"doubtful_above": 1e-6, "page_doubt_share": 1.0, "alone_above": None}})


def _doubts(half: CompactEncoderHalf, crops: list[Image.Image]) -> tuple[list[bool], list[float] | None]:
    assert half._pp is not None
    frames = [normalise_line_array(c).shape[-1] // 8 for c in crops]
    cjk, _, doubts = half._pp.script_lines(half.prepare_lines(crops), frames)
    return cjk, doubts


def test_onnx_and_torch_runtimes_give_the_same_doubts_and_routes(read_ckpt, tmp_path):
    onnx_half = CompactEncoderHalf.load(read_ckpt)
    torch_dir = tmp_path / "torch"
    shutil.copytree(read_ckpt, torch_dir)
    (torch_dir / "encoder.onnx").unlink()
    torch_half = CompactEncoderHalf.load(torch_dir)
    assert (onnx_half.runtime, torch_half.runtime) == ("onnxruntime", "torch")
    read_names = ckpt.tensor_names(read_ckpt, ckpt.READ_PREFIX)
    assert read_names and read_names <= onnx_half.loaded_tensor_names()
    assert onnx_half.loaded_tensor_names() == torch_half.loaded_tensor_names()
    crops = [_line(t) for t in TEXTS]
    (cjk_a, a), (cjk_b, b) = _doubts(onnx_half, crops), _doubts(torch_half, crops)
    assert cjk_a == cjk_b == [False] * len(TEXTS)
    assert a is not None and b is not None and all(d > 0 for d in a)
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    # every line is doubtful: the page is a scan, every line goes to the PP tower
    routes, *_ = onnx_half.route(crops)
    assert routes == [True] * len(TEXTS)


def test_without_a_read_head_routing_is_by_script_alone(read_ckpt, tmp_path):
    plain = tmp_path / "plain"
    shutil.copytree(read_ckpt, plain)
    from safetensors.torch import load_file, save_file

    tensors = {k: v for k, v in load_file(str(plain / ckpt.WEIGHTS)).items() if not k.startswith(ckpt.READ_PREFIX)}
    save_file(tensors, str(plain / ckpt.WEIGHTS), metadata={"format": "pt"})
    for f in ("encoder.onnx", "pp_tokens.onnx"):
        (plain / f).unlink(missing_ok=True)
    half = CompactEncoderHalf.load(plain)
    crops = [_line(t) for t in TEXTS]
    assert _doubts(half, crops)[1] is None and half._pp is not None and half._pp.bars is None
    assert half.route(crops)[0] == [False] * len(TEXTS)
