"""Profile one decoder decode step at 1 and 8 rows: where the time of a batched step goes.

Model: the one ``bench/decoder_batching.py`` builds (random ``deepseek_ocr2``, ``--hidden``,
``--layers``, 8 routed experts top-2 + 1 shared). For each row count the rows are prefilled, joined
into one :class:`~decoder_service.kv.BatchedKVCache` as the engine does, and decode steps are timed
in thread CPU seconds (``time.thread_time``: robust when other jobs share the cores), once with the
bench's prompts (``--vision-tokens`` + the markdown template) and once with a 1-token image, which
separates the KV-cache reads from the rest. With ``--ops`` it prints torch.profiler's top operators
of ``--steps`` steps per row count (self CPU time; wall clock, so noisy on a shared machine).

Usage: ``python bench/decoder_step_profile.py [--rows 1,8 --hidden 512 --layers 4 --ops]``.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile
import time

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from decoder_batching import build, prompts

from decoder_service.kv import BatchedKVCache
from decoder_service.prefill import prefill


def batch(half, embeds: list[torch.Tensor]) -> BatchedKVCache:
    """Prefill ``embeds`` one by one and join them into one left-padded batch (rows in order)."""
    kv = BatchedKVCache()
    for e in embeds:
        _, cache, mask = prefill(half, [e])
        kv.add(cache, mask)
    return kv


def step(half, kv: BatchedKVCache, last: torch.Tensor) -> torch.Tensor:
    """One decode step of every row (what ``RunningBatch._decode_step`` runs) -> next tokens [B, 1]."""
    mask, pos = kv.step_inputs()
    logits = half.forward(half.embed_tokens(last), mask, pos, kv.cache)
    kv.commit_step(mask)
    return logits.max(dim=-1).indices[:, None]


def timed_steps(half, kv: BatchedKVCache, n: int) -> float:
    """Median thread CPU milliseconds of ``n`` decode steps (after 3 warm-up steps)."""
    last = torch.zeros(kv.batch_size, 1, dtype=torch.long)
    for _ in range(3):
        last = step(half, kv, last)
    times = []
    for _ in range(n):
        c0 = time.thread_time()
        last = step(half, kv, last)
        times.append(time.thread_time() - c0)
    return sorted(times)[n // 2] * 1e3


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vision-tokens", type=int, default=257)
    ap.add_argument("--rows", default="1,8")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--ops", action="store_true", help="print torch.profiler's top operators")
    args = ap.parse_args(argv)
    args.device = "cpu"
    torch.set_num_threads(1)
    rows = [int(r) for r in args.rows.split(",")]
    with tempfile.TemporaryDirectory() as tmp, torch.inference_mode():
        half, _ = build(args, pathlib.Path(tmp))
        full_prompts = prompts(half, max(rows), args.vision_tokens)
        short_prompts = prompts(half, max(rows), 1)
        print(f"model: hidden {args.hidden}, {args.layers} layers, 8 experts top-2; one thread; "
              f"median thread CPU ms per decode step")
        heads = [f"prompt ~{p[0].shape[0]}" for p in (full_prompts, short_prompts)]
        print(f"{'rows':>4} | {heads[0]:>12} | {heads[1]:>11}")
        for n in rows:
            long_ms = timed_steps(half, batch(half, full_prompts[:n]), args.steps)
            short_ms = timed_steps(half, batch(half, short_prompts[:n]), args.steps)
            print(f"{n:>4} | {long_ms:12.2f} | {short_ms:11.2f}", flush=True)
        if args.ops:
            from torch.profiler import ProfilerActivity, profile

            for n in rows:
                kv = batch(half, full_prompts[:n])
                last = step(half, kv, torch.zeros(n, 1, dtype=torch.long))
                with profile(activities=[ProfilerActivity.CPU]) as prof:
                    for _ in range(args.steps):
                        last = step(half, kv, last)
                print(f"\nrows {n}, {args.steps} steps:")
                print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
