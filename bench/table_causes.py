"""Lost table cells of ``bench/tables.py`` pages, each with its cause (issue 37, table structure).

For every ground-truth body cell not matched by a predicted cell (the multiset match of
:func:`bench.table_metrics.cell_recall`), the cause is the first that applies:

* ``no_table``: the page has no ``table`` block;
* ``merged``: one predicted cell holds the cell's text as whole tokens beside other text
  (two columns or two rows read as one cell);
* ``split``: the cell's text is the concatenation (with or without a space) of two predicted
  cells of one predicted row (one column read as two);
* ``outside``: the text is in the page's text but in no table cell (a row or column left out of the
  table);
* ``misread``: a predicted cell in the cell's row (same label) and column order differs from it
  (a reading error: tables8's scope, counted here only to be told apart);
* ``lost``: none of these (not read at all).

Also counted: matched cells in the wrong row or column (``misplaced``: the predicted cell's row is
not the row whose label matches, or its column index differs from the truth's column index after
the label column is aligned).

Run: ``OMP_NUM_THREADS=1 .venv/bin/python bench/table_causes.py --seeds 0 1 --pages 8 [--cache DIR]``;
one line per lost cell, then counts by cause.
"""

from __future__ import annotations

import argparse
import pathlib
import pickle
import sys
from collections import Counter

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.table_metrics import cells_html, numbers_kept, teds  # noqa: E402 - after sys.path
from bench.table_pages import render_table_page  # noqa: E402
from bench.tables import page_spec  # noqa: E402


def _norm(t: str) -> str:
    return " ".join(t.split())


def read_pages(seed: int, pages: int, cache: pathlib.Path | None) -> list[dict]:
    """Per page: ``body`` (truth rows), ``header_rows``, ``cells`` [(table, row, column, text)],
    ``text`` (page text). Read once, then from ``cache/seed_S.pkl`` when given and present."""
    f = cache / f"seed_{seed}_{pages}.pkl" if cache else None
    if f is not None and f.exists():
        return pickle.loads(f.read_bytes())
    from bench.tables import Ours

    ours = Ours()
    out = []
    for k in range(pages):
        page = render_table_page(**page_spec(seed, k))
        res = ours.read(page)
        tables = [b for b in res.blocks if b.type == "table"]
        cells = [(i, c.row, c.column, c.text) for i, b in enumerate(tables) for c in b.cells]
        out.append({"body": page.body, "header_rows": len(page.header), "cells": cells, "text": res.text,
                    "rules": page.rules, "fill": page.fill, "lang": page.lang})
    if f is not None:
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(pickle.dumps(out))
    return out


def _row_match(row: list[str], rows: dict) -> tuple[tuple[int, int], int] | None:
    """(predicted (table, row), column offset) sharing the most texts with truth ``row`` (at least
    two), the offset the most common predicted-minus-truth column of those texts; None if none."""
    want = [_norm(t) for t in row]
    best, best_n = None, 1
    for key, pr in rows.items():
        n = sum(1 for t in set(want) if t in pr.values())
        if n > best_n:
            best, best_n = key, n
    if best is None:
        return None
    offs = Counter(pc - c for c, t in enumerate(want) for pc, pt in rows[best].items() if pt == t)
    return best, offs.most_common(1)[0][0]


def causes(page: dict) -> tuple[list[tuple[int, int, str, str, str]], int]:
    """(lost cells as (truth row, truth column, text, cause, detail), misplaced matched cells)."""
    body, cells = page["body"], page["cells"]
    have = Counter(_norm(t) for *_, t in cells)
    want = Counter(_norm(t) for row in body for t in row)
    short = {t: n - have[t] for t, n in want.items() if n > have[t]}
    rows: dict[tuple[int, int], dict[int, str]] = {}
    for tb, r, c, t in cells:
        rows.setdefault((tb, r), {})[c] = _norm(t)
    matches = [_row_match(row, rows) for row in body]
    lost: list[tuple[int, int, str, str, str]] = []
    tokens_text = Counter(page["text"].split())
    for r, row in enumerate(body):
        for c, text in enumerate(row):
            t = _norm(text)
            if short.get(t, 0) <= 0:
                continue
            short[t] -= 1
            lost.append((r, c, t, *_cause(t, c, cells, rows, matches[r], tokens_text)))
    misplaced = 0
    seen_rows = Counter(m[0] for m in matches if m)
    for r, row in enumerate(body):
        m = matches[r]
        if m is None:
            continue
        if seen_rows[m[0]] > 1:  # two truth rows read as one predicted row
            misplaced += sum(1 for t in row if _norm(t) in rows[m[0]].values())
            continue
        pr = rows[m[0]]
        for c, text in enumerate(row):
            where = [pc for pc, pt in pr.items() if pt == _norm(text)]
            if where and m[1] + c not in where:
                misplaced += 1
    return lost, misplaced


