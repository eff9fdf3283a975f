"""Load test of the whole stack on loopback: concurrent OCR clients for a bounded time.

Usage::

    python bench/load.py                         # start a LocalStack (embedded model), 32 clients, 300 s
    python bench/load.py --duration 60 --clients 8 --out bench/results/load
    python bench/load.py --url http://127.0.0.1:8080 --pids gateway=123,encoder=456,decoder=789

Each client loops ``POST /v1/ocr`` (one document, default: a generated 2-line page PNG) until
``--duration`` seconds have passed; requests still running then get ``--request-timeout`` seconds.
Traffic goes only to loopback: ``--url`` must name 127.0.0.0/8, ::1 or localhost. A stack started
here runs with the gateway's result cache off (``--keep-cache`` keeps it), since every client sends
the same document; against ``--url`` turn the cache off in that gateway for model figures.

Reported (stdout and ``<out>/summary.json``): requests, responses by HTTP status and client-side
errors by exception type, latency p50/p95/p99 of successful requests (seconds, nearest-rank
percentiles), throughput (requests/s, pages/s), unexpected 5xx (every 5xx except 503 with a
Retry-After header, the documented "not ready / draining, retry" answer), and each process's
resident set size (RSS, MiB from ``/proc/<pid>/status`` every ``--sample-interval`` s) drawn over
time in ``<out>/rss.png`` (matplotlib). Exit code 1 when any unexpected 5xx or no success happened.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import ipaddress
import json
import math
import pathlib
import socket
import sys
import threading
import time
import urllib.parse
from collections import Counter
from dataclasses import dataclass, field

import httpx
from PIL import Image, ImageDraw, ImageFont

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # run as a script from a source checkout


@dataclass
class Outcome:
    """One request: wall-clock start (s since the run began), latency (s), HTTP status (0 = no
    response), error type name for client-side failures, pages in the answer."""

    start_s: float
    latency_s: float
    status: int
    error: str = ""
    pages: int = 0
    retry_after: bool = False


@dataclass
class RssSampler:
    """Samples ``VmRSS`` of named processes every ``interval_s`` seconds in a thread."""

    pids: dict[str, int]
    interval_s: float = 1.0
    samples: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # name -> [(t_s, MiB)]
    _stop: threading.Event = field(default_factory=threading.Event)

    @staticmethod
    def rss_mib(pid: int) -> float | None:
        """Resident set size of ``pid`` in MiB (``VmRSS`` in /proc/PID/status is in kB), None if gone."""
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 1024.0
        except OSError:
            return None
        return None

    def start(self, t0: float) -> None:
        def run() -> None:
            while not self._stop.is_set():
                now = time.monotonic() - t0
                for name, pid in self.pids.items():
                    v = self.rss_mib(pid)
                    if v is not None:
                        self.samples.setdefault(name, []).append((now, v))
                self._stop.wait(self.interval_s)

        threading.Thread(target=run, name="rss-sampler", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (``q`` in 0..100) of ``values``; None when empty."""
    if not values:
        return None
    s = sorted(values)
    return s[max(0, math.ceil(q / 100 * len(s)) - 1)]


def default_document() -> tuple[bytes, str, str]:
    """A white 1000 x 260 page with two printed lines, PNG bytes (name, media type)."""
    im = Image.new("RGB", (1000, 260), "white")
    draw = ImageDraw.Draw(im)
    try:
        font = ImageFont.truetype("DejaVuSans.ttf", 36)
    except OSError:
        font = ImageFont.load_default(size=36)
    draw.text((40, 50), "The quick brown fox jumps over", fill="black", font=font)
    draw.text((40, 140), "the lazy dog 12 times in 2026", fill="black", font=font)
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    return buf.getvalue(), "load.png", "image/png"


def ensure_loopback(url: str) -> None:
    """Raise SystemExit unless every address ``url``'s host resolves to is a loopback address."""
    host = urllib.parse.urlsplit(url).hostname or ""
    try:
        infos = socket.getaddrinfo(host, None)
    except socket.gaierror as exc:
        raise SystemExit(f"load.py: cannot resolve {host!r}: {exc}") from None
    addrs = {ipaddress.ip_address(i[4][0]) for i in infos}
    if not addrs or not all(a.is_loopback for a in addrs):
        raise SystemExit(f"load.py: {url} is not a loopback address; this benchmark only targets this machine")


