"""Setting up a bilingual training run: the model from its ``--init`` checkpoint (a Latin one, or a
bilingual export to continue from), the optimiser's parameter groups, and resuming from ``state.pt``.
Used by :mod:`training.compact.train_zh`.
"""

from __future__ import annotations

import argparse
import pathlib
from collections.abc import Callable

import torch

from models.compact import checkpoint as ckpt
from models.compact.export import writer
from models.compact.line.pptower import PP_FRAME_PX, PP_TOKEN_PX
from models.compact.vocab import build_tokenizer
from training.compact.pp_head_init import feature_basis, identity_compressor, init_rows_from_pp
from training.compact.zh_model import Bilingual


def build_model(args: argparse.Namespace, tok, out: pathlib.Path, say: Callable[[str], None]) -> Bilingual:
    """The :class:`Bilingual` model of ``args.init`` on the host: the Latin tower and decoder of the
    checkpoint, the vocabulary of ``tok`` (the bilingual tokenizer); a bilingual export's compressor
    and copy head are loaded too (a new posterior path or copy head starts fresh), a new compressor
    starts from the PP classifier (:mod:`training.compact.pp_head_init`) unless ``--no-pp-head-init``
    or ``out/state.pt`` exists. Raises RuntimeError when the export's tensors do not match.
    """
    cfg = ckpt.read_config(args.init)
    latin = writer.load_training_model(args.init, cfg)
    spec = cfg.get("pp_tower", {})
    topk = int(spec.get("posterior_topk", args.posterior_topk))
    stride = 1 if topk else (int(spec.get("tokens_stride_px", PP_TOKEN_PX)) // PP_FRAME_PX if spec else args.pp_stride)
    copy_topk = int(cfg.get("copy", {}).get("topk", args.copy_topk))
    pointer = args.pointer or cfg.get("copy", {}).get("pointer") == "monotonic"
    model = Bilingual(latin, tok.get_vocab(), pp_stride=stride, posterior_topk=topk, copy_topk=copy_topk,
                      copy_pointer=pointer)
    model.att_radius = args.att_radius
    model.input_noise = args.input_noise
    if spec:  # continuing from a bilingual export (e.g. the committed one); a new posterior path starts fresh
        comp, _ = ckpt.load_prefixed(args.init, ckpt.PP_TOWER_PREFIX)
        missing, unexpected = model.pp_tower.load_state_dict({k: v.float() for k, v in comp.items()}, strict=False)
        if unexpected or [m for m in missing if not m.startswith("char_embed.")]:
            raise RuntimeError(f"{args.init}: PP compressor tensors do not match ({missing}, {unexpected})")
        if missing:
            say(f"new posterior path (top-{topk}) on the compressor of {args.init}")
        elif topk:  # an exported posterior table is A H: recover the shared map A (H has full column rank)
            with torch.no_grad():
                head = torch.as_tensor(model.lm.get_output_embeddings().weight).detach()
                sol = torch.linalg.lstsq(head, model.pp_tower.char_embed.weight.detach()).solution
                model.pp_copy.weight.copy_(sol.T)
        if model.copy is not None and "copy" in cfg:
            copy_state, _ = ckpt.load_prefixed(args.init, ckpt.COPY_PREFIX)
            model.copy.load_state_dict({k: v.float() for k, v in copy_state.items()}, strict=True)
        elif model.copy is not None:
            say(f"new pointer-generator output (top-{copy_topk})")
    elif not args.no_pp_head_init and not topk and not (out / "state.pt").is_file():
        q = feature_basis(model.lm.config.hidden_size)
        identity_compressor(model.pp_tower, q)
        probe = torch.load(pathlib.Path(args.features) / "eval.pt", weights_only=False)[:50]
        norm = float(torch.cat([r["frames"].float() for r in probe]).norm(dim=1).mean())
        rows = init_rows_from_pp(model, tok, q, norm, build_tokenizer().get_vocab_size())
        say(f"rows from the PP classifier: {rows}")
    return model


def make_optimizer(model: Bilingual, lr: float, decoder_lr_scale: float) -> tuple[torch.optim.Optimizer, list]:
    """(AdamW over three groups: the new parts and vocabulary rows, the training-only CTC head, the
    decoder's layers at ``decoder_lr_scale`` x the rate; each group's ``"scale"`` multiplies the
    scheduled ``lr``, all trainable parameters for gradient clipping).
    """
    ctc_params = list(model.ctc_head.parameters())
    io_names = ("lm.model.embed_tokens.", "lm.lm_head.")
    layer_params = [q for n, q in model.named_parameters() if q.requires_grad and n.startswith("lm.")
                    and not n.startswith(io_names)]
    main_params = [q for n, q in model.named_parameters() if q.requires_grad and not n.startswith("ctc_head.")
                   and not (n.startswith("lm.") and not n.startswith(io_names))]
    train_params = main_params + ctc_params + layer_params
    # The decoder's layers are shared with the Latin tower's lines: --decoder-lr-scale keeps them from
    # drifting away from what the Latin tower's tokens need, while the compressor and the vocabulary
    # rows learn at the full rate.
    opt = torch.optim.AdamW([{"params": main_params, "scale": 1.0}, {"params": ctc_params, "scale": 1.0},
                             {"params": layer_params, "scale": decoder_lr_scale}],
                            lr=lr, weight_decay=0.01, betas=(0.9, 0.98))
    return opt, train_params


def resume(model: Bilingual, opt: torch.optim.Optimizer, state_path: pathlib.Path, args: argparse.Namespace,
           say: Callable[[str], None]) -> tuple[int, float]:
    """(step, seconds of training) of ``state_path`` loaded into ``model`` and ``opt``; (0, 0.0) when it does
    not exist. An optimiser state of another parameter layout is dropped and the warm-up restarts
    (``args.warmup_from``). Raises RuntimeError when the state lacks model tensors.
    """
    step, seconds = 0, 0.0
    if state_path.is_file():
        st = torch.load(state_path, map_location="cpu", weights_only=False)
        missing, _ = model.load_state_dict(st["model"], strict=False)
        new_parts = ("ctc_head.", "copy.gate_stats.")  # training-only / added since: start as initialised
        if [m for m in missing if not m.startswith(new_parts)]:
            raise RuntimeError(f"state.pt lacks {missing}")
        same = [len(g["params"]) for g in st["opt"]["param_groups"]] == [len(g["params"]) for g in opt.param_groups]
        if same:
            opt.load_state_dict(st["opt"])
            for g, scale in zip(opt.param_groups, (1.0, 1.0, args.decoder_lr_scale), strict=True):
                g["scale"] = scale  # this run's --decoder-lr-scale, not the saved one
        else:  # a state from another parameter layout: moments start afresh
            say("optimiser state of another layout: AdamW moments start afresh (warm-up from here)")
            args.warmup_from = st["step"]
        step, seconds = st["step"], st["seconds"]
        say(f"resumed from step {step}")
    return step, seconds
