"""Every ONNX file a compact checkpoint's encoder half runs without torch, written beside its weights:
``python -m models.compact.export.onnx DIR [DIR ...]`` (re)writes them for each checkpoint.
"""

from __future__ import annotations

import pathlib
import sys

from models.compact import checkpoint as ckpt
from models.compact.export.line_onnx import export_line_encoder
from models.compact.export.pp_onnx import export_pp_tokens


def export_onnx(checkpoint_dir: str | pathlib.Path) -> list[pathlib.Path]:
    """Write every ONNX file the checkpoint's encoder half runs without torch: ``encoder.onnx``
    (:func:`export_line_encoder`) and, for a bilingual checkpoint, ``pp_tokens.onnx``
    (:func:`models.compact.export.pp_onnx.export_pp_tokens`; needs the rapidocr recogniser file). Needs
    torch. Raises InvalidInput for a directory that is not a compact checkpoint. Returns their paths.
    """
    out = [export_line_encoder(checkpoint_dir)]
    if "pp_tower" in ckpt.read_config(checkpoint_dir):
        out.append(export_pp_tokens(checkpoint_dir))
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m models.compact.export.onnx DIR [DIR ...]``: (re)write each checkpoint's ONNX files
    (:func:`export_onnx`), printing their paths.
    """
    dirs = sys.argv[1:] if argv is None else argv
    if not dirs:
        print("usage: python -m models.compact.export.onnx CHECKPOINT_DIR [...]", file=sys.stderr)
        return 2
    for d in dirs:
        for path in export_onnx(d):
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
