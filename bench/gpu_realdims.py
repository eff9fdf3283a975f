"""DeepSeek-OCR-2 at its REAL dimensions (random bf16 weights) on one GPU: the builtin engine in-process
and through the gRPC services, against transformers' monolithic ``generate``, and the operator sizing.

Usage: ``python bench/gpu_realdims.py [--pages-per-day N] [--max-new-tokens T] [--budget-s S]``
(needs a CUDA GPU; only torch + transformers + this repository, no network), or
``python bench/gpu_realdims.py --tiny`` (the same phases on CPU with a tiny random checkpoint, < 60 s;
run by ``tests/system/test_gpu_realdims_bench.py``).

Phases, each within its share of ``--budget-s`` (default 400 s; with start-up and the watchdog's 50 s
margin the run ends within 8 minutes; a phase that does not fit is printed as skipped, never left hanging):

1. Write the checkpoint to a temporary directory on local disk (``make-tiny-checkpoint --real-dims``:
   3.39 B parameters, ~6.8 GB of bf16 created on the GPU; the output head's EOS rows are zeroed so
   greedy decoding runs to ``--max-new-tokens`` on every path and all paths do the same work).
2. Device copy bandwidth: a large tensor copied on the device (read + write bytes / s).
3. ``generate``: the full ``DeepseekOcr2ForConditionalGeneration`` + processor, one page at a time.
4. In-process: encoder half + decoder half on the device, pages encoded in a worker thread while the
   builtin continuous-batching engine (:class:`decoder_service.scheduler.DecodeEngine`) decodes;
   ``c`` = 1 / 8 / 32 pages in flight (closed loop).
5. gRPC: ``inkstream serve encoder`` + ``decoder`` on loopback (bf16 on the device), driven by the
   gateway's pipeline in this process, the same concurrencies; TPOT from the decoder's metrics.

Per measurement: pages/s, generated tokens per page, mean TPOT and the weight-read bound of one decode
step at that batch: (bytes of the parameters the step reads: attention, dense MLP, shared experts, the
head, plus the routed experts that ``c`` rows touch in expectation under uniform routing,
``E * (1 - (1 - k/E)^c)``, plus the KV cache) / measured copy bandwidth. The last lines: the ratio of
the best stack concurrency to ``generate`` and the sizing: pages per GPU-hour at the best concurrency
and the GPUs needed for ``--pages-per-day`` with 1.5x headroom. A final ``RESULT {json}`` line holds
every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import faulthandler
import io
import json
import math
import os
import pathlib
import random
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))  # run as a script from a checkout

HEADROOM = 1.5
# What the in-process engine and the services import beyond torch + transformers (pyproject dependencies).
SERVICE_MODULES = ("grpc", "grpc_health", "google.protobuf", "opentelemetry.sdk", "prometheus_client", "pydantic",
                   "yaml", "httpx", "safetensors", "tokenizers")


def missing_modules(names: tuple[str, ...] = SERVICE_MODULES) -> list[str]:
    """The modules of ``names`` that cannot be imported here."""
    import importlib.util

    out = []
    for name in names:
        try:
            found = importlib.util.find_spec(name) is not None
        except ImportError:  # a missing parent package
            found = False
        if not found:
            out.append(name)
    return out
MODE, TASK = "base", "ocr"  # one 1024 px global view: 257 vision tokens per page at real size


class Budget:
    """Wall-clock budget of the run: ``left()`` seconds remain; ``fits(s)`` says whether ``s`` more do."""

    def __init__(self, seconds: float):
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        """Seconds left (may be negative)."""
        return self.end - time.monotonic()

    def fits(self, seconds: float) -> bool:
        """True when ``seconds`` more still end within the budget."""
        return seconds < self.left()


def make_pages(n: int, size_px: int, seed: int = 0) -> list[bytes]:
    """``n`` synthetic PNG pages (``size_px`` tall, 0.77 x as wide) with random lines of text."""
    from PIL import Image, ImageDraw

    rng = random.Random(seed)
    words = "invoice total amount date page section table figure number account balance due".split()
    out = []
    for _ in range(n):
        im = Image.new("RGB", (int(size_px * 0.77), size_px), "white")
        d = ImageDraw.Draw(im)
        for y in range(size_px // 20, size_px - size_px // 20, max(12, size_px // 40)):
            d.text((size_px // 20, y), " ".join(rng.choice(words) for _ in range(8)), fill="black")
        buf = io.BytesIO()
        im.save(buf, format="PNG")
        out.append(buf.getvalue())
    return out


def copy_bandwidth(device: str, n_bytes: int) -> float:
    """Device memory bandwidth in bytes/s measured by copying an ``n_bytes`` tensor (read + write)."""
    import torch

    src = torch.empty(n_bytes, dtype=torch.uint8, device=device).fill_(1)
    dst = torch.empty_like(src)
    dst.copy_(src)
    _sync(device)
    reps = 10 if device.startswith("cuda") else 3
    t0 = time.perf_counter()
    for _ in range(reps):
        dst.copy_(src)
    _sync(device)
    return 2.0 * n_bytes * reps / (time.perf_counter() - t0)


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def step_bytes(counts: dict[str, int], text_config: Any, rows: int, context: int, dtype_bytes: int) -> float:
    """Bytes one decode step of ``rows`` sequences at ``context`` cached positions must read: the
    parameters every step reads, the routed experts ``rows`` tokens touch in expectation (uniform
    routing) and the KV cache (keys + values of every layer).
    """
    E, k = int(text_config.n_routed_experts), int(text_config.num_experts_per_tok)
    per_expert_share = counts["routed_experts"] / E
    fixed = counts["active_per_token"] - counts["routed_experts"] * k / E
    touched = E * (1.0 - (1.0 - k / E) ** rows)
    head_dim = int(getattr(text_config, "head_dim", 0) or text_config.hidden_size // text_config.num_attention_heads)
    kv = rows * context * int(text_config.num_hidden_layers) * 2 * int(text_config.num_key_value_heads) * head_dim
    return (fixed + per_expert_share * touched + kv) * dtype_bytes


def run_generate(ckpt: pathlib.Path, device: str, dtype: Any, images: list[bytes], max_new: int,
                 budget: Budget) -> dict[str, float] | None:
    """transformers' ``generate`` page by page (after one warm-up page): pages/s, tokens/page, TPOT s;
    None when no page fitted in ``budget``. The model is freed (device cache emptied) on return.
    """
    runs = _generate_pages(ckpt, device, dtype, images, max_new, budget)
    _free(device)
    if not runs:
        return None
    return {"pages_per_s": len(runs) / sum(r[1] for r in runs), "tokens_per_page": sum(r[0] for r in runs) / len(runs),
            "tpot_s": sum(r[2] for r in runs) / len(runs), "pages": len(runs)}


def _free(device: str) -> None:
    import gc

    import torch

    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


def _generate_pages(ckpt: pathlib.Path, device: str, dtype: Any, images: list[bytes], max_new: int,
                    budget: Budget) -> list[tuple[int, float, float]]:
    import torch
    from PIL import Image
    from transformers import AutoProcessor, DeepseekOcr2ForConditionalGeneration

    from models.deepseek_ocr2.modes import processor_kwargs

    model = DeepseekOcr2ForConditionalGeneration.from_pretrained(ckpt, dtype=dtype).to(device).eval()
    processor = AutoProcessor.from_pretrained(ckpt)
    kwargs = processor_kwargs(processor, MODE)

    def one(png: bytes) -> tuple[int, float, float]:
        """(tokens generated, seconds of the full generate, TPOT s) for one page."""
        inputs = processor(images=Image.open(io.BytesIO(png)).convert("RGB"), text="<image>\nFree OCR. ",
                           return_tensors="pt", **kwargs).to(device)
        for key in ("pixel_values", "pixel_values_local"):
            if key in inputs:
                inputs[key] = inputs[key].to(dtype)
        with torch.inference_mode():
            _sync(device)
            t0 = time.perf_counter()
            model.generate(**inputs, do_sample=False, max_new_tokens=1)
            _sync(device)
            t1 = time.perf_counter()
            out = model.generate(**inputs, do_sample=False, max_new_tokens=max_new, min_new_tokens=max_new)
            _sync(device)
            t2 = time.perf_counter()
        n = int(out.shape[1] - inputs["input_ids"].shape[1])
        # TPOT: the full run's time beyond a one-token run (encoder + prefill), per further token.
        return n, t2 - t1, ((t2 - t1) - (t1 - t0)) / max(1, n - 1)

    t0 = time.perf_counter()
    one(images[0])  # warm-up
    warm = time.perf_counter() - t0
    runs: list[tuple[int, float, float]] = []
    for png in images:
        if runs and not budget.fits(warm * 1.5):
            break
        runs.append(one(png))
    return runs


async def _inprocess_level(enc: Any, engine: Any, images: list[bytes], c: int, max_new: int) -> dict[str, float]:
    """``c`` closed-loop clients over ``images``: encode in a worker thread, decode in the engine."""
    from PIL import Image

    from decoder_service.sampling import SamplingParams

    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="bench-encode")
    loop = asyncio.get_running_loop()
    queue = list(images)
    tpots: list[float] = []
    tokens: list[int] = []

    def encode(png: bytes) -> Any:
        page = enc.preprocess(Image.open(io.BytesIO(png)), MODE)
        return enc.encode_batch([page])[0].segments[0].vision_tokens

    async def one(png: bytes) -> None:
        vt = await loop.run_in_executor(pool, encode, png)
        params = SamplingParams(max_new_tokens=max_new, repetition_guard=False)
        stream = await engine.submit(vt, params, task=TASK)
        async for ev in stream:
            if ev.usage is not None:
                tokens.append(ev.usage.generated_tokens)
                tpots.append(ev.usage.tpot_s)

    async def client() -> None:
        while queue:
            await one(queue.pop(0))

    t0 = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(c)))
    dt = time.perf_counter() - t0
    pool.shutdown()
    return {"pages_per_s": len(images) / dt, "tokens_per_page": sum(tokens) / len(tokens),
            "tpot_s": sum(tpots) / len(tpots), "pages": len(images)}


def run_inprocess(ckpt: pathlib.Path, device: str, dtype: Any, images: list[bytes], levels: list[int],
                  pages_at: dict[int, int], max_new: int, budget: Budget) -> dict[int, dict[str, float]]:
    """The two halves in this process with the builtin engine, per concurrency level (freed on return)."""
    results = _inprocess_levels(ckpt, device, dtype, images, levels, pages_at, max_new, budget)
    _free(device)
    return results


def _inprocess_levels(ckpt: pathlib.Path, device: str, dtype: Any, images: list[bytes], levels: list[int],
                      pages_at: dict[int, int], max_new: int, budget: Budget) -> dict[int, dict[str, float]]:
    from decoder_service.scheduler import DecodeEngine
    from models.deepseek_ocr2.decoder_half import DeepseekOcr2DecoderHalf
    from models.deepseek_ocr2.encoder_half import DeepseekOcr2EncoderHalf

    enc = DeepseekOcr2EncoderHalf.load(ckpt, device=device, dtype=dtype)
    dec = DeepseekOcr2DecoderHalf.load(ckpt, device=device, dtype=dtype)
    results: dict[int, dict[str, float]] = {}

    async def main() -> None:
        engine = DecodeEngine(dec, max_running=max(levels), max_waiting=max(levels),
                              kv_cache_budget_tokens=max(levels) * (dec.max_vision_tokens + max_new + 64))
        await engine.start()
        try:
            t0 = time.perf_counter()
            await _inprocess_level(enc, engine, images[:1], 1, max_new)  # warm-up
            per_page = time.perf_counter() - t0
            for c in levels:
                n = pages_at[c]
                if not budget.fits(per_page * n / max(1.0, min(c, 8) / 2) + 5):
                    print(f"in-process c={c}: skipped (budget)", flush=True)
                    continue
                results[c] = r = await _inprocess_level(enc, engine, images[:n], c, max_new)
                per_page = 1.0 / r["pages_per_s"]
        finally:
            await engine.stop()

    asyncio.run(main())
    return results


def _tpot_totals(metrics: dict[str, float]) -> tuple[float, float]:
    """(sum s, count) of the decoder's TPOT histogram in a /metrics scrape."""
    s = sum(v for k, v in metrics.items() if "tpot" in k and k.split("{")[0].endswith("_sum"))
    n = sum(v for k, v in metrics.items() if "tpot" in k and k.split("{")[0].endswith("_count"))
    return s, n