def _cause(t, c, cells, rows, match, tokens_text) -> tuple[str, str]:
    if not cells:
        return "no_table", ""
    toks = t.split()
    for *_, pt in cells:
        ptk = _norm(pt).split()
        if len(ptk) > len(toks) and any(ptk[i:i + len(toks)] == toks for i in range(len(ptk) - len(toks) + 1)):
            return "merged", pt
    for row_cells in rows.values():
        cs = sorted(row_cells)
        for a, b in zip(cs, cs[1:], strict=False):
            ta, tb = row_cells[a], row_cells[b]
            if ta and tb and t.replace(" ", "") == (ta + tb).replace(" ", ""):
                return "split", f"{ta!r}|{tb!r}"
    if match is not None:
        key, off = match
        got = rows[key].get(off + c)
        if got is not None:
            return "misread", got
        return "empty_slot", repr(sorted(rows[key].items()))
    if all(tokens_text[x] > 0 for x in toks):
        return "outside", ""
    return "lost", ""


def _remnants(page: dict) -> None:
    """Apply :func:`gateway.output.table_votes.rule_remnants` to a cached page's cells, in place
    (idempotent: pages read with it in the code are unchanged); a changed cell's text is replaced
    in the page text too."""
    from gateway.output.table_votes import rule_remnants

    by: dict[int, dict[tuple[int, int], str]] = {}
    for tb, r, c, t in page["cells"]:
        by.setdefault(tb, {})[(r, c)] = t
    new = {tb: rule_remnants(cells) for tb, cells in by.items()}
    for tb, cells in by.items():
        for key, t in cells.items():
            if new[tb][key] != t:
                page["text"] = page["text"].replace(t, new[tb][key], 1)
    page["cells"] = [(tb, r, c, new[tb][(r, c)]) for tb, r, c, _ in page["cells"]]


class _C:
    def __init__(self, row: int, column: int, text: str) -> None:
        self.row, self.column, self.text = row, column, text


def _teds(page: dict, truth_html: str) -> float:
    """TEDS of the page's largest table (as ``bench/tables.py``), 0.0 without one."""
    by: dict[int, list[_C]] = {}
    for tb, r, c, t in page["cells"]:
        by.setdefault(tb, []).append(_C(r, c, t))
    if not by:
        return 0.0
    best = max(by.values(), key=len)
    return teds(cells_html(best, page["header_rows"]), truth_html)


def main(argv: list[str] | None = None) -> int:
    """Print every lost cell with its cause, then the counts by cause and per seed."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--pages", type=int, default=8)
    p.add_argument("--cache", type=pathlib.Path, default=None)
    p.add_argument("--remnants", action="store_true",
                   help="apply gateway.output.table_votes.rule_remnants to cached cells (pages read before it)")
    args = p.parse_args(argv)
    total: Counter[str] = Counter()
    for seed in args.seeds:
        n_cells = n_lost = n_mis = 0
        n_num = kept = 0
        score = 0.0
        for k, page in enumerate(read_pages(seed, args.pages, args.cache)):
            if args.remnants:
                _remnants(page)
            lost, mis = causes(page)
            truth = render_table_page(**page_spec(seed, k))
            n_num += len(truth.numbers)
            kept += numbers_kept(truth.numbers, page["text"])
            score += _teds(page, truth.html)
            n_cells += sum(len(r) for r in page["body"])
            n_lost += len(lost)
            n_mis += mis
            for r, c, t, cause, detail in lost:
                total[cause] += 1
                print(f"seed {seed} page {k} {page['rules']:10} {page['fill']:5} {page['lang']} r{r:2} c{c:2}"
                      f" {cause:10} {t!r} <- {detail[:120]}")
        print(f"seed {seed}: cell recall {100 * (n_cells - n_lost) / n_cells:.2f} %  lost {n_lost}  "
              f"misplaced {n_mis}  numbers kept {100 * kept / max(1, n_num):.2f} %  "
              f"TEDS {score / args.pages:.4f}", flush=True)
    print("causes:", dict(total.most_common()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
