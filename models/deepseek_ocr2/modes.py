"""Resolution modes of DeepSeek-OCR-2 and how each maps onto transformers' ``DeepseekOcr2Processor``.

Names follow DeepSeek-OCR's resolution modes; sizes come from the checkpoint's processor config
(real DeepSeek-OCR-2 values in brackets: ``size`` = base_size [1024 px], ``tile_size`` =
image_size [768 px], 2..6 tiles, ``patch_size`` [16 px] x ``downsample_ratio`` [4] = 64 px per
vision token side). A view of V px gives ``ceil(V / 64)**2`` vision tokens
(``DeepseekOcr2Processor.replace_image_token``), and each page ends with one view-separator token.

* ``gundam`` (default; DeepSeek-OCR-2's crop_mode=True): global view at ``size`` plus 2..6 local
  tiles of ``tile_size`` when the page's long side exceeds one tile. Largest page:
  256 + 6 x 144 + 1 = 1,121 tokens. The gateway rasterises at 3 tiles [2,304 px] on the long side,
  so an A4 page (aspect 0.71 -> 2x3 grid) is cut without upscaling.
* ``base`` (crop_mode=False): one global view at ``size`` [1024 px]: 257 tokens.
* ``small``: one global view at ``tile_size`` [768 px]: 145 tokens.
"""

from __future__ import annotations

import math

from inkstream.errors import InvalidInput
from models.base import ModeSpec

CROP_MODE_PAGE_TILES = 3
DEFAULT_MODE = "gundam"


def view_tokens(view_px: int, px_per_token: int) -> int:
    """Vision tokens of one square view of ``view_px`` pixels (``ceil(view_px / px_per_token)**2``)."""
    return math.ceil(view_px / px_per_token) ** 2


def build_modes(global_px: int, tile_px: int, px_per_token: int, max_tiles: int) -> dict[str, ModeSpec]:
    """The three modes (see module docstring) for the given processor geometry, by name."""
    g, t = view_tokens(global_px, px_per_token), view_tokens(tile_px, px_per_token)
    return {
        "gundam": ModeSpec("gundam", CROP_MODE_PAGE_TILES * tile_px, base_size=global_px, image_size=tile_px,
                           crop=True, max_vision_tokens=g + max_tiles * t + 1),
        "base": ModeSpec("base", global_px, base_size=global_px, image_size=global_px, crop=False,
                         max_vision_tokens=g + 1),
        "small": ModeSpec("small", tile_px, base_size=tile_px, image_size=tile_px, crop=False,
                          max_vision_tokens=t + 1),
    }


def modes_from_processor(processor) -> dict[str, ModeSpec]:
    """:func:`build_modes` with the geometry of a loaded ``DeepseekOcr2Processor``."""
    ip = processor.image_processor
    return build_modes(int(ip.size.height), int(ip.tile_size),
                       int(processor.patch_size) * int(processor.downsample_ratio), int(ip.max_patches))


def get_mode(modes: dict[str, ModeSpec], name: str) -> ModeSpec:
    """Mode by name; raises InvalidInput listing the known modes."""
    try:
        return modes[name]
    except KeyError:
        raise InvalidInput(f"unknown mode {name!r}; known modes: {', '.join(modes)}") from None


def processor_kwargs(processor, mode: str) -> dict:
    """Keyword arguments for ``DeepseekOcr2Processor.__call__`` / its image processor selecting ``mode``.

    Without crops the image processor resizes the global view to ``tile_size`` while
    ``replace_image_token`` counts placeholders from ``size``; both are set to the view size so the
    two agree (with defaults they disagree: 145 features vs 257 placeholders, and the model raises).
    Raises InvalidInput for an unknown mode.
    """
    spec = get_mode(modes_from_processor(processor), mode)
    if spec.crop:
        return {"crop_to_patches": True}
    px = spec.base_size
    return {"crop_to_patches": False, "tile_size": px, "size": {"height": px, "width": px}}
