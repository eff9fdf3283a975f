"""Latency of small requests alone and beside a long document (fair queues, inkstream.fair).

Usage: ``python bench/fairness.py [--model DIR] [--pages 100] [--small 10] [--probe-pages 70]
[--probes 5]`` (default model: the embedded compact checkpoint, models/compact/weights_zh).

One local stack (gateway + one encoder + one decoder, :class:`launcher.local_stack.LocalStack`).
The small requests are one-page PDFs (the eval set's scanned lines on a letter page,
:mod:`bench.pdfgen`; each gets a file of its own, so the result cache answers none of them) sent
through ``POST /v1/ocr``. Two cases:

*Ten together* (``--small`` requests sent at once):

1. alone: nothing else in flight; each request's latency (seconds, send to full answer);
2. beside: the same requests, sent while a ``--pages``-page PDF is being read by a request of its
   own (sent first; the small ones go once its first pages are in flight; not waited for).

*One at a time beside a long document* (``--probes`` requests, each sent when the previous one
answered, ``--gap-s`` apart):

1. alone: the probes with nothing else in flight, and a ``--probe-pages``-page PDF read alone
   (seconds, send to full answer);
2. beside: the PDF again (a file of its own) and, once its first pages are in flight, the probes.

Printed after each case: the latencies (median and max), then ``small_latency_ratio: X`` (ten
together: median beside / median alone, goal <= 2.0), or ``probe_latency_ratio: X`` (one at a time: median
beside / median alone, goal <= 2.0, moonshot 1.5) and ``long_document_slowdown: X`` (the long
PDF's time beside the probes / alone, goal <= 1.10). Every pair is measured in the same run, on the
same stack, so machine noise affects both sides alike.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pathlib
import statistics
import sys
import tempfile
import time

import httpx

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))  # run as a script from a checkout
os.environ.setdefault("OMP_NUM_THREADS", "1")

from bench.pdfgen import line_pages, make_pdf
from launcher.local_stack import LocalStack

REPO = pathlib.Path(__file__).resolve().parent.parent


async def _ocr(client: httpx.AsyncClient, url: str, pdf: bytes, name: str) -> float:
    """Seconds until the whole answer of one POST /v1/ocr came back; raises on a non-200 answer."""
    t0 = time.perf_counter()
    r = await client.post(f"{url}/v1/ocr", files={"file": (name, pdf, "application/pdf")},
                          data={"format": "json"}, timeout=3600)
    if r.status_code != 200:
        raise RuntimeError(f"POST /v1/ocr ({name}) answered {r.status_code}: {r.text[:300]}")
    return time.perf_counter() - t0


async def _small_batch(client: httpx.AsyncClient, url: str, pdfs: list[bytes]) -> list[float]:
    return list(await asyncio.gather(*(_ocr(client, url, p, f"small{i}.pdf") for i, p in enumerate(pdfs))))


async def _run(url: str, warm: bytes, small: list[bytes], small_beside: list[bytes], long_pdf: bytes,
               lead_s: float) -> tuple[list[float], list[float]]:
    async with httpx.AsyncClient() as client:
        await _ocr(client, url, warm, "warm-up.pdf")
        alone = await _small_batch(client, url, small)
        long_task = asyncio.ensure_future(_ocr(client, url, long_pdf, "long.pdf"))
        await asyncio.sleep(lead_s)  # its first pages are in the encoder and decoder
        beside = await _small_batch(client, url, small_beside)
        if long_task.done():
            print("warning: the long document finished before the small requests did; use more --pages")
        long_task.cancel()
        return alone, beside


async def _probes(client: httpx.AsyncClient, url: str, pdfs: list[bytes], gap_s: float, tag: str) -> list[float]:
    """Send ``pdfs`` one at a time, ``gap_s`` seconds between an answer and the next request."""
    out = []
    for i, p in enumerate(pdfs):
        if i:
            await asyncio.sleep(gap_s)
        out.append(await _ocr(client, url, p, f"probe-{tag}{i}.pdf"))
    return out


async def _run_probes(url: str, warm: bytes, probes_alone: list[bytes], probes_beside: list[bytes], long_alone: bytes,
                      long_beside: bytes, lead_s: float, gap_s: float) -> tuple[list[float], list[float], float, float]:
    """The one-at-a-time case: (probe latencies alone, beside, long PDF seconds alone, beside)."""
    async with httpx.AsyncClient() as client:
        await _ocr(client, url, warm, "warm-up.pdf")
        alone = await _probes(client, url, probes_alone, gap_s, "a")
        long_alone_s = await _ocr(client, url, long_alone, "long-alone.pdf")
        long_task = asyncio.ensure_future(_ocr(client, url, long_beside, "long-beside.pdf"))
        await asyncio.sleep(lead_s)
        beside = await _probes(client, url, probes_beside, gap_s, "b")
        if long_task.done():
            print("warning: the long document finished before the probes did; use more --probe-pages")
        long_beside_s = await long_task
        return alone, beside, long_alone_s, long_beside_s


def _describe(name: str, xs: list[float]) -> str:
    return f"{name}: median {statistics.median(xs):.2f} s, max {max(xs):.2f} s ({', '.join(f'{x:.1f}' for x in xs)})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=str(REPO / "models" / "compact" / "weights_zh"), help="checkpoint directory")
    ap.add_argument("--pages", type=int, default=100, help="pages of the long document (default 100)")
    ap.add_argument("--small", type=int, default=10, help="one-page requests per run (default 10)")
    ap.add_argument("--lead-s", type=float, default=8.0, help="seconds the long document runs before (default 8)")
    ap.add_argument("--probe-pages", type=int, default=70, help="pages of the document beside the probes (70)")
    ap.add_argument("--probes", type=int, default=5, help="one-page requests sent one at a time (default 5)")
    ap.add_argument("--gap-s", type=float, default=2.0, help="seconds between two probes (default 2)")
    ap.add_argument("--case", choices=("both", "together", "probes"), default="both", help="which case to run")
    ap.add_argument("--shared", default=str(REPO.parent / "shared"), help="folder with eval/lines")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-fair-") as scratch:
        tmp = pathlib.Path(scratch)
        pages = line_pages(args.shared)
        # Distinct files for warm-up, alone and beside (the result cache would answer a repeat at
        # once): the same page at slightly different resolutions, so the work per request is alike.
        def small_pdfs(run: int) -> list[bytes]:
            return [make_pdf([pages[i % len(pages)]], 1, tmp / f"s{run}-{i}.pdf", dpi=150.0 + run).read_bytes()
                    for i in range(args.small)]

        def probe_pdfs(run: int) -> list[bytes]:
            return [make_pdf([pages[i % len(pages)]], 1, tmp / f"p{run}-{i}.pdf", dpi=160.0 + run).read_bytes()
                    for i in range(args.probes)]

        warm, small, small_beside = small_pdfs(0)[0], small_pdfs(1), small_pdfs(2)
        long_pdf = make_pdf(pages, args.pages, tmp / "long.pdf").read_bytes()
        # Two files with the same pages (the result cache keys on the file's bytes): dpi differs.
        long_a = make_pdf(pages, args.probe_pages, tmp / "long-a.pdf", dpi=150.0).read_bytes()
        long_b = make_pdf(pages, args.probe_pages, tmp / "long-b.pdf", dpi=150.5).read_bytes()
        with LocalStack(pathlib.Path(args.model), gateway=True, startup_timeout_s=600) as stack:
            url = stack.gateway_url
            if args.case in ("both", "together"):  # each case's figures as soon as it is done
                alone, beside = asyncio.run(_run(url, warm, small, small_beside, long_pdf, args.lead_s))
                print(_describe(f"{args.small} small requests alone", alone))
                print(_describe(f"{args.small} small requests beside a {args.pages}-page document", beside))
                print(f"small_latency_ratio: {statistics.median(beside) / statistics.median(alone):.2f}", flush=True)
            if args.case in ("both", "probes"):
                p_alone, p_beside, l_alone, l_beside = asyncio.run(_run_probes(
                    url, warm, probe_pdfs(1), probe_pdfs(2), long_a, long_b, args.lead_s, args.gap_s))
                print(_describe(f"{args.probes} one-page requests one at a time, alone", p_alone))
                print(_describe(f"{args.probes} one-page requests one at a time, beside a "
                                f"{args.probe_pages}-page document", p_beside))
                print(f"{args.probe_pages}-page document: alone {l_alone:.1f} s, beside the probes {l_beside:.1f} s")
                print(f"probe_latency_ratio: {statistics.median(p_beside) / statistics.median(p_alone):.2f}")
                print(f"long_document_slowdown: {l_beside / l_alone:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
