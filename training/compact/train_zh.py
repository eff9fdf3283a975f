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
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import pathlib
import random
import time

import torch
from torch import nn

from models.compact import checkpoint as ckpt
from models.compact.decode.copy_head import (
    PointerCopy,
    advance,
    attention_rows,
    coverage,
    keep_confident_spike,
    pointer_attention,
    pointer_end,
    teacher_pointer,
    trim_overrun,
)
from models.compact.decode.rereads import drop_unread_repeats
from models.compact.decode.spacing import spike_classes
from models.compact.export import writer
from models.compact.line.columns import copy_weights, peak_classes
from models.compact.line.pptower import PP_FRAME_PX, PP_TOKEN_PX, PPCompressor, attach_recogniser_head
from models.compact.model import SUPERVISED_HEADS, CompactOCR, attention_supervision
from models.compact.vocab import BOS_ID, EOS_ID, PAD_ID, SPACE_ID, SPECIALS, build_tokenizer, decode, encode
from models.compact.vocab_zh import ZH_CHARSET
from training.compact.corpus import build_corpus
from training.compact.data import SyntheticLines, collate, fixed_eval_set
from training.compact.kit import load_kit
from training.compact.pp_head_init import feature_basis, identity_compressor, init_rows_from_pp
from training.compact.render import find_fonts


