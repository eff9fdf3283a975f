"""The one registry of model families: name -> ``"module:Class"`` for each half.

A family is a pair of halves loading from one Hugging Face-layout checkpoint directory. The family
name is read from ``config.json`` (key ``inkstream_family``, falling back to ``model_type``) so that
``--model DIR`` is enough to serve a checkpoint.
"""

from __future__ import annotations

import importlib
import json
import pathlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from inkstream.errors import InvalidInput

if TYPE_CHECKING:  # models.base imports torch: not at registry import time
    from models.base import DecoderHalf, EncoderHalf


@dataclass(frozen=True)
class FamilyEntry:
    """Import paths (``"module:Class"``) of a family's encoder and decoder halves."""

    encoder: str
    decoder: str


FAMILIES: dict[str, FamilyEntry] = {
    "deepseek_ocr2": FamilyEntry(
        encoder="models.deepseek_ocr2.encoder_half:DeepseekOcr2EncoderHalf",
        decoder="models.deepseek_ocr2.decoder_half:DeepseekOcr2DecoderHalf",
    ),
    "compact": FamilyEntry(
        encoder="models.compact.encoder_half:CompactEncoderHalf",
        decoder="models.compact.decoder_half:CompactDecoderHalf",
    ),
}

# config.json model_type values that identify a family when inkstream_family is absent.
MODEL_TYPE_ALIASES: dict[str, str] = {"deepseek_ocr2": "deepseek_ocr2", "inkstream_compact": "compact"}


def _import(path: str) -> type:
    module, _, cls = path.partition(":")
    return getattr(importlib.import_module(module), cls)


def family_of(checkpoint_dir: str | pathlib.Path) -> str:
    """Family name of a checkpoint directory; raises InvalidInput when it cannot be told."""
    cfg_path = pathlib.Path(checkpoint_dir) / "config.json"
    if not cfg_path.is_file():
        raise InvalidInput(f"{checkpoint_dir}: not a checkpoint directory (no config.json)")
    cfg = json.loads(cfg_path.read_text())
    name = cfg.get("inkstream_family") or MODEL_TYPE_ALIASES.get(cfg.get("model_type", ""))
    if name not in FAMILIES:
        raise InvalidInput(
            f"{checkpoint_dir}: unknown model family {name or cfg.get('model_type')!r}; "
            f"known families: {', '.join(sorted(FAMILIES))}"
        )
    return name


def get_family(name: str) -> FamilyEntry:
    """Registry lookup; raises InvalidInput listing the known names for an unknown one."""
    try:
        return FAMILIES[name]
    except KeyError:
        raise InvalidInput(f"unknown model family {name!r}; known families: {', '.join(sorted(FAMILIES))}") from None


def encoder_half_class(name: str) -> type[EncoderHalf]:
    """The EncoderHalf class of family ``name`` (imports its module); raises InvalidInput for an unknown one."""
    return _import(get_family(name).encoder)


def decoder_half_class(name: str) -> type[DecoderHalf]:
    """The DecoderHalf class of family ``name`` (imports its module); raises InvalidInput for an unknown one."""
    return _import(get_family(name).decoder)
