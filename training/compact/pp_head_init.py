"""Start the bilingual decoder's Chinese rows from the PP-OCRv6 recogniser's own classifier.

The frozen PP-OCRv6 trunk's frames are read by its CTC head, a linear map W [120, 18,710] (+ bias)
over PaddleOCR's dictionary (ONNX metadata ``character``; class 0 = blank, the last = space), that was
trained on far more Chinese than these machines can render. Training the bilingual checkpoint's
vocabulary rows from scratch leaves rare hanzi nearly unseen (3,000 steps: random GB 2312 runs at 96 %
CER), so this module transfers that knowledge (a form of distillation: the teacher's classifier, not
its outputs, is copied):

- :func:`identity_compressor` sets :class:`models.compact.line.pptower.PPCompressor` so that each vision token
  is ``sqrt(hidden) * Q f / |f|``: its trunk frame ``f`` (stride 1) carried through the two
  convolutions (channel pairs ``x, -x`` survive GELU exactly: GELU(x) - GELU(-x) = x), projected by a
  fixed ``Q`` [hidden, 120] with orthonormal, zero-mean columns, then LayerNorm;
- :func:`init_rows_from_pp` gives every vocabulary id that PaddleOCR's dictionary knows the row
  ``scale * Q w_c`` in the training-only CTC head (blank = ``<pad>``), and, for the ids the Latin
  checkpoint did not have, in the decoder's output matrix and (renormalised) its input embeddings.

At step 0 the CTC head then reads the tokens as the PP recogniser reads its frames, and the decoder's
new rows already separate the hanzi; training only has to learn to fetch the right token (one map for
all characters), not 7,400 classes from a few examples each.
"""

from __future__ import annotations

import torch
from torch import nn

from models.compact.line.pptower import PP_FEATURE_DIM, PPCompressor, pp_classifier
from models.compact.vocab import PAD_ID


def feature_basis(hidden: int, seed: int = 0) -> torch.Tensor:
    """Q float32 [hidden, 120]: orthonormal columns orthogonal to the all-ones vector (so LayerNorm's
    mean subtraction leaves ``Q f`` unchanged). Raises ValueError if hidden < 121.
    """
    if hidden <= PP_FEATURE_DIM:
        raise ValueError(f"hidden size {hidden} must exceed the trunk's {PP_FEATURE_DIM} channels")
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(hidden, PP_FEATURE_DIM, generator=g, dtype=torch.float64)
    a -= a.mean(0, keepdim=True)
    q, _ = torch.linalg.qr(a)
    return q.float()


@torch.no_grad()
def identity_compressor(comp: PPCompressor, q: torch.Tensor, noise: float = 1e-3) -> None:
    """Set ``comp`` (channels >= 240) to token = LayerNorm(Q f_i) (stride 1; the mean of frames 2i and
    2i+1 at stride 2); other weights get
    ``noise`` so they can still learn. Raises ValueError for too few channels.
    """
    c1, c2 = comp.compress[0], comp.compress[2]
    lin, norm = comp.proj[0], comp.proj[1]
    assert isinstance(c1, nn.Conv1d) and isinstance(c2, nn.Conv1d)
    assert isinstance(lin, nn.Linear) and isinstance(norm, nn.LayerNorm)
    n = PP_FEATURE_DIM
    if c1.out_channels < 2 * n:
        raise ValueError(f"compressor needs >= {2 * n} channels, has {c1.out_channels}")
    eye = torch.eye(n)
    for conv in (c1, c2):
        conv.weight.normal_(0.0, noise)
        if conv.bias is not None:
            conv.bias.zero_()
    taps = (1,) if comp.stride == 1 else (1, 2)  # kernel 3, padding 1: tap 1 = frame s*i, tap 2 = s*i + 1
    for tap in taps:
        c1.weight[:n, :, tap] += eye / len(taps)
        c1.weight[n: 2 * n, :, tap] -= eye / len(taps)
    diff = torch.cat([eye, -eye], 1)  # in_j - in_{n+j} = GELU(x) - GELU(-x) = x
    c2.weight[:n, : 2 * n, 1] += diff
    c2.weight[n: 2 * n, : 2 * n, 1] -= diff
    lin.weight.normal_(0.0, noise)
    lin.bias.zero_()
    lin.weight[:, :n] += q
    lin.weight[:, n: 2 * n] -= q
    norm.weight.fill_(1.0)
    norm.bias.zero_()


@torch.no_grad()
def init_rows_from_pp(model, tok, q: torch.Tensor, frame_norm: float, old_vocab: int) -> dict[str, int]:
    """Write the PP classifier's rows (see the module docstring) into ``model`` (a
    :class:`training.compact.zh_model.Bilingual`). ``frame_norm``: typical |f| of a trunk frame (the
    tokens are normalised, so logits are rescaled by it); ``old_vocab``: ids below it keep the Latin
    checkpoint's decoder rows. Returns counts of the rows written.
    """
    w, b, labels = pp_classifier()
    index = {c: i for i, c in enumerate(labels) if c}
    hidden = q.shape[0]
    cols = torch.from_numpy(w)  # [120, C]
    scale = frame_norm / hidden ** 0.5
    head = torch.as_tensor(model.lm.get_output_embeddings().weight)
    emb = torch.as_tensor(model.lm.get_input_embeddings().weight)
    emb_norm = float(emb[:old_vocab].norm(dim=1).mean())
    out_norm = float(head[:old_vocab].norm(dim=1).mean())
    ctc, dec = 0, 0
    model.ctc_head.weight.normal_(0.0, 0.02)
    model.ctc_head.bias.fill_(-5.0)
    model.ctc_head.weight[PAD_ID] = scale * (q @ cols[:, 0])
    model.ctc_head.bias[PAD_ID] = float(b[0])
    known = [(i, index[t]) for t, i in tok.get_vocab().items() if t in index]
    new_norm = float(cols[:, [k for i, k in known if i >= old_vocab]].norm(dim=0).mean())
    for i, k in known:
        row = q @ cols[:, k]
        model.ctc_head.weight[i] = scale * row
        model.ctc_head.bias[i] = float(b[k])
        ctc += 1
        if i >= old_vocab:
            head[i] = row * (out_norm / new_norm)  # one factor: the rows' relative norms are the classifier's
            emb[i] = row * (emb_norm / max(1e-6, float(row.norm())))
            dec += 1
    return {"ctc_rows": ctc, "decoder_rows": dec}