def run_grpc(ckpt: pathlib.Path, device: str, dtype_name: str, images: list[bytes], levels: list[int],
             pages_at: dict[int, int], max_new: int, budget: Budget) -> dict[int, dict[str, float]]:
    """Encoder + decoder services on loopback driven by the gateway pipeline, per concurrency level."""
    from bench.stack_vs_generate import stack_pages_per_s
    from launcher.local_stack import LocalStack

    env = {"INKSTREAM_DECODER__DEVICE": device, "INKSTREAM_DECODER__DTYPE": dtype_name,
           "INKSTREAM_ENCODER__DEVICE": device, "INKSTREAM_ENCODER__DTYPE": dtype_name,
           "INKSTREAM_DECODER__MAX_RUNNING": str(max(levels)), "INKSTREAM_DECODER__MAX_WAITING": str(max(levels)),
           # n-gram * 2 repeats > max_new: the loop guard cannot fire, every path does the same work
           "INKSTREAM_DECODER__REPETITION_NGRAM": str(max_new), "INKSTREAM_DECODER__REPETITION_REPEATS": "2",
           "INKSTREAM_DECODER__REPETITION_WINDOW": str(max(256, 2 * max_new))}
    results: dict[int, dict[str, float]] = {}
    with LocalStack(ckpt, gateway=False, env=env, startup_timeout_s=max(30.0, budget.left() - 20)) as stack:
        per_page = None
        for c in levels:
            n = pages_at[c]
            if per_page is not None and not budget.fits(per_page * n / max(1.0, min(c, 8) / 2) + 10):
                print(f"grpc c={c}: skipped (budget)", flush=True)
                continue
            before = _tpot_totals(stack.metrics("decoder"))
            pps, tok = asyncio.run(stack_pages_per_s(stack.encoder_addrs, stack.decoder_addrs, images[:n], MODE,
                                                     TASK, max_new, c))
            after = _tpot_totals(stack.metrics("decoder"))
            count = after[1] - before[1]
            tpot = (after[0] - before[0]) / count if count > 0 else float("nan")
            results[c] = {"pages_per_s": pps, "tokens_per_page": tok, "tpot_s": tpot, "pages": n}
            per_page = 1.0 / pps
    return results


