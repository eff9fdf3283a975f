"""Test doubles and helpers for the encoder service tests.

:class:`PatchHalf` is a real (small) vision encoder: a seeded patch-embedding convolution, GELU and a
linear projector, so its vision tokens depend on every pixel and batching changes the summation
shapes exactly as a real tower would. :class:`WideHalf` produces vision tokens of the real
DeepSeek-OCR-2 shape ([1,120, 1,280]) cheaply, for wire / message-limit tests.
"""

from __future__ import annotations

import io
import json
import pathlib
import threading
import time
from typing import Any

import numpy as np
import torch
from PIL import Image

from inkstream.errors import InvalidInput
from models.base import EncodedPage, EncoderHalf, ModeSpec, PreparedPage, SegmentTokens

# Side (pixels) of each test mode; the patch size is 8 px, so "small" = 4x4 = 16 vision tokens and
# "large" = 8x8 = 64 vision tokens.
MODE_SIDES = {"small": 32, "large": 64}
PATCH = 8
HIDDEN = 24


class _Tower(torch.nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.patch = torch.nn.Conv2d(3, 16, kernel_size=PATCH, stride=PATCH)
        self.proj = torch.nn.Linear(16, hidden)

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        """[B, 3, S, S] float32 -> [B, (S/8)^2, hidden]."""
        x = self.patch(pixels).flatten(2).transpose(1, 2)
        return self.proj(torch.nn.functional.gelu(x))


class FakeClock:
    """Monotonic seconds that move only when told (:meth:`advance`), for the batcher's ``clock``:
    measured times then do not depend on how loaded the machine running the tests is.
    Thread-safe (forwards and preprocessing advance it from worker threads).
    """

    def __init__(self) -> None:
        self._t = 0.0
        self._lock = threading.Lock()

    def __call__(self) -> float:
        return self._t

    def advance(self, seconds: float) -> None:
        """Move the clock ``seconds`` (>= 0) forward."""
        with self._lock:
            self._t += seconds


class PatchHalf(EncoderHalf):
    """A small real EncoderHalf. Knobs for tests:

    ``delay_s``: extra seconds per forward (simulated compute, so pages pile up behind it);
    ``clock``: a :class:`FakeClock` a forward advances by ``delay_s`` instead of sleeping;
    ``gate``: a threading.Event every forward waits on (tests hold a forward in flight);
    ``fail_on_black``: raise RuntimeError when a batch holds an all-black page.
    Records ``batches`` (list of (batch_key, n_pages)).
    """

    family = "test-patch"

    def __init__(self, seed: int = 0, hidden: int = HIDDEN):
        torch.manual_seed(seed)
        self.tower = _Tower(hidden).eval()
        self.model_id = "test/patch-tower"
        self.revision = f"seed{seed}"
        self.hidden_size = hidden
        self.device = torch.device("cpu")
        self.dtype = torch.float32
        self.default_mode = "small"
        self.delay_s = 0.0
        self.clock: FakeClock | None = None
        self.gate: threading.Event | None = None
        self.fail_on_black = False
        self.batches: list[tuple[Any, int]] = []
        self._lock = threading.Lock()

    @classmethod
    def load(cls, checkpoint_dir: str | pathlib.Path, device: str = "cpu",
             dtype: torch.dtype = torch.float32) -> PatchHalf:
        cfg_path = pathlib.Path(checkpoint_dir) / "config.json"
        if not cfg_path.is_file():
            raise InvalidInput(f"{checkpoint_dir}: no config.json")
        cfg = json.loads(cfg_path.read_text())
        return cls(seed=int(cfg.get("seed", 0)), hidden=int(cfg.get("hidden", HIDDEN)))

    def modes(self) -> list[ModeSpec]:
        return [
            ModeSpec(name, page_long_side_px=side * 4, base_size=side, max_vision_tokens=(side // PATCH) ** 2)
            for name, side in MODE_SIDES.items()
        ]

    def preprocess(self, image: Image.Image, mode: str) -> PreparedPage:
        if mode not in MODE_SIDES:
            raise InvalidInput(f"unknown mode {mode!r}; expected one of {sorted(MODE_SIDES)}")
        side = MODE_SIDES[mode]
        arr = np.asarray(image.convert("RGB").resize((side, side), Image.BILINEAR), dtype=np.float32) / 255.0
        pixels = (torch.from_numpy(arr).permute(2, 0, 1) - 0.5) / 0.5
        return PreparedPage(batch_key=("pixels", side), tensors={"pixels": pixels}, width=image.width,
                            height=image.height)

    @torch.no_grad()
    def encode_batch(self, pages: list[PreparedPage]) -> list[EncodedPage]:
        if self.gate is not None:
            assert self.gate.wait(30), "test gate never opened"
        if self.clock is not None:
            self.clock.advance(self.delay_s)
        elif self.delay_s:
            time.sleep(self.delay_s)
        keys = {p.batch_key for p in pages}
        assert len(keys) == 1, f"mixed batch keys in one batch: {keys}"
        with self._lock:
            self.batches.append((pages[0].batch_key, len(pages)))
        pixels = torch.stack([p.tensors["pixels"] for p in pages])
        if self.fail_on_black and bool((pixels.flatten(1) <= -1.0).all(dim=1).any()):
            raise RuntimeError("simulated kernel failure on an all-black page")
        tokens = self.tower(pixels)
        return [
            EncodedPage(
                segments=[SegmentTokens(tokens[i].clone(), (0.0, 0.0, float(p.width), float(p.height)))],
                width=p.width,
                height=p.height,
            )
            for i, p in enumerate(pages)
        ]

    def loaded_tensor_names(self) -> set[str]:
        return {f"vision.{k}" for k in self.tower.state_dict()}

    def reference(self, image_bytes: bytes, mode: str = "small") -> torch.Tensor:
        """Unbatched reference: vision tokens [n, H] of one page encoded alone (float32)."""
        from encoder_service.images import decode_page

        page = self.preprocess(decode_page(image_bytes, max_image_bytes=1 << 30, max_image_pixels=1 << 30), mode)
        saved_gate, saved_batches = self.gate, list(self.batches)
        self.gate = None
        try:
            return self.encode_batch([page])[0].segments[0].vision_tokens
        finally:
            self.gate, self.batches = saved_gate, saved_batches


class WideHalf(EncoderHalf):
    """Vision tokens of the real DeepSeek-OCR-2 page shape: [n_tokens=1120, hidden=1280] float32.

    tokens = position table [1120, 1280] + mean page colour [3] @ W [3, 1280] (seeded), so the
    values depend on the page and are not constant.
    """

    family = "test-wide"

    def __init__(self, n_tokens: int = 1120, hidden: int = 1280, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        self.table = torch.randn(n_tokens, hidden, generator=g)
        self.mix = torch.randn(3, hidden, generator=g)
        self.model_id, self.revision = "test/wide", "seed0"
        self.hidden_size, self.device, self.dtype = hidden, torch.device("cpu"), torch.float32
        self.default_mode = "page"

    @classmethod
    def load(cls, checkpoint_dir: str | pathlib.Path, device: str = "cpu",
             dtype: torch.dtype = torch.float32) -> WideHalf:
        return cls()

    def modes(self) -> list[ModeSpec]:
        return [ModeSpec("page", page_long_side_px=64, max_vision_tokens=int(self.table.shape[0]))]

    def preprocess(self, image: Image.Image, mode: str) -> PreparedPage:
        if mode != "page":
            raise InvalidInput(f"unknown mode {mode!r}; expected 'page'")
        mean = torch.from_numpy(np.asarray(image, dtype=np.float32).reshape(-1, 3).mean(0) / 255.0)
        return PreparedPage(batch_key="page", tensors={"mean": mean}, width=image.width, height=image.height)

    def encode_batch(self, pages: list[PreparedPage]) -> list[EncodedPage]:
        return [
            EncodedPage([SegmentTokens(self.table + p.tensors["mean"] @ self.mix, (0, 0, p.width, p.height))],
                        p.width, p.height)
            for p in pages
        ]

    def loaded_tensor_names(self) -> set[str]:
        return {"vision.table", "vision.mix"}


def page_png(seed: int, size: tuple[int, int] = (40, 56), mode: str = "RGB") -> bytes:
    """A random-noise page image (PNG bytes) of ``size`` (width, height) pixels."""
    rng = np.random.default_rng(seed)
    arr = rng.integers(0, 256, size=(size[1], size[0], 3), dtype=np.uint8)
    im = Image.fromarray(arr, "RGB")
    if mode != "RGB":
        im = im.convert(mode)
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    return buf.getvalue()


def solid_png(color: tuple[int, int, int], size: tuple[int, int] = (40, 56)) -> bytes:
    """A single-colour page (PNG bytes)."""
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, format="PNG")
    return buf.getvalue()

