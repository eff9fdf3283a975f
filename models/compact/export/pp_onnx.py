"""The PP tower's compressor on onnxruntime: a bilingual checkpoint's vision tokens without torch.

The PP-OCRv6 trunk of a bilingual checkpoint already runs on onnxruntime
(:class:`models.compact.line.pptrunk.PPTrunk`); what turns its frames into vision tokens,
:class:`models.compact.line.pptower.PPTokens` (the checkpoint's compressor, the recogniser's CTC head for
the posterior top-k of each frame, and a copy checkpoint's copy classes), is torch. Exported beside
the weights, it runs without torch, so that the encoder service of a bilingual checkpoint imports no
torch at all (with the Latin encoder's ``encoder.onnx``, :mod:`models.compact.export.line_onnx`).

* :func:`export_pp_tokens` (torch; at checkpoint export, or ``python -m models.compact.export.onnx
  DIR``) builds :class:`~models.compact.line.pptower.PPTokens` from the ``pp_tower.*`` tensors AS STORED
  and writes ``pp_tokens.onnx`` (ONNX opset 17, TorchScript exporter, as ``encoder.onnx``): input
  ``frames`` [B, T, 120] float32 (and, for a checkpoint with a spacing head, ``columns`` [B, T, 16]
  float32, :func:`models.compact.line.inkcolumns.column_ink`), output ``tokens`` [B, ceil(T/stride),
  hidden + copy_width] float32 (copy_width counts the spacing head's 2 columns), B and T dynamic.
  The recogniser's head (120 x 18,710 float32, 9 MB) is inside the file
  (15 MB with zh-copy-step1000's ``char_embed`` table). ``peak_classes`` is exported as its traceable
  twin :func:`peak_classes_traceable` (the original updates slices in place, which the exporter cannot
  trace); ``pack`` as it is.
  Its metadata holds the checkpoint's revision (:func:`models.compact.checkpoint.checkpoint_identity`),
  so a file left from other weights is never used, and the token layout (``stride``, ``copy_width``).
* :meth:`models.compact.line.onnx_runtime.OnnxPPTokens.open` runs it when the checkpoint's file is current.

The posterior is a softmax over 18,710 classes per frame: [B, T, 18,710] float32 is 75 KB a frame, so
callers bound the frames of one call (:data:`models.compact.line.towers.MAX_POSTERIOR_FRAMES`); lines are
independent here (the trunk, not the compressor, mixes a line with attention), so any grouping of
lines gives the same tokens.

Measured on the shared Chinese report page (``pdfplumber_zh_report_p03.png``: 71 lines, 43 routed to
the PP tower; checkpoint zh-copy-step1000, one thread) against the torch modules: the same routing,
features within 4e-6, copy ids exact, copy probabilities exact but for 19 of 9,164 (where a CTC
spike spread over two frames ties to float32 rounding, :func:`models.compact.decode.copy_head.peak_classes`
keeps it at the other frame); the decoder reads the page to the same text. The encoder process
peaks at 635 MiB (VmHWM) against 1,310 MiB with torch, and encodes the page in 2.5-2.6 s against
2.9-3.5 s (routing 0.04-0.06 s against 0.22-0.24 s; the compressor 0.14-0.16 s against 0.35 s).
"""

from __future__ import annotations

import pathlib
from typing import TYPE_CHECKING

from models.compact import checkpoint as ckpt
from models.compact.export.line_onnx import export_stamped
from models.compact.line.inkcolumns import PROFILE_CHANNELS
from models.compact.line.onnx_runtime import PP_ONNX as ONNX_FILE
from models.compact.line.pptrunk import PP_FEATURE_DIM

if TYPE_CHECKING:  # torch is imported by the export alone: running the file must not load it
    import torch


def export_pp_tokens(checkpoint_dir: str | pathlib.Path) -> pathlib.Path:
    """Write ``<checkpoint_dir>/pp_tokens.onnx`` from the checkpoint's ``pp_tower.*`` tensors (see the
    module docstring). Needs torch and the rapidocr recogniser file (for a posterior compressor).
    Raises InvalidInput for a directory that is not a bilingual compact checkpoint, FileNotFoundError
    as :func:`models.compact.line.pptrunk.pp_classifier`. Returns the file's path.
    """
    import torch

    from inkstream.errors import InvalidInput
    from models.compact.line.pptower import PPTokens

    root = pathlib.Path(checkpoint_dir)
    cfg = ckpt.read_config(root)
    if "pp_tower" not in cfg:
        raise InvalidInput(f"{checkpoint_dir}: not a bilingual checkpoint (no \"pp_tower\" in config.json)")
    module, _ = PPTokens.load(root, cfg, int(cfg["decoder"]["hidden_size"]))
    module.peak = peak_classes_traceable
    frames = torch.randn(2, 37, PP_FEATURE_DIM, generator=torch.Generator().manual_seed(0))
    meta = {"stride": str(module.compressor.stride), "copy_width": str(module.copy_width)}
    if module.spacing is None:
        return export_stamped(module, (frames,), root / ONNX_FILE, ["frames"], ["tokens"],
                              {"frames": {0: "b", 1: "t"}, "tokens": {0: "b", 1: "n"}}, meta)
    columns = torch.rand(2, 37, PROFILE_CHANNELS, generator=torch.Generator().manual_seed(1))
    return export_stamped(module, (frames, columns), root / ONNX_FILE, ["frames", "columns"], ["tokens"],
                          {"frames": {0: "b", 1: "t"}, "columns": {0: "b", 1: "t"}, "tokens": {0: "b", 1: "n"}},
                          meta)


def peak_classes_traceable(p: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """:func:`models.compact.decode.copy_head.peak_classes` (posterior [..., T, k] float, ids [..., T, k] int
    -> float32 [..., T, k]) in a form the TorchScript exporter traces: the neighbours as shifted
    copies (padded with an id that matches none), no in-place update of a slice, no Python bool in a
    tensor expression. Equal to it exactly (tests/unit/test_pp_onnx.py). Needs torch.
    """
    from torch.nn.functional import pad

    pf = p.float()
    pp, ip = pad(pf, [0, 0, 1, 1], value=0.0), pad(ids.long(), [0, 0, 1, 1], value=-1)  # one frame each side
    mine_p, mine_ids = pf[..., :, :, None], ids.long()[..., :, :, None]
    prev_p, prev_ids = pp[..., :-2, None, :], ip[..., :-2, None, :]
    next_p, next_ids = pp[..., 2:, None, :], ip[..., 2:, None, :]
    beaten = ((mine_ids == prev_ids) & (prev_p >= mine_p)).any(-1)  # on a tie the earlier frame keeps it
    beaten = beaten | ((mine_ids == next_ids) & (next_p > mine_p)).any(-1)
    return pf * ~beaten
