"""Pieces of a cut text line are joined as the encoder marked them (inkstream.segments), whatever
their boxes: a rotated page turns the pieces' geometry around."""

from __future__ import annotations

import pytest

from inkstream.segments import join_lines


def test_pieces_join_with_a_space_or_directly_and_lines_start_anew():
    texts = ["The quick brown", "fox jum", "ps over.", "Next line", "solo"]
    joins = ["line", "space", "direct", "line", "line"]
    assert join_lines(texts, joins) == ["The quick brown fox jumps over.", "Next line", "solo"]


def test_an_empty_piece_does_not_break_its_line_and_an_empty_line_makes_none():
    assert join_lines(["left", "", "right"], ["line", "space", "space"]) == ["left right"]
    assert join_lines(["left", "", "right"], ["line", "space", "direct"]) == ["left right"]  # the gap's space stays
    assert join_lines(["le", "", "ft"], ["line", "direct", "direct"]) == ["left"]
    assert join_lines(["", "tail", "next"], ["line", "space", "line"]) == ["tail", "next"]
    assert join_lines(["", ""], ["line", "line"]) == []


def test_bad_joins_are_refused():
    with pytest.raises(ValueError, match="unknown segment join"):
        join_lines(["a"], ["sideways"])
    with pytest.raises(ValueError, match="1 texts but 2 joins"):
        join_lines(["a"], ["line", "line"])
