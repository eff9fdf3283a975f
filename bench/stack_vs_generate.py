"""Throughput of the pipelined stack vs the family's reference ``generate``, same checkpoint, same pages.

Usage: ``python bench/stack_vs_generate.py [--model DIR] [--pages N] [--max-new-tokens T]``
(default model: a tiny random deepseek_ocr2 checkpoint written to a temporary directory).

- Reference: the pages one after another through the family's slow, obviously-correct path in this
  process (for deepseek_ocr2: :func:`models.deepseek_ocr2.reference.reference_generate`, the full HF
  model + processor + greedy ``generate``; for other families, e.g. compact:
  :func:`models.inprocess.ocr_page`, the two halves with a simple greedy loop), after one
  untimed warm-up page.
- Stack: encoder + decoder as separate processes (:class:`launcher.local_stack.LocalStack`) driven by
  the gateway's :class:`gateway.routing.pipeline.Pipeline` in this process. Concurrency ``c`` = ``c`` clients
  in a closed loop, each sending single-page requests until the N pages are done; at c = 1 there is
  exactly one page in the system at a time, at c = 8 the encoder micro-batches and the decoder's
  continuous batching decodes up to 8 pages together.

Both sides decode greedily up to ``--max-new-tokens`` tokens per page (or EOS). The stack's
repetition guard is configured so it cannot fire before that bound (n-gram * repeats > bound), so
both sides do the same work; generated tokens per page are printed for both as a check. Every
process uses one torch thread (OMP_NUM_THREADS=1). Output: one line per measurement, then
``ratio@1: X`` and, last, ``ratio@8: X`` (stack pages/s / reference pages/s).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import pathlib
import sys
import tempfile
import time

from PIL import Image

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))  # run as a script from a checkout
os.environ.setdefault("OMP_NUM_THREADS", "1")

from bench.pdfgen import line_pages
from gateway.routing.pipeline import Pipeline, PipelineConfig
from gateway.types import PageInput, PipelineOptions
from launcher.local_stack import LocalStack
from models.registry import decoder_half_class, encoder_half_class, family_of

REPO = pathlib.Path(__file__).resolve().parent.parent


def reference_pages_per_s(model_dir: pathlib.Path, images: list[bytes], mode: str, task: str,
                          max_new: int) -> tuple[float, float]:
    """(pages/s, mean generated tokens per page; NaN when the path does not report tokens) of the
    family's reference path, one page at a time in this process."""
    import torch  # heavy: torch and the model code, for the in-process reference only

    torch.set_num_threads(1)
    family = family_of(model_dir)
    if family == "deepseek_ocr2":
        from models.deepseek_ocr2.reference import reference_generate

        def one(im: Image.Image) -> float:
            return float(len(reference_generate(model_dir, im, mode, task, max_new)))
    else:  # families without an HF generate: the in-process halves + greedy loop reference
        from models.inprocess import ocr_page

        enc = encoder_half_class(family).load(model_dir)
        dec = decoder_half_class(family).load(model_dir)

        def one(im: Image.Image) -> float:
            ocr_page(enc, dec, im, mode or None, max_new_tokens=max_new)
            return float("nan")

    pils = [Image.open(io.BytesIO(b)).convert("RGB") for b in images]
    one(pils[0])  # warm-up: load + first forward
    t0 = time.perf_counter()
    tokens = [one(im) for im in pils]
    dt = time.perf_counter() - t0
    return len(pils) / dt, sum(tokens) / len(tokens)


async def stack_pages_per_s(enc: list[str], dec: list[str], images: list[bytes], mode: str, task: str,
                            max_new: int, concurrency: int) -> tuple[float, float]:
    """(pages/s, mean generated tokens per page) with ``concurrency`` closed-loop clients."""
    p = await Pipeline.connect(enc, dec, PipelineConfig(max_pages_in_flight=max(64, concurrency)))
    try:
        await p.wait_ready(60)
        queue = list(enumerate(images))
        tokens: list[int] = []

        async def one(i: int, img: bytes, rid: str) -> None:
            async def src():
                yield PageInput(index=i, image=img)

            async for o in p.run(src(), PipelineOptions(mode=mode, task=task, max_new_tokens=max_new, request_id=rid)):
                if o.status != "ok":
                    raise RuntimeError(f"page {i + 1} failed: {o.error}")
                tokens.append(o.generated_tokens)

        await one(0, images[0], "warm-up")
        tokens.clear()

        async def client(c: int) -> None:
            while queue:
                i, img = queue.pop(0)
                await one(i, img, f"c{c}-p{i}")

        t0 = time.perf_counter()
        await asyncio.gather(*(client(c) for c in range(concurrency)))
        dt = time.perf_counter() - t0
        return len(images) / dt, sum(tokens) / len(tokens)
    finally:
        await p.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="checkpoint directory (default: tiny random deepseek_ocr2)")
    ap.add_argument("--pages", type=int, default=32, help="pages per measurement (default 32)")
    ap.add_argument("--max-new-tokens", type=int, default=64, help="tokens per page at most (default 64)")
    ap.add_argument("--mode", default="", help="encoder resolution mode (default: base for deepseek_ocr2, "
                    "else the encoder's default)")
    ap.add_argument("--task", default="", help="decoder task (default: ocr for deepseek_ocr2, else the decoder's)")
    ap.add_argument("--shared", default=str(REPO.parent / "shared"), help="folder with eval/lines")
    args = ap.parse_args(argv)

    scratch = tempfile.TemporaryDirectory(prefix="bench-svg-")
    model = pathlib.Path(args.model) if args.model else None
    if model is None:
        from models.deepseek_ocr2.tiny import write_tiny_checkpoint  # heavy: torch + transformers

        model = pathlib.Path(write_tiny_checkpoint(pathlib.Path(scratch.name) / "tiny", seed=0))
    if family_of(model) == "deepseek_ocr2":
        args.mode, args.task = args.mode or "base", args.task or "ocr"
    base = line_pages(args.shared)
    images = [base[i % len(base)] for i in range(args.pages)]
    ngram = args.max_new_tokens  # n-gram * 2 repeats > max_new_tokens: the loop guard cannot fire
    env = {"INKSTREAM_DECODER__REPETITION_NGRAM": str(ngram), "INKSTREAM_DECODER__REPETITION_REPEATS": "2",
           "INKSTREAM_DECODER__REPETITION_WINDOW": str(max(256, 2 * ngram)),
           "INKSTREAM_DECODER__MAX_RUNNING": "16"}

    ref, ref_tok = reference_pages_per_s(model, images, args.mode, args.task, args.max_new_tokens)
    print(f"reference generate: {ref:.3f} pages/s ({ref_tok:.1f} tokens/page, {args.pages} pages, "
          f"model {model})", flush=True)
    ratios = {}
    with LocalStack(model, gateway=False, env=env, startup_timeout_s=600) as stack:
        for c in (1, 8):
            pps, tok = asyncio.run(stack_pages_per_s(stack.encoder_addrs, stack.decoder_addrs, images, args.mode,
                                                     args.task, args.max_new_tokens, c))
            ratios[c] = pps / ref
            print(f"stack concurrency {c}: {pps:.3f} pages/s ({tok:.1f} tokens/page)", flush=True)
    scratch.cleanup()
    print(f"ratio@1: {ratios[1]:.2f}")
    print(f"ratio@8: {ratios[8]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
