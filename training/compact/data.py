"""Synthetic training / evaluation batches for the compact model (rendered on the fly).

A batch is ``(images [B,1,32,W] float32, n_tokens [B] int64, text_ids list[list[int]], texts)``.
Length bucketing: ``pool`` batches' worth of lines are rendered, sorted by width and cut into
batches, so a batch pads little (``W`` = widest line of the batch).
"""

from __future__ import annotations

import random

import torch
from torch.utils.data import IterableDataset, get_worker_info

from models.compact.line.image import LINE_HEIGHT, WIDTH_MULTIPLE, normalise_line
from models.compact.vocab import build_tokenizer, encode
from training.compact.corpus import LineTexts
from training.compact.render import render_line


def collate(samples: list[tuple], tok) -> tuple:
    """[(image [1,32,w], text[, align])] -> (images [B,1,32,W], n_tokens [B], ids, texts, align);
    pads with 0 (paper). ``align[i]``: vision-token index of each character of line i, or None.
    """
    width = max(s[0].shape[-1] for s in samples)
    images = torch.zeros(len(samples), 1, samples[0][0].shape[1], width)
    for i, s in enumerate(samples):
        images[i, :, :, : s[0].shape[-1]] = s[0]
    n_tokens = torch.tensor([s[0].shape[-1] // WIDTH_MULTIPLE for s in samples], dtype=torch.long)
    texts = [s[1] for s in samples]
    ids = [encode(tok, t) for t in texts]
    align = [s[2] if len(s) > 2 and s[2] is not None and len(s[2]) == len(i) else None
             for s, i in zip(samples, ids, strict=True)]
    return images, n_tokens, ids, texts, align


def make_sample(texts: LineTexts, fonts: list[str], rng: random.Random,
                max_chars: int) -> tuple[torch.Tensor, str, list[int]]:
    """One rendered, normalised line, its text and the vision-token index of each character
    (x centre x 32 / image height / 16, clipped to the line's tokens). Retries with another text if
    no font covers it.
    """
    for _ in range(20):
        text = texts.sample(rng, max_chars)
        xs: list[float] = []
        try:
            img = render_line(text, fonts, rng, positions=xs)
        except ValueError:
            continue
        x = normalise_line(img)
        n = x.shape[-1] // WIDTH_MULTIPLE
        scale = LINE_HEIGHT / img.height
        align = [min(n - 1, max(0, int(p * scale // WIDTH_MULTIPLE))) for p in xs]
        return x, text, align
    raise RuntimeError("could not render a line in 20 tries")


class SyntheticLines(IterableDataset):
    """Endless stream of length-bucketed batches. ``seed`` + worker id seed each worker, so a resumed
    run (new seed = base seed + step) does not replay the same lines.
    """

    def __init__(self, lines: list[str], fonts: list[str], batch_size: int, seed: int, max_chars: int = 110,
                 pool: int = 6, shares: tuple[float, ...] = LineTexts.SHARES):
        self.lines, self.fonts, self.batch_size, self.seed = lines, fonts, batch_size, seed
        self.max_chars, self.pool, self.shares = max_chars, pool, tuple(shares)

    def __iter__(self):
        info = get_worker_info()
        rng = random.Random(self.seed * 1000 + (info.id if info else 0))
        texts, tok = LineTexts(self.lines, self.shares), build_tokenizer()
        while True:
            samples = [make_sample(texts, self.fonts, rng, self.max_chars) for _ in range(self.batch_size * self.pool)]
            samples.sort(key=lambda s: s[0].shape[-1])
            batches = [samples[i: i + self.batch_size] for i in range(0, len(samples), self.batch_size)]
            rng.shuffle(batches)
            for b in batches:
                yield collate(b, tok)


def fixed_eval_set(lines: list[str], fonts: list[str], n: int, seed: int, max_chars: int = 110,
                   kinds: list[str] | None = None) -> list[tuple[torch.Tensor, str, list[int]]]:
    """``n`` rendered held-out lines (held-out texts x held-out fonts), deterministic for ``seed``.
    If ``kinds`` is a list, it receives each line's text kind (:attr:`LineTexts.KINDS`).
    """
    rng, texts = random.Random(seed), LineTexts(lines)
    out = []
    for _ in range(n):
        out.append(make_sample(texts, fonts, rng, max_chars))
        if kinds is not None:
            kinds.append(texts.last_kind)
    return out
