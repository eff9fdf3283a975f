"""Generate the Python gRPC stubs from ``protos/`` with grpcio-tools (never edited by hand).

Called by ``setup.py`` at build time and, for source checkouts / editable installs, on first import
of :mod:`inkstream.pb` when the stubs are missing or older than their ``.proto`` files.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import pathlib

PACKAGE_ROOT = pathlib.Path(__file__).resolve().parent.parent
PROTO_ROOT = PACKAGE_ROOT / "protos"
STAMP = pathlib.Path(__file__).resolve().parent / ".protos.sha256"


def proto_files(root: pathlib.Path = PROTO_ROOT) -> list[pathlib.Path]:
    """All ``.proto`` files under ``root``, sorted (paths)."""
    return sorted(root.rglob("*.proto"))


def _digest(files: list[pathlib.Path]) -> str:
    h = hashlib.sha256()
    for f in files:
        h.update(str(f.relative_to(PROTO_ROOT)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def generate(out_dir: pathlib.Path = PACKAGE_ROOT, force: bool = False) -> bool:
    """Run protoc (from grpcio-tools) over every proto into ``out_dir``.

    Returns True when stubs were (re)generated. Raises RuntimeError when protoc fails or when the
    protos directory is absent and no stubs exist.
    """
    files = proto_files()
    if not files:
        if (out_dir / "inkstream" / "common" / "v1" / "tensor_pb2.py").exists():
            return False
        raise RuntimeError(f"no .proto files under {PROTO_ROOT} and no generated stubs")
    digest = _digest(files)
    stamp = out_dir / "inkstream" / ".protos.sha256"
    if not force and stamp.exists() and stamp.read_text() == digest:
        return False
    from grpc_tools import protoc  # imported lazily: only needed when generating

    include = str(importlib.resources.files("grpc_tools") / "_proto")
    args = [
        "protoc",
        f"-I{PROTO_ROOT}",
        f"-I{include}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        *[str(f) for f in files],
    ]
    rc = protoc.main(args)
    if rc != 0:
        raise RuntimeError(f"protoc failed with exit code {rc}: {' '.join(args)}")
    stamp.write_text(digest)
    return True


if __name__ == "__main__":
    print("generated" if generate(force=True) else "up to date")
