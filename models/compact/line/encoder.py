"""The compact model's line encoder (the Latin vision tower): normalised line images -> vision tokens.

Kept apart from :mod:`models.compact.model` so that the encoder service imports neither transformers
nor timm (each pulls in torchvision; see :mod:`models.compact.line.trunk`). Shapes: [B, 1, 32, W] float32
(W a multiple of 16, ink = 1) -> ResNet trunk [B, C, 4, W/8] -> (4 x 3) convolution collapsing the
height -> stride-2 1-D convolution -> [B, W/16, hidden] vision tokens.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from models.compact.line.config import EncoderConfig
from models.compact.line.trunk import ResNetTrunk


class LineEncoder(nn.Module):
    """Normalised line images [B, 1, 32, W] -> (vision tokens [B, W/16, hidden], stride-8 features
    [B, W/8, C]). The trunk is timm's deep-stem ``resnet18`` topology up to ``layer2``
    (:class:`models.compact.line.trunk.ResNetTrunk`: the same modules and tensor names, without importing timm
    and torchvision into the encoder).
    """

    def __init__(self, cfg: EncoderConfig, hidden: int):
        super().__init__()
        self.cfg = cfg
        self.trunk = ResNetTrunk(cfg.stem_width, (cfg.channels[0], cfg.channels[1]), (cfg.layers[0], cfg.layers[1]))
        c_in, c = cfg.channels[-1], cfg.compressor_channels
        self.collapse = nn.Sequential(nn.Conv2d(c_in, c, kernel_size=(4, 3), padding=(0, 1)), nn.BatchNorm2d(c),
                                      nn.GELU())
        self.compress = nn.Sequential(
            nn.Conv1d(c, c, kernel_size=3, stride=2, padding=1), nn.GELU(),
            nn.Conv1d(c, c, kernel_size=3, padding=1), nn.GELU(),
        )
        self.proj = nn.Sequential(nn.Linear(c, hidden), nn.LayerNorm(hidden))

    def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``images`` [B, 1, 32, W] float (W a multiple of 16) -> (vision tokens [B, W/16, hidden],
        stride-8 features [B, W/8, compressor_channels] for the CTC head).
        """
        feats = self.trunk(images)[0]  # [B, C, 4, W/8]
        feats = self.collapse(feats).squeeze(2)  # [B, c, W/8]
        tokens = self.compress(feats).transpose(1, 2)  # [B, W/16, c]
        return self.proj(tokens), feats.transpose(1, 2)


class TorchLineRunner:
    """A loaded :class:`LineEncoder` behind the same call as :class:`models.compact.line.onnx_runtime.OnnxLineEncoder`
    (numpy in, numpy out), for checkpoints without a current ``encoder.onnx``, other devices or dtypes,
    and bilingual checkpoints (``module`` also gives the script router its features).
    """

    def __init__(self, module: LineEncoder, device: torch.device, dtype: torch.dtype) -> None:
        self.module, self.device, self.dtype = module, device, dtype

    def __call__(self, lines: np.ndarray) -> np.ndarray:
        """``lines`` [N, 1, 32, W] -> vision tokens [N, W/16, hidden] float32 (computed in ``dtype``)."""
        with torch.no_grad():
            x = torch.from_numpy(np.ascontiguousarray(lines)).to(self.device, self.dtype)
            return self.module(x)[0].float().cpu().numpy()
