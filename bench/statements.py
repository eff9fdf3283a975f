"""Statement pages: table documents unlike ``bench/table_pages.py``'s, read by the embedded model (issue 37).

Renders, seeded, five kinds of US-letter pages at 150-300 dpi, each made a real PDF (image page,
:func:`bench.pdfgen.make_pdf`) and rasterised back as the gateway does
(:func:`inkstream.page_image.render_pdf_page`):

* ``statement``: a financial statement: section headings, indented row labels (two levels), subtotal
  rules (single above a subtotal, double under the total), negatives in parentheses, ``$`` on first
  and total rows, footnote markers (``1,234*``, ``(a)`` in labels), a note column, a merged header
  cell ("Year ended 31 December") over the year columns;
* ``swiss``: right-aligned amounts with apostrophe (``1'234'567.50``) or thin-space (``1 234 567``)
  thousands separators and a percent column, a merged header over two years;
* ``invoice``: an invoice's item table (description, quantity, unit price, VAT %, amount with ``€``
  or ``£``) and a right-aligned totals block;
* ``zh``: a Chinese report: Chinese labels (some indented, ``其中：``), Latin numbers, ``注`` markers,
  a merged header ``2024年`` / ``2023年`` over ``金额`` / ``占比`` columns;
* ``twocol``: one long table continued over the two columns of the page (header repeated).

About half the pages get light scan noise (blur, noise, JPEG) and a skew within ±1.5 degrees.
Ground truth: every body cell's text (empty cells skipped), the number cells among them.

Metrics (:mod:`bench.table_metrics`): numbers kept exactly (whitespace tokens; a thin-space number
counts as kept when its space-separated groups are read consecutively), cell recall. Every lost
number gets a cause: ``not_detected`` (nothing like it read), ``merged`` (read glued to a neighbour
token), ``split`` (its characters read as two tokens), ``misread`` (a near token read: ``truth -> read``),
looked for in the lines holding the number's row label (a ``?`` after the cause when the label was not
read, so the whole text was searched).

Run: ``PYTHONPATH=. OMP_NUM_THREADS=1 .venv/bin/python bench/statements.py [--pages 10] [--seed 0]``;
prints one line per page, one per lost number (page, kind, cause, truth, read) and per lost text cell
(a label or a nil ``-``: ``merged`` / ``split`` / ``outside`` the table / ``not_read``, see
:func:`cell_cause`), then per kind and in all: ``numbers_kept`` and ``cell_recall`` (percent) and the
counts by cause.
"""

from __future__ import annotations

import argparse
import difflib
import pathlib
import random
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.statement_render import KINDS, StatementPage, render_statement  # noqa: E402
from bench.table_metrics import cell_recall, numbers_kept  # noqa: E402


def as_pdf_page(page: StatementPage, tmp: pathlib.Path, long_side_px: int = 2200):  # -> PIL image
    """``page.image`` written as a one-page PDF at ``page.dpi``, then rendered back at ``long_side_px``."""
    import io

    import pypdfium2 as pdfium

    from bench.pdfgen import make_pdf
    from inkstream.page_image import render_pdf_page

    buf = io.BytesIO()
    page.image.save(buf, format="PNG")
    path = make_pdf([buf.getvalue()], 1, tmp / "page.pdf", dpi=page.dpi)
    pdf = pdfium.PdfDocument(str(path))
    try:
        return render_pdf_page(pdf[0], long_side_px)
    finally:
        pdf.close()


def _kept(numbers: list[str], text: str) -> tuple[int, list[int]]:
    """(numbers kept, indices of the lost ones): plain numbers as whitespace tokens (the count is
    :func:`bench.table_metrics.numbers_kept`'s), spaced ones (thin-space groups) as a token sequence."""
    lost = []
    have = Counter(text.split())
    for i, t in enumerate(numbers):
        if " " not in t:
            if have[t] > 0:
                have[t] -= 1
            else:
                lost.append(i)
    kept = numbers_kept([n for n in numbers if " " not in n], text)
    flat = " " + " ".join(text.split()) + " "
    for i, n in enumerate(numbers):
        if " " in n:
            if f" {n} " in flat:
                kept += 1
                flat = flat.replace(f" {n} ", " | ", 1)
            else:
                lost.append(i)
    return kept, lost


def _row_tokens(label: str, text: str) -> list[str] | None:
    """Tokens of the text lines that hold ``label`` (its row), None when no line does."""
    lines = [ln for ln in text.splitlines() if label in ln]
    return [t for ln in lines for t in ln.split()] or None


def cause(number: str, label: str, text: str) -> tuple[str, str]:
    """(cause, what was read) of a number not kept, looked for in its row's text lines (the whole text
    when its label was not read; the cause then ends in ``?``): see the module docstring."""
    row = _row_tokens(label, text)
    toks = row if row is not None else text.split()
    q = "" if row is not None else "?"
    flat = number.replace(" ", "")
    for t in toks:
        if t != flat and (t.startswith(flat) or t.endswith(flat)) and len(t) > len(flat):
            return "merged" + q, t
    pairs = [f"{a} {b}" for a, b in zip(toks, toks[1:], strict=False)]
    for pair in pairs:
        if pair.replace(" ", "") == flat and " " not in number:
            return "split" + q, pair
    best = difflib.get_close_matches(number, toks + pairs, n=1, cutoff=0.6)
    if best:
        return "misread" + q, best[0]
    return "not_detected" + q, ""


