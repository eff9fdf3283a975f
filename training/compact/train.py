"""``inkstream train-compact``: train the compact OCR model on synthetic lines (CPU, resumable).

Teacher forcing with cross-entropy on the text (+ ``--ctc-weight`` x CTC on the encoder's stride-8
features), AdamW, linear warm-up then cosine decay (``--steps`` total), gradient clipping at 1.0.
Every ``--ckpt-every`` steps the full training state is saved to ``OUT/state.pt`` (atomic rename);
rerunning the same command resumes from it. Every ``--eval-every`` steps greedy CER on a fixed set of
held-out lines (held-out fonts and texts) is measured, the model is exported in Hugging Face layout to
``OUT/export`` (see checkpoint.py), ``OUT/log.jsonl`` / ``OUT/train.log`` are appended and the
learning curve ``OUT/curve.png`` (matplotlib) is redrawn.

Example: ``nice -n 5 inkstream train-compact --out runs/compact --steps 8000``

On an accelerator (``--device cuda``) the CPU workers that render lines are the bottleneck: use a
large ``--batch``, ``--workers`` = cores - 2, ``--replay-uses`` > 1 (replay.py) and
``--budget-seconds`` (a schedule of its own, begun by this command). Where the training machine
lacks the local text sources, write the exact corpus split here first (``--write-corpus
corpus.json``) and train there with ``--texts corpus.json``; the fonts must be installed there under
the same file names (render.py).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import time

import torch
from rapidfuzz.distance import Levenshtein

from models.compact.export.writer import export_checkpoint
from models.compact.model import CompactOCR, EncoderConfig, decoder_config
from models.compact.vocab import build_tokenizer, decode
from training.compact.corpus import build_corpus, texts_corpus
from training.compact.curve import plot_curve
from training.compact.data import SyntheticLines, collate, fixed_eval_set
from training.compact.render import find_fonts
from training.compact.replay import ReplayBatches


def cer(hyp: str, ref: str) -> float:
    """Character error rate: Levenshtein distance / len(ref) (rapidfuzz)."""
    return Levenshtein.distance(hyp, ref) / max(1, len(ref))


def evaluate_lines(model: CompactOCR, samples: list, batch: int = 32) -> tuple[float, list[tuple[str, str]]]:
    """Greedy-decode ``samples`` [(image, text)]; returns (corpus CER = total edits / total chars, pairs)."""
    tok = build_tokenizer()
    model.eval()
    edits, chars, pairs = 0, 0, []
    order = sorted(range(len(samples)), key=lambda i: samples[i][0].shape[-1])
    for s in range(0, len(order), batch):
        chunk = [samples[i] for i in order[s: s + batch]]
        images, n_tokens, _, texts, _ = collate(chunk, tok)
        images = images.to(next(model.parameters()).device)
        max_new = min(250, int(1.3 * max(len(t) for t in texts)) + 10)
        for ids, ref in zip(model.greedy(images, n_tokens, max_new=max_new), texts, strict=True):
            hyp = decode(tok, ids)
            edits += Levenshtein.distance(hyp, ref)
            chars += len(ref)
            pairs.append((hyp, ref))
    model.train()
    return edits / max(1, chars), pairs


def progress(step: int, seconds: float, args: argparse.Namespace) -> float:
    """Fraction of the schedule done: the larger of steps / --steps and seconds / --hours, or, with
    --budget-seconds, the seconds trained since that schedule began / --budget-seconds.
    """
    if args.budget_seconds > 0:
        return min(1.0, (seconds - args.seconds_at_start) / args.budget_seconds)
    p = step / max(1, args.steps)
    if args.hours > 0:
        p = max(p, seconds / (3600.0 * args.hours))
    return min(1.0, p)


def _lr(step: int, prog: float, peak: float, warmup: int) -> float:
    """Linear warm-up over ``warmup`` steps, then cosine decay to 2 % of ``peak`` at progress 1."""
    if step < warmup:
        return peak * (step + 1) / warmup
    p = prog
    return peak * (0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * p)))


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Parse the ``inkstream train-compact`` command line (``argv`` without the program name).

    Raises SystemExit (argparse) on a bad command line or for ``--help``.
    """
    p = argparse.ArgumentParser(prog="inkstream train-compact", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="runs/compact", help="run directory (state, log, export)")
    p.add_argument("--steps", type=int, default=8000, help="total optimiser steps (cosine schedule length)")
    p.add_argument("--max-steps-this-run", type=int, default=0,
                   help="stop after this many steps in this invocation (0 = no limit)")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--lr", type=float, default=1.5e-3)
    p.add_argument("--warmup", type=int, default=300)
    p.add_argument("--ctc-weight", type=float, default=0.3)
    p.add_argument("--att-weight", type=float, default=0.5,
                   help="weight of the supervised-attention loss (0 = off)")
    p.add_argument("--hours", type=float, default=0.0,
                   help="training-time budget: the schedule ends at whichever of --steps / --hours comes first "
                   "(0 = steps only)")
    p.add_argument("--hidden", type=int, default=160)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--max-chars", type=int, default=110)
    p.add_argument("--eval-every", type=int, default=400)
    p.add_argument("--eval-lines", type=int, default=128)
    p.add_argument("--ckpt-every", type=int, default=200)
    p.add_argument("--log-every", type=int, default=25)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--workers", type=int, default=1, help="DataLoader worker processes rendering lines")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--texts", default="",
                   help="UTF-8 file of training texts, one per line (or a .json corpus split, see texts_corpus), "
                   "instead of the local corpus (held-out split by crc32 as in corpus.py; used by tests)")
    p.add_argument("--kind-shares", default="0.62,0.26,0.07,0.05",
                   help="training share of each text kind: prose, mixed, random characters, upper case "
                   "(the held-out set keeps the default)")
    p.add_argument("--device", default="cpu", help="torch device to train on (cpu, cuda)")
    p.add_argument("--budget-seconds", type=float, default=0.0,
                   help="schedule of this invocation alone: warm-up from the resumed step, cosine to 2 %% after this "
                   "many seconds of training (rerunning the same command after an interruption continues it; once "
                   "finished, a rerun starts a new one)")
    p.add_argument("--replay-uses", type=int, default=1,
                   help="with a fast accelerator: serve each rendered batch up to this many times while no fresh "
                   "batch waits (replay.py)")
    p.add_argument("--write-corpus", default="", help="write the local corpus split as JSON to this path and exit")
    p.add_argument("--enc-channels", default="32,64", help="trunk stage widths (tests use smaller ones)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Train (or resume) the compact model; returns 0 when ``--steps`` are done."""
    args = parse_args(list(argv or []))
    torch.set_num_threads(args.threads)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log_path, state_path = out / "log.jsonl", out / "state.pt"
    def say(msg: str) -> None:
        line = f"{time.strftime('%H:%M:%S')} {msg}"
        print(line, flush=True)
        with open(out / "train.log", "a") as textlog:
            textlog.write(line + "\n")

    corpus = texts_corpus(args.texts) if args.texts else build_corpus()
    if args.write_corpus:
        split = json.dumps({"train": corpus.train, "eval": corpus.eval})
        pathlib.Path(args.write_corpus).write_text(split, encoding="utf-8")
        say(f"wrote {args.write_corpus}")
        return 0
    train_fonts, eval_fonts = find_fonts()
    say(f"corpus: {len(corpus.train)} train / {len(corpus.eval)} held-out text lines; "
        f"fonts: {len(train_fonts)} train / {len(eval_fonts)} held-out")
    tok = build_tokenizer()
    c0, c1 = (int(c) for c in args.enc_channels.split(","))  # two trunk stages; ValueError otherwise
    enc_cfg = EncoderConfig(channels=(c0, c1))
    model = CompactOCR(enc_cfg, decoder_config(tok.get_vocab_size(), args.hidden, args.layers)).to(args.device)
    if args.device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = True
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01, betas=(0.9, 0.98))
    step, seconds, schedule = 0, 0.0, None
    if state_path.is_file():
        # On the host: load_state_dict moves the tensors to the parameters' device, but leaves AdamW's
        # step counters where they are, and counters on a GPU cost a sync per tensor and step.
        st = torch.load(state_path, map_location="cpu", weights_only=False)
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        step, seconds, schedule = st["step"], st.get("seconds", 0.0), st.get("schedule")
        say(f"resumed from step {step} ({seconds / 3600:.2f} h trained)")
    n_enc = sum(p.numel() for p in model.encoder.parameters())
    n_dec = sum(p.numel() for p in model.lm.parameters())
    say(f"params: encoder {n_enc / 1e6:.2f} M, decoder {n_dec / 1e6:.2f} M")
    eval_set = fixed_eval_set(corpus.eval, eval_fonts, args.eval_lines, seed=7, max_chars=args.max_chars)
    ds = SyntheticLines(corpus.train, train_fonts, args.batch, seed=args.seed + step, max_chars=args.max_chars,
                        shares=tuple(float(x) for x in args.kind_shares.split(",")))
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=args.workers,
                                         prefetch_factor=4 if args.workers else None,
                                         persistent_workers=bool(args.workers))
    batches: ReplayBatches | torch.utils.data.DataLoader = (
        ReplayBatches(loader, max_uses=args.replay_uses, seed=args.seed + step) if args.replay_uses > 1 else loader)
    args.seconds_at_start, warm_from = seconds, step if args.budget_seconds > 0 else 0
    if (args.budget_seconds > 0 and schedule and schedule["budget_seconds"] == args.budget_seconds
            and seconds - schedule["seconds_at_start"] < args.budget_seconds):  # an interrupted run of this one
        args.seconds_at_start, warm_from = schedule["seconds_at_start"], schedule["step_at_start"]
        say(f"continuing the --budget-seconds schedule begun at step {warm_from}")
    model.train()
    t_last, started, agg = time.time(), step, {"ce": 0.0, "ctc": 0.0, "att": 0.0, "n": 0, "chars": 0, "tokens": 0}

    def save_state() -> None:
        tmp = state_path.with_suffix(".tmp")
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step, "seconds": seconds,
                    "args": vars(args),
                    "schedule": {"budget_seconds": args.budget_seconds, "seconds_at_start": args.seconds_at_start,
                                 "step_at_start": warm_from} if args.budget_seconds > 0 else None}, tmp)
        os.replace(tmp, state_path)

    try:
        first = True
        for images, n_tokens, ids, _texts, align in batches:
            if first:  # worker start-up and the first batch's rendering are not training time
                t_last, first = time.time(), False
            if progress(step, seconds, args) >= 1.0 or (
                    args.max_steps_this_run and step - started >= args.max_steps_this_run):
                break
            for g in opt.param_groups:
                g["lr"] = _lr(step - warm_from, progress(step, seconds, args), args.lr, args.warmup)
            ce, ctc = model(images.to(args.device, non_blocking=True), n_tokens, ids,
                            align if args.att_weight > 0 else None)
            att = model.last_attention_loss
            loss = ce + args.ctc_weight * ctc + args.att_weight * att
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            now = time.time()
            seconds += now - t_last
            t_last = now
            agg["ce"] += float(ce.detach())
            agg["ctc"] += float(ctc.detach())
            agg["att"] += float(att.detach())
            agg["n"] += 1
            agg["chars"] += sum(len(i) for i in ids)
            agg["tokens"] += int(n_tokens.sum())
            if step % args.log_every == 0:
                row = {"kind": "train", "step": step, "ce": agg["ce"] / agg["n"], "ctc": agg["ctc"] / agg["n"],
                       "att": agg["att"] / agg["n"], "lr": opt.param_groups[0]["lr"], "hours": seconds / 3600,
                       "chars_per_vision_token": agg["chars"] / max(1, agg["tokens"]),
                       "device": args.device, "batch": args.batch}
                if isinstance(batches, ReplayBatches):
                    row["fresh_batches"], row["replayed_batches"] = batches.stats()
                with open(log_path, "a") as fh:
                    fh.write(json.dumps(row) + "\n")
                say(f"step {step} ce {row['ce']:.4f} ctc {row['ctc']:.4f} att {row['att']:.3f} lr {row['lr']:.2e} "
                    f"{seconds / max(1, step):.2f}s/step-avg chars/token {row['chars_per_vision_token']:.2f}")
                agg = {"ce": 0.0, "ctc": 0.0, "att": 0.0, "n": 0, "chars": 0, "tokens": 0}
            if step % args.ckpt_every == 0:
                save_state()
            if step % args.eval_every == 0 or progress(step, seconds, args) >= 1.0:
                t0 = time.time()
                c, pairs = evaluate_lines(model, eval_set)
                with open(log_path, "a") as fh:
                    fh.write(json.dumps({"kind": "eval", "step": step, "cer": c, "hours": seconds / 3600}) + "\n")
                say(f"eval step {step}: held-out CER {100 * c:.2f}% ({time.time() - t0:.0f}s); "
                    f"e.g. {pairs[len(pairs) // 2]}")
                export_checkpoint(model, out / "export", revision=f"step{step}",
                                  training={"step": step, "hours": round(seconds / 3600, 3),
                                            "heldout_cer": round(c, 5)})
                plot_curve(log_path, out / "curve.png")
                t_last = time.time()
    finally:
        if isinstance(batches, ReplayBatches):
            batches.close()
    save_state()
    say(f"done at step {step}")
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
