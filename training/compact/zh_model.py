"""The bilingual compact model being trained (:class:`Bilingual`: the frozen Latin tower, the PP token
compressor and the shared MoE decoder, with its losses and greedy decoding) and its export as a
checkpoint (:func:`export`). Trained by :mod:`training.compact.train_zh`.
"""

from __future__ import annotations

import pathlib

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
)
from models.compact.decode.finish import FinishRules, finish_segment, finish_state
from models.compact.export import writer
from models.compact.line.columns import copy_weights, peak_classes
from models.compact.line.pptower import PPCompressor, attach_recogniser_head
from models.compact.model import SUPERVISED_HEADS, CompactOCR, attention_supervision
from models.compact.vocab import BOS_ID, EOS_ID, PAD_ID, SPACE_ID, SPECIALS
from models.compact.vocab_zh import ZH_CHARSET


class Bilingual(nn.Module):
    """Frozen Latin tower (``encoder``) + trainable ``pp_tower`` compressor + ``lm`` decoder."""

    def __init__(self, latin: CompactOCR, vocab: dict[str, int], pp_channels: int = 256, pp_stride: int = 1,
                 posterior_topk: int = 0, copy_topk: int = 0, copy_pointer: bool = False) -> None:
        super().__init__()
        vocab_size = len(vocab)
        #: The finishing chain of the held-out greedy decoding: the decoder service's rules for this vocabulary
        #: (:meth:`FinishRules.from_vocab`, as :class:`models.compact.decoder_half.CompactDecoderHalf` builds
        #: them), without the spacing head (no ``spacing_confidence``), so held-out CER is the served one's.
        self.finish_rules = FinishRules.from_vocab(vocab, {EOS_ID})
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
        not skipped, and each line goes through the one finishing chain,
        :func:`models.compact.decode.finish.finish_segment`, without the spacing head, which is trained
        afterwards by training/compact/spacing_head.py). Returns ids per line, no specials.
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
            if self.copy is not None and self.copy.pointer:  # as the decoder service finishes a whole segment
                out[i] = finish_segment(finish_state(q[0], qids[0], SPACE_ID), out[i], self.finish_rules)
        return out


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
