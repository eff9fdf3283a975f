"""Ship the Latin tower's CTC head as a bilingual checkpoint's read head (the doubt routing signal).

``python -m training.compact.read_head CHECKPOINT_DIR --state training/compact/state/state.pt
--doubtful 0.2 --page-share 0.2 --faint-below 120``

The Latin tower was trained with an auxiliary CTC head (``ctc_head.*`` in the training state of
``training/compact/train.py``), never exported: only the encoder and decoder were. This copies it into
the checkpoint as ``read_head.weight`` [256, 192] / ``read_head.bias`` [256] -- after checking that
every ``encoder.*`` tensor of the checkpoint equals the state's (the head reads those features and no
others) -- writes the routing bars into config.json (``read_head``: ``doubtful_above``,
``page_doubt_share``, ``alone_above`` (null: off), ``faint_median_below``, see
:mod:`models.compact.line.doubt`) and re-exports the checkpoint's ONNX files (new weights, new
revision). Raises SystemExit with a message when the encoders differ.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

import torch
from safetensors.torch import load_file, save_file

from models.compact import checkpoint as ckpt
from models.compact.export.onnx import export_onnx

READ_PREFIX = ckpt.READ_PREFIX


def main(argv: list[str] | None = None) -> int:
    """Copy the head, write the bars, re-export; see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--state", default="training/compact/state/state.pt")
    ap.add_argument("--doubtful", type=float, required=True, help="line doubt (nats) above which a line is doubtful")
    ap.add_argument("--alone-above", type=float, default=None, help="doubt above which a line goes to PP alone")
    ap.add_argument("--faint-below", type=float, default=None, help="median line contrast: fainter pages go to PP")
    ap.add_argument("--page-share", type=float, required=True, help="share of doubtful lines that sends a page to PP")
    ap.add_argument("--note", default="", help="where the bars come from (stored in config.json)")
    args = ap.parse_args(argv)
    root = pathlib.Path(args.checkpoint)
    full = torch.load(args.state, map_location="cpu", weights_only=False)
    state = full["model"]
    weights = root / ckpt.WEIGHTS
    tensors = load_file(str(weights))
    enc = {k: v for k, v in tensors.items() if k.startswith(ckpt.ENCODER_PREFIX)}
    differ = [k for k, v in enc.items() if k not in state or not torch.equal(v.float(), state[k].float())]
    if differ or not enc:
        raise SystemExit(f"{root}: encoder tensors differ from {args.state} ({len(differ)} of {len(enc)}); "
                         "its CTC head does not read this encoder")
    tensors[READ_PREFIX + "weight"] = state["ctc_head.weight"].detach().float().clone().contiguous()
    tensors[READ_PREFIX + "bias"] = state["ctc_head.bias"].detach().float().clone().contiguous()
    save_file(tensors, str(weights), metadata={"format": "pt"})
    cfg = ckpt.read_config(root)
    cfg["read_head"] = {"doubtful_above": args.doubtful, "page_doubt_share": args.page_share,
                        "alone_above": args.alone_above, "faint_median_below": args.faint_below,
                        "from_state_step": int(full.get("step", 0)),
                        "note": args.note}
    (root / "config.json").write_text(json.dumps(cfg, indent=2, default=str))
    for path in export_onnx(root):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
