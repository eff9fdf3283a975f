"""Kill tests: real encoder / decoder processes (LocalStack, tiny deepseek_ocr2 checkpoint); the
gateway's pipeline runs in the test process. A replica is killed with SIGKILL (kill -9) while it
holds pages of a 20-page document; the document must still complete with every page exactly once,
in order, and each page's text equal to what the stack produces for that page alone.
"""

from __future__ import annotations

import asyncio
import pathlib
import time

import pytest

from gateway.routing.config import PipelineConfig, RetryPolicy
from gateway.routing.pipeline import Pipeline
from gateway.types import PageInput, PipelineOptions
from launcher.local_stack import LocalStack, grpc_serving

pytestmark = [pytest.mark.slow, pytest.mark.system, pytest.mark.timeout(240)]

N_PAGES = 20
MAX_NEW_TOKENS = 16  # per segment: keeps random-weight pages short (they loop until the bound)


@pytest.fixture(scope="module")
def line_images(shared_dir: pathlib.Path) -> list[bytes]:
    """Small real pages: the eval set's scanned text lines stacked on letter-size pages (PNG bytes)."""
    from bench.pdfgen import line_pages

    return line_pages(shared_dir)


def encoded_total(stack: LocalStack, i: int) -> float:
    """``inkstream_encoder_pages_encoded_total`` of encoder replica ``i`` (includes its warm-up page)."""
    return sum(v for k, v in stack.metrics("encoder", i).items()
               if k.startswith("inkstream_encoder_pages_encoded_total"))


async def _pages(images: list[bytes], n: int):
    for i in range(n):
        yield PageInput(index=i, image=images[i % len(images)])


async def _collect(p: Pipeline, images: list[bytes], n: int, rid: str):
    opts = PipelineOptions(request_id=rid, max_new_tokens=MAX_NEW_TOKENS)
    return [o async for o in p.run(_pages(images, n), opts)]


async def _kill_when_busy(stack: LocalStack, p: Pipeline, service: str, idx: int, busy: int = 1) -> int:
    """SIGKILL replica ``idx`` of ``service`` as soon as it holds ``busy`` pages; returns the pages
    it held at that moment. The signal is sent synchronously, with
    no await between the check and the kill, so the pages counted are still in its hands (a page
    on a fast random-weight decoder otherwise finished during the hop to a thread, and nothing was
    left to retry)."""
    import os
    import signal

    rs = p.encoders if service == "encoder" else p.decoders
    addr = (stack.encoder_addrs if service == "encoder" else stack.decoder_addrs)[idx]
    while p.router.leases(rs.replicas[addr]) < busy:
        await asyncio.sleep(0.002)
    held = p.router.leases(rs.replicas[addr])
    os.kill(stack.procs[service][idx].pid, signal.SIGKILL)
    await asyncio.to_thread(stack.kill, service, idx)  # reap
    return held


async def _ready_and_alone(stack: LocalStack, p: Pipeline, images: list[bytes]) -> dict[int, str]:
    """Wait for every replica, then read each distinct page alone: the reference text per image,
    taken before anything is killed."""
    await p.encoders.wait_ready(60, count=len(stack.encoder_addrs))
    await p.decoders.wait_ready(60, count=len(stack.decoder_addrs))
    expected = {}
    for k, img in enumerate(images):
        (alone,) = await _collect(p, [img], 1, f"alone-{k}")
        assert alone.status == "ok", alone.error
        expected[k] = alone.text
    return expected


async def _kill_run(stack: LocalStack, images: list[bytes], service: str):
    cfg = PipelineConfig(max_pages_per_request=8, retry=RetryPolicy(replica_wait_s=30.0))
    p = await Pipeline.connect(stack.encoder_addrs, stack.decoder_addrs, cfg)
    try:
        expected = await _ready_and_alone(stack, p, images)
        calls_before = p.stats.encode.calls
        killer = asyncio.create_task(_kill_when_busy(stack, p, service, 0))
        outs = await asyncio.wait_for(_collect(p, images, N_PAGES, "doc"), 150)
        held = await killer
        return p, outs, expected, held, p.stats.encode.calls - calls_before
    finally:
        await p.close()


def _check_document(outs, expected, images):
    assert [o.index for o in outs] == list(range(N_PAGES))  # every page exactly once, in order
    for o in outs:
        assert o.status == "ok", (o.index, o.error)
        assert o.text == expected[o.index % len(images)], f"page {o.index + 1} differs from the page alone"


