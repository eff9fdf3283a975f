"""Training tests of the compact model on CPU: the loss goes down on real rendered lines, and
``inkstream train-compact`` checkpoints, resumes, logs, plots and exports a loadable checkpoint."""

from __future__ import annotations

import json
import random

import pytest
import torch

from models.compact.decoder_half import CompactDecoderHalf
from models.compact.encoder_half import CompactEncoderHalf
from models.compact.model import CompactOCR, EncoderConfig, decoder_config
from models.compact.vocab import build_tokenizer
from training.compact import train
from training.compact.corpus import LineTexts
from training.compact.data import collate, make_sample
from training.compact.render import find_fonts

TEXTS = ["The quick brown fox jumps over the lazy dog.", "Invoice No. 4711 dated 12/03/2024: $1,250.00",
         "Der schnelle braune Fuchs springt über den faulen Hund.", "Le renard brun « rapide » saute.",
         "SECTION 2. Definitions and scope", "Tel. (555) 123-4567, e-mail info@example.com"]


def test_loss_goes_down_in_a_few_steps():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    rng = random.Random(0)
    fonts, _ = find_fonts()
    assert fonts, "no fonts installed (apt-get install fonts-dejavu fonts-liberation ...)"
    tok = build_tokenizer()
    batch = collate([make_sample(LineTexts(TEXTS), fonts, rng, 40) for _ in range(8)], tok)
    model = CompactOCR(EncoderConfig(stem_width=8, channels=(16, 32), layers=(1, 1), compressor_channels=64),
                       decoder_config(tok.get_vocab_size(), hidden=64, layers=2))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(30):
        ce, ctc = model(batch[0], batch[1], batch[2])
        opt.zero_grad()
        (ce + 0.3 * ctc).backward()
        opt.step()
        losses.append(float(ce.detach()))
    assert losses[0] > 4.0  # ~ln(256) at random init
    assert sum(losses[-3:]) / 3 < 0.6 * losses[0], losses


def test_train_command_checkpoints_resumes_and_exports(tmp_path):
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS * 3))
    out = tmp_path / "run"
    common = ["--out", str(out), "--texts", str(texts), "--steps", "4", "--batch", "4", "--hidden", "32",
              "--enc-channels", "8,16", "--eval-every", "4", "--eval-lines", "4", "--ckpt-every", "2",
              "--log-every", "1", "--workers", "0", "--threads", "1", "--warmup", "2", "--max-chars", "30"]
    assert train.main(common + ["--max-steps-this-run", "2"]) == 0
    assert torch.load(out / "state.pt", weights_only=False)["step"] == 2
    assert train.main(common) == 0
    assert torch.load(out / "state.pt", weights_only=False)["step"] == 4
    assert "resumed from step 2" in (out / "train.log").read_text()
    rows = [json.loads(ln) for ln in (out / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if r["kind"] == "train"] == [1, 2, 3, 4]
    assert any(r["kind"] == "eval" for r in rows)
    assert (out / "curve.png").stat().st_size > 1000
    cfg = json.loads((out / "export" / "config.json").read_text())
    assert cfg["inkstream_family"] == "compact" and cfg["training"]["step"] == 4
    assert CompactEncoderHalf.load(out / "export").hidden_size == 32
    assert CompactDecoderHalf.load(out / "export").hidden_size == 32


def test_eval_set_reports_text_kinds_without_changing_the_lines():
    from training.compact.data import fixed_eval_set

    fonts, _ = find_fonts()
    lines = TEXTS * 4
    kinds: list[str] = []
    with_kinds = fixed_eval_set(lines, fonts, 40, seed=3, max_chars=40, kinds=kinds)
    plain = fixed_eval_set(lines, fonts, 40, seed=3, max_chars=40)
    assert [s[1] for s in with_kinds] == [s[1] for s in plain]
    assert len(kinds) == 40 and set(kinds) <= set(LineTexts.KINDS)
    assert "prose" in kinds and len(set(kinds)) >= 2
    for (_, text, _), kind in zip(with_kinds, kinds, strict=True):
        if kind == "upper":
            assert text == text.upper()


def test_training_can_over_sample_a_text_kind_and_rejects_bad_shares():
    rng = random.Random(11)
    texts = LineTexts(TEXTS * 4, shares=(0.0, 0.0, 1.0, 0.0))
    for _ in range(20):
        texts.sample(rng, 30)
        assert texts.last_kind == "random"
    for bad in [(0.5, 0.5), (0.7, 0.3, 0.1, -0.1), (0.5, 0.5, 0.5, 0.0)]:
        with pytest.raises(ValueError, match="kind shares"):
            LineTexts(TEXTS, shares=bad)
