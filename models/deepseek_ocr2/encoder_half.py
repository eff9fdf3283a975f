"""DeepSeek-OCR-2 encoder half: image processor + SAM/Qwen2 vision tower + projector -> vision tokens.

Built on transformers' ``DeepseekOcr2ImageProcessor`` and ``DeepseekOcr2VisionModel``. Per page the
vision tokens are exactly what ``DeepseekOcr2Model.get_image_features`` yields for that page and
what the full model scatters into the page's ``<image>`` placeholders:

    [local tile 0 queries, ..., local tile n-1 queries, global view queries, view_separator]

Each view gives 144 or 256 tokens for the real model (768 px tile / 1024 px global view), hidden
1,280 (the MoE decoder's width). Modes (``gundam`` with local crops, ``base`` and ``small``
without) and their sizes are described in :mod:`models.deepseek_ocr2.modes`.
"""

from __future__ import annotations

import pathlib

import torch
from PIL import Image
from torch import nn

from inkstream.errors import InternalError, InvalidInput
from models.base import EncodedPage, EncoderHalf, ModeSpec, PreparedPage, SegmentTokens
from models.deepseek_ocr2 import checkpoint as ckpt
from models.deepseek_ocr2 import modes as modes_mod

ATTN_IMPLEMENTATION = "sdpa"  # what from_pretrained picks on CPU/GPU; SAM cannot use flash attention