@pytest.fixture(scope="module")
def random_compact_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A RANDOM compact-family checkpoint (line-level: several segments per page), written with the
    family's own exporter. Its output head is scaled x50 like the tiny deepseek_ocr2 checkpoint's,
    so greedy choices do not depend on the batch a segment lands in (DESIGN.md, parity on random
    weights)."""
    import torch

    from models.compact.export.writer import export_checkpoint
    from models.compact.model import CompactOCR, EncoderConfig, decoder_config
    from models.compact.vocab import build_tokenizer

    torch.manual_seed(0)
    model = CompactOCR(EncoderConfig(), decoder_config(build_tokenizer().get_vocab_size()))
    with torch.no_grad():
        model.lm.lm_head.weight.mul_(50.0)
    return export_checkpoint(model, tmp_path_factory.mktemp("compact") / "random", revision="random")


@pytest.mark.parametrize("family", ["deepseek_ocr2", "compact"])
def test_kill_decoder_mid_document(family, request, line_images):
    ckpt = request.getfixturevalue("tiny_ds_checkpoint" if family == "deepseek_ocr2" else "random_compact_checkpoint")
    with LocalStack(ckpt, encoders=1, decoders=2, gateway=False, startup_timeout_s=150) as stack:
        before = encoded_total(stack, 0)
        p, outs, expected, held, encode_calls = asyncio.run(_kill_run(stack, line_images, "decoder"))
        assert held >= 1 and not stack.alive()["decoder"][0]
        _check_document(outs, expected, line_images)
        assert p.stats.decode.retries >= 1  # the killed decoder's pages were decoded elsewhere...
        # ...without re-running the encoder: it encoded each page once (gateway and encoder agree).
        assert encode_calls == N_PAGES
        assert encoded_total(stack, 0) - before == N_PAGES + len(line_images)


def test_kill_encoder_mid_document(tiny_ds_checkpoint, line_images):
    with LocalStack(tiny_ds_checkpoint, encoders=2, decoders=1, gateway=False, startup_timeout_s=150) as stack:
        before = encoded_total(stack, 1)
        p, outs, expected, held, encode_calls = asyncio.run(_kill_run(stack, line_images, "encoder"))
        assert held >= 1 and not stack.alive()["encoder"][0]
        _check_document(outs, expected, line_images)
        assert p.stats.encode.retries >= 1
        # The pages lost with the killed encoder were encoded again (on the survivor).
        assert encode_calls > N_PAGES
        assert encoded_total(stack, 1) - before >= 1
        # ``inkstream up`` starts a killed replica again on its ports: it comes back SERVING there.
        stack.restart("encoder", 0)
        deadline = time.monotonic() + 120
        while not grpc_serving(stack.encoder_addrs[0]) and time.monotonic() < deadline:
            assert stack.alive()["encoder"][0], stack.log_tail("encoder", 0)
            time.sleep(0.5)
        assert grpc_serving(stack.encoder_addrs[0])


async def _kill_both_and_ride_out(stack: LocalStack, images: list[bytes]):
    """Kill -9 decoder 0 once it holds a page, then encoder 0 once it holds one (after the decoder
    is back when it is the only one), while ``inkstream up``'s supervisor (:func:`launcher.up.watch`,
    in a thread) restarts each on its ports. Returns the outcomes, the pages-alone reference and the
    pages each killed replica held."""
    cfg = PipelineConfig(max_pages_per_request=4, retry=RetryPolicy(base_s=0.05, cap_s=0.5))
    p = await Pipeline.connect(stack.encoder_addrs, stack.decoder_addrs, cfg)
    try:
        expected = await _ready_and_alone(stack, p, images)

        async def killer() -> list[int]:
            held = [await _kill_when_busy(stack, p, "decoder", 0)]
            dec = p.decoders.replicas[stack.decoder_addrs[0]]
            # With one decoder, the encoder is killed once the decoder is back (the supervisor
            # restarted it and it reports SERVING); with two, at once (the other one carries on).
            while len(stack.decoder_addrs) == 1 and not (dec.healthy and dec.incarnation >= 2):
                await asyncio.sleep(0.05)
            held.append(await _kill_when_busy(stack, p, "encoder", 0))
            return held

        kill = asyncio.create_task(killer())
        outs = await asyncio.wait_for(_collect(p, images, N_PAGES, "doc"), 200)
        held = await asyncio.wait_for(kill, 5)
        return outs, expected, held
    finally:
        await p.close()


@pytest.mark.parametrize("replicas", [1, 2])
def test_kill_decoder_then_encoder_restarted_by_the_supervisor(replicas, tiny_ds_checkpoint, line_images):
    """One encoder and one decoder (and again two of each): kill -9 of the decoder mid-document,
    then of the encoder; the supervisor restarts each on its ports and the document still comes
    back whole: pages wait for a replica (up to their deadline) and the restarted address is a new
    incarnation, not one "already tried"."""
    import threading

    from launcher.up import watch

    with LocalStack(tiny_ds_checkpoint, encoders=replicas, decoders=replicas, gateway=False,
                    startup_timeout_s=150) as stack:
        stop = threading.Event()
        sup = threading.Thread(target=watch, args=(stack, stop.is_set), kwargs={"poll_s": 0.1, "backoff_s": 0.1},
                               daemon=True)
        sup.start()
        try:
            outs, expected, held = asyncio.run(_kill_both_and_ride_out(stack, line_images))
        finally:
            stop.set()
            sup.join(10)
        assert all(h >= 1 for h in held)
        _check_document(outs, expected, line_images)
