"""Table metrics of ``bench/tables.py`` and the table tests: numbers kept, cell recall, TEDS.

* **numbers kept**: the share of the page's number cells (multiset) found *exactly* as a
  whitespace-separated token of the text read (a number with a digit changed, a sign or a separator
  lost, or a space inserted, is not kept). The same measure for every engine.
* **cell recall**: the share of the ground truth's body cells (multiset of texts) found exactly as the
  text of one predicted table cell (``table`` blocks' cells).
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