class _VisionStack(nn.Module):
    """The encoder-side submodules of ``DeepseekOcr2Model`` under their own attribute names."""

    def __init__(self, config) -> None:
        super().__init__()
        from transformers.models.deepseek_ocr2.modeling_deepseek_ocr2 import (  # heavy: transformers
            DeepseekOcr2VisionModel,
        )

        self.vision_tower = DeepseekOcr2VisionModel(config.vision_config)
        self.multi_modal_projector = nn.Linear(
            config.vision_config.encoder_config.hidden_size, config.text_config.hidden_size
        )
        self.view_separator = nn.Parameter(torch.empty(config.text_config.hidden_size))

    def project(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """Views [N, 3, S, S] -> projected query features [N, q, H] (q = 144 or 256)."""
        return self.multi_modal_projector(self.vision_tower(pixel_values).last_hidden_state)


class DeepseekOcr2EncoderHalf(EncoderHalf):
    """Encoder half of ``deepseek_ocr2``; see the module docstring for modes and token layout."""

    family = "deepseek_ocr2"

    def __init__(self, stack: _VisionStack, processor, loaded: set[str], checkpoint_dir: pathlib.Path,
                 device: torch.device, dtype: torch.dtype) -> None:
        self._stack = stack
        self._processor = processor
        self._image_processor = processor.image_processor
        self._loaded = loaded
        self.model_id, self.revision = ckpt.checkpoint_identity(checkpoint_dir)
        self.hidden_size = int(stack.view_separator.shape[0])
        self.device, self.dtype = device, dtype
        self._tile_px = int(self._image_processor.tile_size)
        self._px_per_token = int(processor.patch_size) * int(processor.downsample_ratio)
        self._modes = modes_mod.modes_from_processor(processor)
        self.default_mode = modes_mod.DEFAULT_MODE

    @classmethod
    def load(cls, checkpoint_dir: str | pathlib.Path, device: str = "cpu",
             dtype: torch.dtype | str = torch.float32, threads: int | None = None) -> DeepseekOcr2EncoderHalf:
        """Load the image processor and ONLY the vision-side tensors (SAM, Qwen2 vision encoder, queries,
        projector, view separator); ``dtype`` a torch dtype or its name; ``threads``: torch's intra-op
        threads of this process (None: unchanged). Raises InvalidInput for a directory that is not
        such a checkpoint or an unknown dtype name.
        """
        if threads is not None:
            torch.set_num_threads(threads)
        if isinstance(dtype, str):
            from inkstream.wire import dtype_from_name

            dtype = dtype_from_name(dtype)
        from transformers import (  # heavy: transformers
            AutoProcessor,
            DeepseekOcr2Config,
            DeepseekOcr2VisionConfig,
            PreTrainedConfig,
        )

        root = pathlib.Path(checkpoint_dir)
        state, loaded = ckpt.read_state_dict(root, ckpt.is_vision_name, dtype)
        config = DeepseekOcr2Config.from_pretrained(root)
        vision = config.vision_config
        assert isinstance(vision, DeepseekOcr2VisionConfig)  # sub-config dicts are built into configs on load
        for sub in (config, vision, vision.sam_config, vision.encoder_config):
            assert isinstance(sub, PreTrainedConfig)
            sub._attn_implementation = ATTN_IMPLEMENTATION
        stack = ckpt.materialize(lambda: _VisionStack(config), ckpt.strip_prefix(state, "model."), device)
        processor = AutoProcessor.from_pretrained(root)
        return cls(stack, processor, loaded, root, torch.device(device), dtype)

    def modes(self) -> list[ModeSpec]:
        """Gundam / base / small (see :mod:`models.deepseek_ocr2.modes`), sizes in pixels from the checkpoint."""
        return list(self._modes.values())

    def mode(self, name: str) -> ModeSpec:
        """ModeSpec by name; raises InvalidInput listing the known modes."""
        return modes_mod.get_mode(self._modes, name)

    def tile_grid(self, width: int, height: int, mode: str) -> tuple[int, int]:
        """(cols, rows) of local tiles the processor cuts for a ``width`` x ``height`` px page; (0, 0) = none."""
        from transformers.models.deepseek_ocr2.image_processing_deepseek_ocr2 import (  # heavy: transformers
            get_optimal_tiled_canvas,
        )

        spec = self.mode(mode)
        if not spec.crop or max(width, height) <= self._tile_px:
            return 0, 0
        ip = self._image_processor
        return get_optimal_tiled_canvas((height, width), (self._tile_px, self._tile_px),
                                        int(ip.min_patches), int(ip.max_patches))

    def preprocess(self, image: Image.Image, mode: str) -> PreparedPage:
        """PIL page -> global view ``pixel_values`` [1, 3, S, S] and, in crop mode for pages larger than a
        tile, ``pixel_values_local`` [n, 3, T, T] (float32, normalised to [-1, 1]). ``batch_key`` =
        (mode, cols, rows). Raises InvalidInput for an unknown mode or an unusable page (empty, or so
        elongated that the global view would be less than 1 px thick).
        """
        spec = self.mode(mode)
        width, height = image.size
        view_px = spec.base_size
        if min(width, height) < 1 or min(width, height) * view_px / max(width, height) < 1:
            raise InvalidInput(f"page of {width}x{height} px is empty or too elongated for a {view_px} px view")
        if image.mode != "RGB":
            image = image.convert("RGB")
        cols, rows = self.tile_grid(width, height, mode)
        kwargs = modes_mod.processor_kwargs(self._processor, mode)
        out = self._image_processor(images=[image], return_tensors="pt", **kwargs)
        tensors = {"pixel_values": out["pixel_values"]}
        if "pixel_values_local" in out:
            tensors["pixel_values_local"] = out["pixel_values_local"]
        n_local = int(out["num_local_patches"][0])
        if n_local != cols * rows:
            raise InternalError(f"image processor cut {n_local} tiles, expected a {cols}x{rows} grid")
        meta = {"mode": mode, "tile_cols": cols, "tile_rows": rows,
                "n_vision_tokens": modes_mod.view_tokens(view_px, self._px_per_token)
                + n_local * modes_mod.view_tokens(self._tile_px, self._px_per_token) + 1}
        return PreparedPage(batch_key=(mode, cols, rows), tensors=tensors, width=width, height=height, meta=meta)

    def encode_batch(self, pages: list[PreparedPage]) -> list[EncodedPage]:
        """One forward of the vision tower over all global views (and one over all local tiles) of
        pages sharing a ``batch_key``. Returns per page one segment: vision tokens [n_tokens, H]
        (``self.dtype``, CPU; created under ``inference_mode``, so read-only outside it) with box = whole
        page in pixels. Raises InvalidInput for mixed batch keys.
        """
        if not pages:
            return []
        if len({p.batch_key for p in pages}) != 1:
            raise InvalidInput(f"pages of one batch must share a batch_key, got {[p.batch_key for p in pages]}")
        with torch.inference_mode():
            dev = self.device
            global_px = torch.cat([torch.as_tensor(p.tensors["pixel_values"]) for p in pages]).to(dev, self.dtype)
            global_feats = self._stack.project(global_px)  # [B, q, H]
            local_feats = None
            if "pixel_values_local" in pages[0].tensors:
                local = [torch.as_tensor(p.tensors["pixel_values_local"]) for p in pages]
                local_px = torch.cat(local).to(dev, self.dtype)
                local_feats = self._stack.project(local_px)  # [B*n, q, H]
            sep = self._stack.view_separator.unsqueeze(0)
            results = []
            for i, page in enumerate(pages):
                parts = []
                if local_feats is not None:
                    n = page.tensors["pixel_values_local"].shape[0]
                    parts.append(local_feats[i * n:(i + 1) * n].reshape(-1, self.hidden_size))
                parts += [global_feats[i], sep]
                tokens = torch.cat(parts, dim=0).to("cpu", self.dtype)
                results.append(EncodedPage(
                    segments=[SegmentTokens(tokens, (0.0, 0.0, float(page.width), float(page.height)))],
                    width=page.width, height=page.height,
                    tile_rows=page.meta["tile_rows"], tile_cols=page.meta["tile_cols"]))
        return results

    def loaded_tensor_names(self) -> set[str]:
        """Checkpoint names of the vision tensors read at load time."""
        return set(self._loaded)