async def client_loop(client, url: str, doc: tuple[bytes, str, str], t0: float, stop_at: float,
                      out: list[Outcome]) -> None:
    """POST the document repeatedly until ``stop_at`` (monotonic seconds)."""
    data, name, media = doc
    while time.monotonic() < stop_at:
        start = time.monotonic()
        try:
            r = await client.post(f"{url}/v1/ocr", files={"file": (name, data, media)}, data={"format": "json"})
            pages = 0
            if r.status_code == 200:
                try:
                    pages = len(r.json().get("pages", []))
                except ValueError:
                    pass
            out.append(Outcome(start - t0, time.monotonic() - start, r.status_code, pages=pages,
                               retry_after="retry-after" in r.headers))
            if r.status_code == 429:  # honour the server's back-off hint, bounded by the run's end
                wait = float(r.headers.get("retry-after", "1"))
                await asyncio.sleep(max(0.0, min(wait, stop_at - time.monotonic())))
        except httpx.HTTPError as exc:
            out.append(Outcome(start - t0, time.monotonic() - start, 0, error=type(exc).__name__))


async def run_load(url: str, clients: int, duration_s: float, request_timeout_s: float,
                   doc: tuple[bytes, str, str], t0: float) -> list[Outcome]:
    """``clients`` concurrent client loops for ``duration_s`` seconds; all outcomes."""
    out: list[Outcome] = []
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=request_timeout_s, limits=limits) as client:
        stop_at = time.monotonic() + duration_s
        await asyncio.gather(*(client_loop(client, url, doc, t0, stop_at, out) for _ in range(clients)))
    return out


def summarize(outcomes: list[Outcome], wall_s: float, rss: dict[str, list[tuple[float, float]]]) -> dict:
    """The figures described in the module docstring."""
    by_status = Counter(str(o.status) for o in outcomes if o.status)
    errors = Counter(o.error for o in outcomes if o.error)
    ok = [o for o in outcomes if o.status == 200]
    lat = [o.latency_s for o in ok]
    unexpected = [o for o in outcomes if o.status >= 500 and not (o.status == 503 and o.retry_after)]
    return {
        "requests": len(outcomes),
        "wall_s": round(wall_s, 2),
        "by_status": dict(sorted(by_status.items())),
        "client_errors": dict(errors),
        "unexpected_5xx": len(unexpected),
        "latency_s": {k: (round(v, 4) if v is not None else None) for k, v in
                      (("p50", percentile(lat, 50)), ("p95", percentile(lat, 95)), ("p99", percentile(lat, 99)),
                       ("max", max(lat) if lat else None))},
        "throughput": {"requests_per_s": round(len(ok) / wall_s, 3) if wall_s else 0.0,
                       "pages_per_s": round(sum(o.pages for o in ok) / wall_s, 3) if wall_s else 0.0},
        "rss_mib": {name: {"first": round(s[0][1], 1), "last": round(s[-1][1], 1),
                           "max": round(max(v for _, v in s), 1)}
                    for name, s in rss.items() if s},
    }


