"""Latency of small requests alone and beside a long document (fair queues, inkstream.fair).

Usage: ``python bench/fairness.py [--model DIR] [--pages 100] [--small 10] [--probe-pages 70]
[--probes 5] [--rounds 3] [--case both|together|probes] [--spans]`` (default model: the embedded
compact checkpoint, models/compact/weights_zh).

One local stack (gateway + one encoder + one decoder, :class:`launcher.local_stack.LocalStack`).
The small requests are one-page PDFs (the eval set's scanned lines on a letter page,
:mod:`bench.pdfgen`; each gets a file of its own, so the result cache answers none of them) sent
through ``POST /v1/ocr``. Two cases:

*Ten together* (``--small`` requests sent at once): alone (nothing else in flight), and beside a
``--pages``-page PDF read by a request of its own (sent first; the small ones go once its first
pages are in flight, ``--lead-s``; it is cancelled when they are done).

*One at a time beside a long document* (``--probes`` requests, each sent ``--gap-s`` after the
previous one answered): alone, with nothing else in flight, and beside a ``--probe-pages``-page PDF
(sent first, the probes once its first pages are in flight); the PDF is also read alone.

Machine load: on a shared machine the speed of the stack changes from one minute to the next, so
each case runs ``--rounds`` rounds, each measuring both sides back to back, the order alternating
(even rounds alone first, odd rounds beside first: a drift of the load affects both sides alike
over two rounds). The figures are per round ratios; printed are each round's, then their median
and spread (min-max), and the load average seen. Lines to read:

- ``small_latency_ratio: X`` (ten together: median beside / median alone, goal <= 2.0);
- ``probe_latency_ratio: X`` (one at a time: median beside / median alone, goal <= 2.0,
  moonshot 1.5) and ``long_document_slowdown: X`` (the long PDF's time beside the probes / alone,
  goal <= 1.10).

``--spans``: the stack writes its traces to a jsonl file, and each probe's time is split by stage
(gateway window, encoder preparation / queue / forward, decode; :mod:`bench.fair_spans`), with the
long document's mean forward batch, so one sees where a probe still waits.
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
from dataclasses import dataclass, field

import httpx

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))  # run as a script from a checkout
os.environ.setdefault("OMP_NUM_THREADS", "1")

from bench.fair_spans import request_spans
from bench.pdfgen import line_pages, make_pdf
from launcher.local_stack import LocalStack

REPO = pathlib.Path(__file__).resolve().parent.parent
SETTLE_S = 3.0  # after a cancelled long document, for its pages in flight to leave the replicas


async def _ocr(client: httpx.AsyncClient, url: str, pdf: bytes, rid: str) -> float:
    """Seconds until the whole answer of one POST /v1/ocr (request id ``rid``) came back; raises on
    a non-200 answer.
    """
    t0 = time.perf_counter()
    r = await client.post(f"{url}/v1/ocr", files={"file": (f"{rid}.pdf", pdf, "application/pdf")},
                          data={"format": "json"}, headers={"x-request-id": rid}, timeout=3600)
    if r.status_code != 200:
        raise RuntimeError(f"POST /v1/ocr ({rid}) answered {r.status_code}: {r.text[:300]}")
    return time.perf_counter() - t0


async def _together(client: httpx.AsyncClient, url: str, pdfs: list[bytes], tag: str) -> list[float]:
    return list(await asyncio.gather(*(_ocr(client, url, p, f"{tag}-{i}") for i, p in enumerate(pdfs))))


async def _one_at_a_time(client: httpx.AsyncClient, url: str, pdfs: list[bytes], gap_s: float, tag: str) -> list[float]:
    """Send ``pdfs`` one at a time, ``gap_s`` seconds between an answer and the next request."""
    out = []
    for i, p in enumerate(pdfs):
        if i:
            await asyncio.sleep(gap_s)
        out.append(await _ocr(client, url, p, f"{tag}-{i}"))
    return out


@dataclass
class Round:
    """One round's measurements (seconds): small requests ``alone`` and ``beside`` the long
    document, the long document ``long_alone`` / ``long_beside`` (probe case only; 0.0 otherwise),
    and the 1-minute load averages seen at its phases.
    """

    alone: list[float] = field(default_factory=list)
    beside: list[float] = field(default_factory=list)
    long_alone: float = 0.0
    long_beside: float = 0.0
    load: list[float] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        """Median beside / median alone."""
        return statistics.median(self.beside) / statistics.median(self.alone)


class Files:
    """Distinct PDFs for every request of the bench (the result cache keys on a file's bytes, so a
    repeat would be answered at once): the same pages at slightly different resolutions, so the
    work per request is alike. ``pages``: page images (:func:`bench.pdfgen.line_pages`).
    """

    def __init__(self, pages: list[bytes], tmp: pathlib.Path):
        self.pages, self.tmp, self.n = pages, tmp, 0

    def pdf(self, n_pages: int, first: int = 0) -> bytes:
        """A fresh ``n_pages``-page PDF starting at page image ``first``."""
        self.n += 1
        imgs = self.pages[first % len(self.pages):] + self.pages[:first % len(self.pages)]
        return make_pdf(imgs, n_pages, self.tmp / f"f{self.n}.pdf", dpi=150.0 + 0.05 * self.n).read_bytes()

    def smalls(self, n: int) -> list[bytes]:
        """``n`` fresh one-page PDFs (page images 0, 1, ...)."""
        return [self.pdf(1, i) for i in range(n)]


async def _together_round(url: str, files: Files, r: int, n_small: int, n_long: int, lead_s: float) -> Round:
    """One round of the ten-together case (module docstring); beside first in odd rounds."""
    out = Round()
    async with httpx.AsyncClient() as client:
        async def alone() -> None:
            out.load.append(os.getloadavg()[0])
            out.alone = await _together(client, url, files.smalls(n_small), f"r{r}-alone")

        async def beside() -> None:
            out.load.append(os.getloadavg()[0])
            long_task = asyncio.ensure_future(_ocr(client, url, files.pdf(n_long), f"r{r}-long"))
            await asyncio.sleep(lead_s)  # its first pages are in the encoder and decoder
            out.beside = await _together(client, url, files.smalls(n_small), f"r{r}-beside")
            if long_task.done():
                print("warning: the long document finished before the small requests did; use more --pages")
            long_task.cancel()
            await asyncio.sleep(SETTLE_S)

        for phase in ((alone, beside) if r % 2 == 0 else (beside, alone)):
            await phase()
    return out


async def _probe_round(url: str, files: Files, r: int, n_probes: int, n_long: int, lead_s: float,
                       gap_s: float) -> Round:
    """One round of the one-at-a-time case (module docstring). Even rounds: long document alone,
    probes alone, then both together; odd rounds the reverse, so the probes alone always run
    next to the probes beside.
    """
    out = Round()
    async with httpx.AsyncClient() as client:
        async def long_alone() -> None:
            out.load.append(os.getloadavg()[0])
            out.long_alone = await _ocr(client, url, files.pdf(n_long), f"r{r}-long-alone")

        async def probes_alone() -> None:
            out.load.append(os.getloadavg()[0])
            out.alone = await _one_at_a_time(client, url, files.smalls(n_probes), gap_s, f"r{r}-probe-alone")

        async def beside() -> None:
            out.load.append(os.getloadavg()[0])
            long_task = asyncio.ensure_future(_ocr(client, url, files.pdf(n_long), f"r{r}-long-beside"))
            await asyncio.sleep(lead_s)
            out.beside = await _one_at_a_time(client, url, files.smalls(n_probes), gap_s, f"r{r}-probe-beside")
            if long_task.done():
                print("warning: the long document finished before the probes did; use more --probe-pages")
            out.long_beside = await long_task

        for phase in ((long_alone, probes_alone, beside) if r % 2 == 0 else (beside, probes_alone, long_alone)):
            await phase()
    return out


def _describe(name: str, xs: list[float]) -> str:
    return f"{name}: median {statistics.median(xs):.2f} s, max {max(xs):.2f} s ({', '.join(f'{x:.1f}' for x in xs)})"


def _summary(name: str, xs: list[float]) -> str:
    """``name: median`` then the spread and every round's figure."""
    return (f"{name}: {statistics.median(xs):.2f} (spread {min(xs):.2f}-{max(xs):.2f} over {len(xs)} rounds: "
            f"{', '.join(f'{x:.2f}' for x in xs)})")


