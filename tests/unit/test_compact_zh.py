"""The committed bilingual compact checkpoint reads Chinese, English and mixed lines: rendered in
fonts held out of training, routed to the right vision tower, pieces stitched without spaces between
hanzi; and the frozen PP-OCRv6 tower is the exact file the checkpoint was trained on."""

from __future__ import annotations

import json
import pathlib
import re

import pytest
import torch
from PIL import Image, ImageDraw, ImageFont
from rapidfuzz.distance import Levenshtein

from models.compact.decoder_half import CompactDecoderHalf
from models.compact.encoder_half import CompactEncoderHalf
from models.compact.line.pptower import PPTrunk
from models.compact.vocab import CHARSET
from models.compact.vocab_zh import gb2312_chars
from models.inprocess import ocr_page
from training.compact.render import find_zh_fonts

WEIGHTS = pathlib.Path(__file__).resolve().parents[2] / "models" / "compact" / "weights_zh"
ZH_LINES = ["本公司董事会保证报告内容真实、准确、完整", "经营活动产生的现金流量净额（元）",
            "合同签订日期：2025年6月18日", "甲方应于收到发票后十五日内付款", "人民币贰万叁仟元整", "第三节 重要事项"]
HANZI_GAP = re.compile(r"[\u4e00-\u9fff] +[\u4e00-\u9fff]")


@pytest.fixture(scope="module")
def halves():
    torch.set_num_threads(1)
    return CompactEncoderHalf.load(WEIGHTS), CompactDecoderHalf.load(WEIGHTS)


@pytest.fixture(scope="module")
def held_out_font() -> str:
    _, held = find_zh_fonts()
    micro = [f for f in held if "microhei" in f]
    if not micro:
        pytest.fail("fonts-wqy-microhei is not installed (make system-packages)")
    return micro[0]


def _page(lines: list[str], font_spec: str, size: int = 36) -> Image.Image:
    path, _, index = font_spec.partition("#")
    font = ImageFont.truetype(path, size, index=int(index or 0))
    width = max(int(font.getlength(t)) for t in lines) + 160
    img = Image.new("RGB", (width, 80 + len(lines) * int(size * 2)), "white")
    draw = ImageDraw.Draw(img)
    for i, t in enumerate(lines):
        draw.text((80, 40 + i * int(size * 2)), t, font=font, fill="black")
    return img


def test_checkpoint_is_bilingual_and_small():
    cfg = json.loads((WEIGHTS / "config.json").read_text())
    assert cfg["pp_tower"]["trunk"] == "PP-OCRv6_rec_small.onnx" and len(cfg["pp_tower"]["trunk_sha256"]) == 64
    assert cfg["decoder"]["vocab_size"] >= 5 + len(set(CHARSET) | set(gb2312_chars()))
    assert (WEIGHTS / "model.safetensors").stat().st_size <= 60 * 2**20
    assert cfg["copy"]["pointer"] == "monotonic"  # copies through the pointer over the recogniser's spikes


@pytest.mark.parametrize("face", ["NotoSansCJK-Bold", "NotoSansCJK-Regular", "gkai00mp", "wqy-microhei"])
def test_reads_rendered_chinese_lines_in_held_out_fonts(halves, face):
    """Six business lines on a small clean page (880 px wide) in each held-out face (Noto Sans Mono CJK
    SC regular and bold, AR PL KaitiM GB, WenQuanYi Micro Hei): each line found whole, CER <= 3 %
    (#17's goal). zh-noise-step2000 reads all four faces without an error; before the rule check
    (models/compact/page/rule_lines.unbroken_rules) the Noto regular page lost the top strokes of 币, 万, 三
    to rule erasing (18 % CER)."""
    enc, dec = halves
    fonts = [f for f in find_zh_fonts()[1] if face in f]
    if not fonts:
        pytest.fail(f"held-out face {face} is not installed (make system-packages)")
    text = ocr_page(enc, dec, _page(ZH_LINES, fonts[0])).text
    got = [ln.strip() for ln in text.splitlines() if ln.strip()]
    assert len(got) == len(ZH_LINES), got  # each line found whole, none split or merged
    edits = Levenshtein.distance("\n".join(got), "\n".join(ZH_LINES))
    assert edits / len("\n".join(ZH_LINES)) <= 0.03, got