def _line(name: str, r: dict[str, float], bound_s: float | None) -> str:
    text = (f"{name}: {r['pages_per_s']:.3f} pages/s, {r['tokens_per_page']:.1f} tokens/page, "
            f"TPOT {r['tpot_s'] * 1e3:.2f} ms")
    if bound_s:
        text += f" (weight-read bound {bound_s * 1e3:.3f} ms, {r['tpot_s'] / bound_s:.1f}x the bound)"
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tiny", action="store_true", help="tiny random checkpoint on CPU (quick check, < 60 s)")
    ap.add_argument("--device", default="", help="torch device (default: cuda, or cpu with --tiny)")
    ap.add_argument("--max-new-tokens", type=int, default=0, help="tokens per page (default 128, --tiny 8)")
    ap.add_argument("--concurrency", default="1,8,32", help="pages in flight, comma-separated (default 1,8,32)")
    ap.add_argument("--generate-pages", type=int, default=0, help="pages through generate (default 4, --tiny 2)")
    ap.add_argument("--pages-per-day", type=float, default=1_000_000, help="daily volume to size for (pages)")
    ap.add_argument("--budget-s", type=float, default=0, help="wall-clock budget (default 400, --tiny 120)")
    ap.add_argument("--keep", default="", help="write the checkpoint here instead of a temporary directory")
    args = ap.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1" if args.tiny else "8")
    import torch

    device = args.device or ("cpu" if args.tiny else "cuda")
    if device.startswith("cuda") and not torch.cuda.is_available():
        print("error: no CUDA GPU is visible to torch (torch.cuda.is_available() is False); this benchmark "
              "measures DeepSeek-OCR-2 at real size on a GPU. Run it where one is, or pass --tiny for the "
              "CPU check with a tiny checkpoint.", file=sys.stderr)
        return 2
    start = time.monotonic()
    budget = Budget(args.budget_s or (120.0 if args.tiny else 400.0))
    # Unattended runs must end: past the budget plus a margin, dump every thread's stack and exit.
    faulthandler.dump_traceback_later(budget.left() + 50.0, exit=True)
    max_new = args.max_new_tokens or (8 if args.tiny else 128)
    levels = [int(c) for c in args.concurrency.split(",") if c.strip()]
    pages_at = {c: max(c, 4) if c < 8 else c * (2 if c <= 8 else 1) for c in levels}
    if args.tiny:
        pages_at = {c: max(2, c) for c in levels}
    dtype_name = "float32" if args.tiny else "bfloat16"
    dtype = getattr(torch, dtype_name)
    dtype_bytes = torch.empty(0, dtype=dtype).element_size()
    gpu = torch.cuda.get_device_name(device) if device.startswith("cuda") else "cpu"

    from transformers.utils import logging as hf_logging

    from models.deepseek_ocr2 import tiny

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    scratch = tempfile.TemporaryDirectory(prefix="bench-realdims-")
    ckpt = pathlib.Path(args.keep or scratch.name) / ("tiny" if args.tiny else "deepseek-ocr2-realdims")
    t0 = time.perf_counter()
    tiny.write_tiny_checkpoint(ckpt, seed=0, real_dims=not args.tiny, device=device, no_eos=True)
    write_s = time.perf_counter() - t0
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(ckpt)
    counts = tiny.parameter_counts(config)
    size = sum(p.stat().st_size for p in ckpt.iterdir() if p.is_file())
    print(f"device: {gpu}; torch {torch.__version__}; checkpoint {'tiny' if args.tiny else 'real dims'}: "
          f"{counts['total']:,} parameters ({counts['vision']:,} vision, {counts['text']:,} text), "
          f"{counts['active_per_token']:,} active per token, {size / 1e6:,.1f} MB written in {write_s:.1f} s",
          flush=True)

    missing = missing_modules()
    bw = copy_bandwidth(device, (2 << 30) if device.startswith("cuda") else (64 << 20))
    print(f"copy bandwidth: {bw / 1e9:.1f} GB/s (read + write)", flush=True)
    page_px = 256 if args.tiny else 1100
    images = make_pages(max(pages_at.values()), page_px)
    context = (tiny.REAL_GLOBAL_SIZE_PX // tiny.REAL_PATCH_SIZE_PX // 4) ** 2 + 1 + 12 + max_new // 2
    tc = config.text_config

    def bound(rows: int) -> float:
        return step_bytes(counts, tc, rows, context, dtype_bytes) / bw

    figures: dict[str, Any] = {"device": gpu, "params_total": counts["total"],
                               "active_params_per_token": counts["active_per_token"], "copy_bandwidth_Bps": bw,
                               "max_new_tokens": max_new, "checkpoint_write_s": write_s}

    gen = run_generate(ckpt, device, dtype, images[:(args.generate_pages or (2 if args.tiny else 4))], max_new,
                       Budget(min(budget.left() * 0.25, 120.0)))
    if gen:
        print(_line("generate (transformers, one page at a time)", gen, bound(1)), flush=True)
        figures["generate"] = gen
    inproc: dict[int, dict[str, float]] = {}
    grpc: dict[int, dict[str, float]] = {}
    if missing:
        print(f"in-process and grpc: skipped: packages of this repository's services are not installed here "
              f"({', '.join(missing)}); install them (pip install -e . where there is a network, or carry their "
              f"wheels and pip install --no-index --find-links DIR)", flush=True)
    else:
        try:
            inproc = run_inprocess(ckpt, device, dtype, images, levels, pages_at, max_new,
                                   Budget(budget.left() * 0.45))
        except Exception as exc:  # noqa: BLE001 - reported; the other phases still measure
            print(f"in-process: failed ({type(exc).__name__}: {str(exc)[-2000:]})", flush=True)
        for c, r in inproc.items():
            print(_line(f"in-process c={c}", r, bound(c)), flush=True)
        try:
            grpc = run_grpc(ckpt, device, dtype_name, images, levels, pages_at, max_new, Budget(budget.left() - 5))
        except Exception as exc:  # noqa: BLE001 - e.g. a service not up in the budget: size from in-process figures
            print(f"grpc: failed ({type(exc).__name__}: {str(exc)[-2000:]})", flush=True)
    figures["inprocess"] = inproc
    for c, r in grpc.items():
        print(_line(f"grpc c={c}", r, bound(c) if math.isfinite(r["tpot_s"]) else None), flush=True)
    figures["grpc"] = grpc
    figures["bound_tpot_s"] = {c: bound(c) for c in levels}

    stack, path = (grpc, "grpc") if grpc else (inproc, "in-process")
    if not stack and gen:  # the services could not run here: size from generate alone, and say so
        stack, path = {1: gen}, "generate"
    if not stack:
        print("error: no measurement fitted in the budget", file=sys.stderr)
        return 1
    best_c = max(stack, key=lambda c: stack[c]["pages_per_s"])
    best = stack[best_c]["pages_per_s"]
    if gen and path != "generate":
        figures["ratio_vs_generate"] = best / gen["pages_per_s"]
        print(f"ratio {path} c={best_c} / generate: {best / gen['pages_per_s']:.2f}x pages/s", flush=True)
    per_hour = best * 3600.0
    gpus = max(1, math.ceil(args.pages_per_day * HEADROOM / (best * 86400.0)))
    figures.update(best_concurrency=best_c, best_path=path, pages_per_gpu_hour=per_hour,
                   pages_per_day=args.pages_per_day, gpus_needed=gpus, wall_s=time.monotonic() - start)
    print(f"sizing: {path} at {best_c} pages in flight: {best:.3f} pages/s = {per_hour:,.0f} pages per GPU-hour "
          f"({max_new} tokens/page); {args.pages_per_day:,.0f} pages/day with {HEADROOM}x headroom needs "
          f"{gpus} GPU(s) of this kind", flush=True)
    print(f"wall: {figures['wall_s']:.1f} s")
    print("RESULT " + json.dumps(figures, default=str), flush=True)
    scratch.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
