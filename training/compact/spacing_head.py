"""Train the spacing head (:mod:`models.compact.decode.spacing`) of a bilingual compact checkpoint, in place.

Data: feature records of :mod:`training.compact.zh_features` that carry ``columns`` (rendered training
lines: training fonts and texts; held-out fonts and texts for ``--eval``). For each line the
recogniser's copy classes are computed as the encoder computes them (the frozen CTC head,
:func:`models.compact.decode.copy_head.peak_classes`); where the line's non-space characters are exactly its
character spikes (:func:`models.compact.decode.spacing.character_spikes`; ~95 % of lines), spike i is the
reading of character i and gets two labels: a space follows it in the text, it is full-width (only for
the marks of :data:`models.compact.decode.spacing.FULL_TO_HALF`, both widths). Other frames are not scored.
Loss: binary cross-entropy on both outputs (AdamW, one-cycle schedule). A few minutes on one core.

Writes ``spacing.*`` tensors into the checkpoint's model.safetensors, ``spacing`` into config.json
(the head's size, the confidence the decoder needs to override its own choice, held-out figures), and
the checkpoint's ONNX files again (``pp_tokens.onnx`` gets the ``columns`` input).

``python -m training.compact.spacing_head --checkpoint DIR --features runs/zh/spacing --eval runs/zh/features/eval.pt``

``--eval-only`` trains and writes nothing: it reports the checkpoint's own head on ``--eval`` and, per
``--dump HELD.pt=PRED.jsonl``, the CER of the decoder's predictions as written and respaced.
"""

from __future__ import annotations

import argparse
import glob
import json
import pathlib
import random
import time

import torch
from safetensors.torch import load_file, save_file

from models.compact import checkpoint as ckpt
from models.compact.decode.spacing import FULL_TO_HALF, HALF_TO_FULL, respace, width_pairs
from models.compact.export.onnx import export_onnx
from models.compact.line.columns import character_spikes, copy_weights, peak_classes
from models.compact.line.pptower import PPCompressor, attach_recogniser_head
from models.compact.line.spacing_head import SpacingHead, head_inputs, script_classes
from models.compact.vocab import SPECIALS, build_tokenizer, decode, encode
from models.compact.vocab_zh import ZH_CHARSET

SPACING_PREFIX = ckpt.SPACING_PREFIX
CONFIDENCE = 0.9  #: set before measuring, as keep_confident_spike's floor; not tuned on held-out lines


def line_inputs(record: dict, comp: PPCompressor, scripts: torch.Tensor,
                space_id: int) -> tuple[torch.Tensor, list[int], list[int]]:
    """A feature record (with ``columns``) -> (the head's input float32 [T, 142], :func:`head_inputs`;
    the frames of its character spikes, in order; the recogniser's class at each), the copy classes
    computed as the encoder does.
    """
    if "columns" not in record:
        raise SystemExit("feature records without ink columns: write them again with training.compact.zh_features")
    p, ids = comp.top_classes(record["frames"].float())
    q = copy_weights(peak_classes(p, ids), ids)
    spikes = character_spikes(q, ids, space_id).nonzero()[:, 0].tolist()
    x = head_inputs(record["frames"][None], record["columns"][None], q[None], ids[None], scripts, space_id)[0]
    return x, spikes, ids[spikes, 0].tolist()


def examples(records: list[dict], comp: PPCompressor, scripts: torch.Tensor, space_id: int) -> list[dict]:
    """Feature records (with ``columns``) -> one example per line whose non-space characters match its
    character spikes: ``x`` float16 [T, 142] (:func:`line_inputs`), ``ys`` / ``yw`` int8 [T] (1 / 0 at
    spikes, -1 elsewhere), and the record's ``text`` and ``kind``.
    """
    ambiguous = set(FULL_TO_HALF) | set(HALF_TO_FULL)
    out = []
    for r in records:
        x, spikes, _ = line_inputs(r, comp, scripts, space_id)
        text = r["text"]
        solid = [k for k, ch in enumerate(text) if ch != " "]
        if not solid or len(solid) != len(spikes):
            continue
        ys = torch.full((x.shape[0],), -1, dtype=torch.int8)
        yw = ys.clone()
        for i, t in enumerate(spikes):
            if i + 1 < len(spikes):
                ys[t] = int(solid[i + 1] > solid[i] + 1)
            if text[solid[i]] in ambiguous:
                yw[t] = int(text[solid[i]] in FULL_TO_HALF)
        out.append({"x": x.half(), "ys": ys, "yw": yw, "text": text, "kind": r["kind"]})
    return out


