"""Peak memory of each service for a long document vs a one-page document.

Usage: ``python bench/memory.py [--model DIR] [--pages 200]`` (default model: a tiny random
deepseek_ocr2 checkpoint written to a temporary directory).

For each document size (1 page, then ``--pages`` pages) a FRESH local stack (gateway + encoder +
decoder processes, :class:`launcher.local_stack.LocalStack`) reads one PDF through ``POST /v1/ocr``
(the pages are the eval set's scanned lines on letter-size pages, :mod:`bench.pdfgen`); then the
peak resident set size of every process is read from ``VmHWM`` in ``/proc/<pid>/status``
(proc(5): "peak resident set size"). The gateway holds at most its in-flight window of pages
(images, then vision tokens), the encoder and decoder only what they are working on, so the peaks
should not grow with page count. Printed: each service's peak in MiB for both sizes and their
ratio, the whole stack's (sum of the services' peaks; ``stack_rss_ratio``, goal <= 1.15), pages
that failed (a page lost to the request deadline never reached the replicas, so the peaks would not
count it); last line ``rss_ratio: X`` = the largest ratio over the services (goal <= 1.15).
The decoder is capped at ``--max-new-tokens`` per page to keep the run short.
"""

from __future__ import annotations

import argparse
import collections
import os
import pathlib
import sys
import tempfile
import time

import httpx

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))  # run as a script from a checkout
os.environ.setdefault("OMP_NUM_THREADS", "1")

from bench.pdfgen import line_pages, make_pdf
from launcher.local_stack import LocalStack

REPO = pathlib.Path(__file__).resolve().parent.parent


def vm_hwm_bytes(pid: int) -> int:
    """Peak RSS of process ``pid`` in bytes (``VmHWM`` of /proc/<pid>/status, reported in kB)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmHWM for pid {pid}")


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) process ``pid`` has used so far, in seconds (fields 14 and 15 of
    /proc/<pid>/stat, in clock ticks; proc(5)).
    """
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()  # the command name may hold spaces
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_once(model: pathlib.Path, pdf: bytes, n_pages: int, max_new: int,
             extra_env: dict[str, str]) -> tuple[dict[str, int], float]:
    """Start a stack, OCR ``pdf``, return ({service: peak RSS bytes}, seconds of the request)."""
    # The gateway's synchronous deadline as long as the client's wait: a 200-page document on a loaded
    # machine is read whole, not refused at the encoder's warm-up rate (gateway.routing.deadline_fit)
    # nor cut at 600 s (pages lost to the deadline never reach the replicas: their peaks would not count).
    env = {"INKSTREAM_DECODER__MAX_NEW_TOKENS": str(max_new), "INKSTREAM_GATEWAY__REQUEST_TIMEOUT_S": "3600",
           **extra_env}
    with LocalStack(model, gateway=True, env=env, startup_timeout_s=600) as stack:
        t0 = time.perf_counter()
        r = httpx.post(f"{stack.gateway_url}/v1/ocr", files={"file": ("doc.pdf", pdf, "application/pdf")},
                       data={"format": "json"}, timeout=3600)
        dt = time.perf_counter() - t0
        if r.status_code != 200:
            raise RuntimeError(f"POST /v1/ocr answered {r.status_code}: {r.text[:500]}")
        doc = r.json()
        if len(doc["pages"]) != n_pages:
            raise RuntimeError(f"expected {n_pages} pages, got {len(doc['pages'])}")
        errors = collections.Counter(p["error"]["code"] for p in doc["pages"] if p.get("error"))
        if errors:  # such pages never reached the replicas: their peaks would not count them
            print(f"warning: {sum(errors.values())} of {n_pages} pages failed: {dict(errors)}", flush=True)
        peaks = {s: max(vm_hwm_bytes(p.pid) for p in procs) for s, procs in stack.procs.items() if procs}
    return peaks, dt


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="checkpoint directory (default: tiny random deepseek_ocr2)")
    ap.add_argument("--pages", type=int, default=200, help="pages of the long document (default 200)")
    ap.add_argument("--max-new-tokens", type=int, default=32, help="decoder cap per page (default 32)")
    ap.add_argument("--shared", default=str(REPO.parent / "shared"), help="folder with eval/lines")
    ap.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                    help="extra environment for the services, e.g. MALLOC_ARENA_MAX=2 (repeatable)")
    args = ap.parse_args(argv)
    extra_env = dict(e.split("=", 1) for e in args.env)

    scratch = tempfile.TemporaryDirectory(prefix="bench-mem-")
    tmp = pathlib.Path(scratch.name)
    model = pathlib.Path(args.model) if args.model else None
    if model is None:
        from models.deepseek_ocr2.tiny import write_tiny_checkpoint  # heavy: torch + transformers

        model = pathlib.Path(write_tiny_checkpoint(tmp / "tiny", seed=0))
    pages = line_pages(args.shared)
    results = {}
    for n in (1, args.pages):
        pdf = make_pdf(pages, n, tmp / f"doc{n}.pdf").read_bytes()
        peaks, dt = run_once(model, pdf, n, args.max_new_tokens, extra_env)
        results[n] = peaks
        print(f"{n} page(s), {len(pdf) / 2**20:.1f} MiB PDF, {dt:.1f} s: "
              + ", ".join(f"{s} {v / 2**20:.0f} MiB" for s, v in peaks.items()), flush=True)
    ratios = {s: results[args.pages][s] / results[1][s] for s in results[1]}
    for s, r in ratios.items():
        print(f"{s}: peak RSS {args.pages} pages / 1 page = {r:.3f}")
    stack = {n: sum(peaks.values()) for n, peaks in results.items()}
    print(f"whole stack: peak RSS {stack[1] / 2**20:.0f} -> {stack[args.pages] / 2**20:.0f} MiB, "
          f"stack_rss_ratio: {stack[args.pages] / stack[1]:.3f}")
    scratch.cleanup()
    print(f"rss_ratio: {max(ratios.values()):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
