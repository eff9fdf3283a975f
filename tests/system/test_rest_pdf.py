"""A 40-page PDF through ``POST /v1/ocr`` of a real gateway process (LocalStack, tiny
deepseek_ocr2 checkpoint): 40 pages in order, each equal to what the stack returns for that page
requested alone (``pages=N``)."""

from __future__ import annotations

import pathlib

import httpx
import pytest

from bench.pdfgen import line_pages, make_pdf
from launcher.local_stack import LocalStack

pytestmark = [pytest.mark.slow, pytest.mark.system, pytest.mark.timeout(300)]

N_PAGES = 40


def _ocr(client: httpx.Client, url: str, pdf: bytes, **fields: str) -> dict:
    r = client.post(f"{url}/v1/ocr", files={"file": ("doc.pdf", pdf, "application/pdf")},
                    data={"format": "json", **fields})
    assert r.status_code == 200, r.text[:2000]
    return r.json()


def test_40_page_pdf_in_order_and_equal_to_pages_alone(tiny_ds_checkpoint, shared_dir, tmp_path: pathlib.Path):
    pages = line_pages(shared_dir)
    pdf = make_pdf(pages, N_PAGES, tmp_path / "doc40.pdf").read_bytes()
    with LocalStack(tiny_ds_checkpoint, encoders=1, decoders=1, gateway=True, startup_timeout_s=150) as stack, \
            httpx.Client(timeout=240) as client:
        doc = _ocr(client, stack.gateway_url, pdf)
        got = doc["pages"]
        assert [p["index"] for p in got] == list(range(1, N_PAGES + 1))
        assert all(p["status"] == "ok" for p in got), [p["error"] for p in got if p["status"] != "ok"]
        assert doc["pages_ok"] == N_PAGES
        # Page i of the PDF shows pages[i % 4]; request one page of each kind alone.
        for k in range(len(pages)):
            (alone,) = _ocr(client, stack.gateway_url, pdf, pages=str(k + 1))["pages"]
            assert alone["index"] == k + 1 and alone["status"] == "ok"
            for p in got[k::len(pages)]:
                assert p["text"] == alone["text"], f"page {p['index']} differs from page {k + 1} alone"
                assert p["vision_tokens"] == alone["vision_tokens"]
