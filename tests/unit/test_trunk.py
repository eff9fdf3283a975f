"""The Latin tower's trunk without timm (models/compact/line/trunk.py) is timm's network, and the encoder
service does not import timm, torchvision or transformers (their import costs ~220 MiB of RSS)."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import timm
import torch

from models.compact.line.encoder import EncoderConfig
from models.compact.line.trunk import ResNetTrunk


def _timm_trunk(cfg: EncoderConfig):
    return timm.create_model("resnet18", pretrained=False, in_chans=1, features_only=True, out_indices=(2,),
                             stem_type="deep", stem_width=cfg.stem_width, channels=tuple(cfg.channels) + (8, 8),
                             layers=tuple(cfg.layers) + (1, 1))


def test_same_tensors_and_outputs_as_timm():
    torch.manual_seed(0)
    for cfg in (EncoderConfig(), EncoderConfig(stem_width=4, channels=(16, 24), layers=(2, 1))):
        ref = _timm_trunk(cfg)
        for m in ref.modules():  # non-trivial BN statistics, so eval mode is checked too
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.data.uniform_(0.5, 1.5)
        ours = ResNetTrunk(cfg.stem_width, cfg.channels, cfg.layers)
        assert list(ours.state_dict()) == list(ref.state_dict())
        ours.load_state_dict(ref.state_dict(), strict=True)
        x = torch.rand(3, 1, 32, 96)
        for mode in ("eval", "train"):
            getattr(ref, mode)()
            getattr(ours, mode)()
            want, got = ref(x), ours(x)
            assert len(got) == 1 and got[0].shape == want[0].shape == (3, cfg.channels[1], 4, 12)
            torch.testing.assert_close(got[0], want[0])


def test_encoder_half_imports_no_timm_torchvision_or_transformers():
    code = ("import sys; import models.compact.encoder_half, models.compact.line.towers; "
            "print(sorted(m for m in ('timm', 'torchvision', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_encoder_service_with_the_default_model_runs_without_torch():
    """The encoder service of a Latin checkpoint with a current encoder.onnx (the embedded default):
    load, read a page and build its gRPC response without importing torch (its CUDA build is half
    of the process's memory, issue #16)."""
    code = (
        "import sys, io; from PIL import Image, ImageDraw\n"
        "from encoder_service.server import build_server\n"
        "from encoder_service.convert import encode_response\n"
        "from models.compact.encoder_half import CompactEncoderHalf\n"
        "h = CompactEncoderHalf.load('models/compact/weights')\n"
        "im = Image.new('RGB', (900, 200), 'white'); ImageDraw.Draw(im).text((40, 60), 'No torch here', "
        "fill='black', font_size=48)\n"
        "page = h.encode_batch([h.preprocess(im, 'lines')])[0]\n"
        "r = encode_response(0, page, wire_dtype='bfloat16', model_id=h.model_id, seconds=0.0)\n"
        "print(h.runtime, len(r.segments), 'torch' in sys.modules)\n"
    )
    root = pathlib.Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True,
                         cwd=root)
    assert out.stdout.split() == ["onnxruntime", "1", "False"], out.stdout + out.stderr[-2000:]
