"""Memory after long documents: what a service took for a document it gives back.

Three 100-page PDFs one after another through the full local stack (gateway + encoder + decoder
processes, tiny deepseek_ocr2 checkpoint, REST ``POST /v1/ocr``): every service's resident set
after the third is within 1.1x of its resident set after the first (memory does not climb with the
number of long documents served), and the gateway's is within 1.5x of what it was after a 1-page
warm-up request (what it took for a document returns). RSS = ``VmRSS`` of /proc/<pid>/status.
"""

from __future__ import annotations

import pathlib
import time

import httpx
import pytest

from bench.pdfgen import line_pages, make_pdf
from launcher.local_stack import LocalStack

pytestmark = [pytest.mark.slow, pytest.mark.system, pytest.mark.timeout(900)]

N_PAGES = 100
SETTLE_S = 3.0  # after an answer, before reading RSS: the gateway's idle trim runs within 1 s


def vm_rss_bytes(pid: int) -> int:
    """Resident set size of ``pid`` in bytes (``VmRSS``, reported in kB)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def _rss(stack: LocalStack) -> dict[str, int]:
    return {s: sum(vm_rss_bytes(p.pid) for p in procs) for s, procs in stack.procs.items() if procs}


def _ocr(stack: LocalStack, pdf: bytes, n: int) -> None:
    r = httpx.post(f"{stack.gateway_url}/v1/ocr", files={"file": ("doc.pdf", pdf, "application/pdf")},
                   data={"format": "json"}, timeout=600)
    assert r.status_code == 200, r.text[:300]
    pages = r.json()["pages"]
    assert len(pages) == n and all(p["status"] == "ok" for p in pages)


def test_rss_does_not_climb_with_long_documents(tiny_ds_checkpoint, shared_dir: pathlib.Path, tmp_path):
    images = line_pages(shared_dir)
    one = make_pdf(images, 1, tmp_path / "one.pdf").read_bytes()
    long_pdf = make_pdf(images, N_PAGES, tmp_path / "long.pdf").read_bytes()
    env = {"INKSTREAM_DECODER__MAX_NEW_TOKENS": "16"}
    with LocalStack(tiny_ds_checkpoint, gateway=True, env=env, log_dir=tmp_path / "logs",
                    startup_timeout_s=150) as stack:
        _ocr(stack, one, 1)
        time.sleep(SETTLE_S)
        start = _rss(stack)
        after = []
        for _ in range(3):
            _ocr(stack, long_pdf, N_PAGES)
            time.sleep(SETTLE_S)
            after.append(_rss(stack))
    mib = {k: [round(a[k] / 2**20) for a in [start, *after]] for k in start}
    for service in start:
        assert after[2][service] <= 1.1 * after[0][service], f"{service} RSS climbed (MiB: {mib})"
    assert after[2]["gateway"] <= 1.5 * start["gateway"], f"gateway kept a document's memory (MiB: {mib})"
