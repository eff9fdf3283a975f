"""Generated forms and invoices (``bench/doc_pages.py``, seeded) read in-process in their known reading
order: per page, CER no more than 1.5 points above the order-free error (issue 37, item 3: invoices
and forms were read at 25-35 % CER with 2-3 % order-free). Seed 306: its form pages are
``bench/doc_pages.py --seed 300`` pages 6 (two key-value panels in one table block, 29 % CER before
models/compact/page/band_panels.py) and 9 (a one-column form found as a table, 9 %). About 40 s: the
model is loaded once.
"""

from __future__ import annotations

import pytest

from bench.doc_pages import english_source, render
from bench.receipts import order_free_edits
from evaluation.score import score


@pytest.fixture(scope="module")
def engine():
    from evaluation.engines import InProcessEngine

    return InProcessEngine(None, threads=1)


def _read(engine, tmp_path, seed: int, index: int, zh_fonts) -> tuple[str, str, float, float]:
    """(text read, reference, CER, order-free CER) of page ``index`` of ``bench/doc_pages.py``'s ``seed``."""
    doc = render(index, seed, ["本报告期内公司经营情况良好，营业收入稳步增长。"], english_source(), zh_fonts)
    path = tmp_path / "doc.png"
    doc.image.save(path)
    text, _ = engine.ocr(path)
    ref = "\n".join(doc.lines)
    edits, n = order_free_edits(text, ref)
    return text, ref, score(text, ref).cer, edits / n


@pytest.mark.slow
@pytest.mark.parametrize("index", [0, 1, 3, 4])  # form-en, invoice-en, form-zh, invoice-zh
def test_forms_and_invoices_are_read_in_order(engine, tmp_path, index):
    from training.compact.render import find_zh_fonts

    _, zh_fonts = find_zh_fonts()
    if index >= 3 and not zh_fonts:
        pytest.skip("no held-out CJK fonts installed")
    text, ref, cer, order_free = _read(engine, tmp_path, 306, index, zh_fonts)
    assert cer <= order_free + 0.015, (cer, order_free, text)


@pytest.mark.slow
@pytest.mark.parametrize(("seed", "index"), [(400, 0), (700, 7), (400, 6)])
def test_unseen_forms_and_invoices_are_read_in_order(engine, tmp_path, seed, index):
    """Pages of seeds never tuned on (issue 37): seed 400 page 0, a form whose blocks run across its
    sections (36 % CER at 0.2 % order-free before models/compact/page/band_panels.py took a band's
    lines out of such blocks); seed 700 page 7, an invoice whose two bands of panels are 0.8 line
    heights apart (4-16 %); seed 400 page 6, a form whose labels and values were found as one line
    and read with a stray ``_`` in the tab gap (models/compact/line/split.py cuts there now)."""
    from training.compact.render import find_zh_fonts

    text, ref, cer, order_free = _read(engine, tmp_path, seed, index, find_zh_fonts()[1])
    assert cer <= order_free + 0.015, (cer, order_free, text)
    assert "_" not in text and "_" not in ref, text
