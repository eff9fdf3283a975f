"""Issue 37's page, read by the embedded model: a Chinese report table of 50 rows with colour column
bands (bench/table_pages.py, seed 0) where the detector ran stretches of numeric columns into one box
(36 % of the numbers lost before rows were split). Its numbers come back, and every output format --
text, markdown, the JSON blocks and the ``table`` block's cells, hOCR, the searchable PDF's text layer --
holds the same number cells as the page text (about 40 s)."""

from __future__ import annotations

import html
import json
import re
import subprocess
from collections import Counter

import pytest

from bench.table_metrics import numbers_kept
from bench.table_pages import render_table_page

NUMBER = re.compile(r"^[-(]?\d[\d,.]*%?\)?$")


def _numbers(text: str) -> Counter:
    return Counter(t for t in text.split() if NUMBER.match(t))


@pytest.fixture(scope="module")
def read():
    from bench.tables import Ours

    page = render_table_page(0, skew_deg=0.0, noise=False)
    return page, Ours().read(page)


def test_the_dense_report_table_keeps_its_numbers(read):
    page, res = read
    kept = numbers_kept(page.numbers, res.text) / len(page.numbers)
    assert kept >= 0.93, kept  # 0.637 when the tall boxes were read as single lines
    assert "unread_region" not in res.warnings


def test_every_output_format_holds_the_same_number_cells(read, tmp_path):
    from gateway.output.hocr import render_hocr
    from gateway.output.searchable_pdf import write_searchable_pdf
    from gateway.output.stitch import render_page
    from inkstream.page_result import PageResult

    page, res = read
    want = _numbers(res.text)
    assert sum(want.values()) >= 0.93 * len(page.numbers)
    assert _numbers(render_page(res, "text")) == want
    markdown = render_page(res, "markdown")
    assert _numbers(re.sub(r"<!--.*?-->", " ", markdown).replace("|", " ")) == want  # page comments aside
    d = json.loads(json.dumps(res.to_dict()))
    assert PageResult.from_dict(d).text == res.text
    tables = [b for b in d["blocks"] if b["type"] == "table"]
    assert tables, "no table block"
    in_cells = sum((_numbers(c["text"]) for b in tables for c in b["cells"]), Counter())
    in_lines = sum((_numbers(b["text"]) for b in d["blocks"] if b["type"] != "table"), Counter())
    assert in_lines == want and in_cells == sum((_numbers(b["text"]) for b in tables), Counter())
    assert sum(in_cells.values()) >= 0.9 * sum(want.values())  # the grid holds the table's numbers
    hocr = render_hocr([res], "compact")
    assert _numbers(html.unescape(re.sub(r"<[^>]+>", " ", hocr))) == want
    src = tmp_path / "page.png"
    page.image.save(src, dpi=(200, 200))
    out = tmp_path / "page.pdf"
    write_searchable_pdf([res], src, "png", out)
    layer = subprocess.run(["pdftotext", str(out), "-"], capture_output=True, text=True, check=True).stdout
    assert _numbers(layer) == want
