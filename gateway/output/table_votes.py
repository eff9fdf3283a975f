"""Table-level votes on cell texts: what one cell read ambiguously, its table (or column) settles.

A table prints one convention throughout; a recogniser reads each cell alone and may break it in
one cell. Three such misreadings are corrected here, each only where the table's other cells make
the answer unambiguous (issue 37, ``bench/table_losses.py``):

* **decimal mark** (:func:`decimal_mark_vote`): the cells whose number shows its decimal mark
  beyond doubt (``1,234.56``: the last of two marks; ``-0.0153`` / ``12.34%``: a single mark not
  followed by exactly three digits, which a thousands separator always is -- or after a lone ``0``)
  vote for ``.`` or ``,``. When one mark wins clearly (at least :data:`DECIMAL_MIN_VOTES` votes and
  :data:`DECIMAL_MARGIN` times the other's), a cell whose number shows the other mark in decimal
  position beyond doubt takes the table's: ``-0,0153`` -> ``-0.0153``, ``1.234,56`` -> ``1,234.56``.
  ``1,234`` (exactly three digits after a single mark) could be a thousands group and is left. A
  column whose own cells elect the other mark clearly (a column in another convention) is left.
* **number form** (:func:`number_form_vote`): an accounting negative left open (``(16,228``) or
  closed in the other width (``(75,867）``) gets the close the table's other negatives have; a
  number with a full stop after it that no other number of the table has (``-9,262.``) loses it.
* **capital I** (:func:`leading_capital_vote`): in most sans-serif faces capital ``I`` and small
  ``l`` are one glyph, and a recogniser reading a cell alone cannot tell ``Iowa`` from ``lowa``.
  When at least :data:`CASE_MIN_CELLS` of a column's other cells (those not starting with ``l`` and
  a small letter themselves) start with a letter and at least :data:`CASE_UPPER_SHARE` of those start
  upper-case (a column of names, labels), a cell starting with ``l`` followed by a small letter gets
  ``I``. No dictionary: the column's case alone decides.

Each takes and returns ``{(row, column): text}`` and changes nothing but the characters named.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping

#: A number cell: optional sign / parenthesis / currency, digits with ``.`` / ``,`` marks, optional
#: ``%`` and closing parenthesis. Group 2 is the digits-and-marks core.
_NUMBER = re.compile(r"^([-+−(（$€£¥]*)(\d(?:[\d.,]*\d)?)([%)）]*)$")
#: The decimal vote needs this many cells showing the winning mark beyond doubt ...
DECIMAL_MIN_VOTES = 3
#: ... and this many times the other mark's votes (a table prints one convention; a swapped reading
#: is a few percent of its cells at most, so 3:1 leaves a wide margin either way).
DECIMAL_MARGIN = 3.0
#: The case vote needs this many other cells of the column starting with a letter ...
CASE_MIN_CELLS = 3
#: ... this share of them upper-case.
CASE_UPPER_SHARE = 0.9
_SWAP = str.maketrans(".,", ",.")


def decimal_mark_of(text: str) -> str | None:
    """The decimal mark (``"."`` or ``","``) that the number ``text`` (a whole cell, stripped) shows
    beyond doubt, or None: two kinds of mark with the last one single and after every mark of the
    other kind (``1,234.56`` -> ``.``); or one mark once, not followed by exactly three digits
    (``12,34%`` -> ``,``) or after a lone ``0`` (``0.153`` -> ``.``). ``1,234``, ``1.234.567``,
    text that is no number: None.
    """
    m = _NUMBER.match(text)
    if m is None:
        return None
    core = m.group(2)
    marks = [(i, ch) for i, ch in enumerate(core) if ch in ".,"]
    if not marks or any(b - a == 1 for (a, _), (b, _) in zip(marks, marks[1:], strict=False)):
        return None
    last_i, last = marks[-1]
    kinds = {ch for _, ch in marks}
    if sum(ch == last for _, ch in marks) > 1:
        return None
    if len(kinds) == 2:
        return last
    if len(core) - last_i - 1 != 3 or core[:last_i] == "0":
        return last
    return None


def _elected(votes: Counter) -> str | None:
    """The mark that ``votes`` ({mark: cells}) elect clearly (:data:`DECIMAL_MIN_VOTES`,
    :data:`DECIMAL_MARGIN`), or None.
    """
    ranked = votes.most_common() + [(None, 0), (None, 0)]
    (win, n_win), (_, n_lose) = ranked[0], ranked[1]
    return win if n_win >= DECIMAL_MIN_VOTES and n_win >= DECIMAL_MARGIN * n_lose else None


def decimal_mark_vote(cells: Mapping[tuple[int, int], str]) -> dict[tuple[int, int], str]:
    """``cells`` ({(row, column): text}) with the table's decimal mark in the cells that show the
    other one beyond doubt (module docstring; :func:`decimal_mark_of`). Unchanged when no mark wins
    clearly (:func:`_elected`); a column whose own cells elect the other mark clearly is left.
    """
    marks = {key: decimal_mark_of(text.strip()) for key, text in cells.items()}
    win = _elected(Counter(m for m in marks.values() if m is not None))
    if win is None:
        return dict(cells)
    by_col: dict[int, Counter] = {}
    for (_, col), m in marks.items():
        if m is not None:
            by_col.setdefault(col, Counter())[m] += 1
    out = dict(cells)
    for key, m in marks.items():
        if m is not None and m != win and _elected(by_col[key[1]]) != m:
            out[key] = cells[key].translate(_SWAP)
    return out


def _starts_upper(text: str) -> bool | None:
    """Whether ``text`` starts with an upper-case letter; None when it does not start with a letter
    that has case (digits, CJK, punctuation).
    """
    ch = text[:1]
    if not ch or ch.upper() == ch.lower():
        return None
    return ch.isupper()


def leading_capital_vote(cells: Mapping[tuple[int, int], str]) -> dict[tuple[int, int], str]:
    """``cells`` ({(row, column): text}) with a leading ``l`` followed by a small letter read as ``I``
    in columns whose other cells start upper-case (module docstring; :data:`CASE_MIN_CELLS`,
    :data:`CASE_UPPER_SHARE`).
    """
    by_col: dict[int, list[tuple[tuple[int, int], str]]] = {}
    for key, text in cells.items():
        by_col.setdefault(key[1], []).append((key, text.strip()))
    out = dict(cells)
    for col_cells in by_col.values():
        doubtful = [key for key, text in col_cells if _ambiguous_l(text)]
        cases = (_starts_upper(text) for _, text in col_cells if not _ambiguous_l(text))
        others = [up for up in cases if up is not None]
        if not doubtful or len(others) < CASE_MIN_CELLS or sum(others) < CASE_UPPER_SHARE * len(others):
            continue
        for key in doubtful:
            raw = cells[key]
            i = raw.index("l")
            out[key] = raw[:i] + "I" + raw[i + 1:]
    return out


def _ambiguous_l(text: str) -> bool:
    """Whether ``text`` (stripped) starts with ``l`` followed by a small letter (``lowa``: ``Iowa``?)."""
    return len(text) >= 2 and text[0] == "l" and text[1].islower()


#: Number-cell punctuation is voted on with at least this many number cells showing the table's form.
FORM_MIN_CELLS = 3
_CLOSE_OF = {"(": ")", "（": "）"}


def number_form_vote(cells: Mapping[tuple[int, int], str]) -> dict[tuple[int, int], str]:
    """``cells`` ({(row, column): text}) with the punctuation around a number that no other number of
    its table has, in two forms: an accounting negative opened and not closed (``(16,228``: the
    recogniser lost a ``)`` that touches a rule or the cell's edge) or closed in the other width
    (``(75,867）``) gets the close of its open when at least :data:`FORM_MIN_CELLS` numbers of the
    table are closed that way; a number followed by a ``.`` (``-9,262.``: a speck or the rule's end
    read as a full stop) loses it when at least :data:`FORM_MIN_CELLS` numbers of the table end
    and none of them ends in ``.`` (a column of ``1.`` ``2.`` ``3.`` item numbers keeps its stops).
    """
    parts = {key: _NUMBER.match(text.strip().removesuffix(".")) for key, text in cells.items()}
    numbers = {key: m for key, m in parts.items() if m is not None}
    closed = sum(1 for m in numbers.values() if _closes(m) and _closes(m) == _CLOSE_OF.get(m.group(1)[-1:]))
    stops = sum(1 for key in numbers if cells[key].strip().endswith("."))
    out = dict(cells)
    for key, m in numbers.items():
        text = cells[key].strip()
        if text.endswith(".") and stops == 1 and len(numbers) >= FORM_MIN_CELLS:
            text = text[:-1]
        want = _CLOSE_OF.get(m.group(1)[-1:])
        if want is not None and closed >= FORM_MIN_CELLS and _closes(m) != want:
            text = text[: m.start(3)] + m.group(3).rstrip(")）") + want
        if text != cells[key].strip():
            out[key] = text
    return out


def _closes(m: re.Match) -> str:
    """The closing parenthesis of a number matched by ``_NUMBER`` (``)`` / ``）``), or ``""``."""
    return m.group(3)[-1:] if m.group(3)[-1:] in (")", "）") else ""


#: Vertical bars a column rule's remnant reads as (ASCII bar, box drawing light / heavy, broken bar).
_BARS = "|│┃¦"
#: Letters a column rule's stub reads as in a sans-serif face (small L, capital i: one upright stroke).
_STUB_LETTERS = ("l", "I")
_BARRED = re.compile(rf"^[{_BARS}]?\s*(\S+?)\s*[{_BARS}]?$")


def _lettered_number(text: str) -> str | None:
    """The number of ``text`` when it is one number and one :data:`_STUB_LETTERS` letter, two words
    (``587 l``, ``I -0.0459``); else None.
    """
    words = text.split()
    if len(words) != 2 or (words[0] in _STUB_LETTERS) == (words[1] in _STUB_LETTERS):
        return None
    number = words[1] if words[0] in _STUB_LETTERS else words[0]
    return number if _NUMBER.match(number) else None


def rule_remnants(cells: Mapping[tuple[int, int], str]) -> dict[tuple[int, int], str]:
    """``cells`` with a vertical bar (:data:`_BARS`) before or after a number cell's number taken
    off: a stub of a column rule that the rule eraser left beside the cell's text, read as ``│``
    (``bench/table_causes.py`` seeds 0-7: ``30 │``, ``19,516 │``, ``79|``, ``391 │`` -- 7 of the
    8 cells of seed 7 page 5 and seed 4 page 0, grid rules, that kept a wrong character). Only
    where the rest is one number (:data:`_NUMBER`); text cells are left as read.
    A stub read as a letter (:data:`_STUB_LETTERS`: ``587 l``, ``734 l``, seeds 7 and 10 of
    ``bench/tables.py``, grid rules) goes too, when it stands apart from the number (a word of its
    own) and under half of its column's cells hold such a letter (a column of litres, ``2 l``,
    keeps its unit: a stub is the odd cell out).
    """
    out = dict(cells)
    lettered = {key: _lettered_number(text) for key, text in cells.items()}
    per_column: Counter = Counter(c for _, c in cells)
    with_letter = Counter(c for (_, c), n in lettered.items() if n is not None)
    for key, text in cells.items():
        t = text.strip()
        number = lettered[key]
        if number is not None:
            if with_letter[key[1]] < 0.5 * per_column[key[1]]:
                out[key] = number
            continue
        if not t or (t[0] not in _BARS and t[-1] not in _BARS):
            continue
        m = _BARRED.match(t)
        if m is not None and m.group(1) != t and _NUMBER.match(m.group(1)):
            out[key] = m.group(1)
    return out


def vote_cells(cells: Mapping[tuple[int, int], str]) -> dict[tuple[int, int], str]:
    """The rule-remnant cleanup (:func:`rule_remnants`) and the votes (:func:`decimal_mark_vote`,
    :func:`number_form_vote`, then :func:`leading_capital_vote`) on one table's ``cells``
    ({(row, column): text}).
    """
    return leading_capital_vote(number_form_vote(decimal_mark_vote(rule_remnants(cells))))
