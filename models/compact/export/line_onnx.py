"""The Latin line encoder on onnxruntime: exported beside the weights, run without torch.

Why: the encoder process's peak RSS (issue #16, goal <= 1 GiB). ``import torch`` (the pinned CUDA
build) is 507 MiB of the process before any page, ~150 MiB of it CUDA libraries the CPU path never
uses; the detector already runs on onnxruntime. With the line encoder exported too, the encoder
service of a Latin checkpoint imports no torch at all. Measured against the torch module on this CPU
(one thread): the same vision tokens within 5e-6 (scale ~8), and faster: 64 lines of 1,024 px in
0.35 s against 0.37-0.59 s, 20 lines of 1,600 px 0.11 s against 0.22 s.

* :func:`export_line_encoder` (torch; at checkpoint export, or ``python -m models.compact.export.onnx
  DIR`` for an older checkpoint) builds the line encoder from the ``encoder.*`` tensors AS STORED
  and writes ``encoder.onnx`` (ONNX opset 17, TorchScript exporter): input ``lines`` [N, 1, 32, W]
  float32, output ``tokens`` [N, W/16, hidden] float32, N and W dynamic. Its metadata holds the
  checkpoint's revision (:func:`models.compact.checkpoint.checkpoint_identity`), so a file left
  from other weights is never used.
* :meth:`models.compact.line.onnx_runtime.OnnxLineEncoder.open` runs it when the checkpoint's file is current.

A bilingual checkpoint (config.json ``"pp_tower"``) with its script head (``script_head.*``
tensors) gets a second output, ``script_logits`` [N, W/8] float32: the script head's linear layer on
the stride-8 features (:class:`models.compact.line.script.ScriptHead`), one logit per 8 pixel columns that
they hold CJK script, which :func:`models.compact.line.towers.script_decisions` turns into the routing
decision; its PP tower's compressor goes to ``pp_tokens.onnx`` (:mod:`models.compact.export.pp_onnx`). With
both current, the encoder service of a bilingual checkpoint imports no torch either. With a read head
(``read_head.*`` tensors, :mod:`models.compact.line.doubt`) it gets a third output, ``read_top``
[N, W/8, 3] float32: per stride-8 frame, the read head's log-probability of its most likely class and
of the blank, and that class's id (:mod:`models.compact.line.number_reads`).
:func:`export_onnx` (and this module's command line) writes every ONNX file a checkpoint needs.
"""

from __future__ import annotations

import pathlib
import warnings
from typing import TYPE_CHECKING

from models.compact import checkpoint as ckpt
from models.compact.line.config import encoder_config
from models.compact.line.doubt import load_read_head, read_top
from models.compact.line.onnx_runtime import LINE_ONNX as ONNX_FILE
from models.compact.line.onnx_runtime import READ_OUTPUT, REVISION_KEY, SCRIPT_OUTPUT

if TYPE_CHECKING:  # torch is imported by the exports alone: running the files must not load it
    import torch

OPSET = 17


def export_line_encoder(checkpoint_dir: str | pathlib.Path) -> pathlib.Path:
    """Write ``<checkpoint_dir>/encoder.onnx`` from the checkpoint's ``encoder.*`` tensors (and, for a
    bilingual checkpoint, its ``script_head.*`` ones: the ``script_logits`` output; see the module
    docstring). Needs torch. Raises InvalidInput for a directory that is not a compact checkpoint.
    Returns the file's path.
    """
    import torch

    from models.compact.line.encoder import LineEncoder
    from models.compact.line.script import ScriptHead

    root = pathlib.Path(checkpoint_dir)
    cfg = ckpt.read_config(root)
    state, _ = ckpt.load_prefixed(root, ckpt.ENCODER_PREFIX)
    enc = LineEncoder(encoder_config(cfg), int(cfg["decoder"]["hidden_size"]))
    enc.load_state_dict({k: v.float() for k, v in state.items()}, strict=True)
    head, read = None, None
    if "pp_tower" in cfg and ckpt.tensor_names(root, ckpt.SCRIPT_PREFIX):
        head = ScriptHead(enc.cfg.compressor_channels)
        head.load_state_dict({k: v.float() for k, v in ckpt.load_prefixed(root, ckpt.SCRIPT_PREFIX)[0].items()},
                             strict=True)
        read = load_read_head(root)

    class _Tokens(torch.nn.Module):
        def __init__(self, encoder: LineEncoder, script: ScriptHead | None, read: torch.nn.Linear | None) -> None:
            super().__init__()
            self.encoder, self.script, self.read = encoder, script, read

        def forward(self, lines: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
            tokens, feats = self.encoder(lines)
            if self.script is None:
                return tokens
            logits = self.script.linear(feats).squeeze(-1)  # [N, W/8]: ScriptHead's frame logits
            if self.read is None:
                return tokens, logits
            return tokens, logits, read_top(self.read, feats)

    module = _Tokens(enc, head, read).eval()  # eval on the wrapper: the exporter restores the wrapper's mode after
    names = ["tokens"] + ([SCRIPT_OUTPUT] if head is not None else []) + ([READ_OUTPUT] if read is not None else [])
    axes = {"lines": {0: "n", 3: "w"}, "tokens": {0: "n", 1: "t"}, SCRIPT_OUTPUT: {0: "n", 1: "f"},
            READ_OUTPUT: {0: "n", 1: "f"}}
    return export_stamped(module, (torch.zeros(2, 1, enc.cfg.line_height, 256),), root / ONNX_FILE, ["lines"],
                          names, {k: v for k, v in axes.items() if k in ["lines", *names]})


def export_stamped(module: torch.nn.Module, args: tuple, out: pathlib.Path, inputs: list[str], outputs: list[str],
                   axes: dict[str, dict[int, str]], meta: dict[str, str] | None = None) -> pathlib.Path:
    """Export the torch ``module`` (eval mode) called on ``args`` to ``out`` (ONNX opset 17, the
    TorchScript exporter, ``axes`` dynamic), its metadata holding the revision of the checkpoint
    ``out`` lies in (:func:`models.compact.checkpoint.checkpoint_identity`) and ``meta``; written to a
    temporary file beside it first. Needs torch and onnx. Returns ``out``.
    """
    import onnx
    import torch

    tmp = out.with_suffix(".onnx.tmp")
    with torch.no_grad(), warnings.catch_warnings():
        # the TorchScript exporter is deprecated in favour of torch.export's, which needs onnxscript
        # (not a dependency); at the pinned torch it is still the supported path for dynamic axes
        warnings.simplefilter("ignore", DeprecationWarning)
        # expected here: shapes the tracer takes as constants (a module's fixed sizes), slices it cannot fold
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", "Constant folding", UserWarning)
        torch.onnx.export(module, args, str(tmp), dynamo=False, opset_version=OPSET, input_names=inputs,
                          output_names=outputs, dynamic_axes=axes)
    model = onnx.load(str(tmp))
    onnx.helper.set_model_props(model, {REVISION_KEY: ckpt.checkpoint_identity(out.parent)[1], **(meta or {})})
    onnx.save(model, str(tmp))
    tmp.replace(out)
    return out

