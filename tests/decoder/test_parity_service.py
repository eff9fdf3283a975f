"""Parity on the real family: deepseek_ocr2 encoder half (in-process) -> decoder SERVICE over gRPC
equals ``models.deepseek_ocr2.reference.reference_generate`` (the full HF model's ``generate``)
token for token, for one page and for 8 different pages sent concurrently, with local crops
("gundam" mode: global view + tiles) and without ("base" mode: global view only). float32 on CPU
and on the wire; the tiny checkpoint's output head is scaled so greedy choices are decisive.
"""

from __future__ import annotations

import asyncio

import grpc
import numpy as np
import pytest
import torch
from PIL import Image

from decoder_service.config import DecoderConfig
from decoder_service.server import build_server
from inkstream.lifecycle import client_options
from inkstream.pb import decoder_pb2, decoder_pb2_grpc
from inkstream.wire import to_wire

pytestmark = pytest.mark.integration

MAX_NEW = 24
TASK = "markdown"


def _page(i: int) -> Image.Image:
    """A distinct synthetic page: random noise, with sizes/aspects that give different tile grids."""
    rng = np.random.default_rng(1000 + i)
    w, h = [(200, 300), (320, 180), (150, 150), (400, 260), (96, 400), (260, 410), (128, 96), (500, 220)][i]
    arr = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    arr[: h // 3] = 255 - arr[: h // 3]  # some structure so pages differ beyond noise
    return Image.fromarray(arr)


@pytest.fixture(scope="module")
def halves(tiny_ds_checkpoint):
    from models.deepseek_ocr2.decoder_half import DeepseekOcr2DecoderHalf
    from models.deepseek_ocr2.encoder_half import DeepseekOcr2EncoderHalf

    torch.set_num_threads(1)
    return DeepseekOcr2EncoderHalf.load(tiny_ds_checkpoint), DeepseekOcr2DecoderHalf.load(tiny_ds_checkpoint)


@pytest.fixture(scope="module")
def cases(halves, tiny_ds_checkpoint):
    """{mode: [(vision tokens [n, H] float32, reference token ids)] for 8 pages}."""
    from models.deepseek_ocr2.reference import reference_generate

    enc, _ = halves
    out = {}
    for mode in ("base", "gundam"):
        rows = []
        for i in range(8):
            img = _page(i)
            page = enc.encode_batch([enc.preprocess(img, mode)])[0]
            assert len(page.segments) == 1
            ref = reference_generate(tiny_ds_checkpoint, img, mode, TASK, MAX_NEW)
            rows.append((page.segments[0].vision_tokens.float(), ref))
        out[mode] = rows
    return out


@pytest.fixture
async def stub(halves):
    _, dec = halves
    cfg = DecoderConfig(host="127.0.0.1", port=0, max_running=8, max_waiting=16, kv_cache_budget_tokens=16384,
                        max_new_tokens=MAX_NEW)
    b = await build_server(cfg, dec)
    ch = grpc.aio.insecure_channel(f"127.0.0.1:{b.port}", options=client_options())
    yield decoder_pb2_grpc.TextDecoderStub(ch)
    await ch.close()
    await b.stop(0)


def _req(seg: int, vt: torch.Tensor) -> decoder_pb2.DecodeRequest:
    return decoder_pb2.DecodeRequest(segment_id=seg, vision_tokens=to_wire(vt), task=TASK,
                                     sampling=decoder_pb2.SamplingParams(max_new_tokens=MAX_NEW,
                                                                         disable_repetition_guard=True))


async def _decode(stub, reqs: list[decoder_pb2.DecodeRequest]) -> dict[int, list[int]]:
    ids: dict[int, list[int]] = {}
    async for r in stub.Decode(iter(reqs)):
        assert not r.HasField("error"), r.error.message
        ids.setdefault(r.segment_id, []).extend(r.token_ids)
    return ids


def test_cases_are_distinct(cases):
    for mode, rows in cases.items():
        assert len({tuple(ref) for _, ref in rows}) == 8, mode
        assert all(len(ref) > 0 for _, ref in rows)
    # crops change the vision-token count per page
    assert len({vt.shape[0] for vt, _ in cases["gundam"]}) > 1


@pytest.mark.parametrize("mode", ["base", "gundam"])
async def test_one_page_matches_reference(stub, cases, mode):
    vt, ref = cases[mode][0]
    assert (await _decode(stub, [_req(0, vt)]))[0] == ref


@pytest.mark.parametrize("mode", ["base", "gundam"])
async def test_eight_pages_concurrently_match_reference(stub, cases, mode):
    rows = cases[mode]

    async def one(i: int) -> list[int]:
        await asyncio.sleep(0.005 * i)  # staggered: pages join a running batch
        return (await _decode(stub, [_req(i, rows[i][0])]))[i]

    got = await asyncio.gather(*[one(i) for i in range(8)])
    assert got == [ref for _, ref in rows]
    # the same 8 pages as 8 segments of one call
    both = await _decode(stub, [_req(i, vt) for i, (vt, _) in enumerate(rows)])
    assert [both[i] for i in range(8)] == [ref for _, ref in rows]
