"""Held-out evaluation of the bilingual model being trained: greedy CER of PP-tower lines (feature
records) and of Latin lines through the frozen Latin tower (reading Latin must not regress).
"""

from __future__ import annotations

import torch

from models.compact.vocab import decode
from training.compact.data import collate
from training.compact.zh_model import Bilingual
from training.compact.zh_records import pp_batch, pp_text, pp_top


def evaluate(model: Bilingual, tok, records: list[dict], batch: int = 24,
             dump: list[dict] | None = None) -> tuple[float, dict[str, float]]:
    """Greedy CER (total edits / total characters) on held-out records, overall and per kind; ``dump``
    (a list) receives ``{"kind", "text", "pred", "edits", "pp"}`` for every line (``pp``: :func:`pp_text`).
    """
    from rapidfuzz.distance import Levenshtein  # evaluation only (not installed on a training accelerator)

    model.eval()
    edits: dict[str, int] = {}
    chars: dict[str, int] = {}
    for s in range(0, len(records), batch):
        chunk = records[s: s + batch]
        frames, n_tok = pp_batch(chunk, model.pp_tower.stride)
        top = pp_top(model.pp_tower, chunk, frames.shape[1])
        vis = model.pp_tokens(frames, top)
        for ids, r in zip(model.greedy(vis, n_tok, int(1.3 * max(len(c["text"]) for c in chunk)) + 8, top),
                          chunk, strict=True):
            k, pred = r["kind"], decode(tok, ids)
            dist = Levenshtein.distance(pred, r["text"])
            edits[k] = edits.get(k, 0) + dist
            if dump is not None:
                dump.append({"kind": k, "text": r["text"], "pred": pred, "edits": dist, "pp": pp_text(tok, r)})
            chars[k] = chars.get(k, 0) + len(r["text"])
    model.train()
    model.encoder.eval()
    per = {k: edits[k] / max(1, chars[k]) for k in edits}
    return sum(edits.values()) / max(1, sum(chars.values())), per


def evaluate_latin(model: Bilingual, latin_tok, samples: list, batch: int = 24) -> float:
    """Greedy CER of held-out Latin lines (held-out fonts and texts, ``train.py``'s set) through the
    frozen Latin tower and the decoder being trained: reading Latin must not regress.
    """
    from rapidfuzz.distance import Levenshtein

    model.eval()
    edits = chars = 0
    for s in range(0, len(samples), batch):
        images, n_tokens, _, texts, _ = collate(samples[s: s + batch], latin_tok)
        with torch.no_grad():
            vis, _ = model.encoder(images.to(model.ctc_head.weight.device))
        for ids, ref in zip(model.greedy(vis, n_tokens.tolist(), int(1.3 * max(map(len, texts))) + 8), texts,
                            strict=True):
            edits += Levenshtein.distance(decode(latin_tok, ids), ref)
            chars += len(ref)
    model.train()
    model.encoder.eval()
    return edits / max(1, chars)
