"""The embedded result store: blobs as files in a local directory (atomic rename on write)."""

from __future__ import annotations

import os
import pathlib
import shutil
import threading
from collections.abc import Iterator

from inkstream.errors import InvalidInput


class DirResultStore:
    """:class:`gateway.stores.ResultStore` in the directory ``root``; writes go to a temp name and
    are renamed (atomic on POSIX). Names that would leave ``root`` raise InvalidInput.
    """

    def __init__(self, root: str | os.PathLike[str]):
        self.root = pathlib.Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, name: str) -> pathlib.Path:
        p = (self.root / name).resolve()
        if self.root.resolve() not in p.parents:
            raise InvalidInput(f"invalid result name {name!r}")
        return p

    def _tmp(self, p: pathlib.Path) -> pathlib.Path:
        p.parent.mkdir(parents=True, exist_ok=True)
        return p.with_name(f".{p.name}.{os.getpid()}.{threading.get_ident()}.tmp")

    def put(self, name: str, data: bytes, content_type: str = "application/octet-stream") -> None:
        """See :meth:`ResultStore.put` (``content_type`` is not kept by a directory)."""
        p = self._path(name)
        tmp = self._tmp(p)
        tmp.write_bytes(data)
        os.replace(tmp, p)

    def put_file(self, name: str, path: pathlib.Path) -> None:
        """See :meth:`ResultStore.put_file` (the file is moved into the store)."""
        p = self._path(name)
        tmp = self._tmp(p)
        shutil.move(path, tmp)
        os.replace(tmp, p)

    def local_path(self, name: str) -> pathlib.Path | None:
        """See :meth:`ResultStore.local_path`."""
        p = self._path(name)
        return p if p.is_file() else None

    def fetch_to(self, name: str, path: pathlib.Path) -> bool:
        """See :meth:`ResultStore.fetch_to`."""
        src = self.local_path(name)
        if src is None:
            return False
        shutil.copyfile(src, path)
        return True

    def chunks(self, name: str, chunk_bytes: int = 1 << 20) -> Iterator[bytes] | None:
        """See :meth:`ResultStore.chunks`."""
        src = self.local_path(name)
        if src is None:
            return None

        def read() -> Iterator[bytes]:
            with open(src, "rb") as f:
                while chunk := f.read(chunk_bytes):
                    yield chunk

        return read()

    def get(self, name: str) -> bytes | None:
        """See :meth:`ResultStore.get`."""
        try:
            return self._path(name).read_bytes()
        except FileNotFoundError:
            return None

    def delete(self, name: str) -> None:
        """See :meth:`ResultStore.delete`."""
        self._path(name).unlink(missing_ok=True)

    def delete_prefix(self, prefix: str) -> None:
        """See :meth:`ResultStore.delete_prefix` (``prefix`` names a folder here, e.g. ``<job id>/``)."""
        p = self._path(prefix.rstrip("/"))
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)

    def names(self, prefix: str) -> list[tuple[str, float]]:
        """See :meth:`ResultStore.names`."""
        base = self._path(prefix) if prefix else self.root
        if not base.is_dir():
            return []
        out = []
        for p in base.rglob("*"):
            if p.is_file() and not p.name.startswith("."):
                try:
                    out.append((str(p.relative_to(self.root)), p.stat().st_mtime))
                except FileNotFoundError:
                    continue
        return out

    def url(self, name: str, expires_s: int) -> str:
        """A directory has no URLs: always ""."""
        return ""

    def ping(self) -> None:
        """A local directory is always reachable."""
