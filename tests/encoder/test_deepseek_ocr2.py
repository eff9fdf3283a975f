"""Integration: the encoder service with the tiny random deepseek_ocr2 checkpoint (real family code)."""

from __future__ import annotations

import asyncio
import io

import numpy as np
import pytest
import torch
from PIL import Image
from safetensors import safe_open

from inkstream.pb import encoder_pb2
from inkstream.wire import from_wire
from tests.encoder.grpc_util import encode_all, requests, running_encoder

pytestmark = pytest.mark.integration

# Tensor-name prefixes of the language model in a DeepSeek-OCR-2 checkpoint (DeepSeek's own layout,
# as written by save_pretrained) and in transformers' module layout.
LM_PREFIXES = ("model.layers.", "model.embed_tokens.", "model.norm.", "lm_head.", "model.language_model.")


@pytest.fixture(scope="module")
def ds_half(tiny_ds_checkpoint):
    from models.registry import encoder_half_class, family_of

    assert family_of(tiny_ds_checkpoint) == "deepseek_ocr2"
    return encoder_half_class("deepseek_ocr2").load(tiny_ds_checkpoint, device="cpu", dtype=torch.float32)


def _page(seed: int, size=(200, 280)) -> bytes:
    rng = np.random.default_rng(seed)
    arr = np.full((size[1], size[0], 3), 255, np.uint8)
    for _ in range(12):  # dark "text lines" at random places
        y, x = rng.integers(0, size[1] - 6), rng.integers(0, size[0] // 2)
        arr[y:y + 4, x:x + rng.integers(20, size[0] // 2)] = rng.integers(0, 80)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    return buf.getvalue()


def test_encoder_half_loads_no_language_model_tensors(tiny_ds_checkpoint, ds_half):
    names: set[str] = set()
    for f in tiny_ds_checkpoint.glob("*.safetensors"):
        with safe_open(str(f), "pt") as sf:
            names |= set(sf.keys())
    lm = {n for n in names if n.startswith(LM_PREFIXES)}
    assert lm, "the checkpoint must hold language-model tensors for this test to mean anything"
    loaded = ds_half.loaded_tensor_names()
    assert loaded and loaded <= names
    assert not (loaded & lm), sorted(loaded & lm)[:5]
    # Everything vision-side was loaded (the tower is complete), nothing else.
    assert all(("sam_model" in n or "qwen2_model" in n or "projector" in n or "view_sep" in n or "vision" in n)
               for n in loaded)


async def test_tiny_deepseek_pages_batched_match_unbatched(ds_half):
    images = [_page(i) for i in range(4)]
    async with running_encoder(ds_half, wire_dtype="float32", max_batch_size=4, max_wait_ms=200) as (srv, stub, _):
        info = await stub.Info(encoder_pb2.InfoRequest())
        assert info.family == "deepseek_ocr2" and info.default_mode == "gundam"
        assert info.hidden_size == ds_half.hidden_size
        modes = {m.name: m for m in info.modes}
        assert set(modes) == {"gundam", "base", "small"}
        srv.batcher.stats.batch_sizes.clear()
        res = await asyncio.gather(*(encode_all(stub, requests([(i, img, "")])) for i, img in enumerate(images)))
        assert max(srv.batcher.stats.batch_sizes) > 1, list(srv.batcher.stats.batch_sizes)
    from encoder_service.images import decode_page

    for i, img in enumerate(images):
        resp = res[i][i]
        assert not resp.HasField("error"), resp.error
        assert resp.n_vision_tokens <= modes["gundam"].max_vision_tokens
        assert (resp.tile_cols, resp.tile_rows) != (0, 0)  # 200x280 px > one 96 px tile: crops used
        got = from_wire(resp.segments[0].vision_tokens, expect_last_dim=ds_half.hidden_size)
        page = ds_half.preprocess(decode_page(img, max_image_bytes=1 << 30, max_image_pixels=1 << 30), "gundam")
        want = ds_half.encode_batch([page])[0].segments[0].vision_tokens
        assert got.shape == want.shape == (resp.n_vision_tokens, ds_half.hidden_size)
        torch.testing.assert_close(got, want)


async def test_tiny_deepseek_modes_and_bad_page(ds_half):
    async with running_encoder(ds_half) as (_srv, stub, _):
        res = await encode_all(stub, requests([(0, _page(0), "base"), (1, _page(1), "small"),
                                               (2, b"%PDF-1.7", "base")]))
    assert res[0].n_vision_tokens == 257 and res[1].n_vision_tokens == 145  # 16x16+1, 12x12+1 (real-model counts)
    assert res[0].segments[0].vision_tokens.dtype == 3  # DTYPE_BFLOAT16 on the wire by default
    assert res[2].error.code == "INVALID_ARGUMENT" and "not a PNG or JPEG" in res[2].error.message
