"""training/compact/spacing_head.py end to end on a few rendered lines: labels from the text at the
recogniser's spikes, a short training run written into a copy of the committed checkpoint, and the
encoder half running the new head inside ``pp_tokens.onnx``."""

from __future__ import annotations

import json
import random
import shutil

import numpy as np
import pytest
import torch
from PIL import Image, ImageDraw, ImageFont

from models.compact.encoder_half import CompactEncoderHalf
from models.compact.line.pptower import PPCompressor, PPTrunk, attach_recogniser_head
from models.compact.line.spacing_head import script_classes
from models.compact.vocab import build_tokenizer
from models.compact.vocab_zh import ZH_CHARSET
from training.compact import spacing_head
from training.compact.render import find_zh_fonts
from training.compact.zh_corpus import ZhLineTexts
from training.compact.zh_features import render_samples, trunk_records

from .test_compact_zh import WEIGHTS

LINES = ["执行时间: 12 ms, 状态正常", "合同编号：HT-2024，金额", "使用 Python 编写 OCR 服务", "第三节 重要事项"]


class _Fixed(ZhLineTexts):
    """The generator's interface over fixed lines (the kind of each: mixed)."""

    def __init__(self) -> None:
        self.i, self.last_kind = 0, "mixed_en"

    def sample(self, rng: random.Random, max_chars: int = 60) -> str:
        self.i += 1
        return LINES[(self.i - 1) % len(LINES)]


@pytest.fixture(scope="module")
def records():
    torch.set_num_threads(1)
    train_fonts, _ = find_zh_fonts()
    if not train_fonts:
        pytest.fail("no CJK training face is installed (make system-packages)")
    samples = render_samples(_Fixed(), train_fonts, train_fonts, random.Random(5), 16)
    return trunk_records(PPTrunk(), samples)


def test_labels_are_the_texts_spaces_and_widths_at_the_spikes(records):
    vocab = build_tokenizer(ZH_CHARSET).get_vocab()
    comp = PPCompressor(16, stride=1, posterior_topk=4, vocab_size=len(vocab))
    attach_recogniser_head(comp, vocab)
    assert all(r["columns"].shape == (r["frames"].shape[0], 16) for r in records)
    ex = spacing_head.examples(records, comp, script_classes(vocab), vocab[" "])
    assert len(ex) >= len(records) // 2  # clean renders: most lines' characters are their spikes
    for e in ex:
        spaces = e["text"].count(" ")
        assert int((e["ys"] == 1).sum()) == spaces and int((e["ys"] >= 0).sum()) == len(e["text"]) - spaces - 1
        marks = sum(c in ",:，：" for c in e["text"])
        assert int((e["yw"] >= 0).sum()) == marks
        assert int((e["yw"] == 1).sum()) == sum(c in "，：" for c in e["text"])


def test_a_trained_head_is_written_into_the_checkpoint_and_run_by_the_encoder(records, tmp_path):
    shards = tmp_path / "features"
    shards.mkdir()
    torch.save(records[:12], shards / "train_0_00000.pt")
    torch.save(records[12:], tmp_path / "eval.pt")
    ck = tmp_path / "ck"
    shutil.copytree(WEIGHTS, ck)
    assert spacing_head.main(["--checkpoint", str(ck), "--features", str(shards), "--eval", str(tmp_path / "eval.pt"),
                              "--steps", "3", "--batch", "4", "--hidden", "8", "--threads", "1"]) == 0
    spec = json.loads((ck / "config.json").read_text())["spacing"]
    assert spec["hidden"] == 8 and spec["steps"] == 3 and spec["heldout"]["spaces"] > 0
    enc = CompactEncoderHalf.load(ck)
    assert enc.runtime == "onnxruntime"  # pp_tokens.onnx written again for the new weights, with the head
    font = ImageFont.truetype(find_zh_fonts()[0][0].partition("#")[0], 36)
    img = Image.new("RGB", (900, 140), "white")
    ImageDraw.Draw(img).text((40, 40), LINES[0], font=font, fill="black")
    seg = enc.encode_batch([enc.preprocess(img, "lines")])[0].segments[0]
    tokens = np.asarray(seg.vision_tokens)
    assert tokens.shape[1] == enc.hidden_size == 160 + 12 + 2
    assert ((tokens[:, -2:] >= 0) & (tokens[:, -2:] <= 1)).all() and tokens[:, -2:].std() > 0


def test_eval_only_reports_the_checkpoints_own_head_and_writes_nothing(records, tmp_path, capsys):
    torch.save(records[12:], tmp_path / "eval.pt")
    dump = tmp_path / "pred.jsonl"  # the decoder wrote each held-out line without its spaces
    dump.write_text("".join(json.dumps({"kind": "mixed_en", "text": r["text"], "pred": r["text"].replace(" ", "")},
                                       ensure_ascii=False) + "\n" for r in records[12:]))
    before = {p.name: p.read_bytes() for p in WEIGHTS.iterdir() if p.is_file()}
    assert spacing_head.main(["--checkpoint", str(WEIGHTS), "--eval-only", "--eval", str(tmp_path / "eval.pt"),
                              "--dump", f"{tmp_path / 'eval.pt'}={dump}", "--threads", "1"]) == 0
    assert {p.name: p.read_bytes() for p in WEIGHTS.iterdir() if p.is_file()} == before
    out = capsys.readouterr().out
    written, respaced = json.loads(out.split("(as written, respaced) ")[1].splitlines()[0])["all"]
    assert written > 0 and respaced < written  # the committed head puts the drawn spaces back


def test_the_committed_heads_tokens_need_the_ink_columns(records):
    """Without the pixels the head's probabilities would be guesses: the torch module and the ONNX file
    refuse to run it without ``columns`` rather than fill in zeros."""
    from models.compact import checkpoint as ckpt
    from models.compact.line.onnx_runtime import OnnxPPTokens
    from models.compact.line.pptower import PPTokens

    cfg = ckpt.read_config(WEIGHTS)
    module, _ = PPTokens.load(WEIGHTS, cfg, int(cfg["decoder"]["hidden_size"]))
    frames = records[0]["frames"].float()[None]
    with pytest.raises(ValueError, match="ink columns"):
        module(frames)
    assert module(frames, records[0]["columns"].float()[None]).shape[-1] == 160 + 12 + 2
    runner = OnnxPPTokens.open(WEIGHTS)
    assert runner is not None and runner.takes_columns
    with pytest.raises(ValueError, match="ink columns"):
        runner(frames.numpy())
