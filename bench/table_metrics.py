"""Table metrics of ``bench/tables.py`` and the table tests: numbers kept, cell recall, TEDS.

* **numbers kept**: the share of the page's number cells (multiset) found *exactly* as a
  whitespace-separated token of the text read (a number with a digit changed, a sign or a separator
  lost, or a space inserted, is not kept). The same measure for every engine.
* **cell recall**: the share of the ground truth's body cells (multiset of texts) found exactly as the
  text of one predicted table cell (``table`` blocks' cells).
* **numbers added**: tokens with a digit in the text read that are not on the page (multiset against
  every token of the page's lines, title and headers included): a duplicate read over a neighbour's
  ink (``2,799.55 2``), a number split in two, or a misread; **number precision** is the share of the
  digit tokens read that are on the page. **duplicated** counts those added tokens whose digits are the
  first or last digits of the token beside them (the duplicate read's signature).
* **cell precision**: the share of the predicted cells (non-empty) whose text is a ground-truth cell
  (multiset; ``bench/tables.py`` counts the header's cells with the body's); **cells with an extra
  token**: predicted cells that are not, but would be with one whitespace token taken out.
* **TEDS**: tree-edit-distance similarity of PubTabNet (Zhong et al., "Image-based table recognition:
  data, model, and evaluation", ECCV 2020), computed by the ``table-recognition-metric`` package (the
  reference implementation, apted + Levenshtein on cell text); the prediction's HTML is built from its
  cells by :func:`cells_html` (first row as header, no spans).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from html import escape
from typing import Protocol


class _Cell(Protocol):
    row: int
    column: int
    text: str


def numbers_kept(numbers: Sequence[str], text: str) -> int:
    """How many of ``numbers`` (cell texts, with repeats) occur as whitespace tokens of ``text``,
    each token used once."""
    have = Counter(text.split())
    return sum(min(n, have[t]) for t, n in Counter(numbers).items())


def _digits(token: str) -> str:
    return "".join(ch for ch in token if ch.isdigit())


def numbers_added(truth_lines: Iterable[str], text: str) -> tuple[int, int, int]:
    """(digit tokens of ``text`` not among the whitespace tokens of ``truth_lines`` (multiset), of those
    the ones whose digits begin or end the digits of a token next to them on its line, digit tokens
    of ``text``)."""
    have = Counter(t for line in truth_lines for t in line.split())
    added = dup = read = 0
    for line in text.splitlines():
        toks = line.split()
        for i, t in enumerate(toks):
            d = _digits(t)
            if not d:
                continue
            read += 1
            if have[t] > 0:
                have[t] -= 1
                continue
            added += 1
            near = [_digits(toks[j]) for j in (i - 1, i + 1) if 0 <= j < len(toks)]
            dup += any(len(n) > len(d) and (n.startswith(d) or n.endswith(d)) for n in near)
    return added, dup, read


def cell_precision(truth: Iterable[str], predicted: Iterable[str]) -> tuple[int, int, int]:
    """(predicted non-empty cells whose text is a ground-truth cell, predicted cells that would be one
    with one whitespace token taken out, predicted non-empty cells); multisets, runs of spaces folded."""
    want = Counter(" ".join(t.split()) for t in truth)
    hit = extra = n = 0
    for text in predicted:
        toks = text.split()
        if not toks:
            continue
        n += 1
        t = " ".join(toks)
        if want[t] > 0:
            want[t] -= 1
            hit += 1
        elif len(toks) > 1 and any(want[" ".join(toks[:i] + toks[i + 1:])] > 0 for i in range(len(toks))):
            extra += 1
    return hit, extra, n


def cell_recall(truth: Iterable[str], predicted: Iterable[str]) -> tuple[int, int]:
    """(ground-truth cells matched exactly by a predicted cell's text, ground-truth cells); each
    predicted cell matches once. Texts are compared with runs of spaces folded to one."""
    want = Counter(" ".join(t.split()) for t in truth)
    have = Counter(" ".join(t.split()) for t in predicted)
    return sum(min(n, have[t]) for t, n in want.items()), sum(want.values())


def cells_html(cells: Sequence[_Cell], header_rows: int = 1) -> str:
    """A predicted table (``cells`` with 0-based ``row`` / ``column`` and ``text``) in PubTabNet's HTML
    form: every grid position a ``td`` (empty where no cell), the first ``header_rows`` rows in
    ``<thead>``; ``""`` without cells."""
    if not cells:
        return ""
    grid: dict[tuple[int, int], str] = {(c.row, c.column): c.text for c in cells}
    rows = sorted({r for r, _ in grid})
    n_cols = 1 + max(c for _, c in grid)
    trs = ["<tr>" + "".join(f"<td>{escape(grid.get((r, c), ''))}</td>" for c in range(n_cols)) + "</tr>"
           for r in rows]
    head, body = "".join(trs[:header_rows]), "".join(trs[header_rows:])
    return f"<html><body><table><thead>{head}</thead><tbody>{body}</tbody></table></body></html>"


def teds(pred_html: str, truth_html: str) -> float:
    """TEDS in [0, 1] of two tables in PubTabNet HTML (``<html><body><table>...``); 0.0 when the
    prediction is empty. Raises ImportError when ``table-recognition-metric`` is not installed."""
    from table_recognition_metric import TEDS  # type: ignore[import-untyped]  # optional: benches and tests only

    return float(TEDS()(pred_html, truth_html)) if pred_html else 0.0
