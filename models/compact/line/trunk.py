"""The Latin tower's ResNet trunk, without importing timm.

The compact line encoder was designed and trained on timm's ``resnet18`` topology (``stem_type="deep"``,
``features_only=True, out_indices=(2,)``: deep 3-conv stem, max-pool, ``layer1``, ``layer2``; He et al.
2016 BasicBlocks; the deep stem of Bag of Tricks, He et al. 2019). timm imports torchvision at import
time (``timm.layers.create_norm`` -> ``torchvision.ops``), and with the CUDA build of torch that the
project pins, torchvision's extension alone adds ~165 MiB of resident memory to every encoder
process (measured: ``import torch`` 507 MiB, ``+ torchvision`` 670 MiB). :class:`ResNetTrunk` is the
same network in plain torch with the same module names, so the checkpoint's ``encoder.trunk.*``
tensors load unchanged; ``tests/unit/test_trunk.py`` checks it against timm's model (same state-dict
keys, same outputs for the same weights).
"""

from __future__ import annotations

import torch
from torch import nn


class BasicBlock(nn.Module):
    """ResNet basic block: 3x3 conv (``stride``) - BN - ReLU - 3x3 conv - BN, + shortcut (1x1 conv + BN
    when the shape changes), ReLU. [B, c_in, H, W] -> [B, c_out, H/stride, W/stride].
    """

    def __init__(self, c_in: int, c_out: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.act1 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.act2 = nn.ReLU(inplace=True)
        self.downsample = (nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False), nn.BatchNorm2d(c_out))
                           if stride != 1 or c_in != c_out else None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """[B, c_in, H, W] -> [B, c_out, H/stride, W/stride]."""
        shortcut = x if self.downsample is None else self.downsample(x)
        y = self.act1(self.bn1(self.conv1(x)))
        return self.act2(self.bn2(self.conv2(y)) + shortcut)


class ResNetTrunk(nn.Module):
    """Deep-stem ResNet up to its second stage, as timm's ``resnet18(stem_type="deep", stem_width=s,
    channels=(c1, c2, ...), layers=(n1, n2, ...), in_chans=1, features_only=True, out_indices=(2,))``.

    ``forward``: [B, 1, H, W] float -> [[B, c2, H/8, W/8]] (a one-element list, like timm's
    FeatureListNet): stem stride 2, max-pool stride 2, ``layer2`` stride 2.
    """

    def __init__(self, stem_width: int, channels: tuple[int, int], layers: tuple[int, int],
                 in_chans: int = 1) -> None:
        super().__init__()
        s, inplanes = stem_width, 2 * stem_width
        self.conv1 = nn.Sequential(
            nn.Conv2d(in_chans, s, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(s), nn.ReLU(inplace=True),
            nn.Conv2d(s, s, 3, padding=1, bias=False), nn.BatchNorm2d(s), nn.ReLU(inplace=True),
            nn.Conv2d(s, inplanes, 3, padding=1, bias=False))
        self.bn1 = nn.BatchNorm2d(inplanes)
        self.act1 = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        c1, c2 = channels
        self.layer1 = nn.Sequential(*(BasicBlock(inplanes if i == 0 else c1, c1) for i in range(layers[0])))
        self.layer2 = nn.Sequential(*(BasicBlock(c1 if i == 0 else c2, c2, stride=2 if i == 0 else 1)
                                      for i in range(layers[1])))

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        """[B, 1, H, W] -> [[B, c2, H/8, W/8]]."""
        x = self.maxpool(self.act1(self.bn1(self.conv1(x))))
        return [self.layer2(self.layer1(x))]
