"""Selective loading of a DeepSeek-OCR-2 checkpoint: read only one half's tensors from safetensors.

A DeepSeek-OCR-2 checkpoint on disk uses DeepSeek's original tensor names (``model.sam_model.*``,
``model.qwen2_model.*``, ``model.projector.layers.*``, ``model.view_seperator``, ``model.layers.*``
with one tensor per routed expert, ...). ``DeepseekOcr2ForConditionalGeneration.from_pretrained``
renames them at load time with the table ``conversion_mapping._build_checkpoint_conversion_mapping()
["deepseek_ocr2"]`` of transformers 5.x, and ``save_pretrained`` writes them back in the original
layout. :func:`to_module_name` mirrors that table (and also accepts names already in the module
layout); :func:`read_state_dict` additionally stacks per-expert weights into the fused
``experts.gate_up_proj`` [E, 2*I, H] / ``experts.down_proj`` [E, H, I] parameters (same operations
as transformers' ``MergeModulelist(dim=0)`` + ``Concatenate(dim=1)``).

Only ``safetensors.safe_open(...).get_tensor(name)`` for the selected names touches tensor data, so
a half never reads the other half's bytes. Modules are built on the ``meta`` device and filled with
``load_state_dict(assign=True)`` so no random initialisation and no second copy happens.
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import re
from collections import defaultdict
from collections.abc import Callable
from typing import TypeVar

import torch
from safetensors import safe_open

from inkstream.errors import InvalidInput

_VISION_MARKERS = ("sam_model.", "qwen2_model.", "projector.", "view_seperator", "vision_tower.", "view_separator")

# (pattern, replacement) applied in order; mirrors transformers' "deepseek_ocr2" conversion table.
_VISION_RENAMES = [
    (r"sam_model\.blocks\.(\d+)\.norm1\.", r"vision_tower.sam_encoder.layers.\1.layer_norm1."),
    (r"sam_model\.blocks\.(\d+)\.norm2\.", r"vision_tower.sam_encoder.layers.\1.layer_norm2."),
    (r"sam_model\.blocks\.(\d+)\.attn\.", r"vision_tower.sam_encoder.layers.\1.attn."),
    (r"sam_model\.blocks\.(\d+)\.mlp\.", r"vision_tower.sam_encoder.layers.\1.mlp."),
    (r"sam_model\.patch_embed\.proj\.", "vision_tower.sam_encoder.patch_embed.projection."),
    (r"sam_model\.pos_embed", "vision_tower.sam_encoder.pos_embed"),
    (r"sam_model\.neck\.0\.", "vision_tower.sam_encoder.neck.conv1."),
    (r"sam_model\.neck\.1\.", "vision_tower.sam_encoder.neck.layer_norm1."),
    (r"sam_model\.neck\.2\.", "vision_tower.sam_encoder.neck.conv2."),
    (r"sam_model\.neck\.3\.", "vision_tower.sam_encoder.neck.layer_norm2."),
    (r"sam_model\.net_2\.", "vision_tower.sam_encoder.proj.conv1."),
    (r"sam_model\.net_3\.", "vision_tower.sam_encoder.proj.conv2."),
    (r"qwen2_model\.model\.model\.layers\.", "vision_tower.vision_encoder.layers."),
    (r"qwen2_model\.model\.model\.norm\.", "vision_tower.vision_encoder.norm."),
    (r"qwen2_model\.query_768\.", "vision_tower.query_768_resolution."),
    (r"qwen2_model\.query_1024\.", "vision_tower.query_1024_resolution."),
    (r"projector\.layers\.", "multi_modal_projector."),
    (r"view_seperator", "view_separator"),
]
_TEXT_RENAMES = [
    (r"^model\.embed_tokens\.", "model.language_model.embed_tokens."),
    (r"^model\.layers\.", "model.language_model.layers."),
    (r"^model\.norm\.", "model.language_model.norm."),
]
_TENSOR_SAMPLE_BYTES = 4096  # per tensor, from its start and from its end
# Tag of this fingerprint scheme (inkstream.revision): replicas of older code fingerprinted the same
# weights differently (each file's first and last MiB), and must not look like other weights.
_FINGERPRINT_SCHEME = "fp2"
_EXPERT_RE = re.compile(r"^(.*\.mlp\.experts)\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight$")


def safetensors_files(checkpoint_dir: str | pathlib.Path) -> list[pathlib.Path]:
    """The ``*.safetensors`` files of a checkpoint (single file or sharded with an index).

    Raises InvalidInput when the directory has no config.json or no safetensors file.
    """
    root = pathlib.Path(checkpoint_dir)
    if not (root / "config.json").is_file():
        raise InvalidInput(f"{root}: not a checkpoint directory (no config.json)")
    index = root / "model.safetensors.index.json"
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        return [root / s for s in shards]
    files = sorted(root.glob("*.safetensors"))
    if not files:
        raise InvalidInput(f"{root}: no *.safetensors weights found")
    return files


def tensor_names(checkpoint_dir: str | pathlib.Path) -> dict[str, pathlib.Path]:
    """Every tensor name in the checkpoint -> the safetensors file holding it (reads headers only)."""
    names: dict[str, pathlib.Path] = {}
    for path in safetensors_files(checkpoint_dir):
        with safe_open(str(path), framework="pt") as f:
            for key in f.keys():
                names[key] = path
    return names


def is_vision_name(name: str) -> bool:
    """True for tensors of the encoder half (SAM, Qwen2 vision encoder, queries, projector, view separator)."""
    return any(marker in name for marker in _VISION_MARKERS)


def to_module_name(name: str) -> str:
    """Checkpoint tensor name -> ``DeepseekOcr2ForConditionalGeneration`` state-dict name."""
    table = _VISION_RENAMES if is_vision_name(name) else _TEXT_RENAMES
    for pattern, repl in table:
        name = re.sub(pattern, repl, name)
    return name


def read_state_dict(
    checkpoint_dir: str | pathlib.Path, select: Callable[[str], bool], dtype: torch.dtype
) -> tuple[dict[str, torch.Tensor], set[str]]:
    """Read the checkpoint tensors whose name passes ``select``.

    Returns (state dict keyed by module names with routed experts fused, cast to ``dtype``;
    the set of checkpoint names read). Raises InvalidInput when nothing matches.
    """
    wanted = {n: p for n, p in tensor_names(checkpoint_dir).items() if select(n)}
    if not wanted:
        raise InvalidInput(f"{checkpoint_dir}: checkpoint holds none of the tensors this half needs")
    by_file: dict[pathlib.Path, list[str]] = defaultdict(list)
    for name, path in wanted.items():
        by_file[path].append(name)
    state: dict[str, torch.Tensor] = {}
    experts: dict[str, dict[str, dict[int, torch.Tensor]]] = defaultdict(lambda: defaultdict(dict))
    for path, names in by_file.items():
        with safe_open(str(path), framework="pt") as f:
            for name in names:
                tensor = f.get_tensor(name).to(dtype)
                target = to_module_name(name)
                m = _EXPERT_RE.match(target)
                if m:
                    experts[m.group(1)][m.group(3)][int(m.group(2))] = tensor
                else:
                    state[target] = tensor
    for prefix, parts in experts.items():
        n = len(parts["down_proj"])
        gate_up = [torch.cat([parts["gate_proj"][e], parts["up_proj"][e]], dim=0) for e in range(n)]
        state[f"{prefix}.gate_up_proj"] = torch.stack(gate_up)
        state[f"{prefix}.down_proj"] = torch.stack([parts["down_proj"][e] for e in range(n)])
    return state, set(wanted)


def strip_prefix(state: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    """Keys starting with ``prefix`` with it removed (other keys dropped)."""
    return {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}


ModuleT = TypeVar("ModuleT", bound=torch.nn.Module)


def materialize(factory: Callable[[], ModuleT], state: dict[str, torch.Tensor], device: str) -> ModuleT:
    """Build ``factory()`` on the meta device, assign ``state`` (strict), rebuild rotary embeddings
    (non-persistent ``inv_freq`` buffers) on the real device, and return it in eval mode.

    Raises InvalidInput when the checkpoint misses tensors or has unexpected ones for the module.
    """
    with torch.device("meta"):
        module = factory()
    try:
        module.load_state_dict(state, strict=True, assign=True)
    except RuntimeError as exc:
        raise InvalidInput(f"checkpoint does not match the model config: {exc}") from exc
    for parent in list(module.modules()):
        for child_name, child in list(parent.named_children()):
            if type(child).__name__.endswith("RotaryEmbedding"):
                with torch.device(device):
                    setattr(parent, child_name, type(child)(child.config))
    module = module.to(device)
    leftover = [n for n, t in list(module.named_parameters()) + list(module.named_buffers()) if t.is_meta]
    if leftover:
        raise InvalidInput(f"tensors not found in the checkpoint: {leftover[:5]}")
    return module.eval()


def checkpoint_identity(checkpoint_dir: str | pathlib.Path) -> tuple[str, str]:
    """(model_id, revision): the directory name and ``"fp2-"`` + a 12-hex-digit content fingerprint.

    The fingerprint is sha256 over config.json and, per safetensors file, its size, its header
    (tensor names, dtypes, shapes, offsets; safetensors format: 8-byte little-endian length + JSON)
    and the first and last :data:`_TENSOR_SAMPLE_BYTES` of EVERY tensor's data: a few MB read from
    multi-GB weights, yet a fine-tune of any tensor (the vision half alone, say: training changes a
    tensor's values throughout) changes it. The gateway sends a page's vision tokens only to decoders of
    the same revision, so two different checkpoints must not share one. A weights directory is versioned by its contents
    (DESIGN.md). Raises InvalidInput for a safetensors file whose header cannot be read.
    """
    root = pathlib.Path(checkpoint_dir).resolve()
    digest = hashlib.sha256((root / "config.json").read_bytes())
    for path in safetensors_files(root):
        size = path.stat().st_size
        digest.update(f"{path.name}:{size}".encode())
        with path.open("rb") as f:
            try:
                n = int.from_bytes(f.read(8), "little")
                header = f.read(n)
                entries = json.loads(header)
            except ValueError as exc:
                raise InvalidInput(f"{path}: not a safetensors file (unreadable header: {exc})") from exc
            digest.update(header)
            for name in sorted(k for k in entries if k != "__metadata__"):
                begin, end = entries[name]["data_offsets"]
                k = min(_TENSOR_SAMPLE_BYTES, end - begin)
                for at in sorted({begin, end - k}):
                    f.seek(8 + n + at)
                    digest.update(f.read(k))
    return root.name, f"{_FINGERPRINT_SCHEME}-{digest.hexdigest()[:12]}"
