"""``inkstream train-compact-zh``: train the bilingual (Chinese + Latin) compact checkpoint (CPU, resumable).

Starting point: a trained checkpoint (``--init``, default the embedded one): a Latin one, or a
bilingual export to continue from (its compressor is loaded too). Its line encoder is
kept frozen as the Latin tower; the PP-OCRv6 recognition trunk (:mod:`models.compact.line.pptower`, frozen,
pretrained) is the second tower, whose lines come from feature shards (:mod:`training.compact.zh_features`).
Trained: the PP token compressor (new), the MoE decoder (initialised from the Latin checkpoint, its
vocabulary grown to :data:`models.compact.vocab_zh.ZH_CHARSET`: the Latin ids keep their rows, new rows
start small and random) and the script head that routes a line to a tower.

Each step: cross-entropy on a batch of PP-tower lines (+ ``--att-weight`` x supervised attention, as in
``train.py``, + ``--ctc-weight`` x CTC on the vision tokens through a training-only head) plus
``--latin-weight`` x cross-entropy on a batch of freshly rendered Latin lines
through the frozen Latin tower (replay, so that reading Latin does not regress). With a pointer-generator
output (``--copy-topk``, :mod:`models.compact.decode.copy_head`) the cross-entropy is that of the mixture.
AdamW, warm-up then
cosine over ``--steps``; every ``--ckpt-every`` steps the state goes to ``OUT/state.pt`` (atomic) and
rerunning the same command resumes; every ``--eval-every`` steps greedy CER on the held-out shard
(``eval.pt``: held-out fonts and texts) is logged and the checkpoint is exported to ``OUT/export``.
The script head is trained by :mod:`training.compact.script_head` afterwards (it only needs the
Latin tower).

This module holds the command line and the training loop; the model and its export are
:mod:`training.compact.zh_model`, its set-up from ``--init`` and the resumed state
:mod:`training.compact.zh_setup`, the feature records :mod:`training.compact.zh_records`, the held-out
evaluation :mod:`training.compact.zh_eval`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import random
import time

import torch
from torch import nn

from models.compact import checkpoint as ckpt
from models.compact.vocab import build_tokenizer, encode
from models.compact.vocab_zh import ZH_CHARSET
from training.compact.corpus import build_corpus
from training.compact.data import SyntheticLines, fixed_eval_set
from training.compact.kit import load_kit
from training.compact.render import find_fonts
from training.compact.zh_eval import evaluate, evaluate_latin
from training.compact.zh_model import export
from training.compact.zh_records import ShardPool, pp_batch, pp_top, record_align, spike_align
from training.compact.zh_setup import build_model, make_optimizer, resume


def main(argv: list[str] | None = None) -> int:
    """Train or resume (see the module docstring); returns 0 when ``--steps`` (or ``--budget-seconds``)
    are done.
    """
    p = argparse.ArgumentParser(prog="inkstream train-compact-zh", description=__doc__.split("\n\n")[0])
    p.add_argument("--init", default=str(pathlib.Path(ckpt.__file__).parent / "weights"))
    p.add_argument("--features", default="runs/zh/features")
    p.add_argument("--out", default="runs/zh/train")
    p.add_argument("--steps", type=int, default=6000)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--latin-batch", type=int, default=12)
    p.add_argument("--latin-weight", type=float, default=0.5)
    p.add_argument("--att-weight", type=float, default=0.2)
    p.add_argument("--att-radius", type=int, default=1,
                   help="supervised attention window, +- vision tokens (0: exactly the teacher's spike frame, "
                        "where the copy head finds the character)")
    p.add_argument("--ctc-weight", type=float, default=0.5)
    p.add_argument("--decoder-lr-scale", type=float, default=0.5,
                   help="learning-rate factor of the decoder's layers (shared with the Latin tower's lines)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--pp-stride", type=int, default=1, choices=(1, 2),
                   help="trunk frames per vision token of a new compressor (1: 8 px, 2: 16 px)")
    p.add_argument("--posterior-topk", type=int, default=0,
                   help="a new compressor adds the recogniser's top-k CTC posterior of each frame, embedded "
                        "(stride 1; models.compact.line.pptower.PPCompressor)")
    p.add_argument("--input-noise", type=float, default=0.0,
                   help="share of a PP line's teacher-forced input characters replaced by a wrong one "
                        "(Bilingual.noisy_inputs; against exposure bias of the copy gate)")
    p.add_argument("--pointer", action="store_true",
                   help="copy through the monotonic pointer over the recogniser's spikes "
                        "(models.compact.decode.copy_head.pointer_attention), not the supervised heads' attention")
    p.add_argument("--copy-topk", type=int, default=0,
                   help="a new pointer-generator output copying each vision token's top-k classes "
                        "(models.compact.decode.copy_head; needs a posterior compressor)")
    p.add_argument("--no-pp-head-init", action="store_true",
                   help="start the new vocabulary rows and compressor at random, not from the PP classifier "
                        "(training.compact.pp_head_init)")
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--ckpt-every", type=int, default=100)
    p.add_argument("--eval-every", type=int, default=500)
    p.add_argument("--eval-lines", type=int, default=150)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu", help="torch device to train on (cuda: a lent accelerator)")
    p.add_argument("--budget-seconds", type=float, default=0.0,
                   help="train for this many seconds of training time instead of --steps (the cosine runs "
                        "over the budget; an accelerator's lease is counted in time, not steps)")
    p.add_argument("--kit", default="",
                   help="Latin replay fonts and texts from a kit (training.compact.kit) instead of the installed "
                        "packages; the Latin held-out evaluation is then skipped (a kit has no held-out faces)")
    p.add_argument("--latin-workers", type=int, default=1, help="processes rendering the Latin replay lines")
    p.add_argument("--eval-only", action="store_true",
                   help="evaluate --init (or the state in --out) on the held-out lines and exit")
    p.add_argument("--dump", default="",
                   help="with --eval-only: write every held-out line's kind, text, prediction, edits and the "
                        "recogniser's own reading here (JSONL)")
    args = p.parse_args(argv)
    args.warmup_from = 0
    torch.set_num_threads(args.threads)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    def say(msg: str) -> None:
        line = f"{time.strftime('%H:%M:%S')} {msg}"
        print(line, flush=True)
        with open(out / "train.log", "a") as fh:
            fh.write(line + "\n")

    tok = build_tokenizer(ZH_CHARSET)
    model = build_model(args, tok, out, say)
    # Built and loaded on the host as on a CPU run, then moved; from here on everything a step builds
    # (padding, masks, pointer states) is made on the device; records and the Latin replay are loaded
    # on the host and moved explicitly.
    model.to(args.device)
    if args.device != "cpu":
        torch.set_default_device(args.device)
    opt, train_params = make_optimizer(model, args.lr, args.decoder_lr_scale)
    state_path = out / "state.pt"
    step, seconds = resume(model, opt, state_path, args, say)
    space_id = tok.get_vocab()[" "]
    pool = ShardPool(pathlib.Path(args.features), args.device)
    eval_path = pathlib.Path(args.features) / "eval.pt"
    held = (torch.load(eval_path, weights_only=False, map_location="cpu")[: args.eval_lines]
            if eval_path.is_file() else [])
    for r in held:
        r["frames"] = r["frames"].to(args.device)
    if args.kit:
        kit = load_kit(args.kit)
        latin_lines, fonts, latin_held = kit.latin_lines, kit.latin_fonts, []
    else:
        corpus = build_corpus()
        fonts, held_fonts = find_fonts()
        latin_lines = corpus.train
        latin_held = fixed_eval_set(corpus.eval, held_fonts, args.eval_lines, seed=7)
    latin_tok = build_tokenizer()
    say(f"{len(pool.records)} feature lines; trainable {sum(q.numel() for q in train_params) / 1e6:.2f} M params")

    if args.eval_only:
        lines: list[dict] = []
        cer, per = evaluate(model, tok, held, dump=lines)
        if args.dump:
            pathlib.Path(args.dump).write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines))
        if latin_held:
            per["latin_tower"] = evaluate_latin(model, latin_tok, latin_held)
        say(f"step {step}: held-out CER {100 * cer:.2f} % {json.dumps({k: round(100 * v, 2) for k, v in per.items()})}")
        return 0

    # The Latin replay (training only). The loader's seeds and its (forked) workers' tensors live on the
    # host: the workers inherit this context, innermost, and must not touch the accelerator the parent
    # trains on.
    with torch.device("cpu"):
        latin_iter = iter(torch.utils.data.DataLoader(
            SyntheticLines(latin_lines, fonts, args.latin_batch, seed=args.seed + step), batch_size=None,
            num_workers=args.latin_workers, prefetch_factor=4, persistent_workers=True))
    rng = random.Random(args.seed + step)

    def save() -> None:
        tmp = state_path.with_suffix(".tmp")
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step, "seconds": seconds}, tmp)
        os.replace(tmp, state_path)

    waited = 0.0
    while not pool.records and waited < 600:  # producers started beside the trainer: their first shard
        time.sleep(2.0)
        waited += 2.0
        pool.refresh()
    if not pool.records:
        raise SystemExit(f"no feature shards (train_*.pt) in {args.features}")
    model.train()
    model.encoder.eval()
    t_last = time.time()
    def progress() -> float:
        return seconds / args.budget_seconds if args.budget_seconds > 0 else step / args.steps

    while progress() < 1.0:
        cosine = 0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress())))
        lr = args.lr * min(1.0, (step + 1 - args.warmup_from) / args.warmup) * cosine
        for g in opt.param_groups:
            g["lr"] = lr * g["scale"]
        recs = pool.batch(rng, args.batch)
        frames, n_tok = pp_batch(recs, model.pp_tower.stride)
        ids = [encode(tok, r["text"]) for r in recs]
        top = pp_top(model.pp_tower, recs, frames.shape[1])
        aligns = [spike_align(r, i, space_id) or record_align(r, model.pp_tower.stride)
                  for r, i in zip(recs, ids, strict=True)]
        align = [a if a is not None and len(a) == len(i) else None for a, i in zip(aligns, ids, strict=True)]
        vis = model.pp_tokens(frames, top)
        ce, att = model.sequence_loss(vis, n_tok, ids, align, classes=top)
        ctc = model.ctc_loss(vis, n_tok, ids) if args.ctc_weight > 0 else torch.zeros(())
        images, lat_ntok, _, texts, _ = next(latin_iter)
        with torch.no_grad():
            lat_vis, _ = model.encoder(images.to(args.device))
        lat_ce, _ = model.sequence_loss(lat_vis, lat_ntok.tolist(), [encode(latin_tok, t) for t in texts])
        loss = ce + args.att_weight * att + args.ctc_weight * ctc + args.latin_weight * lat_ce
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(train_params, 1.0)
        opt.step()
        step += 1
        now = time.time()
        seconds += now - t_last
        t_last = now
        if step % 20 == 0:
            row = {"kind": "train", "step": step, "ce": ce.item(), "att": att.item(), "ctc": ctc.item(),
                   "latin_ce": lat_ce.item(),
                   "lr": lr, "hours": seconds / 3600, "lines": len(pool.records)}
            with open(out / "log.jsonl", "a") as fh:
                fh.write(json.dumps(row) + "\n")
            say(json.dumps(row))
        if step % args.ckpt_every == 0:
            save()
            pool.refresh()
        if step % args.eval_every == 0 or progress() >= 1.0:
            cer, per = evaluate(model, tok, held) if held else (float("nan"), {})
            if latin_held:
                per["latin_tower"] = evaluate_latin(model, latin_tok, latin_held)
            with open(out / "log.jsonl", "a") as fh:
                fh.write(json.dumps({"kind": "eval", "step": step, "cer": cer, "per_kind": per}) + "\n")
            kinds = json.dumps({k: round(100 * v, 2) for k, v in per.items()})
            say(f"step {step}: held-out CER {100 * cer:.2f} % {kinds}")
            # On an accelerator only the weights: the ONNX files are exported where the checkpoint is served.
            export(model, out / "export", f"zh-step{step}",
                   {"step": step, "hours": round(seconds / 3600, 3), "heldout_cer_zh": round(cer, 5)},
                   onnx=args.device == "cpu")
            t_last = time.time()
    save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
