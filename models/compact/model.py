"""The compact model's networks: line encoder (:mod:`models.compact.line.encoder`: ResNet trunk +
convolutional token compressor) and the DeepSeek-V2 MoE decoder configuration, plus the training
wrapper :class:`CompactOCR`.

Shapes: a batch of normalised lines ``images`` [B, 1, 32, W] float32 (W multiple of 16, ink = 1).
The trunk (timm's ``resnet18`` topology, :mod:`models.compact.line.trunk`, narrow, no pretrained weights,
1 input channel; stem
stride 4, one stride-2 stage) gives [B, C, 4, W/8]; the compressor collapses the height with a
(4 x 3) convolution and halves the width with a stride-2 1-D convolution, giving one vision token per
16 pixel columns: [B, W/16, H]. At 32 px line height a printed character is 8-16 px wide, so one
vision token carries ~1.3-2 characters (compression ratio reported by ``train.py`` on real data).

The decoder is ``transformers.DeepseekV2ForCausalLM`` (multi-head latent attention, MoE MLPs with one
shared expert and top-2 of 4 routed experts, DeepSeek-V2 paper arXiv:2405.04434) reading the
sequence ``[vision tokens][<s>] text [</s>]`` as ``inputs_embeds``.

An auxiliary CTC head on the stride-8 features (hybrid CTC/attention training, Watanabe et al.
2017) speeds up learning of the encoder; it is training-only and not exported.
"""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from transformers import DeepseekV2Config, DeepseekV2ForCausalLM

from models.compact.line.encoder import EncoderConfig, LineEncoder
from models.compact.vocab import BOS_ID, EOS_ID, PAD_ID

__all__ = ["CompactOCR", "EncoderConfig", "LineEncoder", "attention_supervision", "decoder_config"]


def decoder_config(vocab_size: int, hidden: int = 160, layers: int = 2) -> DeepseekV2Config:
    """The DeepSeek-V2 MoE decoder config: ``hidden`` width, ``layers`` layers, first dense then MoE
    (1 shared + 4 routed experts, top-2), MLA with kv_lora_rank 64, 4 heads, context 512 tokens.
    """
    # attn_implementation: taken by PreTrainedConfig.__post_init__(**kwargs); the dataclass signature omits it.
    return DeepseekV2Config(  # type: ignore[call-arg]
        vocab_size=vocab_size, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=512,
        q_lora_rank=None, kv_lora_rank=64, qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=32,
        n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1, moe_intermediate_size=hidden,
        first_k_dense_replace=1, topk_method="greedy", norm_topk_prob=True, routed_scaling_factor=1.0,
        bos_token_id=BOS_ID, eos_token_id=EOS_ID, pad_token_id=PAD_ID, tie_word_embeddings=False,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, attn_implementation="eager",
    )


SUPERVISED_HEADS = (0, 1)  # heads of the last decoder layer whose attention is supervised in training


def attention_supervision(att: torch.Tensor, n_tokens: torch.Tensor, align: list[list[int] | None],
                          radius: int = 1) -> torch.Tensor:
    """Supervised attention loss (cf. guided attention, Tachibana et al. 2017, arXiv:1710.08969):
    ``att`` [B, heads, S, S] of one layer; the query that predicts character k (the BOS position
    for k = 0, else character k-1's position) of line b should put its attention mass on vision
    tokens ``align[b][k] +- radius``. Returns mean over supervised queries and heads of
    -log(mass + 1e-6), float32 scalar (0 when no line carries an alignment).
    """
    B, _, S, _ = att.shape
    lo = np.zeros((B, S), dtype=np.int64)  # supervised key window [lo, hi) per query, built on the host
    hi = np.zeros((B, S), dtype=np.int64)
    valid = np.zeros((B, S), dtype=np.float32)
    for b, al in enumerate(align):
        if al is None:
            continue
        n = int(n_tokens[b])
        for k, j in enumerate(al):
            q = n + k
            if q < S:
                lo[b, q], hi[b, q], valid[b, q] = max(0, j - radius), min(n, j + radius + 1), 1.0
    if float(valid.sum()) == 0.0:
        return torch.zeros((), device=att.device)
    keys = torch.arange(S, device=att.device)
    lo_t, hi_t = torch.from_numpy(lo).to(att.device), torch.from_numpy(hi).to(att.device)
    window = (keys >= lo_t[..., None]) & (keys < hi_t[..., None])  # [B, S queries, S keys] bool
    mass = (att[:, list(SUPERVISED_HEADS)].float() * window[:, None]).sum(-1)  # [B, h, S]
    valid_t = torch.from_numpy(valid).to(att.device)
    nll = -(torch.log(mass + 1e-6) * valid_t[:, None])
    return nll.sum() / (float(valid.sum()) * len(SUPERVISED_HEADS))


