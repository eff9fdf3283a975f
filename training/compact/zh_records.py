"""Feature records of PP-tower lines for the bilingual trainer: batches of trunk frames, the
recogniser's top classes and spikes, the teacher's alignment of a line's characters, and the pool of
feature shards (:class:`ShardPool`). Records are written by :mod:`training.compact.zh_features`.
"""

from __future__ import annotations

import glob
import pathlib
import random

import torch

from models.compact.line.pptower import PP_FRAME_PX, PP_TOKEN_PX, PPCompressor
from models.compact.vocab import PAD_ID, decode


def pp_batch(records: list[dict], stride: int = 1) -> tuple[torch.Tensor, list[int]]:
    """Feature records -> (frames [B, T_max, 120] float32, zero-padded; vision tokens per line at
    compressor ``stride``). Records count tokens of 16 px (:data:`models.compact.line.pptower.PP_TOKEN_PX`);
    at stride 1 a line has twice as many, at most its frames.
    """
    t = max(r["frames"].shape[0] for r in records)
    frames = torch.zeros(len(records), t, records[0]["frames"].shape[1])
    for i, r in enumerate(records):
        frames[i, : r["frames"].shape[0]] = r["frames"].float()
    factor = PP_TOKEN_PX // (PP_FRAME_PX * stride)
    return frames, [min(r["frames"].shape[0], int(r["n_tokens"]) * factor) for r in records]


def pp_top(compressor: PPCompressor, records: list[dict], t: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The batch's top-k PP posteriors (float32 [B, t, k], ids int64 [B, t, k]; zero past a line's frames)
    for a posterior ``compressor`` (None otherwise). Each record keeps its own (float16, int32) after
    its first use: the 120 x 18,710 head costs more than the rest of the compressor.
    """
    k = compressor.posterior_topk
    if not k:
        return None
    p, ids = torch.zeros(len(records), t, k), torch.zeros(len(records), t, k, dtype=torch.long)
    for i, r in enumerate(records):
        if "top_p" not in r:
            rp, rid = compressor.top_classes(r["frames"].float())
            r["top_p"], r["top_ids"] = rp.half(), rid.int()
        n = r["top_p"].shape[0]
        p[i, :n], ids[i, :n] = r["top_p"].float(), r["top_ids"].long()
    return p, ids


def pp_spikes(record: dict) -> list[tuple[int, int]]:
    """(frame, class id) of each spike of the recogniser's greedy CTC path over a record's real frames:
    a frame whose top class (``record["top_ids"]``, :func:`pp_top`) is neither blank nor the previous
    frame's. Frames are stride-1 trunk frames (8 px); padding frames past ``n_tokens`` are not read.
    """
    n = min(int(record["frames"].shape[0]), int(record["n_tokens"]) * PP_TOKEN_PX // PP_FRAME_PX)
    out, prev = [], -1
    for t, c in enumerate(record["top_ids"][:n, 0].tolist()):
        if c != prev and c != PAD_ID:
            out.append((t, int(c)))
        prev = c
    return out


def spike_align(record: dict, ids: list[int], space_id: int) -> list[int] | None:
    """The teacher's alignment of a line: the frame (stride-1 token) of each character's CTC spike in
    the recogniser's greedy path (a frame whose top class is neither blank nor the previous frame's).
    Needs ``record["top_ids"]`` (:func:`pp_top`); spaces, which the recogniser often drops between
    hanzi, get the frame midway between their neighbours. None when the spikes and the line's other
    characters differ in number (the recogniser misread the length: the glyph-centre alignment is used).
    """
    if "top_ids" not in record:
        return None
    spikes = [t for t, c in pp_spikes(record) if c != space_id]
    solid = [k for k, c in enumerate(ids) if c != space_id]
    if not solid or len(spikes) != len(solid):
        return None
    out = [0] * len(ids)
    for k, t in zip(solid, spikes, strict=True):
        out[k] = t
    for k, c in enumerate(ids):
        if c == space_id:
            left = max((out[j] for j in solid if j < k), default=spikes[0])
            right = min((out[j] for j in solid if j > k), default=spikes[-1])
            out[k] = (left + right) // 2
    return out


def pp_text(tok, record: dict) -> str:
    """The recogniser's own reading of a record (its greedy CTC path, collapsed; blanks dropped), after
    :func:`pp_top` filled ``record["top_ids"]``; "" before.
    """
    return decode(tok, [c for _, c in pp_spikes(record)]) if "top_ids" in record else ""


def record_align(record: dict, stride: int = 1) -> list[int] | None:
    """A record's per-character vision-token index at compressor ``stride`` (records store 16 px units;
    x2 at stride 1, within the supervision's +-1 window of the character's centre).
    """
    align = record.get("align")
    if align is None:
        return None
    factor = PP_TOKEN_PX // (PP_FRAME_PX * stride)
    return [int(a) * factor for a in align]


class ShardPool:
    """All feature records of ``train_*.pt`` in a directory, re-scanned for new shards on ``refresh``;
    their frames are moved to ``device`` as they are loaded (an accelerator holds them all: ~17 kB a line).
    """

    def __init__(self, directory: pathlib.Path, device: str = "cpu") -> None:
        self.directory = directory
        self.device = device
        self.seen: set[str] = set()
        self.records: list[dict] = []
        self.refresh()

    def refresh(self) -> None:
        """Load shards written since the last call."""
        for path in sorted(glob.glob(str(self.directory / "train_*.pt"))):
            if path not in self.seen:
                records = torch.load(path, weights_only=False, map_location="cpu")
                for r in records:
                    r["frames"] = r["frames"].to(self.device)
                self.records += records
                self.seen.add(path)

    def batch(self, rng: random.Random, n: int) -> list[dict]:
        """``n`` records drawn uniformly, sorted by width so that a batch pads little."""
        return sorted(rng.sample(self.records, min(n, len(self.records))), key=lambda r: r["frames"].shape[0])
