"""The vision towers' ONNX files on onnxruntime, without torch: the Latin line encoder
(``encoder.onnx``) and the PP tower's compressor (``pp_tokens.onnx``), written beside the weights by
:mod:`models.compact.export.line_onnx` and :mod:`models.compact.export.pp_onnx` (whose docstrings give
the files' inputs, outputs and measured agreement with the torch modules). A file is used only when
the revision stamped in it equals the checkpoint's (:func:`models.compact.checkpoint.checkpoint_identity`).
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from models.compact import checkpoint as ckpt

R = TypeVar("R")
#: the Latin line encoder's file (input ``lines`` [N, 1, 32, W], output ``tokens`` [N, W/16, hidden])
LINE_ONNX = "encoder.onnx"
#: the PP tower compressor's file (input ``frames`` [B, T, 120], output ``tokens``)
PP_ONNX = "pp_tokens.onnx"
#: metadata key of the checkpoint revision an ONNX file was exported from
REVISION_KEY = "inkstream_revision"
#: the bilingual line encoder's second output: script logits [N, W/8]
SCRIPT_OUTPUT = "script_logits"
#: its third, with a read head: per frame the top class's and the blank's log-probability and the top
#: class's id [N, W/8, 3]
READ_OUTPUT = "read_top"


def cpu_session(path: pathlib.Path, threads: int = 1) -> tuple[Any, dict[str, str]]:
    """An onnxruntime CPU session of ``path`` with ``threads`` intra-op threads and no memory arena
    (activations are given back after each run), and the file's metadata (``{}`` when it has none).
    """
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    opts.enable_cpu_mem_arena = False
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")  # as det_net.onnx_session
    opts.enable_mem_pattern = False
    session = ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])
    return session, dict(session.get_modelmeta().custom_metadata_map)


def open_current(runner: Callable[[pathlib.Path, int], R], checkpoint_dir: str | pathlib.Path, name: str,
                 threads: int = 1, revision: str = "") -> R | None:
    """``runner(checkpoint_dir/name, threads)`` (a class with a ``revision`` attribute: the revision
    stamped in the file) when the file exists and was exported from these weights (the stamp equals
    the checkpoint's revision, :func:`models.compact.checkpoint.checkpoint_identity`; ``revision``: the
    checkpoint's, when the caller has it already); None otherwise (the caller runs the torch module).
    """
    path = pathlib.Path(checkpoint_dir) / name
    if not path.is_file():
        return None
    found = runner(path, threads)
    want = revision or ckpt.checkpoint_identity(checkpoint_dir)[1]
    return found if getattr(found, "revision", None) == want else None


class OnnxLineEncoder:
    """``encoder.onnx`` on an onnxruntime CPU session with ``threads`` intra-op threads;
    ``revision``: the revision stamped in the file ("" when it has none); ``has_script``: the file
    has the ``script_logits`` output (a bilingual checkpoint's, see the module docstring);
    ``has_read``: it has the read head's ``read_top`` output too (:mod:`models.compact.line.doubt`).
    """

    @classmethod
    def open(cls, checkpoint_dir: str | pathlib.Path, threads: int = 1,
             revision: str = "") -> OnnxLineEncoder | None:
        """The checkpoint's ``encoder.onnx`` when it exists and was exported from these weights (its
        stamped revision equals the checkpoint's, :func:`models.compact.checkpoint.checkpoint_identity`);
        None otherwise (the caller runs the torch module instead). ``revision``: the checkpoint's, when
        the caller has it already (else computed here).
        """
        return open_current(cls, checkpoint_dir, LINE_ONNX, threads, revision)

    def __init__(self, path: pathlib.Path, threads: int = 1) -> None:
        # Activations here are small (64 lines x 64 channels x 16 x W/2 at most, ~70 MiB at W = 1,024):
        # the arena is off as for the detector so that they are given back after each forward.
        self.session, meta = cpu_session(path, threads)
        self.revision = str(meta.get(REVISION_KEY, ""))
        outputs = [o.name for o in self.session.get_outputs()]
        self.has_script, self.has_read = SCRIPT_OUTPUT in outputs, READ_OUTPUT in outputs

    def __call__(self, lines: np.ndarray) -> np.ndarray:
        """``lines`` [N, 1, 32, W] (any float dtype; W a multiple of 16) -> vision tokens [N, W/16, hidden] float32."""
        x = np.ascontiguousarray(lines, dtype=np.float32)
        return np.asarray(self.session.run(["tokens"], {"lines": x})[0])

    def tokens_and_script(self, lines: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``lines`` [N, 1, 32, W] (any float dtype; W a multiple of 16) -> (vision tokens [N, W/16,
        hidden] float32, the script head's frame logits [N, W/8] float32, > 0: CJK script), from one
        forward. Raises ValueError for a file without the script output (not a bilingual checkpoint's).
        """
        if not self.has_script:
            raise ValueError(f"this {LINE_ONNX} has no {SCRIPT_OUTPUT} output (not a bilingual checkpoint's)")
        x = np.ascontiguousarray(lines, dtype=np.float32)
        tokens, logits = self.session.run(["tokens", SCRIPT_OUTPUT], {"lines": x})
        return np.asarray(tokens), np.asarray(logits)

    def read_all(self, lines: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """As :meth:`tokens_and_script`, plus the read head's ``read_top`` [N, W/8, 3] float32 (2 columns
        from an older export; None for a file without it), from one forward.
        """
        if not self.has_read:
            return (*self.tokens_and_script(lines), None)
        x = np.ascontiguousarray(lines, dtype=np.float32)
        tokens, logits, top = self.session.run(["tokens", SCRIPT_OUTPUT, READ_OUTPUT], {"lines": x})
        return np.asarray(tokens), np.asarray(logits), np.asarray(top)


class OnnxPPTokens:
    """``pp_tokens.onnx`` on an onnxruntime CPU session with ``threads`` intra-op threads (no memory
    arena: the posterior's activations are given back after each call). ``revision``: the revision
    stamped in the file ("" when it has none); ``stride``: frames per token (1 or 2);
    ``copy_width``: columns of copy classes after the ``hidden`` features of each token.
    """

    @classmethod
    def open(cls, checkpoint_dir: str | pathlib.Path, threads: int = 1, revision: str = "") -> OnnxPPTokens | None:
        """The checkpoint's ``pp_tokens.onnx`` when it exists and was exported from these weights (its
        stamped revision equals the checkpoint's); None otherwise (the caller runs the torch module).
        ``revision``: the checkpoint's, when the caller has it already (else computed here).
        """
        return open_current(cls, checkpoint_dir, PP_ONNX, threads, revision)

    def __init__(self, path: pathlib.Path, threads: int = 1) -> None:
        self.session, meta = cpu_session(path, threads)
        self.revision = str(meta.get(REVISION_KEY, ""))
        self.stride = int(meta.get("stride", 1))
        self.copy_width = int(meta.get("copy_width", 0))
        self.takes_columns = any(i.name == "columns" for i in self.session.get_inputs())

    def __call__(self, frames: np.ndarray, columns: np.ndarray | None = None) -> np.ndarray:
        """Trunk frames [B, T, 120] (any float dtype) and, for a file with the spacing head's
        ``columns`` input, the lines' ink columns [B, T, 16] (:func:`models.compact.line.inkcolumns.column_ink`;
        ValueError without them) -> vision tokens [B, ceil(T/stride), hidden + copy_width] float32 (see
        the module docstring).
        """
        feeds = {"frames": np.ascontiguousarray(frames, dtype=np.float32)}
        if self.takes_columns:
            if columns is None:
                raise ValueError(f"{PP_ONNX} has a spacing head: it needs the lines' ink columns")
            feeds["columns"] = np.ascontiguousarray(columns, dtype=np.float32)
        return np.asarray(self.session.run(["tokens"], feeds)[0])