def respaced_cer(head: SpacingHead, records: list[dict], rows: list[dict], comp: PPCompressor, scripts: torch.Tensor,
                 tok, confidence: float) -> dict[str, tuple[float, float]]:
    """CER (%) per kind and overall of the decoder's predictions ``rows`` (``train_zh --eval-only --dump``
    of the same ``records``, same order) as written and after :func:`respace`, exactly as the decoder
    service finishes a segment. Raises ValueError when the dump is of other lines.
    """
    from rapidfuzz.distance import Levenshtein  # evaluation only

    vocab = tok.get_vocab()
    space_id, pairs = vocab[" "], width_pairs(vocab)
    full_ids = {vocab[c] for c in FULL_TO_HALF if c in vocab}
    if len(rows) != len(records) or any(r["text"] != d["text"] for r, d in zip(records, rows, strict=True)):
        raise ValueError("the dump is not of these held-out lines")
    before: dict[str, int] = {}
    after: dict[str, int] = {}
    chars: dict[str, int] = {}
    with torch.no_grad():
        for r, d in zip(records, rows, strict=True):
            x, spikes, spike_ids = line_inputs(r, comp, scripts, space_id)
            probs = torch.sigmoid(head(x[None]))[0][spikes]
            written = [i for i in encode(tok, d["pred"]) if i >= len(SPECIALS)]
            new = decode(tok, respace(written, probs, spike_ids, space_id, pairs, full_ids, confidence))
            for k in (d["kind"], "all"):
                before[k] = before.get(k, 0) + Levenshtein.distance(d["pred"], d["text"])
                after[k] = after.get(k, 0) + Levenshtein.distance(new, d["text"])
                chars[k] = chars.get(k, 0) + len(d["text"])
    return {k: (round(100 * before[k] / chars[k], 2), round(100 * after[k] / chars[k], 2)) for k in chars}


