"""Quantity lines of a till receipt (``2 x 4.00``: count, the letter x, unit price) from the CTC spikes.

What goes wrong. A receipt prints an item bought more than once as ``count x price`` on a row of
its own. PP-OCRv6's recogniser (the PP tower's trunk and CTC head) reads the ``x`` between two
numbers as its dictionary's multiplication sign ``×`` (class 147): it learned receipts that print
one, and at 8 pixel columns a frame it cannot tell the letter from the sign. The decoder, writing
from those spikes and its language model, then writes ``x``, ``×``, nothing at all, or a digit or a
``%`` in its place, and mangles the price around it (generated thermal receipts, seed 30,006:
spikes ``4x1.98`` written ``4 1.9.88``, ``2×1,87`` written ``2 % 1,87``, ``3×14.76`` written
``3 4 14.76``; ``training/compact/scan_docs.py`` receipts print the letter).

What is printed. Till printers print the letter: their ESC/POS default code page (PC437) has no
multiplication sign, and the receipt faces' ``x`` between a count and a price is the letter.
:func:`quantity_from_spikes` therefore writes a segment whose spikes read exactly one quantity --
1-3 digits, ``x`` or ``×`` (:data:`SIGNS`), a price (digits, at most one decimal or group separator
between digits) -- as ``count x price`` from the spikes, the sign as the letter x (an upper-case ``X``
read as such stays), when the decoder wrote no letter but the signs (it read the segment as a
quantity too, not as words; what it wrote for the sign may be any mark: ``¥`` on seed 30,030). A
space on each side of the sign is written; the spacing head (the next step of the chain) removes
one where it is confident there is none. Anything else -- an item name, a weight ``0.456kg``, a
spike string with a letter -- is left alone.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Collection, Mapping

#: What the recogniser reads the sign of a quantity line as: the letter and the multiplication sign
#: (an upper-case ``X`` is added by :func:`quantity_vocab` and kept as read).
SIGNS = "x×"
#: The character a quantity's sign is written as (see the module docstring).
LETTER = "x"
#: At most this many digits in a count (a till's quantity field).
MAX_COUNT_DIGITS = 3


def quantity_vocab(vocab: Mapping[str, int]) -> tuple[dict[int, int], frozenset[int]]:
    """The ids :func:`quantity_from_spikes` needs from a tokenizer's ``vocab`` (token -> id): (sign id
    -> the id it is written as: ``x`` and ``×`` -> ``x``, ``X`` -> ``X``; the ids a decoder's quantity
    may hold: every one-character token that is no letter (Unicode category L*: Latin letters, hanzi),
    and the signs). An empty map and set when the vocabulary lacks the letter x.
    """
    if LETTER not in vocab:
        return {}, frozenset()
    x = int(vocab[LETTER])
    signs = {int(vocab[c]): x for c in SIGNS if c in vocab}
    if "X" in vocab:
        signs[int(vocab["X"])] = int(vocab["X"])
    allowed = frozenset(int(i) for t, i in vocab.items() if len(t) == 1 and not unicodedata.category(t).startswith("L"))
    allowed |= frozenset(signs)
    return signs, allowed


def _price(ids: list[int], digit_ids: Collection[int], separator_ids: Collection[int]) -> bool:
    """Digits with at most one separator, between two digits."""
    seps = [k for k, t in enumerate(ids) if t in separator_ids]
    if not ids or any(t not in digit_ids and t not in separator_ids for t in ids) or len(seps) > 1:
        return False
    return not seps or 0 < seps[0] < len(ids) - 1


def quantity_from_spikes(written: list[int], spike_ids: list[int], digit_ids: Collection[int],
                         separator_ids: Collection[int], signs: Mapping[int, int], allowed_ids: Collection[int],
                         space_id: int) -> list[int]:
    """``written`` (a segment's generated ids, ``</s>`` excluded) replaced by ``count SP x SP price``
    read from ``spike_ids`` (the recogniser's class at each character spike, spaces excluded) when the
    spikes read one quantity and every written id is in ``allowed_ids`` (module docstring). ``signs``
    maps each sign's id to the id written for it and ``allowed_ids`` come from :func:`quantity_vocab`,
    ``digit_ids`` / ``separator_ids`` from :func:`models.compact.decode.numbers.number_vocab`. Returns
    ``written`` itself when nothing changes (also for empty ``signs``: rules without the step or a
    vocabulary without the letter; or ``space_id`` < 0), else a new list.
    """
    if not written or not signs or space_id < 0:
        return written
    at = [k for k, t in enumerate(spike_ids) if t in signs]
    if len(at) != 1 or not 1 <= at[0] <= MAX_COUNT_DIGITS:
        return written
    k = at[0]
    count, price = spike_ids[:k], spike_ids[k + 1:]
    if any(t not in digit_ids for t in count) or not _price(price, digit_ids, separator_ids):
        return written
    if any(t not in allowed_ids for t in written):
        return written
    out = [*count, space_id, signs[spike_ids[k]], space_id, *price]
    return written if out == written else out
