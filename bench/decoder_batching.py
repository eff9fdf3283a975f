"""Decoder continuous-batching benchmark: tokens/s through the engine vs one-at-a-time ``generate``.

Model: a random ``deepseek_ocr2`` checkpoint written by ``models.deepseek_ocr2.tiny`` with a wider
and deeper MoE text model (``--hidden``, ``--layers``; 8 routed experts top-2 + 1 shared) so that per
step compute, not Python overhead, dominates. Prompts: ``--vision-tokens`` random vision tokens
(std 0.02, like the embeddings) + the ``markdown`` task template; greedy, repetition guard off,
``--max-new`` tokens each (fewer if a sequence emits EOS; both paths generate the same tokens).

Baseline: the full ``DeepseekOcr2ForConditionalGeneration.generate`` (Hugging Face, greedy, KV cache)
on the same prompt embeddings, one sequence at a time. For each concurrency C in (1, 4, 8, 16) the
baseline runs the same C prompts one after another and then C sequences are submitted at once to a
``DecodeEngine(max_running=C)``; tokens/s = generated tokens / wall seconds from first submit to
last finish (prefill included in both). The ``cpu`` columns divide by the process's CPU seconds
instead (robust when other jobs share the cores). Each level runs ``--repeats`` pairs (baseline,
then engine, back to back, so both sides of a pair see about the same machine load); the ratios
reported are the medians of the per-pair ratios, and the tokens/s columns the medians of each side
(on a shared machine a best-of-N ratio swung by +-0.3 from run to run; a pair's two halves share
the load, so their ratio varies much less).

Usage: ``python bench/decoder_batching.py [--hidden 512 --layers 4 --max-new 64 --device cpu]``.
The last line is ``ratio@8: X`` (engine tokens/s at 8 concurrent sequences / baseline tokens/s, wall
clock); the line before it, ``ratio_cpu@8: X``, is the same ratio by CPU seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import pathlib
import sys
import tempfile
import time
from statistics import median

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from decoder_service.sampling import SamplingParams
from decoder_service.scheduler import DecodeEngine
from models.deepseek_ocr2.decoder_half import DeepseekOcr2DecoderHalf
from models.deepseek_ocr2.tiny import write_tiny_checkpoint


def build(args: argparse.Namespace, root: pathlib.Path):
    from transformers import DeepseekOcr2ForConditionalGeneration  # heavy: transformers

    L = args.layers
    ck = write_tiny_checkpoint(root / "ckpt", seed=0, text_config=dict(
        hidden_size=args.hidden, intermediate_size=2 * args.hidden, num_hidden_layers=L,
        num_attention_heads=8, num_key_value_heads=8, n_routed_experts=8, num_experts_per_tok=2,
        n_shared_experts=1, moe_intermediate_size=args.hidden // 2, mlp_layer_types=["dense"] + ["sparse"] * (L - 1),
    ))
    half = DeepseekOcr2DecoderHalf.load(ck, device=args.device)
    full = DeepseekOcr2ForConditionalGeneration.from_pretrained(ck, dtype=torch.float32).to(args.device).eval()
    return half, full


def prompts(half, n: int, n_vision: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [half.embed_prompt(torch.randn(n_vision + 3 * i, half.hidden_size, generator=g) * 0.02, "markdown")
            for i in range(n)]


def baseline(full, half, embeds: list[torch.Tensor], max_new: int) -> tuple[float, float, list[list[int]]]:
    """HF generate, one sequence at a time -> (tokens/s wall, tokens per CPU second, ids per sequence)."""
    outs, t0, c0 = [], time.perf_counter(), time.process_time()
    with torch.inference_mode():
        for e in embeds:
            x = e.unsqueeze(0)
            mask = torch.ones(x.shape[:2], dtype=torch.long, device=x.device)
            out = full.generate(inputs_embeds=x, attention_mask=mask, do_sample=False, max_new_tokens=max_new,
                                eos_token_id=sorted(half.eos_token_ids), pad_token_id=sorted(half.eos_token_ids)[0])
            outs.append(out[0].tolist())
    dt, dc = time.perf_counter() - t0, time.process_time() - c0
    n = sum(map(len, outs))
    return n / dt, n / dc, outs


async def engine_run(half, embeds: list[torch.Tensor], max_new: int) -> tuple[float, float, list[list[int]]]:
    """All sequences at once through a DecodeEngine -> (tokens/s wall, tokens per CPU second, ids)."""
    eng = DecodeEngine(half, max_running=len(embeds), max_waiting=0, kv_cache_budget_tokens=10**7, name="bench")
    await eng.start()
    params = SamplingParams(max_new_tokens=max_new, repetition_guard=False)

    async def one(e):
        ids = []
        async for ev in eng.submit_embeds(e, params):
            ids += ev.token_ids
        return ids

    t0, c0 = time.perf_counter(), time.process_time()
    outs = await asyncio.gather(*[one(e) for e in embeds])
    dt, dc = time.perf_counter() - t0, time.process_time() - c0
    await eng.stop()
    n = sum(map(len, outs))
    return n / dt, n / dc, outs


def paired_run(full, half, embeds: list[torch.Tensor], max_new: int) -> tuple[float, float, float, float, bool]:
    """One baseline run then one engine run on ``embeds`` -> (wall ratio, CPU ratio, baseline tokens/s,
    engine tokens/s, whether both generated the same tokens). Ratios are engine / baseline.
    """
    bw, bc, b_ids = baseline(full, half, embeds, max_new)
    ew, ec, e_ids = asyncio.run(engine_run(half, embeds, max_new))
    return ew / bw, ec / bc, bw, ew, e_ids == b_ids


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vision-tokens", type=int, default=257)
    ap.add_argument("--max-new", type=int, default=64)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--concurrency", default="1,4,8,16")
    ap.add_argument("--repeats", type=int, default=4,
                    help="(baseline, engine) pairs per level; the median of the per-pair ratios is reported")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    levels = [int(c) for c in args.concurrency.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        half, full = build(args, pathlib.Path(tmp))
        embeds = prompts(half, max(levels), args.vision_tokens)
        asyncio.run(engine_run(half, embeds[:2], 4))  # warm-up
        baseline(full, half, embeds[:1], 4)
        print(f"model: deepseek_ocr2 random, text hidden {args.hidden}, {args.layers} layers, 8 experts top-2; "
              f"device {args.device}, torch threads {args.threads}; prompt ~{embeds[0].shape[0]} tokens, "
              f"max_new {args.max_new}")
        print(f"{'concurrent':>10} | {'HF generate tok/s':>17} | {'engine tok/s':>12} | {'ratio':>6} | "
              f"{'ratio (cpu)':>11} | {'cpu min-max':>11} | same tokens")
        ratios, cpu_ratios = {}, {}
        for c in levels:
            pairs = [paired_run(full, half, embeds[:c], args.max_new) for _ in range(args.repeats)]
            ratios[c], cpu_ratios[c] = median(p[0] for p in pairs), median(p[1] for p in pairs)
            b_wall, e_wall = median(p[2] for p in pairs), median(p[3] for p in pairs)
            lo, hi = min(p[1] for p in pairs), max(p[1] for p in pairs)
            print(f"{c:>10} | {b_wall:17.1f} | {e_wall:12.1f} | {ratios[c]:5.2f}x | {cpu_ratios[c]:10.2f}x | "
                  f"{lo:5.2f}-{hi:4.2f} | {all(p[4] for p in pairs)}", flush=True)
        if 8 in ratios:
            print(f"ratio_cpu@8: {cpu_ratios[8]:.2f}")  # the figure to trust when other jobs share the cores
            print(f"ratio@8: {ratios[8]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
