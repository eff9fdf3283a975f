"""Static checks of the Dockerfile and .dockerignore (no Docker engine on CI machines).

What is checked: multi-stage build (wheel with generated stubs, then a slim runtime), every Python
package the project ships is copied into the build stage, weights can never enter the build
context or the wheel, the runtime runs as a non-root user, and the entrypoint is ``inkstream`` so the
process is chosen by ``serve encoder|decoder|gateway``.
"""

from __future__ import annotations

import fnmatch
import pathlib
import re
import tomllib

REPO = pathlib.Path(__file__).resolve().parents[2]


def _instructions() -> list[tuple[str, str]]:
    text = (REPO / "Dockerfile").read_text()
    text = re.sub(r"\\\n", " ", text)  # join continuation lines
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            op, _, rest = line.partition(" ")
            out.append((op.upper(), rest.strip()))
    return out


def _stages(instrs) -> list[list[tuple[str, str]]]:
    stages: list[list[tuple[str, str]]] = []
    for op, rest in instrs:
        if op == "FROM":
            stages.append([])
        if stages:
            stages[-1].append((op, rest))
    return stages


def test_multi_stage_wheel_then_runtime():
    stages = _stages(_instructions())
    assert len(stages) == 2
    build, runtime = stages
    assert build[0][1].endswith("AS build") and runtime[0][1].endswith("AS runtime")
    build_runs = " ".join(rest for op, rest in build if op == "RUN")
    assert "pip wheel" in build_runs and "encoder_pb2_grpc.py" in build_runs  # stubs generated into the wheel
    # ... and generated before the wheel is built (package discovery precedes build_py).
    assert build_runs.index("inkstream/_protogen.py") < build_runs.index("pip wheel")
    runtime_runs = " ".join(rest for op, rest in runtime if op == "RUN")
    assert "--no-index" in runtime_runs and "from inkstream.pb import" in runtime_runs
    assert not any(op == "COPY" and "--from" not in rest for op, rest in runtime), "runtime copies no sources"


def test_every_shipped_package_is_copied():
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())
    includes = cfg["tool"]["setuptools"]["packages"]["find"]["include"]
    tops = {p.rstrip("*").rstrip(".") for p in includes}
    copied = {src.rstrip("/") for op, rest in _stages(_instructions())[0] if op == "COPY"
              for src in rest.split()[:-1] if not src.startswith("--")}
    assert tops <= copied, f"not copied into the build stage: {tops - copied}"
    assert {"protos", "pyproject.toml", "setup.py"} <= copied


def test_runtime_is_unprivileged_and_runs_inkstream():
    runtime = _stages(_instructions())[1]
    users = [rest for op, rest in runtime if op == "USER"]
    assert users and users[-1].split(":")[0] not in ("0", "root")
    entry = [rest for op, rest in runtime if op == "ENTRYPOINT"][-1]
    assert entry.rstrip("]").split(",")[-1].strip().strip('"') == "inkstream"
    assert any(op == "VOLUME" and "/weights" in rest for op, rest in runtime)


def _ignored(path: str, rules: list[str]) -> bool:
    """Docker's .dockerignore semantics for the patterns used here: last matching rule wins,
    ``!`` re-includes, ``**`` matches any number of directories."""
    ignored = False
    for rule in rules:
        neg = rule.startswith("!")
        pat = rule[1:] if neg else rule
        pat = pat.rstrip("/")
        regex = fnmatch.translate(pat).replace(".*.*/", "(.*/)?")
        candidates = [path] + [str(p) for p in pathlib.PurePosixPath(path).parents if str(p) != "."]
        if any(re.match(regex, c) for c in candidates) or (pat.endswith("/**") and path.startswith(pat[:-3])):
            ignored = not neg
    return ignored


def test_dockerignore_keeps_sources_and_drops_weights():
    rules = [r.strip() for r in (REPO / ".dockerignore").read_text().splitlines()
             if r.strip() and not r.startswith("#")]
    for kept in ("pyproject.toml", "setup.py", "protos/inkstream/encoder/v1/encoder.proto",
                 "inkstream/tracing.py", "gateway/apis/auth.py", "models/compact/model.py", "models/registry.py"):
        assert not _ignored(kept, rules), kept
    for dropped in ("models/compact/weights/model.safetensors", "models/compact/weights/config.json",
                    "some/dir/pytorch_model.bin", "inkstream/encoder/v1/encoder_pb2.py", ".venv/bin/python",
                    ".git/HEAD", "tests/ops/test_k8s.py", "bench/load.py"):
        assert _ignored(dropped, rules), dropped
