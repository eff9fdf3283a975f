"""Feature shards for training the bilingual compact model on top of the frozen PP-OCRv6 trunk.

The trunk is frozen (:mod:`models.compact.line.pptower`), so its output for a rendered line never changes:
a producer renders lines (:func:`training.compact.render.render_line` with CJK fonts, texts from
:class:`training.compact.zh_corpus.ZhLineTexts`), runs the trunk once per line and writes shards of
``{"frames": float16 [W/8, 120], "n_tokens": int, "text": str, "kind": str, "align": list[int],
"columns": float16 [W/8, 16]}`` (the line's ink per pixel column, :func:`models.compact.decode.spacing.column_ink`) to
``OUT/train_<worker>_<k>.pt`` (atomic rename). The trainer replays them many times, which costs
one trunk forward per line instead of one per use. Rerunning resumes after the last complete shard.

``python -m training.compact.zh_features --out runs/zh/features --shards 200 --worker 0``;
``--eval`` writes ``eval.pt``: held-out fonts and held-out texts, fixed seed.
"""

from __future__ import annotations

import argparse
import pathlib
import random
import time

import numpy as np
import torch

from models.compact.line.inkcolumns import column_ink
from models.compact.line.pptower import PP_LINE_HEIGHT, PP_TOKEN_PX, PPTrunk, normalise_line_pp, pp_tokens
from training.compact.corpus import build_corpus
from training.compact.kit import load_kit
from training.compact.render import find_fonts, find_zh_fonts, render_line
from training.compact.zh_corpus import ZhLineTexts, build_zh_corpus

Sample = tuple[np.ndarray, str, str, int, list[int]]  # PP input, text, kind, vision tokens, alignment


def render_samples(texts: ZhLineTexts, zh_fonts: list[str], latin_fonts: list[str], rng: random.Random,
                   n: int, max_chars: int = 60) -> list[Sample]:
    """``n`` rendered lines as (PP input float32 [3, 48, W], text, kind, vision tokens, the vision-token
    index of each character's centre, for supervising the decoder's attention).
    """
    out: list[Sample] = []
    while len(out) < n:
        text = texts.sample(rng, max_chars)
        fonts = latin_fonts if texts.last_kind == "latin" and rng.random() < 0.6 else zh_fonts
        xs: list[float] = []
        try:
            img = render_line(text, fonts, rng, positions=xs)
        except ValueError:
            continue
        n_tok = pp_tokens(img.width, img.height)
        scale = PP_LINE_HEIGHT / img.height / PP_TOKEN_PX
        align = [min(n_tok - 1, max(0, int(x * scale))) for x in xs]
        out.append((normalise_line_pp(img), text, texts.last_kind, n_tok, align))
    return out


def trunk_records(trunk: PPTrunk, samples: list[Sample], batch: int = 16) -> list[dict]:
    """Run the trunk over ``samples`` grouped by bucket width; one record per sample, same order."""
    records: list[dict | None] = [None] * len(samples)
    by_w: dict[int, list[int]] = {}
    for i, (x, *_rest) in enumerate(samples):
        by_w.setdefault(x.shape[-1], []).append(i)
    for idx in by_w.values():
        for s in range(0, len(idx), batch):
            chunk = idx[s: s + batch]
            feats = trunk.features(np.stack([samples[i][0] for i in chunk]))
            for j, i in enumerate(chunk):
                _, text, kind, n_tokens, align = samples[i]
                records[i] = {"frames": torch.from_numpy(feats[j]).half(), "text": text, "kind": kind,
                              "n_tokens": n_tokens, "align": align,
                              "columns": torch.from_numpy(column_ink(samples[i][0])).half()}
    return [r for r in records if r is not None]


def _save(path: pathlib.Path, records: list[dict]) -> None:
    tmp = path.with_suffix(".tmp")
    torch.save(records, tmp)
    tmp.replace(path)


def main(argv: list[str] | None = None) -> None:
    """Command line: see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True)
    ap.add_argument("--shards", type=int, default=100)
    ap.add_argument("--per-shard", type=int, default=256)
    ap.add_argument("--worker", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--eval", action="store_true", help="write eval.pt (held-out fonts and texts)")
    ap.add_argument("--eval-lines", type=int, default=300)
    ap.add_argument("--eval-seed", type=int, default=12345,
                    help="seed of the held-out lines drawn (another seed: an independent held-out sample)")
    ap.add_argument("--kit", default="", help="training fonts and texts from a kit (training.compact.kit) instead "
                    "of the installed Debian packages (training shards only)")
    ap.add_argument("--kind-shares", default="",
                    help="training shards only: shares of the line kinds, comma-separated in the order of "
                         "ZhLineTexts.KINDS (default ZhLineTexts.SHARES), e.g. to over-sample mixed lines")
    args = ap.parse_args(argv)
    shares = tuple(float(x) for x in args.kind_shares.split(",")) if args.kind_shares else None
    torch.set_num_threads(1)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    trunk = PPTrunk(threads=args.threads)
    if args.kit:
        if args.eval:
            raise SystemExit("--eval needs the held-out fonts and texts, which a kit leaves out")
        kit = load_kit(args.kit)
        texts = ZhLineTexts(kit.zh_lines, kit.latin_lines, shares)
        zh_train, lat_train = kit.zh_fonts, kit.latin_fonts
    else:
        zh, latin = build_zh_corpus(), build_corpus()
        zh_train, zh_eval = find_zh_fonts()
        lat_train, lat_eval = find_fonts()
        texts = ZhLineTexts(zh.train, latin.train, shares)
    if args.eval:
        held = ZhLineTexts(zh.eval, latin.eval)
        samples = render_samples(held, zh_eval, lat_eval, random.Random(args.eval_seed), args.eval_lines)
        _save(out / "eval.pt", trunk_records(trunk, samples))
        print(f"wrote {out / 'eval.pt'}: {args.eval_lines} lines, fonts {zh_eval}")
        return
    for k in range(args.shards):
        path = out / f"train_{args.worker}_{k:05d}.pt"
        if path.exists():
            continue
        t0 = time.time()
        rng = random.Random(1_000_003 * (args.worker + 1) + k)
        records = trunk_records(trunk, render_samples(texts, zh_train, lat_train, rng, args.per_shard))
        _save(path, records)
        print(f"{path.name}: {len(records)} lines in {time.time() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
