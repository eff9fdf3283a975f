"""Tables: cell recall, numbers kept exactly and TEDS of the embedded model on generated table pages,
beside Tesseract's and RapidOCR's numbers kept on the same pages (issue 37).

Pages: ``bench/table_pages.py``, seeded; page ``k`` of a run cycles through the rule styles
(grid, vertical, horizontal, booktabs, none), the fills (column bands, zebra rows, both, none) and
the languages, with a seeded skew (0 on every other page, else within ±3 degrees) and scan noise on
about 40 % of them. 20-50 rows of narrow numeric columns each.

Ours: the compact model's halves in this process (greedy decoding), the page assembled by the
gateway's own code (:func:`gateway.output.stitch.page_result`: text, and the JSON ``table`` blocks
with their cells). Tesseract: the CLI (``eng``; ``chi_sim+eng`` on Chinese pages), one thread.
RapidOCR: the ``rapidocr`` package (PP-OCRv6, one thread). Metrics: :mod:`bench.table_metrics`.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python bench/tables.py [--pages 8] [--seed 0] [--no-others]``;
one line per page, the totals, and last the ratios
``numbers_kept_vs_tesseract: X  numbers_kept_vs_rapidocr: Y`` (ours / theirs, same pages).
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.table_metrics import (  # noqa: E402 - after sys.path
    cell_precision,
    cell_recall,
    cells_html,
    numbers_added,
    numbers_kept,
    teds,
)
from bench.table_pages import FILLS, RULES, TablePage, render_table_page  # noqa: E402


def page_spec(seed: int, k: int) -> dict:
    """Keyword arguments of :func:`bench.table_pages.render_table_page` for page ``k`` of a run."""
    return {"seed": seed * 1000 + k, "rules": RULES[k % len(RULES)], "fill": FILLS[(k // 2) % len(FILLS)],
            "lang": ("en", "zh")[(k // 3) % 2]}


class Ours:
    """The embedded model read in this process, pages assembled as the gateway assembles them."""

    def __init__(self) -> None:
        from evaluation.engines import default_model_dir
        from models.compact.decoder_half import CompactDecoderHalf
        from models.compact.encoder_half import CompactEncoderHalf

        d = default_model_dir()
        self.enc, self.dec = CompactEncoderHalf.load(d), CompactDecoderHalf.load(d)

    def read(self, page: TablePage):  # -> gateway.output.page.PageResult
        """The page's :class:`gateway.output.page.PageResult` (text, blocks, table cells, warnings)."""
        from gateway.output.stitch import page_result
        from gateway.types import PageOutcome, SegmentText
        from models.inprocess import segment_texts

        encoded = self.enc.encode_batch([self.enc.preprocess(page.image, "lines")])[0]
        segs = [SegmentText(index=i, text=text, box=s.box, join=s.join, generated_tokens=n, confidence=1.0)
                for i, ((text, n), s) in enumerate(zip(segment_texts(self.dec, encoded.segments), encoded.segments,
                                                       strict=True))]
        return page_result(PageOutcome(index=0, status="ok", segments=segs, width=page.image.width,
                                       height=page.image.height))


def _others() -> tuple[object | None, object | None, object | None]:
    """(Tesseract eng, Tesseract chi_sim+eng, RapidOCR) engines of :mod:`evaluation.engines`, None
    where one is not installed."""
    from evaluation.engines import RapidOCREngine, TesseractEngine

    try:
        tess, tess_zh = TesseractEngine("eng"), TesseractEngine("chi_sim+eng")
    except FileNotFoundError:
        tess = tess_zh = None
    try:
        rapid: object | None = RapidOCREngine()
    except ImportError:
        rapid = None
    return tess, tess_zh, rapid


def _share(kept: float, n: float, engine: object) -> str:
    """``kept`` of ``n`` numbers as a percentage, or ``not run`` when ``engine`` is None (``--no-others``)."""
    return "not run" if engine is None else f"{100 * kept / n:6.2f} %"