def _print_spans(traces: pathlib.Path, rounds: int, n_probes: int) -> None:
    """Per probe and per long document, where the time went (:mod:`bench.fair_spans`)."""
    rids = {f"r{r}-probe-{side}-{i}" for r in range(rounds) for side in ("alone", "beside") for i in range(n_probes)}
    rids |= {f"r{r}-long-{side}" for r in range(rounds) for side in ("alone", "beside")}
    found = request_spans(traces, rids)
    for rid in sorted(found, key=lambda x: (x.split("-")[0], "long" in x, x)):
        print(f"  {rid}: {found[rid].describe()}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=str(REPO / "models" / "compact" / "weights_zh"), help="checkpoint directory")
    ap.add_argument("--pages", type=int, default=100, help="pages of the long document (default 100)")
    ap.add_argument("--small", type=int, default=10, help="one-page requests per run (default 10)")
    ap.add_argument("--lead-s", type=float, default=8.0, help="seconds the long document runs before (default 8)")
    ap.add_argument("--probe-pages", type=int, default=70, help="pages of the document beside the probes (70)")
    ap.add_argument("--probes", type=int, default=5, help="one-page requests sent one at a time (default 5)")
    ap.add_argument("--gap-s", type=float, default=2.0, help="seconds between two probes (default 2)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds per case, alone and beside in each (default 3)")
    ap.add_argument("--case", choices=("both", "together", "probes"), default="both", help="which case to run")
    ap.add_argument("--spans", action="store_true", help="split each probe's time by stage (from traces)")
    ap.add_argument("--shared", default=str(REPO.parent / "shared"), help="folder with eval/lines")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-fair-") as scratch:
        tmp = pathlib.Path(scratch)
        files = Files(line_pages(args.shared), tmp)
        traces = tmp / "spans.jsonl"
        env = {"INKSTREAM_TRACES_EXPORTER": "jsonl", "INKSTREAM_TRACES_FILE": str(traces)} if args.spans else {}
        # The long documents are read synchronously whatever the machine's load: a loaded 2-core machine
        # would otherwise refuse them at the encoder's warm-up rate (gateway.routing.deadline_fit).
        env["INKSTREAM_GATEWAY__REQUEST_TIMEOUT_S"] = "3600"
        with LocalStack(pathlib.Path(args.model), gateway=True, env=env, startup_timeout_s=600) as stack:
            url = stack.gateway_url

            async def warm_up() -> None:
                async with httpx.AsyncClient() as client:
                    await _ocr(client, url, files.pdf(1), "warm-up")

            asyncio.run(warm_up())
            print(f"load average at start: {os.getloadavg()[0]:.2f} (1 min) on {os.cpu_count()} cores", flush=True)
            if args.case in ("both", "together"):  # each case's figures as soon as it is done
                together = []
                for r in range(args.rounds):
                    rd = asyncio.run(_together_round(url, files, r, args.small, args.pages, args.lead_s))
                    together.append(rd)
                    print(_describe(f"round {r + 1}: {args.small} small requests alone", rd.alone))
                    print(_describe(f"round {r + 1}: {args.small} small requests beside a {args.pages}-page document",
                                    rd.beside))
                    print(f"round {r + 1}: ratio {rd.ratio:.2f}, load {', '.join(f'{x:.1f}' for x in rd.load)}",
                          flush=True)
                print(_summary("small_latency_ratio", [rd.ratio for rd in together]), flush=True)
            if args.case in ("both", "probes"):
                probes = []
                for r in range(args.rounds):
                    rd = asyncio.run(_probe_round(url, files, r, args.probes, args.probe_pages, args.lead_s,
                                                  args.gap_s))
                    probes.append(rd)
                    print(_describe(f"round {r + 1}: {args.probes} one-page requests one at a time, alone", rd.alone))
                    print(_describe(f"round {r + 1}: the same beside a {args.probe_pages}-page document", rd.beside))
                    print(f"round {r + 1}: probe ratio {rd.ratio:.2f}; {args.probe_pages}-page document alone "
                          f"{rd.long_alone:.1f} s, beside the probes {rd.long_beside:.1f} s "
                          f"(x{rd.long_beside / rd.long_alone:.2f}); load {', '.join(f'{x:.1f}' for x in rd.load)}",
                          flush=True)
                if args.spans:
                    _print_spans(traces, args.rounds, args.probes)
                print(_summary("probe_latency_ratio", [rd.ratio for rd in probes]))
                print(_summary("long_document_slowdown", [rd.long_beside / rd.long_alone for rd in probes]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
