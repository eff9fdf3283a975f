"""Chinese text handling that needs no model: the bilingual vocabulary, generated business strings,
and joining pieces of a Chinese line without spaces while Latin words keep theirs."""

from __future__ import annotations

import random

from inkstream.segments import JOIN_LINE, JOIN_SPACE, join_lines, piece_separator
from models.compact.vocab import CHARSET, build_tokenizer, decode, encode
from models.compact.vocab_zh import HANZI, ZH_CHARSET, gb2312_chars
from training.compact.zh_corpus import ZhLineTexts, capital_amount


def test_vocabulary_covers_gb2312_and_keeps_the_latin_ids():
    assert len(gb2312_chars()) == 7445
    assert len([c for c in gb2312_chars() if "\u4e00" <= c <= "\u9fff"]) == 6763
    assert ZH_CHARSET[: len(CHARSET)] == CHARSET
    assert set(gb2312_chars()) <= set(ZH_CHARSET) and len(HANZI) >= 6763
    latin, zh = build_tokenizer(), build_tokenizer(ZH_CHARSET)
    assert latin.get_vocab() == {k: v for k, v in zh.get_vocab().items() if v < latin.get_vocab_size()}


def test_mixed_text_round_trips_through_the_tokenizer():
    tok = build_tokenizer(ZH_CHARSET)
    text = "2024年3月5日，人民币壹万元整（¥1,234.56）Invoice No. AB-2291：营业收入 4,755,785.11"
    ids = encode(tok, text)
    assert len(ids) == len(text) and decode(tok, ids) == text


def test_capital_amounts_read_like_a_cheque():
    assert capital_amount(10000) == "壹万元整"
    assert capital_amount(1234) == "壹仟贰佰叁拾肆元整"
    assert capital_amount(10010) == "壹万零壹拾元整"
    assert capital_amount(100200300) == "壹亿零贰拾万零叁佰元整"
    assert capital_amount(0) == "零元整"


def test_generated_lines_stay_in_the_vocabulary():
    texts = ZhLineTexts(["第二节 公司基本情况，主要会计数据和财务指标。"], ["The quick brown fox jumps over"])
    rng, vocab = random.Random(3), set(ZH_CHARSET)
    for _ in range(300):
        line = texts.sample(rng, 60)
        assert line and len(line) <= 60 and set(line) <= vocab


def test_pieces_of_a_chinese_line_join_without_spaces_latin_words_keep_theirs():
    assert piece_separator("公司基本", "情况") == ""
    assert piece_separator("营业收入（元）", "4,755") == " "
    assert piece_separator("quick", "brown") == " "
    assert piece_separator("数据，", "指标") == ""
    lines = join_lines(["第二节 公司基", "本情况", "The quick", "brown fox"],
                       [JOIN_LINE, JOIN_SPACE, JOIN_LINE, JOIN_SPACE])
    assert lines == ["第二节 公司基本情况", "The quick brown fox"]