def _batch(items: list[dict]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    t = max(i["x"].shape[0] for i in items)
    x = torch.zeros(len(items), t, items[0]["x"].shape[1])
    ys = torch.full((len(items), t), -1, dtype=torch.long)
    yw = ys.clone()
    for b, i in enumerate(items):
        n = i["x"].shape[0]
        x[b, :n], ys[b, :n], yw[b, :n] = i["x"].float(), i["ys"].long(), i["yw"].long()
    return x, ys, yw


def _loss(logits: torch.Tensor, ys: torch.Tensor, yw: torch.Tensor) -> torch.Tensor:
    loss = logits.new_zeros(())
    for k, y in enumerate((ys, yw)):
        m = y >= 0
        if bool(m.any()):
            loss = loss + torch.nn.functional.binary_cross_entropy_with_logits(logits[..., k][m], y[m].float())
    return loss


def errors(head: SpacingHead, items: list[dict], confidence: float) -> dict:
    """The head's decisions at the scored spikes of ``items``: counts of spikes, of wrong decisions at
    0.5, and of confident (>= ``confidence`` either way) decisions and wrong confident ones, for spaces
    and widths.
    """
    c = dict.fromkeys(("spaces", "space_errors", "space_confident", "space_confident_errors",
                       "widths", "width_errors", "width_confident", "width_confident_errors"), 0)
    with torch.no_grad():
        for s in range(0, len(items), 64):
            x, ys, yw = _batch(items[s: s + 64])
            p = torch.sigmoid(head(x))
            for k, (y, name) in enumerate(((ys, "space"), (yw, "width"))):
                m = y >= 0
                pk, yk = p[..., k][m], y[m]
                sure = (pk >= confidence) | (pk <= 1 - confidence)
                wrong = (pk >= 0.5).long() != yk
                c[name + "s"] += int(m.sum())
                c[name + "_errors"] += int(wrong.sum())
                c[name + "_confident"] += int(sure.sum())
                c[name + "_confident_errors"] += int((wrong & sure).sum())
    return c


def main(argv: list[str] | None = None) -> int:
    """Command line: see the module docstring. Returns 0."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--copy-from", default="",
                    help="take the trained head of another bilingual checkpoint instead of training (the head reads "
                         "only the frozen trunk and the pixels, so it carries over when the decoder is retrained)")
    ap.add_argument("--features", action="append", default=[],
                    help="directory of train_*.pt feature shards with columns (repeatable)")
    ap.add_argument("--eval", default="", help="held-out feature records with columns (zh_features --eval)")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--hidden", type=int, default=96)
    ap.add_argument("--dropout", type=float, default=0.0, help="dropout on the head's inputs while training")
    ap.add_argument("--weight-decay", type=float, default=1e-4)
    ap.add_argument("--dilations", default="2,4,8", help="dilation of each convolution after the first")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dump", action="append", default=[],
                    help="HELD.pt=PRED.jsonl: report CER before / after respace on the decoder's predictions of "
                         "those held-out records (train_zh --eval-only --dump); repeatable")
    ap.add_argument("--eval-only", action="store_true",
                    help="report --eval / --dump figures of the checkpoint's own head; train and write nothing")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    root = pathlib.Path(args.checkpoint)
    cfg = ckpt.read_config(root)
    if args.copy_from:
        state, _ = ckpt.load_prefixed(args.copy_from, SPACING_PREFIX)
        _write_head(root, cfg, state,
                    ckpt.read_config(args.copy_from)["spacing"])
        return 0
    if not args.eval_only and (not args.features or not args.eval):
        raise SystemExit("--features and --eval are needed to train the head (or --copy-from)")
    vocab = build_tokenizer(ZH_CHARSET).get_vocab()
    if "copy" not in cfg:
        raise SystemExit(f"{root}: the spacing head needs a checkpoint with copy classes (config \"copy\")")
    comp = PPCompressor(16, stride=1, posterior_topk=int(cfg["pp_tower"]["posterior_topk"]), vocab_size=len(vocab))
    attach_recogniser_head(comp, vocab)
    scripts, space_id = script_classes(vocab), vocab[" "]
    if args.eval_only:
        if "spacing" not in cfg:
            raise SystemExit(f"{root}: no spacing head to evaluate (config \"spacing\")")
        head = SpacingHead(hidden=int(cfg["spacing"]["hidden"]), dilations=tuple(cfg["spacing"]["dilations"]))
        state, _ = ckpt.load_prefixed(root, SPACING_PREFIX)
        head.load_state_dict({k: v.float() for k, v in state.items()})
        _report(head.eval(), args, comp, scripts, space_id)
        return 0
    t0 = time.time()
    train = []
    for path in sorted(p for d in args.features for p in glob.glob(str(pathlib.Path(d) / "train_*.pt"))):
        train += examples(torch.load(path, weights_only=False), comp, scripts, space_id)
    held = examples(torch.load(args.eval, weights_only=False), comp, scripts, space_id)
    print(f"{len(train)} training lines, {len(held)} held-out lines ({time.time() - t0:.0f} s)", flush=True)
    dilations = tuple(int(d) for d in args.dilations.split(","))
    head = SpacingHead(hidden=args.hidden, dilations=dilations, dropout=args.dropout)
    opt = torch.optim.AdamW(head.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, args.lr, total_steps=args.steps, pct_start=0.05)
    rng = random.Random(0)
    for step in range(args.steps):
        x, ys, yw = _batch(rng.sample(train, args.batch))
        loss = _loss(head(x), ys, yw)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % 250 == 0:
            print(f"step {step}: loss {float(loss.detach()):.4f} ({time.time() - t0:.0f} s)", flush=True)
    figures = _report(head.eval(), args, comp, scripts, space_id, held)
    _write_head(root, cfg, head.state_dict(), {
        "hidden": args.hidden, "dilations": list(dilations), "confidence": CONFIDENCE, "training_lines": len(train),
        "steps": args.steps, "heldout_lines": len(held), "heldout": figures})
    return 0


def _report(head: SpacingHead, args: argparse.Namespace, comp: PPCompressor, scripts: torch.Tensor, space_id: int,
            held: list[dict] | None = None) -> dict:
    """Print and return the head's decision errors on the held-out lines (``held``, else ``--eval`` when
    given) and, per ``--dump``, the CER of the decoder's predictions as written and respaced.
    """
    if held is None and args.eval:
        held = examples(torch.load(args.eval, weights_only=False), comp, scripts, space_id)
    figures = errors(head, held, CONFIDENCE) if held else {}
    print("held-out", json.dumps(figures), flush=True)
    tok = build_tokenizer(ZH_CHARSET)
    for spec in args.dump:
        held_path, pred_path = spec.split("=", 1)
        rows = [json.loads(line) for line in pathlib.Path(pred_path).read_text(encoding="utf-8").splitlines()]
        cer = respaced_cer(head, torch.load(held_path, weights_only=False), rows, comp, scripts, tok, CONFIDENCE)
        figures.setdefault("respaced_cer", {})[held_path] = cer
        print(f"{held_path}: CER % (as written, respaced) {json.dumps(cer, ensure_ascii=False)}", flush=True)
    return figures


def _write_head(root: pathlib.Path, cfg: dict, state: dict, spec: dict) -> None:
    """Put the head's tensors into ``root``'s model.safetensors and ``spec`` into config.json
    (``spacing``), then the checkpoint's ONNX files again (new weights, new revision).
    """
    weights = root / ckpt.WEIGHTS
    tensors = load_file(str(weights))
    tensors.update({SPACING_PREFIX + k: v.detach().clone().contiguous() for k, v in state.items()})
    save_file(tensors, str(weights), metadata={"format": "pt"})
    cfg["spacing"] = spec
    (root / "config.json").write_text(json.dumps(cfg, indent=2, default=str))
    for written in export_onnx(root):
        print(f"wrote {written}")


if __name__ == "__main__":
    raise SystemExit(main())