def plot_rss(rss: dict[str, list[tuple[float, float]]], outcomes: list[Outcome], path: pathlib.Path) -> None:
    """RSS (MiB) per process over time, and request latency over time, as a PNG."""
    import matplotlib  # heavy: matplotlib, only to draw the figure

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    for name, s in sorted(rss.items()):
        ax1.plot([t for t, _ in s], [v for _, v in s], label=name)
    ax1.set_ylabel("RSS (MiB)")
    ax1.set_title("Resident memory per process")
    ax1.legend(loc="upper left", fontsize="small")
    ax1.grid(alpha=0.3)
    ok = [o for o in outcomes if o.status == 200]
    bad = [o for o in outcomes if o.status != 200]
    ax2.scatter([o.start_s for o in ok], [o.latency_s for o in ok], s=6, label="200")
    if bad:
        ax2.scatter([o.start_s for o in bad], [o.latency_s for o in bad], s=10, marker="x", c="red",
                    label="errors")
    ax2.set_xlabel("time since start (s)")
    ax2.set_ylabel("request latency (s)")
    ax2.legend(loc="upper left", fontsize="small")
    ax2.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _parse_pids(text: str) -> dict[str, int]:
    out = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        name, _, pid = item.partition("=")
        if not pid.isdigit():
            raise SystemExit(f"load.py: --pids wants name=pid items, got {item!r}")
        out[name] = int(pid)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=300.0, help="seconds of load (default 300)")
    ap.add_argument("--clients", type=int, default=32, help="concurrent clients (default 32)")
    ap.add_argument("--url", help="an already running gateway on loopback (default: start a LocalStack)")
    ap.add_argument("--pids", default="", help="with --url: processes to sample, e.g. gateway=12,encoder=34")
    ap.add_argument("--model", help="checkpoint for the started stack (default: the embedded model)")
    ap.add_argument("--encoders", type=int, default=1)
    ap.add_argument("--decoders", type=int, default=1)
    ap.add_argument("--document", help="file to send (default: a generated 2-line page PNG)")
    ap.add_argument("--request-timeout", type=float, default=120.0, help="seconds per request")
    ap.add_argument("--sample-interval", type=float, default=1.0, help="seconds between RSS samples")
    ap.add_argument("--keep-cache", action="store_true",
                    help="keep the gateway's result cache on in the started stack "
                    "(default: off, every request is computed)")
    ap.add_argument("--log-dir", help="keep the started processes' logs here (default: a temporary directory)")
    ap.add_argument("--out", default="bench/results/load", help="directory for summary.json and rss.png")
    args = ap.parse_args(argv)
    if args.duration <= 0 or args.duration > 3600 or args.clients < 1 or args.clients > 1024:
        ap.error("--duration must be in (0, 3600] s and --clients in [1, 1024]")
    out_dir = pathlib.Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    if args.document:
        p = pathlib.Path(args.document)
        media = {".pdf": "application/pdf", ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
                 ".tif": "image/tiff", ".tiff": "image/tiff"}.get(p.suffix.lower(), "application/octet-stream")
        doc = (p.read_bytes(), p.name, media)
    else:
        doc = default_document()

    stack = None
    if args.url:
        ensure_loopback(args.url)
        url, pids = args.url.rstrip("/"), _parse_pids(args.pids)
    else:
        from launcher.local_stack import LocalStack  # lazy: only when this script starts the stack

        # The result cache would answer every repeat of the one document: measure the models instead.
        env = {} if args.keep_cache else {"INKSTREAM_GATEWAY__STORES__CACHE_ENABLED": "false"}
        stack = LocalStack(args.model, encoders=args.encoders, decoders=args.decoders, env=env,
                           log_dir=args.log_dir, startup_timeout_s=600)
        print("load.py: starting the local stack ...", file=sys.stderr, flush=True)
        stack.start()
        url = stack.gateway_url
        pids = {f"{s}-{i}" if len(ps) > 1 else s: p.pid for s, ps in stack.procs.items() for i, p in enumerate(ps)}
    try:
        t0 = time.monotonic()
        sampler = RssSampler(pids, args.sample_interval)
        sampler.start(t0)
        print(f"load.py: {args.clients} clients for {args.duration:.0f} s against {url}", file=sys.stderr, flush=True)
        outcomes = asyncio.run(run_load(url, args.clients, args.duration, args.request_timeout, doc, t0))
        wall = time.monotonic() - t0
        sampler.stop()
    finally:
        if stack is not None:
            stack.close()  # stop (drain) the processes and remove the scratch directory
    summary = summarize(outcomes, wall, sampler.samples)
    summary["config"] = {"duration_s": args.duration, "clients": args.clients, "document_bytes": len(doc[0]),
                         "encoders": args.encoders, "decoders": args.decoders,
                         "result_cache": "external stack" if args.url else ("on" if args.keep_cache else "off"),
                         "model": str(stack.model_dir) if stack is not None else "external stack"}
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    plot_rss(sampler.samples, outcomes, out_dir / "rss.png")
    print(json.dumps(summary, indent=2))
    print(f"load.py: wrote {out_dir / 'summary.json'} and {out_dir / 'rss.png'}", file=sys.stderr)
    ok = summary["by_status"].get("200", 0)
    return 1 if summary["unexpected_5xx"] or not ok else 0


if __name__ == "__main__":
    sys.exit(main())
