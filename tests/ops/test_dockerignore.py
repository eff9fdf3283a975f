"""The image's build context (.dockerignore) holds every file the services load, and no weights."""

from __future__ import annotations

import pathlib
import subprocess

import pathspec

ROOT = pathlib.Path(__file__).resolve().parents[2]
#: what the Dockerfile copies into the build stage
BUILD_INPUTS = ("pyproject.toml", "setup.py", "README.md", "protos/", "inkstream/", "models/", "encoder_service/",
                "decoder_service/", "gateway/", "launcher/", "client/", "evaluation/")
#: mounted at /weights in a container, never baked in
WEIGHTS = ("models/compact/weights/", "models/compact/weights_zh/")


def _ignored() -> pathspec.PathSpec:
    lines = [ln.strip() for ln in (ROOT / ".dockerignore").read_text().splitlines()]
    return pathspec.PathSpec.from_lines("gitignore", [ln for ln in lines if ln and not ln.startswith("#")])


def _tracked() -> list[str]:
    return subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()


def test_every_file_the_image_needs_is_in_the_build_context():
    spec = _ignored()
    needed = [f for f in _tracked() if f.startswith(BUILD_INPUTS) and not f.startswith(WEIGHTS)]
    assert "models/compact/detector/PP-OCRv6_det_small.int8.onnx" in needed  # the encoder's text detector
    left_out = [f for f in needed if spec.match_file(f)]
    assert not left_out, left_out


def test_weights_and_generated_stubs_stay_out():
    spec = _ignored()
    weights = [f for f in _tracked() if f.startswith(WEIGHTS)]
    assert weights and all(spec.match_file(f) for f in weights)
    assert spec.match_file("inkstream/common/v1/tensor_pb2.py")
    assert spec.match_file("tests/unit/test_layering.py")  # nothing outside the build inputs