def main(argv: list[str] | None = None) -> int:
    """Read the pages, print per page and totals; last line the numbers-kept ratios."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pages", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-others", action="store_true", help="ours only (no Tesseract / RapidOCR)")
    args = p.parse_args(argv)
    ours = Ours()
    tess, tess_zh, rapid = (None, None, None) if args.no_others else _others()
    tot = dict.fromkeys(("numbers", "ours", "tess", "rapid", "cells", "cells_hit", "teds", "s_ours",
                                "added", "dup", "read", "c_hit", "c_extra", "c_n"), 0.0)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="inkstream_tables_"))
    for k in range(args.pages):
        spec = page_spec(args.seed, k)
        page = render_table_page(**spec)
        t0 = time.perf_counter()
        res = ours.read(page)
        tot["s_ours"] += time.perf_counter() - t0
        tables = [b for b in res.blocks if b.type == "table"]
        cells = [c for b in tables for c in b.cells]
        kept = numbers_kept(page.numbers, res.text)
        hit, n_cells = cell_recall([c for row in page.body for c in row], [c.text for c in cells])
        added, dup, read = numbers_added(page.lines, res.text)
        truth = [t for row in page.header for t, _, _ in row] + [c for row in page.body for c in row]
        c_hit, c_extra, c_n = cell_precision(truth, [c.text for c in cells])  # header cells are cells too
        best = max(tables, key=lambda b: len(b.cells), default=None)
        score = teds(cells_html(best.cells, len(page.header)), page.html) if best else 0.0
        path = tmp / f"table_{k}.png"
        page.image.save(path, dpi=(200, 200))
        t_kept = r_kept = 0
        engine = tess_zh if page.lang == "zh" else tess
        if engine is not None:
            t_kept = numbers_kept(page.numbers, engine.ocr(path)[0])  # type: ignore[attr-defined]
        if rapid is not None:
            r_kept = numbers_kept(page.numbers, rapid.ocr(path)[0])  # type: ignore[attr-defined]
        n = len(page.numbers)
        for key, v in (("numbers", n), ("ours", kept), ("tess", t_kept), ("rapid", r_kept), ("cells", n_cells),
                       ("cells_hit", hit), ("teds", score), ("added", added), ("dup", dup), ("read", read),
                       ("c_hit", c_hit), ("c_extra", c_extra), ("c_n", c_n)):
            tot[key] += v
        print(f"table_{k} seed {spec['seed']} {page.lang} {page.rules:10} {page.fill:5} rows {len(page.body):2}"
              f" cols {len(page.body[0]):2}: cell recall {100 * hit / n_cells:6.2f} %  numbers kept ours"
              f" {100 * kept / n:6.2f} %  tesseract {_share(t_kept, n, engine)}  rapidocr {_share(r_kept, n, rapid)}"
              f"  TEDS {score:.3f}  numbers added {added} (duplicated {dup})  cells with an extra token {c_extra}"
              f"  warnings {','.join(res.warnings) or '-'}", flush=True)
    n = max(1.0, tot["numbers"])
    print(f"pages {args.pages}, numbers {int(tot['numbers'])}, cells {int(tot['cells'])}, ours {tot['s_ours']:.1f} s")
    print(f"cell_recall: {100 * tot['cells_hit'] / max(1.0, tot['cells']):.2f} %")
    print(f"numbers_kept: ours {100 * tot['ours'] / n:.2f} %  tesseract {_share(tot['tess'], n, tess)}"
          f"  rapidocr {_share(tot['rapid'], n, rapid)}")
    print(f"teds: {tot['teds'] / max(1, args.pages):.4f}")
    print(f"numbers_added: {int(tot['added'])}  duplicated: {int(tot['dup'])}  number_precision:"
          f" {100 * (tot['read'] - tot['added']) / max(1.0, tot['read']):.2f} %")
    print(f"cell_precision: {100 * tot['c_hit'] / max(1.0, tot['c_n']):.2f} %  cells_with_an_extra_token:"
          f" {int(tot['c_extra'])}")
    if args.no_others:  # no ratio against engines that were not run
        print(f"numbers_kept_ours: {tot['ours'] / n:.4f}  (--no-others: Tesseract and RapidOCR not run)")
    else:
        print(f"numbers_kept_vs_tesseract: {tot['ours'] / max(1.0, tot['tess']):.3f}  "
              f"numbers_kept_vs_rapidocr: {tot['ours'] / max(1.0, tot['rapid']):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