def cell_cause(truth: str, cells: list[str], text: str) -> str:
    """Why a ground-truth cell has no exactly matching predicted cell: ``merged`` (a predicted cell holds
    it beside other text), ``split`` (two predicted cells make it), ``outside`` (in the page text but in
    no table cell, as whole tokens), ``not_read`` (none of these: not detected, or misread)."""
    t = " ".join(truth.split())
    for c in cells:
        if c != t and (f" {t} " in f" {c} "):
            return "merged"
    for a, b in zip(cells, cells[1:], strict=False):
        if f"{a} {b}" == t or a + b == t:
            return "split"
    return "outside" if f" {t} " in " " + " ".join(text.split()) + " " else "not_read"


@dataclass
class Tally:
    numbers: int = 0
    kept: int = 0
    cells: int = 0
    cells_hit: int = 0


def main(argv: list[str] | None = None) -> int:
    """Render, read and score ``--pages`` pages; print per page, lost numbers, totals."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pages", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--kinds", nargs="*", default=list(KINDS))
    p.add_argument("--save", type=pathlib.Path, help="write each page's image (PNG) and text read here")
    args = p.parse_args(argv)
    from bench.tables import Ours

    ours = Ours()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="inkstream_statements_"))
    by_kind: dict[str, Tally] = {}
    causes: Counter = Counter()
    cell_causes: Counter = Counter()
    lost_lines = []
    for k in range(args.pages):
        kind = args.kinds[k % len(args.kinds)]
        page = render_statement(kind, random.Random(f"{args.seed}-{k}"))
        image = as_pdf_page(page, tmp)
        res = ours.read(type("P", (), {"image": image})())
        if args.save:
            args.save.mkdir(parents=True, exist_ok=True)
            image.save(args.save / f"page_{k}_{kind}.png")
            (args.save / f"page_{k}_{kind}.txt").write_text(res.text)
        cells = [c.text for b in res.blocks if b.type == "table" for c in b.cells]
        kept, lost = _kept(page.numbers, res.text)
        hit, n_cells = cell_recall(page.cells, cells)
        want = Counter(" ".join(c.split()) for c in cells)
        for c in page.cells:
            if want[c] > 0:
                want[c] -= 1
            elif not any(ch.isdigit() for ch in c):  # number cells are listed below with the lost numbers
                cc = cell_cause(c, [" ".join(x.split()) for x in cells], res.text)
                cell_causes[(kind, cc)] += 1
                lost_lines.append(f"  lost cell page {k} {kind}: {cc:13} {c!r}")
        t = by_kind.setdefault(kind, Tally())
        t.numbers += len(page.numbers)
        t.kept += kept
        t.cells += n_cells
        t.cells_hit += hit
        print(f"page {k} {kind:9} dpi {page.dpi} skew {page.skew:+.2f} noise {int(page.noisy)}: numbers kept "
              f"{kept}/{len(page.numbers)}  cell recall {hit}/{n_cells}  tables "
              f"{sum(b.type == 'table' for b in res.blocks)}  warnings {','.join(res.warnings) or '-'}", flush=True)
        for i in lost:
            c, read = cause(page.numbers[i], page.labels[i], res.text)
            causes[(kind, c)] += 1
            lost_lines.append(f"  lost page {k} {kind}: {c:13} {page.numbers[i]!r} -> {read!r}"
                              f"  (row {page.labels[i]!r})")
    print("\n".join(lost_lines))
    tot = Tally()
    for kind, t in sorted(by_kind.items()):
        for f in ("numbers", "kept", "cells", "cells_hit"):
            setattr(tot, f, getattr(tot, f) + getattr(t, f))
        cs = ", ".join(f"{c} {n}" for (kk, c), n in sorted(causes.items()) if kk == kind)
        cs += "; label cells lost: " + (", ".join(f"{c} {n}" for (kk, c), n in sorted(cell_causes.items())
                                                  if kk == kind) or "-")
        print(f"{kind:9}: numbers_kept {100 * t.kept / max(1, t.numbers):6.2f} % ({t.kept}/{t.numbers})  "
              f"cell_recall {100 * t.cells_hit / max(1, t.cells):6.2f} %  lost: {cs or '-'}")
    all_c = Counter()
    for (_, c), n in causes.items():
        all_c[c] += n
    print(f"all      : numbers_kept {100 * tot.kept / max(1, tot.numbers):6.2f} % ({tot.kept}/{tot.numbers})  "
          f"cell_recall {100 * tot.cells_hit / max(1, tot.cells):6.2f} %  lost: "
          f"{', '.join(f'{c} {n}' for c, n in sorted(all_c.items())) or '-'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
