"""Numbers as the recogniser read them: a segment that is one number is taken from the CTC spikes.

The decoder of the bilingual checkpoint writes a PP-tower line from the recogniser's CTC spikes
(:mod:`models.compact.decode.copy_head`) and its own language model, which is what lets it mend a
misread hanzi or word. A number has no such context: its digits are not predictable from each
other, and on a short crop -- a table cell of a few digits -- the language model's prior is all the
decoder adds: it writes a digit more in a run (``722`` -> ``7222``), runs on past the cell as if it
held a decimal part (``-5,558`` -> ``-5,558.18``, ``93,393`` -> ``93,393.1``), reads a comma as the
digit before it (``33,774`` -> ``333774``) or writes a digit it expects instead of the one there
(``(79,378)`` -> ``(79,338)``). On ``bench/table_pages.py`` pages (seed 0, pages 0 and 3-5, 655
PP-tower segments that read as a number) the decoder and the spikes disagreed on 42, and on all 42
the spikes were right and the decoder wrong; where they agreed (613) both were right.

:func:`numbers_from_spikes` therefore replaces the written text by the spikes' reading when both are
one number: the spikes hold only characters of :data:`NUMBER_CHARS` and at least one digit, and the
decoder wrote no space and nothing but those characters (or their full-width forms,
:data:`FULL_NUMBER_CHARS`). Anything else -- a line with words, a date with ``年``, two cells in one
segment -- is left to the decoder. So are spikes with two separators side by side (``0..76``,
``1.,5``): no number is printed so, the recogniser read one mark twice (a faded receipt's ``0.76``:
the decoder wrote it right, the spikes' reading made it wrong; generated receipts, seed 30,009).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

#: Characters of a number as printed in tables and text: digits, separators, sign, parentheses, percent.
NUMBER_CHARS = "0123456789,.-+()%"
DIGITS = "0123456789"
#: Decimal and group separators: two of them side by side are no number (:func:`numbers_from_spikes`).
SEPARATORS = ",."
#: Full-width forms of number characters the decoder may write for them (a Chinese page's ``（``).
FULL_NUMBER_CHARS = "０１２３４５６７８９，．－＋（）％"


def number_vocab(vocab: Mapping[str, int]) -> tuple[frozenset[int], frozenset[int], frozenset[int], frozenset[int]]:
    """(ids of :data:`NUMBER_CHARS`, ids of the digits, ids of the number characters in either width,
    ids of the :data:`SEPARATORS`) of a tokenizer's ``vocab`` (token string -> id); characters the
    vocabulary lacks are left out.
    """
    def ids(chars: str) -> frozenset[int]:
        return frozenset(int(vocab[c]) for c in chars if c in vocab)

    return ids(NUMBER_CHARS), ids(DIGITS), ids(NUMBER_CHARS + FULL_NUMBER_CHARS), ids(SEPARATORS)


def numbers_from_spikes(written: list[int], spike_ids: list[int], number_ids: Collection[int],
                        digit_ids: Collection[int], number_like_ids: Collection[int],
                        separator_ids: Collection[int] = frozenset()) -> list[int]:
    """``written`` (a segment's generated ids, ``</s>`` excluded) replaced by ``spike_ids`` (the
    recogniser's class at each character spike, in order, spaces excluded) when both are one number:
    every spike id in ``number_ids`` and one of them in ``digit_ids``, no two ``separator_ids`` side by
    side among the spikes, and every written id in ``number_like_ids`` (so no space, no letter).
    Returns ``written`` itself when nothing changes (also for empty ``number_ids``: rules without the
    step), else a new list.
    """
    if not written or not spike_ids or not number_ids or written == spike_ids:
        return written
    if any(t not in number_ids for t in spike_ids) or not any(t in digit_ids for t in spike_ids):
        return written
    if any(a in separator_ids and b in separator_ids for a, b in zip(spike_ids, spike_ids[1:], strict=False)):
        return written
    if any(t not in number_like_ids for t in written):
        return written
    return list(spike_ids)
