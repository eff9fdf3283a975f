"""Conformance of every registered model family to the half interfaces in :mod:`models.base`.

Each family in :data:`models.registry.FAMILIES` must have a checkpoint provider below (a family added
to the registry without one fails :func:`test_every_family_has_a_checkpoint`), and each must pass the
same checks: the registry finds it from ``config.json``; each half loads only its own tensors; the
encoder's modes, preprocessing and segments have the documented shapes, dtypes, boxes and joins; the
decoder embeds prompts of width H, steps with the documented shapes, keeps its KV cache and writes
text; a page goes through the in-process reference path; and the segments survive the wire format.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable

import numpy as np
import pytest
import torch
from PIL import Image, ImageDraw

from inkstream.segments import is_known_join
from inkstream.wire import from_wire, to_wire
from models.base import DecoderHalf, EncoderHalf, feature_columns, left_pad
from models.inprocess import greedy_segments, ocr_page
from models.registry import FAMILIES, decoder_half_class, encoder_half_class, family_of

REPO = pathlib.Path(__file__).resolve().parents[2]


def _tiny_deepseek_ocr2(tmp: pathlib.Path) -> pathlib.Path:
    from models.deepseek_ocr2.tiny import write_tiny_checkpoint

    return write_tiny_checkpoint(tmp / "deepseek_ocr2", seed=0)


def _compact(_tmp: pathlib.Path) -> pathlib.Path:
    from models.compact import default_checkpoint_dir

    return default_checkpoint_dir()  # the embedded default: the bilingual checkpoint


CHECKPOINTS: dict[str, Callable[[pathlib.Path], pathlib.Path]] = {
    "deepseek_ocr2": _tiny_deepseek_ocr2,
    "compact": _compact,
}


def _page() -> Image.Image:
    """A 640 x 400 px white page with two black text lines."""
    im = Image.new("RGB", (640, 400), "white")
    d = ImageDraw.Draw(im)
    d.text((40, 60), "Conformance of every family", fill="black", font_size=32)
    d.text((40, 160), "second line 12345", fill="black", font_size=32)
    return im


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def halves(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> tuple[str, pathlib.Path, EncoderHalf, DecoderHalf]:
    name = request.param
    if name not in CHECKPOINTS:
        pytest.fail(f"family {name!r} is registered but has no checkpoint provider in {__file__}")
    ckpt = CHECKPOINTS[name](tmp_path_factory.mktemp(f"conformance-{name}"))
    enc = encoder_half_class(name).load(ckpt)
    dec = decoder_half_class(name).load(ckpt)
    return name, ckpt, enc, dec


def test_every_family_has_a_checkpoint():
    assert set(FAMILIES) <= set(CHECKPOINTS), sorted(set(FAMILIES) - set(CHECKPOINTS))


def test_registry_and_attributes(halves):
    name, ckpt, enc, dec = halves
    assert family_of(ckpt) == name == enc.family == dec.family
    assert enc.hidden_size == dec.hidden_size > 0
    assert enc.model_id and dec.model_id and enc.revision == dec.revision
    assert dec.default_task in dec.tasks and dec.eos_token_ids and dec.vocab_size > 0
    assert dec.max_positions > 0 and dec.max_vision_tokens > 0


def test_each_half_loads_only_its_own_tensors(halves):
    _, _, enc, dec = halves
    enc_names, dec_names = enc.loaded_tensor_names(), dec.loaded_tensor_names()
    assert enc_names and dec_names
    assert not enc_names & dec_names, sorted(enc_names & dec_names)[:5]


def test_encoder_contract(halves):
    _, _, enc, _ = halves
    modes = enc.modes()
    assert modes and enc.default_mode in {m.name for m in modes}
    assert all(m.page_long_side_px >= 0 for m in modes)
    page = _page()
    prepared = enc.preprocess(page, enc.default_mode)
    assert (prepared.width, prepared.height) == page.size
    assert all(isinstance(t, torch.Tensor | np.ndarray) for t in prepared.tensors.values())  # a torch-free half
    [encoded] = enc.encode_batch([prepared])
    assert (encoded.width, encoded.height) == page.size and encoded.segments
    for seg in encoded.segments:
        assert seg.vision_tokens.ndim == 2 and seg.vision_tokens.shape[1] == enc.hidden_size
        assert seg.vision_tokens.shape[0] >= 1 and seg.vision_tokens.dtype == enc.dtype
        x0, y0, x1, y1 = seg.box
        assert 0 <= x0 < x1 <= page.width + 1 and 0 <= y0 < y1 <= page.height + 1
        assert is_known_join(seg.join)
    assert encoded.n_vision_tokens == sum(s.vision_tokens.shape[0] for s in encoded.segments)


def test_extra_token_columns_are_declared_alike_and_hold_what_they_say(halves):
    """Both halves declare the non-feature columns of a vision token (served in the encoder's Info),
    and the columns hold values of their declared unit."""
    name, _, enc, dec = halves
    assert enc.extra_columns == dec.extra_columns
    features = feature_columns(enc.hidden_size, enc.extra_columns)
    assert features > 0 and all(c.name and c.count > 0 and c.unit and c.description for c in enc.extra_columns)
    if name == "compact":  # the embedded checkpoint: 4 copy classes and the spacing head
        assert [(c.name, c.count) for c in enc.extra_columns] == [
            ("copy_class_id_high", 4), ("copy_class_id_low", 4), ("copy_class_probability", 4),
            ("spacing_probability", 2)]
    [encoded] = enc.encode_batch([enc.preprocess(_page(), enc.default_mode)])
    for seg in encoded.segments:
        tokens = torch.as_tensor(seg.vision_tokens).float().numpy()
        at = features
        for run in enc.extra_columns:
            block = tokens[:, at: at + run.count]
            if run.unit == "probability":
                assert ((block >= 0) & (block <= 1)).all(), run.name
            elif run.unit == "integer":
                assert (block >= 0).all() and np.array_equal(block, np.round(block)), run.name
            at += run.count
        assert at == enc.hidden_size


def test_unknown_mode_and_task_are_invalid_input(halves):
    from inkstream.errors import InvalidInput

    _, _, enc, dec = halves
    with pytest.raises(InvalidInput):
        enc.preprocess(_page(), "no-such-mode")
    with pytest.raises(InvalidInput):
        dec.embed_prompt(torch.zeros(4, dec.hidden_size, dtype=dec.dtype), "no-such-task")


def test_decoder_contract(halves):
    _, _, enc, dec = halves
    [encoded] = enc.encode_batch([enc.preprocess(_page(), enc.default_mode)])
    vt = encoded.segments[0].vision_tokens
    prompt = dec.embed_prompt(vt, dec.default_task)
    assert prompt.ndim == 2 and prompt.shape[1] == dec.hidden_size and prompt.shape[0] >= vt.shape[0]
    x, mask, pos = left_pad([prompt, prompt[-max(1, prompt.shape[0] // 2):]])
    cache = dec.new_cache()
    dec.check_step_inputs(x, mask, pos, cache)
    logits = dec.forward(x, mask, pos, cache)
    assert logits.shape == (2, dec.vocab_size) and logits.dtype == torch.float32
    assert cache.get_seq_length() == x.shape[1]
    nxt = logits.argmax(-1)
    step = dec.forward(dec.embed_tokens(nxt[:, None]), torch.cat([mask, torch.ones(2, 1, dtype=torch.long)], 1),
                       pos[:, -1:] + 1, cache)
    assert step.shape == (2, dec.vocab_size) and cache.get_seq_length() == x.shape[1] + 1
    assert isinstance(dec.decode_text([int(i) for i in nxt]), str)


def test_reference_path_and_wire(halves):
    _, _, enc, dec = halves
    result = ocr_page(enc, dec, _page(), max_new_tokens=8)
    assert isinstance(result.text, str) and len(result.lines) == len(result.boxes) >= 1
    assert result.n_vision_tokens > 0
    [encoded] = enc.encode_batch([enc.preprocess(_page(), enc.default_mode)])
    seg = encoded.segments[0]
    back = from_wire(to_wire(torch.as_tensor(seg.vision_tokens)), expect_last_dim=enc.hidden_size,
                     max_rows=dec.max_vision_tokens)
    assert back.shape == seg.vision_tokens.shape
    ids = greedy_segments(dec, [seg.vision_tokens, back], max_new_tokens=6)
    assert ids[0] == ids[1]  # the wire format does not change what the decoder reads


async def test_decode_engine_reports_confidence_for_every_family(halves):
    """The decoder service's confidence is computed from any family's logits: the geometric mean of
    the generated tokens' probabilities, as the one-sequence reference computes them."""
    import math

    from decoder_service.reference import generate_one
    from decoder_service.sampling import SamplingParams
    from decoder_service.scheduler import DecodeEngine

    _, _, enc, dec = halves
    [encoded] = enc.encode_batch([enc.preprocess(_page(), enc.default_mode)])
    params = SamplingParams(max_new_tokens=8, repetition_guard=False)
    engine = DecodeEngine(dec, max_running=4, kv_cache_budget_tokens=1 << 16)
    await engine.start()
    try:
        for seg in encoded.segments[:2]:
            ref = generate_one(dec, dec.embed_prompt(seg.vision_tokens, dec.default_task), params)
            last = None
            async for ev in await engine.submit(seg.vision_tokens, params):
                last = ev
            assert last is not None and last.usage is not None
            assert 0.0 < last.usage.confidence <= 1.0
            assert last.usage.confidence == pytest.approx(math.exp(sum(ref.logprobs) / len(ref.logprobs)), rel=1e-3)
    finally:
        await engine.stop()
