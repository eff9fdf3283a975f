"""The Latin line encoder on onnxruntime: exported beside the weights, run without torch.

Why: the encoder process's peak RSS (issue #16, goal <= 1 GiB). ``import torch`` (the pinned CUDA
build) is 507 MiB of the process before any page, ~150 MiB of it CUDA libraries the CPU path never
uses; the detector already runs on onnxruntime. With the line encoder exported too, the encoder
service of a Latin checkpoint imports no torch at all. Measured against the torch module on this CPU
(one thread): the same vision tokens within 5e-6 (scale ~8), and faster: 64 lines of 1,024 px in
0.35 s against 0.37-0.59 s, 20 lines of 1,600 px 0.11 s against 0.22 s.

* :func:`export_line_encoder` (torch; at checkpoint export, or ``python -m models.compact.line_onnx
  DIR`` for an older checkpoint) builds the line encoder from the ``encoder.*`` tensors AS STORED
  and writes ``encoder.onnx`` (ONNX opset 17, TorchScript exporter): input ``lines`` [N, 1, 32, W]
  float32, output ``tokens`` [N, W/16, hidden] float32, N and W dynamic. Its metadata holds the
  checkpoint's revision (:func:`models.compact.checkpoint.checkpoint_identity`), so a file left
  from other weights is never used.
* :meth:`OnnxLineEncoder.open` runs it when the checkpoint's file is current.

Bilingual checkpoints still run the line encoder in torch: routing by script reads the torch
module's stride-8 features, and the PP tower's compressor is torch.
"""

from __future__ import annotations

import pathlib
import sys
import warnings

import numpy as np

from models.compact import checkpoint as ckpt

ONNX_FILE = "encoder.onnx"
REVISION_KEY = "inkstream_revision"
OPSET = 17


def export_line_encoder(checkpoint_dir: str | pathlib.Path) -> pathlib.Path:
    """Write ``<checkpoint_dir>/encoder.onnx`` from the checkpoint's ``encoder.*`` tensors (see the
    module docstring). Needs torch. Raises InvalidInput for a directory that is not a compact
    checkpoint. Returns the file's path.
    """
    import torch

    from models.compact.line_encoder import LineEncoder

    root = pathlib.Path(checkpoint_dir)
    cfg = ckpt.read_config(root)
    state, _ = ckpt.load_prefixed(root, ckpt.ENCODER_PREFIX)
    enc = LineEncoder(ckpt.encoder_config(cfg), int(cfg["decoder"]["hidden_size"]))
    enc.load_state_dict({k: v.float() for k, v in state.items()}, strict=True)

    class _Tokens(torch.nn.Module):
        def __init__(self, encoder: LineEncoder) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(self, lines: torch.Tensor) -> torch.Tensor:
            return self.encoder(lines)[0]

    module = _Tokens(enc).eval()  # eval on the wrapper: the exporter restores the wrapper's mode after
    out = root / ONNX_FILE
    tmp = out.with_suffix(".onnx.tmp")
    with torch.no_grad(), warnings.catch_warnings():
        # the TorchScript exporter is deprecated in favour of torch.export's, which needs onnxscript
        # (not a dependency); at the pinned torch it is still the supported path for dynamic axes
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(module, (torch.zeros(2, 1, enc.cfg.line_height, 256),), str(tmp), dynamo=False,
                          opset_version=OPSET, input_names=["lines"], output_names=["tokens"],
                          dynamic_axes={"lines": {0: "n", 3: "w"}, "tokens": {0: "n", 1: "t"}})
    import onnx

    model = onnx.load(str(tmp))
    onnx.helper.set_model_props(model, {REVISION_KEY: ckpt.checkpoint_identity(root)[1]})
    onnx.save(model, str(tmp))
    tmp.replace(out)
    return out


class OnnxLineEncoder:
    """``encoder.onnx`` on an onnxruntime CPU session with ``threads`` intra-op threads;
    ``revision``: the revision stamped in the file ("" when it has none).
    """

    @classmethod
    def open(cls, checkpoint_dir: str | pathlib.Path, threads: int = 1,
             revision: str = "") -> OnnxLineEncoder | None:
        """The checkpoint's ``encoder.onnx`` when it exists and was exported from these weights (its
        stamped revision equals the checkpoint's, :func:`models.compact.checkpoint.checkpoint_identity`);
        None otherwise (the caller runs the torch module instead). ``revision``: the checkpoint's, when
        the caller has it already (else computed here).
        """
        root = pathlib.Path(checkpoint_dir)
        if not (root / ONNX_FILE).is_file():
            return None
        runner = cls(root / ONNX_FILE, threads)
        return runner if runner.revision == (revision or ckpt.checkpoint_identity(root)[1]) else None

    def __init__(self, path: pathlib.Path, threads: int = 1) -> None:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        # Activations here are small (64 lines x 64 channels x 16 x W/2 at most, ~70 MiB at W = 1,024):
        # the arena is off as for the detector so that they are given back after each forward.
        opts.enable_cpu_mem_arena = False
        opts.enable_mem_pattern = False
        self.session = ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])
        self.revision = str(self.session.get_modelmeta().custom_metadata_map.get(REVISION_KEY, ""))

    def __call__(self, lines: np.ndarray) -> np.ndarray:
        """``lines`` [N, 1, 32, W] (any float dtype; W a multiple of 16) -> vision tokens [N, W/16, hidden] float32."""
        x = np.ascontiguousarray(lines, dtype=np.float32)
        return np.asarray(self.session.run(None, {"lines": x})[0])


def main(argv: list[str] | None = None) -> int:
    """``python -m models.compact.line_onnx DIR [DIR ...]``: (re)write each checkpoint's encoder.onnx."""
    dirs = sys.argv[1:] if argv is None else argv
    if not dirs:
        print("usage: python -m models.compact.line_onnx CHECKPOINT_DIR [...]", file=sys.stderr)
        return 2
    for d in dirs:
        print(export_line_encoder(d))
    return 0


if __name__ == "__main__":
    sys.exit(main())
