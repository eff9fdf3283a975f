"""The spacing head's network and inputs, run in the encoder inside the PP tower: per frame P(space
after this character) and P(this character full-width), shipped as two more token columns. Why and
how it is used: :mod:`models.compact.decode.spacing`. Trained by ``training/compact/spacing_head.py``.
"""

from __future__ import annotations

import torch
from torch import nn

from inkstream.segments import is_wide
from models.compact.line.columns import character_spikes
from models.compact.line.inkcolumns import PROFILE_CHANNELS
from models.compact.vocab_zh import is_hanzi

SPIKE_CHANNELS = 6  #: top-1 posterior, is-spike, script of the spike's class (hanzi, Latin, wide, other)


def script_class(ch: str) -> int:
    """0 hanzi (:func:`models.compact.vocab_zh.is_hanzi`), 1 Latin letter or ASCII digit, 2 other wide
    (East Asian W/F, :func:`inkstream.segments.is_wide`: full-width punctuation, kana), 3 anything else
    (ASCII punctuation, specials).
    """
    if len(ch) != 1:
        return 3
    if is_hanzi(ch):
        return 0
    if is_wide(ch):
        return 2
    return 1 if (ch.isascii() and ch.isalnum()) or ch.isalpha() else 3


def script_classes(vocab: dict[str, int]) -> torch.Tensor:
    """int64 [vocab size]: :func:`script_class` of each token id of ``vocab`` (token -> id)."""
    out = torch.full((max(vocab.values()) + 1,), 3, dtype=torch.long)
    for tok, i in vocab.items():
        out[i] = script_class(tok)
    return out


def spike_channels(q: torch.Tensor, ids: torch.Tensor, scripts: torch.Tensor, space_id: int) -> torch.Tensor:
    """The recogniser's reading as frame channels: copy classes of each frame, weights float [..., T, k]
    and ids int64 [..., T, k] (:func:`models.compact.decode.copy_head.unpack` of the token's copy columns,
    most likely first, non-zero only at a class's spike), ``scripts`` int64 [vocab] (:func:`script_class`
    of each id) -> float32 [..., T, 6]: the top class's weight, 1 at a character spike (the top class
    kept, not the space: :func:`character_spikes`), the one-hot script of that class (zero elsewhere).
    """
    spike = character_spikes(q, ids, space_id)
    onehot = nn.functional.one_hot(scripts[ids[..., 0]], 4).float() * spike[..., None]
    return torch.cat([q[..., :1].float(), spike[..., None].float(), onehot], -1)


def head_inputs(frames: torch.Tensor, columns: torch.Tensor, q: torch.Tensor, ids: torch.Tensor,
                scripts: torch.Tensor, space_id: int) -> torch.Tensor:
    """[B, T, 120] trunk frames, [B, T, 16] :func:`column_ink`, copy classes (q, ids) [B, T, k] ->
    float32 [B, T, 142], the input of :class:`SpacingHead`.
    """
    return torch.cat([frames.float(), columns.float(), spike_channels(q, ids, scripts, space_id)], -1)


class SpacingHead(nn.Module):
    """Frame inputs float [B, T, 120 + 16 + 6] (trunk features, :func:`column_ink`,
    :func:`spike_channels`) -> logits float [B, T, 2]: a space after this frame's character, this
    frame's character full-width. A width-5 convolution, then one per entry of ``dilations``
    (default 2, 4, 8: +-30 frames, ~6 em of a 48-px line, so the neighbours' advances are the
    yardstick of a gap), GELU between, a 1 x 1 output; ``hidden`` channels (96: 0.2 M parameters);
    ``dropout`` on the inputs while training (none in eval mode).
    """

    def __init__(self, features: int = 120, hidden: int = 96, dilations: tuple[int, ...] = (2, 4, 8),
                 dropout: float = 0.0) -> None:
        super().__init__()
        cin = features + PROFILE_CHANNELS + SPIKE_CHANNELS
        layers: list[nn.Module] = [nn.Dropout(dropout), nn.Conv1d(cin, hidden, 5, padding=2), nn.GELU()]
        for d in dilations:
            layers += [nn.Conv1d(hidden, hidden, 5, padding=2 * d, dilation=d), nn.GELU()]
        self.net = nn.Sequential(*layers, nn.Conv1d(hidden, 2, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """See the class docstring."""
        return self.net(x.transpose(1, 2)).transpose(1, 2)
