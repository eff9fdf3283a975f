"""Which checkpoint a local stack serves: ``--model DIR``, else the embedded compact model
(``models/compact/weights_zh/``, bilingual). When those weights are missing (not trained yet), a
tiny RANDOM deepseek_ocr2 checkpoint is written to a scratch directory so the stack still starts,
with a warning that its text is meaningless.
"""

from __future__ import annotations

import os
import pathlib
import sys

import models.compact


def default_model_dir() -> pathlib.Path:
    """The embedded compact model's weights directory (may not exist before training)."""
    return models.compact.default_checkpoint_dir()


def check_model_dir(model_dir: str | os.PathLike) -> pathlib.Path:
    """``model_dir`` as a path when it is a checkpoint directory (holds ``config.json``); else
    FileNotFoundError saying what it is instead (missing, a file, a folder without config.json), in
    the words of the ``--model`` flag.
    """
    p = pathlib.Path(model_dir).expanduser()
    if not p.exists():
        raise FileNotFoundError(f"--model {p}: no such directory")
    if not p.is_dir():
        raise FileNotFoundError(f"--model {p}: not a directory (give the checkpoint's folder, with its config.json)")
    if not (p / "config.json").is_file():
        raise FileNotFoundError(f"--model {p}: not a checkpoint directory (no config.json)")
    return p


def resolve_model(model_dir: str | os.PathLike | None, scratch: pathlib.Path) -> pathlib.Path:
    """``model_dir`` if given (must hold config.json); else the embedded weights; else a tiny random
    deepseek_ocr2 checkpoint written under ``scratch`` (a warning explains). Raises FileNotFoundError.
    """
    if model_dir is not None:
        return check_model_dir(model_dir)
    p = default_model_dir()
    if (p / "config.json").is_file():
        return p
    print(
        f"inkstream: the embedded compact model is missing ({p} has no config.json; train it with "
        "'inkstream train-compact' or pass --model DIR). Falling back to a tiny RANDOM deepseek_ocr2 "
        "checkpoint: the stack works end to end but its text is meaningless.",
        file=sys.stderr,
    )
    from models.deepseek_ocr2.tiny import write_tiny_checkpoint  # heavy: torch + transformers, fallback only

    tiny = scratch / "tiny-deepseek-ocr2"
    if not (tiny / "config.json").is_file():
        write_tiny_checkpoint(tiny, seed=0)
    return tiny
