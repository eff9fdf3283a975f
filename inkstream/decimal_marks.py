"""One decimal mark per page: prices read with the other mark take the page's (a per-page vote).

A receipt, an invoice or a price list writes every amount with the same decimal mark. A recogniser
reads a faint or dotted ``.`` as ``,`` now and then (generated thermal receipts of
``bench/receipts.py``, seed 30,006: ``2 x 1.87`` read ``2 x 1,87`` among twenty prices with a point;
seeds 30,012 and 30,021 alike), and a group separator as the decimal one (scanned forms, seeds 30,019
and 30,022: ``$74,580.27`` read ``$74.580.27``). Each line is read alone, so no line knows what the
page writes; the page does:

* :func:`page_mark`: the mark of the page's *prices* -- numbers with one separator and exactly two
  digits after it, not inside a longer number (``12.50``, ``3,99``; not ``1,234.56``, ``12,500``,
  ``1.2.3`` or ``10:30``) -- when at least :data:`MIN_PRICES` of them are written and at least
  :data:`MIN_SHARE` of them use one mark; else None (too few to vote, or a page that uses both);
* :func:`with_mark`: a text with its prices written with that mark, and a number with the same mark
  twice or more whose last group holds two digits (``74.580.27``: the decimal mark appears once in a
  number, so the earlier ones are group separators) with those written as the other mark.

Both the gateway's stitcher (``gateway/output/stitch.py``) and the in-process path
(``models/inprocess.py``) apply it to a page's segments, so the served text stays the in-process text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

#: A price: digits, one ``.`` or ``,``, two digits, not inside a longer number or a dotted sequence.
PRICE = re.compile(r"(?<![\d.,])(\d+)([.,])(\d{2})(?![\d.,]?\d)")
#: A number whose decimal mark was read as its group separator: 1-3 digits, groups of three with one
#: mark, then the same mark and two digits (``74.580.27``, ``1,234,567,89``).
DOUBLED = re.compile(r"(?<![\d.,])(\d{1,3})((?:([.,])\d{3})+)\3(\d{2})(?![\d.,]?\d)")
#: Fewest prices on a page for a vote (a page with one or two amounts says nothing of its convention).
MIN_PRICES = 4
#: Share of the prices that must use one mark for it to be the page's (at most one in five differs).
MIN_SHARE = 0.8
OTHER = {".": ",", ",": "."}


def page_mark(texts: Sequence[str]) -> str | None:
    """``"."`` or ``","``: the decimal mark of the prices in ``texts`` (a page's segment or line texts,
    module docstring), or None when fewer than :data:`MIN_PRICES` prices are written or no mark holds
    :data:`MIN_SHARE` of them.
    """
    marks = [m.group(2) for t in texts for m in PRICE.finditer(t)]
    if len(marks) < MIN_PRICES:
        return None
    for mark in ".,":
        if marks.count(mark) >= MIN_SHARE * len(marks):
            return mark
    return None


def with_mark(text: str, mark: str | None) -> str:
    """``text`` with each price (:data:`PRICE`) written with ``mark`` and each number of
    :data:`DOUBLED` with its earlier marks as the other one; ``text`` itself for ``mark`` None.
    """
    if mark is None:
        return text
    text = PRICE.sub(lambda m: f"{m.group(1)}{mark}{m.group(3)}", text)
    return DOUBLED.sub(lambda m: f"{m.group(1)}{m.group(2).replace(m.group(3), OTHER[m.group(3)])}{mark}{m.group(4)}"
                       if m.group(3) == mark else m.group(0), text)


def one_mark(texts: Sequence[str]) -> list[str]:
    """``texts`` (one page's segments) rewritten with the page's mark (:func:`page_mark`,
    :func:`with_mark`); a new list, each text unchanged where there is nothing to change.
    """
    mark = page_mark(texts)
    return [with_mark(t, mark) for t in texts]
