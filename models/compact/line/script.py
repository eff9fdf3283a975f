"""Script routing of the bilingual compact checkpoint: which vision tower reads a line.

The Latin tower (timm ResNet trunk, 32 px lines) is fast and reads Latin-script print; the PP-OCRv6
tower (:mod:`models.compact.line.pptower`, 48 px lines) reads Chinese and English but costs several times
more per line. :class:`ScriptHead` is a linear layer on the Latin tower's stride-8 features
[B, W/8, C]: one logit per 8 pixel columns that the columns hold CJK script. A line goes to the PP
tower when the mean of its :data:`TOP_K` highest frame logits is above 0 (p > 0.5): one hanzi spans
about four frames at 32 px height, so a single Chinese word in an English line is enough, while an
isolated noisy frame is not. Trained by :mod:`training.compact.script_head` (line-level labels,
multiple-instance learning over frames).
"""

from __future__ import annotations

import torch
from torch import nn

TOP_K = 3  # frames: fewer than one hanzi's width at the 32 px line height (about 4 frames)


class ScriptHead(nn.Module):
    """Stride-8 Latin-tower features [B, T, C] float -> line logits [B] (CJK if > 0).

    ``n_frames`` [B] (long): real frames of each line (its unpadded width / 8); padded frames are
    ignored.
    """

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.linear = nn.Linear(channels, 1)

    def forward(self, feats: torch.Tensor, n_frames: torch.Tensor) -> torch.Tensor:
        """See the class docstring."""
        logits = self.linear(feats).squeeze(-1)  # [B, T]
        t = torch.arange(logits.shape[1], device=logits.device)
        logits = logits.masked_fill(t[None, :] >= n_frames[:, None], float("-inf"))
        k = min(TOP_K, logits.shape[1])
        top = logits.topk(k, dim=1).values
        top = torch.where(torch.isinf(top), torch.full_like(top, -20.0), top)
        return top.mean(1)