class CompactOCR(nn.Module):
    """Training wrapper: encoder + CTC head + DeepSeek-V2 decoder.

    ``forward(images, n_tokens, text_ids)``: ``images`` [B,1,32,W]; ``n_tokens`` LongTensor [B] =
    real vision tokens per line (its unpadded width / 16); ``text_ids`` list of B id lists (no
    specials). Returns (cross-entropy loss over text+EOS, CTC loss), both scalar float32.
    """

    def __init__(self, enc_cfg: EncoderConfig, dec_cfg: DeepseekV2Config):
        super().__init__()
        self.enc_cfg = enc_cfg
        self.encoder = LineEncoder(enc_cfg, dec_cfg.hidden_size)
        self.ctc_head = nn.Linear(enc_cfg.compressor_channels, dec_cfg.vocab_size)
        self.lm = DeepseekV2ForCausalLM(dec_cfg)

    def encoder_config_dict(self) -> dict:
        """The encoder config as a JSON-serialisable dict."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self.enc_cfg).items()}

    def _sequences(self, vis: torch.Tensor, n_tokens: torch.Tensor, text_ids: list[list[int]]):
        emb = self.lm.get_input_embeddings()
        seqs, labels = [], []
        for i, ids in enumerate(text_ids):
            n = int(n_tokens[i])
            tgt = torch.tensor([BOS_ID] + ids + [EOS_ID], dtype=torch.long, device=vis.device)
            seqs.append(torch.cat([vis[i, :n], emb(tgt[:-1])], 0))
            labels.append(torch.cat([torch.full((n,), -100, dtype=torch.long, device=vis.device), tgt[1:]]))
        lengths = [s.shape[0] for s in seqs]
        x = nn.utils.rnn.pad_sequence(seqs, batch_first=True)
        y = nn.utils.rnn.pad_sequence(labels, batch_first=True, padding_value=-100)
        mask = torch.zeros(x.shape[:2], dtype=torch.long, device=x.device)
        for i, n in enumerate(lengths):
            mask[i, :n] = 1
        return x, y, mask

    def forward(self, images: torch.Tensor, n_tokens: torch.Tensor, text_ids: list[list[int]],
                align: list[list[int] | None] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Training losses (see the class docstring); ``align`` per line: the vision-token index of each
        character, or None (no attention supervision for that line). Returns (cross-entropy, CTC), float32
        scalars; the supervised-attention loss (0 without alignments) is left in ``last_attention_loss``.
        """
        vis, feats = self.encoder(images)
        x, y, mask = self._sequences(vis, n_tokens, text_ids)
        pos = (mask.cumsum(1) - 1).clamp(min=0)
        want_att = align is not None and any(a is not None for a in align)
        out = self.lm(inputs_embeds=x, attention_mask=mask, position_ids=pos, output_attentions=want_att)
        logits = out.logits
        self.last_attention_loss = (
            attention_supervision(out.attentions[-1], n_tokens, align) if want_att and align is not None
            else torch.zeros((), device=logits.device))
        # y is already aligned with the inputs: position p (BOS or a text token) predicts y[p].
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1), ignore_index=-100)
        log_probs = self.ctc_head(feats).float().log_softmax(-1).transpose(0, 1)  # [T, B, V]
        in_len = (n_tokens * 2).clamp(max=feats.shape[1]).to(log_probs.device)
        tgt = torch.tensor([t for ids in text_ids for t in ids], dtype=torch.long, device=log_probs.device)
        tgt_len = torch.tensor([len(ids) for ids in text_ids], dtype=torch.long, device=log_probs.device)
        ctc = F.ctc_loss(log_probs, tgt, in_len, tgt_len, blank=PAD_ID, zero_infinity=True)
        return ce, ctc

    @torch.no_grad()
    def greedy(self, images: torch.Tensor, n_tokens: torch.Tensor, max_new: int = 200) -> list[list[int]]:
        """Batched greedy decoding with a KV cache, prompts left-padded. Returns ids per line (no
        specials). Reference for evaluation during training; serving uses the decoder half.
        """
        vis, _ = self.encoder(images)
        emb = self.lm.get_input_embeddings()
        bos = emb(torch.tensor([BOS_ID], device=vis.device))
        prompts = [torch.cat([vis[i, : int(n_tokens[i])], bos], 0) for i in range(vis.shape[0])]
        L = max(p.shape[0] for p in prompts)
        B, H = len(prompts), vis.shape[-1]
        x = vis.new_zeros(B, L, H)
        mask = torch.zeros(B, L, dtype=torch.long, device=vis.device)
        for i, p in enumerate(prompts):
            x[i, L - p.shape[0]:] = p
            mask[i, L - p.shape[0]:] = 1
        pos = (mask.cumsum(1) - 1).clamp(min=0)
        out = self.lm(inputs_embeds=x, attention_mask=mask, position_ids=pos, use_cache=True)
        cache = out.past_key_values
        done = torch.zeros(B, dtype=torch.bool)
        result: list[list[int]] = [[] for _ in range(B)]
        nxt = out.logits[:, -1].argmax(-1)
        for _ in range(max_new):
            host = nxt.tolist()  # one device-to-host copy per decode step
            for i in range(B):
                if not done[i]:
                    if host[i] == EOS_ID:
                        done[i] = True
                    else:
                        result[i].append(host[i])
            if bool(done.all()):
                break
            mask = torch.cat([mask, mask.new_ones(B, 1)], 1)
            pos = pos[:, -1:] + 1
            out = self.lm(inputs_embeds=emb(nxt[:, None]), attention_mask=mask, position_ids=pos,
                          past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            nxt = out.logits[:, -1].argmax(-1)
        return result
