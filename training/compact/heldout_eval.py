"""Greedy CER of a compact checkpoint on held-out synthetic lines (held-out texts x held-out fonts,
same degradations as training), through the serving halves (encoder half's line encoder + decoder
half + :func:`models.inprocess.greedy_segments`).

Run: ``OMP_NUM_THREADS=1 python -m training.compact.heldout_eval [--model DIR] [--lines 2000] [--fonts PREFIXES]``
(``--fonts URWGothic,texgyreadventor``: only the held-out geometric face).
Prints corpus CER (total edits / total reference characters), exact-line accuracy, CER per text kind
(prose, prose mixed with numbers / dates / codes, random character runs over the whole vocabulary,
upper case; see :class:`training.compact.corpus.LineTexts`), the most frequent character edits
(``--confusions``) and the worst examples; the last line is ``heldout_cer: X``.
"""

from __future__ import annotations

import argparse
import collections
import pathlib
import sys
import time

import numpy as np
import torch
from rapidfuzz.distance import Levenshtein

from models.compact.decoder_half import CompactDecoderHalf
from models.compact.encoder_half import BUCKET_PX, CompactEncoderHalf
from models.inprocess import greedy_segments
from training.compact.corpus import LineTexts, build_corpus
from training.compact.data import fixed_eval_set
from training.compact.render import find_fonts

DEFAULT_MODEL = pathlib.Path(__file__).resolve().parents[2] / "models" / "compact" / "weights"


def main(argv: list[str] | None = None) -> int:
    """Evaluate; returns 0."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=str(DEFAULT_MODEL))
    p.add_argument("--lines", type=int, default=2000)
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--batch", type=int, default=48)
    p.add_argument("--fonts", default="",
                   help="comma-separated font file-name prefixes: only the held-out fonts of these families "
                   "(e.g. URWGothic,texgyreadventor); default all held-out fonts")
    p.add_argument("--confusions", type=int, default=20, help="print the N most frequent character edits (0 = none)")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    _, eval_fonts = find_fonts()
    if args.fonts:
        eval_fonts = [f for f in eval_fonts if pathlib.Path(f).name.startswith(tuple(args.fonts.split(",")))]
        if not eval_fonts:
            p.error(f"no held-out font named {args.fonts}*")
    enc, dec = CompactEncoderHalf.load(args.model), CompactDecoderHalf.load(args.model)
    corpus = build_corpus()
    t0 = time.time()
    kinds: list[str] = []
    samples = fixed_eval_set(corpus.eval, eval_fonts, args.lines, seed=args.seed, kinds=kinds)
    t1 = time.time()
    edits = chars = exact = 0
    per_kind: dict[str, list[int]] = {k: [0, 0, 0] for k in LineTexts.KINDS}  # edits, chars, lines
    worst: list[tuple[float, str, str]] = []
    confusions: collections.Counter[tuple[str, str]] = collections.Counter()  # (reference, read) -> count
    for s in range(0, len(samples), args.batch):
        chunk = samples[s: s + args.batch]
        xs = [c[0] for c in chunk]
        tokens = enc.encode_lines([_bucket(x) for x in xs], [x.shape[-1] // 16 for x in xs])
        for ids, c, kind in zip(greedy_segments(dec, tokens), chunk, kinds[s: s + args.batch], strict=True):
            hyp, ref = dec.decode_text(ids), c[1]
            d = Levenshtein.distance(hyp, ref)
            edits, chars, exact = edits + d, chars + len(ref), exact + (hyp == ref)
            k = per_kind[kind]
            k[0], k[1], k[2] = k[0] + d, k[1] + len(ref), k[2] + 1
            worst.append((d / max(1, len(ref)), hyp, ref))
            for op in Levenshtein.editops(hyp, ref):  # hyp -> ref: what was read instead of what
                read = hyp[op.src_pos] if op.tag != "insert" else ""
                confusions[(ref[op.dest_pos] if op.tag != "delete" else "", read)] += 1
    worst.sort(reverse=True)
    print(f"{len(samples)} held-out lines ({len(eval_fonts)} held-out fonts), rendered in {t1 - t0:.0f}s, "
          f"read in {time.time() - t1:.0f}s")
    print(f"exact lines: {exact}/{len(samples)} ({100 * exact / len(samples):.1f}%)")
    for kind, (k_edits, k_chars, k_lines) in per_kind.items():
        print(f"  {kind:>6}: CER {100 * k_edits / max(1, k_chars):5.2f}%  {k_lines:4d} lines, {k_chars:6d} chars, "
              f"{100 * k_edits / max(1, edits):4.1f}% of all edits")
    if args.confusions:
        total = sum(confusions.values())
        top = ", ".join(f"{r or '∅'!r}→{h or '∅'!r} {n}" for (r, h), n in confusions.most_common(args.confusions))
        print(f"most frequent edits (reference→read, of {total}): {top}")
    for rate, hyp, ref in worst[:8]:
        print(f"  cer {100 * rate:5.1f}%  ref {ref!r}\n               hyp {hyp!r}")
    print(f"heldout_cer: {edits / max(1, chars):.4f}")
    return 0


def _bucket(x: torch.Tensor) -> np.ndarray:
    """Pad a normalised line to the encoder half's 64-px width bucket (as ``prepare_lines`` does)."""
    w = -(-x.shape[-1] // BUCKET_PX) * BUCKET_PX
    out = np.zeros((1, x.shape[1], w), dtype=np.float32)
    out[:, :, : x.shape[-1]] = x.numpy()
    return out


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
