"""Train the script head (:mod:`models.compact.line.script`) of a bilingual compact checkpoint, in place.

Lines are rendered as in training (:func:`training.compact.render.render_line`): Chinese and mixed
Chinese/English lines (label 1, CJK fonts) and Latin lines (label 0: Latin fonts, and English text in
CJK fonts too, so that the head learns the script, not the typeface), normalised exactly as the
encoder half does and run through the checkpoint's frozen Latin tower; the head is fit with binary
cross-entropy on its line logit (AdamW). Held-out fonts and texts give the accuracy printed at the end
and stored in config.json (``script_head``). Writes ``script_head.*`` tensors into the checkpoint's
model.safetensors, then the checkpoint's ONNX files again (:func:`models.compact.export.line_onnx.export_onnx`:
the weights' revision changed, and ``encoder.onnx`` gets the head's ``script_logits`` output).

``python -m training.compact.script_head --checkpoint runs/zh/train/export --lines 3000``
"""

from __future__ import annotations

import argparse
import json
import pathlib
import random

import torch
from safetensors.torch import load_file, save_file

from models.compact import checkpoint as ckpt
from models.compact.export.onnx import export_onnx
from models.compact.line.config import encoder_config
from models.compact.line.encoder import LineEncoder
from models.compact.line.image import WIDTH_MULTIPLE, normalise_line
from models.compact.line.script import ScriptHead
from models.compact.vocab_zh import is_hanzi
from training.compact.corpus import build_corpus
from training.compact.render import find_fonts, find_zh_fonts, render_line
from training.compact.zh_corpus import ZhLineTexts, build_zh_corpus


def _lines(texts: ZhLineTexts, latin: list[str], zh_fonts: list[str], lat_fonts: list[str], rng: random.Random,
           n: int) -> list[tuple[torch.Tensor, float]]:
    out: list[tuple[torch.Tensor, float]] = []
    while len(out) < n:
        if rng.random() < 0.5:
            text = texts.sample(rng)
            fonts = zh_fonts
        else:
            src = rng.choice(latin)
            text = src[: rng.randint(3, 90)].strip() or "a"
            fonts = lat_fonts if rng.random() < 0.7 else zh_fonts
        try:
            img = render_line(text, fonts, rng)
        except ValueError:
            continue
        out.append((normalise_line(img), 1.0 if any(is_hanzi(c) for c in text) else 0.0))
    return out


def _features(encoder, lines: list[tuple[torch.Tensor, float]]) -> list[tuple[torch.Tensor, int, float]]:
    out = []
    with torch.no_grad():
        for x, y in lines:
            _, feats = encoder(x[None])
            out.append((feats[0], x.shape[-1] // (WIDTH_MULTIPLE // 2), y))
    return out


def _logits(head: ScriptHead, items: list) -> torch.Tensor:
    t = max(f.shape[0] for f, _, _ in items)
    feats = torch.zeros(len(items), t, items[0][0].shape[1])
    for i, (f, _, _) in enumerate(items):
        feats[i, : f.shape[0]] = f
    return head(feats, torch.tensor([n for _, n, _ in items]))


def main(argv: list[str] | None = None) -> int:
    """Command line: see the module docstring. Returns 0."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--lines", type=int, default=3000)
    ap.add_argument("--eval-lines", type=int, default=600)
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--copy-from", default="",
                    help="take the trained head of another checkpoint with the same Latin tower instead of training")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    root = pathlib.Path(args.checkpoint)
    cfg = ckpt.read_config(root)
    if args.copy_from:
        src = pathlib.Path(args.copy_from)
        if ckpt.read_config(src)["encoder"] != cfg["encoder"]:
            raise SystemExit(f"{src}: a different Latin tower; train the head for {root} instead")
        head_state, _ = ckpt.load_prefixed(src, ckpt.SCRIPT_PREFIX)
        _write_head(root, cfg, head_state, ckpt.read_config(src)["script_head"])
        return 0
    enc_cfg = encoder_config(cfg)
    encoder = LineEncoder(enc_cfg, int(cfg["decoder"]["hidden_size"]))
    state, _ = ckpt.load_prefixed(root, ckpt.ENCODER_PREFIX)
    encoder.load_state_dict({k: v.float() for k, v in state.items()})
    encoder.eval()
    zh, lat = build_zh_corpus(), build_corpus()
    zh_train, zh_eval = find_zh_fonts()
    lat_train, lat_eval = find_fonts()
    train = _features(encoder, _lines(ZhLineTexts(zh.train, lat.train), lat.train, zh_train, lat_train,
                                      random.Random(1), args.lines))
    held = _features(encoder, _lines(ZhLineTexts(zh.eval, lat.eval), lat.eval, zh_eval, lat_eval,
                                     random.Random(2), args.eval_lines))
    head = ScriptHead(enc_cfg.compressor_channels)
    opt = torch.optim.AdamW(head.parameters(), lr=3e-3, weight_decay=0.01)
    rng = random.Random(0)
    for epoch in range(args.epochs):
        rng.shuffle(train)
        for s in range(0, len(train), 64):
            chunk = train[s: s + 64]
            loss = torch.nn.functional.binary_cross_entropy_with_logits(
                _logits(head, chunk), torch.tensor([y for _, _, y in chunk]))
            opt.zero_grad()
            loss.backward()
            opt.step()
        if epoch % 10 == 9:
            print(f"epoch {epoch + 1}: loss {float(loss):.4f}", flush=True)
    with torch.no_grad():
        pred = _logits(head, held) > 0
    truth = torch.tensor([y > 0.5 for _, _, y in held])
    acc = float((pred == truth).float().mean())
    fn = int((~pred & truth).sum())
    fp = int((pred & ~truth).sum())
    print(f"held-out accuracy {acc:.4f} ({len(held)} lines; {fn} CJK lines sent to Latin, {fp} Latin lines to PP)")
    _write_head(root, cfg, head.state_dict(), {"top_k_frames": 3, "heldout_accuracy": round(acc, 4),
                                               "heldout_lines": len(held), "cjk_to_latin": fn, "latin_to_pp": fp})
    return 0


def _write_head(root: pathlib.Path, cfg: dict, state: dict, figures: dict) -> None:
    """Put the head's tensors into ``root``'s model.safetensors and its figures into config.json."""
    weights = root / ckpt.WEIGHTS
    tensors = load_file(str(weights))
    tensors.update({ckpt.SCRIPT_PREFIX + k: v.detach().clone().contiguous() for k, v in state.items()})
    save_file(tensors, str(weights), metadata={"format": "pt"})
    cfg["script_head"] = figures
    (root / "config.json").write_text(json.dumps(cfg, indent=2, default=str))
    for path in export_onnx(root):  # new weights, new revision: the encoder's ONNX files, with the head's output
        print(f"wrote {path}")


if __name__ == "__main__":
    raise SystemExit(main())