def test_statement_page_reads_number_cells_through_the_pp_tower(halves, held_out_font):
    """A financial statement: item names with number cells right-aligned far apart (each cell its own
    detected line). On a Chinese page every line goes to the PP tower (towers.page_routes), and the
    amounts, per-share figures and percentages come back digit for digit."""
    enc, dec = halves
    rows = [("营业收入（元）", "4,755,785.11", "-16.55%"), ("基本每股收益（元/股）", "-0.0053", "70.22%"),
            ("经营活动产生的现金流量净额（元）", "-4,194,229.68", "-111.96%"),
            ("总资产（元）", "298,608,889.04", "-2.49%")]
    path, _, index = held_out_font.partition("#")
    font = ImageFont.truetype(path, 32, index=int(index or 0))
    img = Image.new("RGB", (1700, 500), "white")
    draw = ImageDraw.Draw(img)
    for i, (item, amount, pct) in enumerate(rows):
        y = 60 + 90 * i
        draw.text((80, y), item, font=font, fill="black")
        draw.text((1150 - font.getlength(amount), y), amount, font=font, fill="black")
        draw.text((1600 - font.getlength(pct), y), pct, font=font, fill="black")
    prepared = enc.preprocess(img, "lines")
    assert prepared.meta["towers"] == ["pp"] * 12, prepared.meta["towers"]
    got = ocr_page(enc, dec, img).text.split()
    for _, amount, pct in rows:
        assert amount in got and pct in got, got


def test_mixed_line_keeps_latin_spaces_and_none_between_hanzi(halves, held_out_font):
    enc, dec = halves
    line = "请使用 Python 3.11 运行 inkstream 服务，并检查 GPU 状态"
    got = ocr_page(enc, dec, _page([line], held_out_font)).text.strip()
    assert "Python 3.11" in got and "inkstream" in got, got
    inserted = [m.group() for m in HANZI_GAP.finditer(got) if m.group().replace(" ", "") in line]
    assert not inserted, got  # no space put between two hanzi that stand together on the line
    assert Levenshtein.distance(got, line) / len(line) <= 0.05, got


def test_lines_are_routed_by_script(halves, held_out_font):
    enc, _ = halves
    page = _page(["The quick brown fox jumps over the lazy dog", "本公司董事会保证报告内容真实"], held_out_font)
    prepared = enc.preprocess(page, "lines")
    assert prepared.meta["towers"] == ["latin", "pp"]
    # each segment says the tower that read it (the gateway calibrates each tower on its own, issue #38)
    assert [s.tower for s in enc.encode_batch([prepared])[0].segments] == ["latin", "pp"]


def test_long_chinese_line_is_cut_and_joined_without_spaces(halves, held_out_font):
    enc, dec = halves
    line = "公司是否需追溯调整或重述以前年度会计数据，本报告期末比上年度末增减变动情况说明如下所述内容请查阅附件"
    page = _page([line], held_out_font, size=30)
    prepared = enc.preprocess(page, "lines")
    assert len(prepared.meta["towers"]) >= 2  # wider than the PP tower's 32 em: cut into pieces
    got = ocr_page(enc, dec, page).text.strip()
    assert "\n" not in got and not HANZI_GAP.search(got), got  # one line, pieces joined unspaced
    assert sum(1 for c in got if "\u4e00" <= c <= "\u9fff") >= 0.6 * len(line), got


def test_tokens_of_a_line_do_not_depend_on_its_batch(halves, held_out_font):
    enc, _ = halves
    page = _page(["本公司董事会保证", "本公司董事会保证报告内容真实准确完整"], held_out_font)
    prepared = enc.preprocess(page, "lines")
    alone = enc.encode_batch([prepared])[0].segments
    with_other = enc.encode_batch([prepared, enc.preprocess(_page(["第三节"], held_out_font), "lines")])[0].segments
    for a, b in zip(alone, with_other, strict=True):
        assert torch.allclose(torch.as_tensor(a.vision_tokens), torch.as_tensor(b.vision_tokens), atol=1e-5)


def test_a_different_trunk_file_is_refused():
    with pytest.raises(ValueError, match="not the PP-OCRv6 recogniser"):
        PPTrunk(expected_sha256="0" * 64)


def test_spacing_head_writes_ascii_punctuation_and_its_space_as_drawn(halves, held_out_font):
    """The committed checkpoint's spacing head (config "spacing", models/compact/decode/spacing.py): in a held-out
    face where ``: `` / ``, `` (ASCII and a space) are narrower than ``：`` / ``，``, each line comes back
    with the widths and spaces it was drawn with. Without the head the decoder wrote ``执行时间:12 ms``."""
    enc, dec = halves
    cfg = json.loads((WEIGHTS / "config.json").read_text())
    assert cfg["spacing"]["confidence"] >= 0.9 and dec.spacing_confidence == cfg["spacing"]["confidence"]
    lines = ["执行时间: 12 ms, 状态正常", "错误 (code 404): 文件未找到", "合同编号：HT-2024，金额（元）"]
    got = [ln.strip() for ln in ocr_page(enc, dec, _page(lines, held_out_font)).text.splitlines() if ln.strip()]
    assert got[:2] == lines[:2], got
    assert got[2].startswith(lines[2]), got  # full-width marks stay full-width
