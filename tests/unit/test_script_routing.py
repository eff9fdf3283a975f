"""Script routing of a bilingual checkpoint: the script head's line decision, and the page rule that
sends every line of a Chinese page (number cells and Latin words included) to the PP tower."""

from __future__ import annotations

import torch

from models.compact.line.script import ScriptHead
from models.compact.line.towers import CJK_PAGE_MIN_LINES, page_routes


def test_a_chinese_page_sends_every_line_to_the_pp_tower():
    # a statement: one item name per row, three number cells beside it (the cells are not CJK)
    rows = [True, False, False, False] * 5
    assert page_routes(rows) == [True] * len(rows)


def test_an_english_page_keeps_the_heads_decisions():
    stray = [False] * 40 + [True, True]  # two lines misread as CJK on a 42-line English page
    assert page_routes(stray) == stray
    few = [True] * (CJK_PAGE_MIN_LINES - 1) + [False] * 2  # a short page with two Chinese lines
    assert page_routes(few) == few
    quoted = [True] * 3 + [False] * 30  # an English page quoting three Chinese lines (9 %)
    assert page_routes(quoted) == quoted
    assert page_routes([]) == []


def test_head_reads_only_the_real_frames_of_a_line():
    head = ScriptHead(4)
    with torch.no_grad():
        head.linear.weight.copy_(torch.tensor([[1.0, 0.0, 0.0, 0.0]]))
        head.linear.bias.zero_()
    feats = torch.full((1, 10, 4), -1.0)
    feats[0, 6:, 0] = 5.0  # strongly CJK frames, but past the line's end (padding)
    with torch.no_grad():
        assert float(head(feats, torch.tensor([6]))[0]) < 0
        assert float(head(feats, torch.tensor([10]))[0]) > 0
