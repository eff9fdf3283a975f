"""The portable training kit (training/compact/kit.py): subset faces render as the installed ones,
held-out faces and texts stay out, and the kit reads back for zh_features / train_zh --kit."""

from __future__ import annotations

import random

import numpy as np
import pytest

from models.compact.vocab_zh import ZH_CHARSET
from training.compact.kit import build, load_kit
from training.compact.render import find_zh_fonts, font_charset, render_line


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    if not find_zh_fonts()[0]:
        pytest.fail("no Chinese training face installed (make system-packages)")
    out = tmp_path_factory.mktemp("kit")
    manifest = build(out, latin_faces=2, latin_lines=300, zh_faces=1)
    return out, manifest


def test_kit_holds_training_faces_cut_to_the_vocabulary_and_training_texts(kit):
    out, manifest = kit
    k = load_kit(out)
    assert len(k.zh_fonts) == 1 and len(k.latin_fonts) == 2 and len(k.latin_lines) == 300
    held_out = set(find_zh_fonts()[1])
    assert not {v["face"] for v in manifest["sources"].values()} & held_out
    zh = k.zh_fonts[0]
    assert set("人民币壹万元整（¥1,234.56）Invoice") <= font_charset(zh)
    assert len(font_charset(zh)) <= len(ZH_CHARSET) + 1  # cut to the vocabulary (+ the space)
    assert (out / "fonts" / manifest["zh_fonts"][0]).stat().st_size < 8_000_000
    assert k.zh_lines and all(isinstance(t, str) for t in k.zh_lines[:10])


def test_a_kit_face_renders_a_line_like_the_installed_face(kit):
    out, manifest = kit
    name = manifest["zh_fonts"][0]
    installed = manifest["sources"][name]["face"]
    text = "合同签订日期：2025年6月18日"
    a = np.asarray(render_line(text, [installed], random.Random(3)), dtype=np.float32)
    b = np.asarray(render_line(text, [str(out / "fonts" / name)], random.Random(3)), dtype=np.float32)
    assert a.shape == b.shape  # same advances and metrics: the same line geometry
    ink = (255 - a).mean()
    assert np.abs(a - b).mean() < 0.35 * ink  # only hinting differs (the kit's faces are unhinted)


def test_pp_text_is_the_recognisers_collapsed_greedy_path():
    import torch

    from models.compact.vocab import PAD_ID, build_tokenizer, encode
    from training.compact.zh_records import pp_text

    tok = build_tokenizer(ZH_CHARSET)
    a, b = encode(tok, "中")[0], encode(tok, "文")[0]
    path = [PAD_ID, a, a, PAD_ID, a, b, b, PAD_ID, b, PAD_ID]  # 10 frames of 8 px = 5 tokens of 16 px
    record = {"frames": torch.zeros(len(path), 120), "n_tokens": 4,
              "top_ids": torch.tensor(path, dtype=torch.int32)[:, None]}
    assert pp_text(tok, {"frames": record["frames"], "n_tokens": 4}) == ""
    assert pp_text(tok, record) == "中中文"  # the last token's two frames are padding: not read