class Bilingual(nn.Module):
    """Frozen Latin tower (``encoder``) + trainable ``pp_tower`` compressor + ``lm`` decoder."""

    def __init__(self, latin: CompactOCR, vocab: dict[str, int], pp_channels: int = 256, pp_stride: int = 1,
                 posterior_topk: int = 0, copy_topk: int = 0, copy_pointer: bool = False) -> None:
        super().__init__()
        vocab_size = len(vocab)
        self.enc_cfg = latin.enc_cfg
        self.encoder = latin.encoder.requires_grad_(False).eval()
        hidden = latin.lm.config.hidden_size
        self.pp_tower = PPCompressor(hidden, pp_channels, pp_stride, posterior_topk, vocab_size)
        self.lm = latin.lm
        old = torch.as_tensor(self.lm.get_input_embeddings().weight).detach().clone()
        self.lm.resize_token_embeddings(vocab_size, mean_resizing=False)
        with torch.no_grad():
            emb = torch.as_tensor(self.lm.get_input_embeddings().weight)
            head = torch.as_tensor(self.lm.get_output_embeddings().weight)
            n = int(old.shape[0])
            emb[n:].normal_(0.0, float(old.std()))
            head[n:].normal_(0.0, 0.02)
        self.lm.config.vocab_size = vocab_size
        self.ctc_head = nn.Linear(hidden, vocab_size)  # training only (see ctc_loss)
        if posterior_topk:
            attach_recogniser_head(self.pp_tower, vocab)
            # The posterior's character rows are not a free table: E = H A^T, H the decoder's output
            # rows, A one learned map shared by all 7,698 ids. What the decoder learns about passing a
            # frequent character from its token to its output then holds for the rare hanzi too, whose
            # own rows are seldom trained. A starts as a multiple of the identity that gives the rows the
            # norm of the feature path's (~44 before the LayerNorm), so both paths count from step 0.
            head = torch.as_tensor(self.lm.get_output_embeddings().weight).detach()
            self.pp_copy = nn.Linear(hidden, hidden, bias=False)
            with torch.no_grad():
                self.pp_copy.weight.copy_(torch.eye(hidden) * (44.0 / float(head.norm(dim=1).mean())))
        # Pointer-generator output (models/compact/decode/copy_head.py): copies the recogniser's classes of the
        # frame the supervised heads attend to (the same top-k as the posterior path's).
        if copy_topk and copy_topk != posterior_topk:
            raise ValueError(f"copy classes ({copy_topk}) must be the posterior's ({posterior_topk})")
        self.copy = PointerCopy(hidden, copy_topk, SUPERVISED_HEADS, copy_pointer) if copy_topk else None
        #: supervised attention window, +- tokens around a character's alignment (main: --att-radius)
        self.att_radius = 1
        #: share of a PP line's teacher-forced input tokens replaced by a wrong one (main: --input-noise)
        self.input_noise = 0.0

    def pp_table(self) -> torch.Tensor | None:
        """The posterior path's character rows [vocab, hidden] (None without one): ``pp_copy(H)``."""
        if not self.pp_tower.posterior_topk:
            return None
        return self.pp_copy(torch.as_tensor(self.lm.get_output_embeddings().weight))

    def pp_tokens(self, frames: torch.Tensor, top) -> torch.Tensor:
        """PP vision tokens [B, T, hidden] of trunk frames [B, T, 120] (``top``: their top classes)."""
        return self.pp_tower(frames, top, self.pp_table())

    def encoder_config_dict(self) -> dict:
        """The Latin tower's config (JSON-serialisable)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in vars(self.enc_cfg).items()}

    def prompt_classes(self, classes: tuple[torch.Tensor, torch.Tensor] | None, n_tokens: list[int],
                       length: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Copy weights and ids [B, length, k] of a batch's positions, as the decoder half unpacks them
        from its inputs: the classes of each line's vision tokens (:func:`copy_weights`), 0 elsewhere.
        """
        assert self.copy is not None
        k = self.copy.topk
        q, qids = torch.zeros(len(n_tokens), length, k), torch.zeros(len(n_tokens), length, k, dtype=torch.long)
        if classes is not None:
            p, ids = classes
            for i, n in enumerate(n_tokens):
                m = min(n, int(p.shape[1]))
                q[i, :m] = copy_weights(peak_classes(p[i, :m], ids[i, :m]), ids[i, :m])
                qids[i, :m] = ids[i, :m]
        return q, qids

    def sequence_loss(self, vis: torch.Tensor, n_tokens: list[int], ids: list[list[int]],
                      align: list | None = None,
                      classes: tuple[torch.Tensor, torch.Tensor] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Teacher-forced loss of ``[vision tokens][<s>] text [</s>]``: (NLL of each character, of the
        pointer-generator mixture when the model has a copy head, ``classes`` the copy classes of the
        vision tokens (the recogniser's top-k per frame, float32 [B, T, k] / int64 [B, T, k]; None: the
        tokens carry none, e.g. the Latin tower's); supervised attention). Float32 scalars.
        """
        emb = self.lm.get_input_embeddings()
        seqs, labels, fed_rows = [], [], []
        for i, t in enumerate(ids):
            n = n_tokens[i]
            tgt = torch.tensor([BOS_ID, *t, EOS_ID], dtype=torch.long)
            fed = self.noisy_inputs(tgt[:-1]) if classes is not None else tgt[:-1]
            fed_rows.append(fed)
            seqs.append(torch.cat([vis[i, :n], emb(fed)], 0))
            labels.append(torch.cat([torch.full((n,), -100, dtype=torch.long), tgt[1:]]))
        x = nn.utils.rnn.pad_sequence(seqs, batch_first=True)
        y = nn.utils.rnn.pad_sequence(labels, batch_first=True, padding_value=-100)
        mask = torch.zeros(x.shape[:2], dtype=torch.long)
        for i, s in enumerate(seqs):
            mask[i, : s.shape[0]] = 1
        want = (align is not None and any(a is not None for a in align)) or self.copy is not None
        out = self.lm.model(inputs_embeds=x, attention_mask=mask, position_ids=(mask.cumsum(1) - 1).clamp(min=0),
                            output_attentions=want)
        keep = y != -100  # the output matrix only where a character is predicted (not over vision tokens)
        hidden = out.last_hidden_state[keep]
        logits = self.lm.lm_head(hidden)
        att = (attention_supervision(out.attentions[-1], torch.tensor(n_tokens), align, self.att_radius)
               if align is not None and any(a is not None for a in align) else torch.zeros(()))
        if self.copy is None:
            return nn.functional.cross_entropy(logits.float(), y[keep]), att
        q, qids = self.prompt_classes(classes, n_tokens, x.shape[1])
        rows = keep.nonzero()[:, 0]
        if self.copy.pointer:  # the monotonic pointer, moved by the teacher's text as serving moves it
            fed = nn.utils.rnn.pad_sequence(fed_rows, batch_first=True, padding_value=-1)
            steps = teacher_pointer(q, qids, fed)
            a = torch.cat([steps[i, : len(t) + 1] for i, t in enumerate(ids)], 0)
            mixed = self.copy.mix(logits, hidden, a, q[rows], qids[rows], end=pointer_end(q[rows], a))
        else:
            att_rows = attention_rows(out.attentions[-1], self.copy.heads)  # [B, S, S]
            covered = coverage(att_rows, keep)[keep]
            mixed = self.copy.mix(logits, hidden, att_rows[keep], q[rows], qids[rows], covered)
        nll = -mixed.gather(1, y[keep][:, None]).mean()
        return nll, att

    def noisy_inputs(self, fed: torch.Tensor) -> torch.Tensor:
        """Teacher-forced input ids [T] (``<s>`` first) with :attr:`input_noise` of the characters
        after ``<s>`` replaced, half by a uniformly drawn character, half by the token before it (a
        repeat, the decoder's own typical slip). Why: under clean teacher forcing the decoder's softmax
        is almost always right, so the copy gate learns to trust it, and when serving it follows its own
        mistakes (a doubled cell, a repeated digit run) over a confident copy; input noise against
        exposure bias, as in scheduled sampling (Bengio et al. 2015) and word dropout.
        """
        if self.input_noise <= 0 or fed.shape[0] < 2:
            return fed
        out = fed.clone()
        hit = torch.rand(fed.shape[0]) < self.input_noise
        hit[0] = False
        vocab = int(self.lm.config.vocab_size)
        repeat = torch.rand(fed.shape[0]) < 0.5
        drawn = torch.randint(len(SPECIALS), vocab, fed.shape)
        prev = torch.cat([fed[:1], fed[:-1]])
        out[hit] = torch.where(repeat, prev, drawn)[hit]
        return out

    def ctc_loss(self, vis: torch.Tensor, n_tokens: list[int], ids: list[list[int]]) -> torch.Tensor:
        """Auxiliary CTC loss (hybrid CTC/attention, Watanabe et al. 2017) on the PP vision tokens through
        the training-only ``ctc_head`` (not exported), blank = ``<pad>``: it makes each token readable as
        the character under it, which the decoder's attention then only has to fetch. Lines too short
        for CTC (tokens < 2 x characters: Latin text at 16 px per token) are left out.
        """
        keep = [i for i, t in enumerate(ids) if t and n_tokens[i] >= 2 * len(t)]
        if not keep:
            return torch.zeros(())
        log_probs = self.ctc_head(vis[keep]).float().log_softmax(-1).transpose(0, 1)  # [T, B, V]
        tgt = torch.tensor([c for i in keep for c in ids[i]], dtype=torch.long)
        return nn.functional.ctc_loss(log_probs, tgt, torch.tensor([n_tokens[i] for i in keep]),
                                      torch.tensor([len(ids[i]) for i in keep]), blank=PAD_ID, zero_infinity=True)

    @torch.no_grad()
    def greedy(self, vis: torch.Tensor, n_tokens: list[int], max_new: int,
               classes: tuple[torch.Tensor, torch.Tensor] | None = None) -> list[list[int]]:
        """Greedy decoding, one line at a time with a KV cache (evaluation only; through the
        pointer-generator mixture when there is a copy head, ``classes`` as in :meth:`sequence_loss`;
        with the monotonic pointer decoded and finished as the decoder service does: a confident spike is
        not skipped, a repeated tail past the last spike is dropped, a repeat the recogniser did not
        read is replaced by its reading; the spacing head's step is training/compact/spacing_head.py's).
        Returns ids per line, no specials.
        """
        emb = self.lm.get_input_embeddings()
        out: list[list[int]] = [[] for _ in n_tokens]
        want = self.copy is not None
        for i, n in enumerate(n_tokens):
            x = torch.cat([vis[i, :n], emb(torch.tensor([BOS_ID]))], 0)[None]
            if self.copy is not None:
                q, qids = self.prompt_classes(None if classes is None else (classes[0][i: i + 1], classes[1][i: i + 1]),
                                              [n], n + 1)
            res = self.lm.model(inputs_embeds=x, use_cache=True, output_attentions=want)
            covered = torch.zeros(1, n + 1)
            past: list[bool] = []  # per written token: the pointer past the last spike (trim_overrun)
            for _ in range(max_new):
                h = res.last_hidden_state[:, -1]
                logits = self.lm.lm_head(h)
                if self.copy is not None:
                    s = res.attentions[-1].shape[-1]
                    pad = s - q.shape[1]
                    qq = nn.functional.pad(q, (0, 0, 0, pad))
                    ii = nn.functional.pad(qids, (0, 0, 0, pad))
                    covered = nn.functional.pad(covered, (0, s - covered.shape[1]))
                    if self.copy.pointer:
                        a = pointer_attention(qq, covered)
                        end = pointer_end(qq, a)
                        logits = self.copy.mix(logits, h, a, qq, ii, end=end)
                        logits = keep_confident_spike(logits, qq, ii, a, covered)  # as serving decodes
                        past.append(bool(end[0] > 0))
                    else:
                        a = attention_rows(res.attentions[-1], self.copy.heads)[:, -1]
                        logits = self.copy.mix(logits, h, a, qq, ii, covered)
                        covered = covered + a
                nxt = int(logits[0].argmax())
                if nxt == EOS_ID:
                    break
                if self.copy is not None and self.copy.pointer:
                    covered = advance(a, qq, ii, covered, torch.tensor([nxt]))
                out[i].append(nxt)
                res = self.lm.model(inputs_embeds=emb(torch.tensor([[nxt]])), past_key_values=res.past_key_values,
                                    use_cache=True, output_attentions=want)
            if past:  # as the decoder service finishes a whole segment (CompactDecoderHalf.finish_tokens)
                out[i] = trim_overrun(out[i], past)
                out[i] = drop_unread_repeats(out[i], spike_classes(q[0], qids[0], SPACE_ID), SPACE_ID)
        return out


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


def export(model: Bilingual, out_dir: pathlib.Path, revision: str, training: dict, onnx: bool = True) -> None:
    """Write the bilingual checkpoint (see :func:`models.compact.checkpoint.export_checkpoint`; ``onnx``:
    also its ONNX files); a posterior path's rows are materialised into the compressor's ``char_embed``
    table first.
    """
    table = model.pp_table()
    if table is not None:
        with torch.no_grad():
            model.pp_tower.char_embed.weight.copy_(table)
    parts: dict[str, nn.Module] = {ckpt.PP_TOWER_PREFIX: model.pp_tower}
    config: dict = {"pp_tower": writer.pp_tower_config(model.pp_tower)}
    if model.copy is not None:
        parts[ckpt.COPY_PREFIX], config["copy"] = model.copy, model.copy.config()
    writer.export_checkpoint(model, out_dir, revision, training, extra_parts=parts, charset=ZH_CHARSET,
                           extra_config=config, onnx=onnx)


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

    cfg = ckpt.read_config(args.init)
    latin = writer.load_training_model(args.init, cfg)
    tok = build_tokenizer(ZH_CHARSET)
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
    # Built and loaded on the host as on a CPU run, then moved; from here on everything a step builds
    # (padding, masks, pointer states) is made on the device; records and the Latin replay are loaded
    # on the host and moved explicitly.
    model.to(args.device)
    if args.device != "cpu":
        torch.set_default_device(args.device)
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
                             {"params": layer_params, "scale": args.decoder_lr_scale}],
                            lr=args.lr, weight_decay=0.01, betas=(0.9, 0.98))
    step, seconds, state_path = 0, 0.0, out / "state.pt"
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
