"""Job store and result store: small interfaces with the embedded implementations.

* :class:`JobStore` — job records (status, progress, idempotency keys). Embedded: :class:`SqliteJobStore`
  (one SQLite file, WAL journal). A Redis implementation needs the same six methods (a hash per job,
  ``SET NX`` on the idempotency key).
* :class:`ResultStore` — opaque blobs by name (job results, cached page results). Embedded:
  :class:`DirResultStore` (a local directory, atomic rename on write). An S3-compatible store maps
  names to object keys (``put_object`` / ``get_object`` / ``delete_object``, lifecycle rules for expiry).

Both are synchronous and fast (local disk); callers on an event loop use them directly.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import sqlite3
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from inkstream.errors import InvalidInput

JOB_STATUSES = ("queued", "running", "done", "failed", "cancelled")
FINISHED = ("done", "failed", "cancelled")


@dataclass
class JobRecord:
    """One asynchronous OCR job. Times are UNIX seconds; ``options`` the request options as a dict."""

    job_id: str
    status: str = "queued"
    pages_done: int = 0
    pages_total: int = 0
    error: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    idempotency_key: str = ""
    doc_sha256: str = ""
    model_id: str = ""
    created_at: float = 0.0
    updated_at: float = 0.0


class JobStore(Protocol):
    """Persistence of job records."""

    def create(self, job: JobRecord) -> tuple[JobRecord, bool]:
        """Insert ``job``; when its idempotency key is already taken return (existing, False)."""

    def get(self, job_id: str) -> JobRecord | None:
        """The record, or None."""

    def get_by_key(self, idempotency_key: str) -> JobRecord | None:
        """The job created with this idempotency key, or None."""

    def update(self, job_id: str, **fields: Any) -> None:
        """Set ``fields`` (JobRecord attributes) and ``updated_at``."""

    def delete(self, job_id: str) -> None:
        """Remove the record (no error when missing)."""

    def expired(self, before: float) -> list[str]:
        """Ids of finished jobs last updated before ``before`` (UNIX seconds)."""

    def fail_unfinished(self, message: str) -> int:
        """Mark queued/running jobs (left by an earlier process) failed; returns how many."""


class SqliteJobStore:
    """JobStore in one SQLite file (``path``; ":memory:" for tests). Thread-safe via one lock."""

    _COLUMNS = list(JobRecord.__dataclass_fields__)

    def __init__(self, path: str | os.PathLike[str]):
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS jobs (job_id TEXT PRIMARY KEY, status TEXT, pages_done INTEGER, "
            "pages_total INTEGER, error TEXT, options TEXT, idempotency_key TEXT, doc_sha256 TEXT, "
            "model_id TEXT, created_at REAL, updated_at REAL)"
        )
        self._db.execute(
            "CREATE UNIQUE INDEX IF NOT EXISTS jobs_idem ON jobs(idempotency_key) WHERE idempotency_key != ''"
        )

    def _row(self, row: tuple[Any, ...] | None) -> JobRecord | None:
        if row is None:
            return None
        d = dict(zip(self._COLUMNS, row, strict=True))  # rows are always SELECTed as _COLUMNS
        d["options"] = json.loads(d["options"] or "{}")
        return JobRecord(**d)

    def create(self, job: JobRecord) -> tuple[JobRecord, bool]:
        """See :meth:`JobStore.create`."""
        d = asdict(job)
        d["options"] = json.dumps(d["options"])
        cols = ",".join(self._COLUMNS)
        marks = ",".join("?" for _ in self._COLUMNS)
        with self._lock:
            try:
                self._db.execute(f"INSERT INTO jobs ({cols}) VALUES ({marks})", [d[c] for c in self._COLUMNS])
            except sqlite3.IntegrityError:
                if not job.idempotency_key:
                    raise
                row = self._db.execute(f"SELECT {cols} FROM jobs WHERE idempotency_key = ?",
                                       (job.idempotency_key,)).fetchone()
                existing = self._row(row)
                if existing is None:  # deleted between the two statements
                    raise InvalidInput("idempotency key conflict; retry the request") from None
                return existing, False
        return job, True

    def get(self, job_id: str) -> JobRecord | None:
        """See :meth:`JobStore.get`."""
        with self._lock:
            row = self._db.execute(f"SELECT {','.join(self._COLUMNS)} FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
        return self._row(row)

    def get_by_key(self, idempotency_key: str) -> JobRecord | None:
        """See :meth:`JobStore.get_by_key`."""
        with self._lock:
            row = self._db.execute(f"SELECT {','.join(self._COLUMNS)} FROM jobs WHERE idempotency_key = ?",
                                   (idempotency_key,)).fetchone()
        return self._row(row)

    def update(self, job_id: str, **fields: Any) -> None:
        """See :meth:`JobStore.update`."""
        fields["updated_at"] = time.time()
        if "options" in fields:
            fields["options"] = json.dumps(fields["options"])
        sets = ",".join(f"{k} = ?" for k in fields)
        with self._lock:
            self._db.execute(f"UPDATE jobs SET {sets} WHERE job_id = ?", [*fields.values(), job_id])

    def delete(self, job_id: str) -> None:
        """See :meth:`JobStore.delete`."""
        with self._lock:
            self._db.execute("DELETE FROM jobs WHERE job_id = ?", (job_id,))

    def expired(self, before: float) -> list[str]:
        """See :meth:`JobStore.expired`."""
        marks = ",".join("?" for _ in FINISHED)
        with self._lock:
            rows = self._db.execute(f"SELECT job_id FROM jobs WHERE status IN ({marks}) AND updated_at < ?",
                                    (*FINISHED, before)).fetchall()
        return [r[0] for r in rows]

    def fail_unfinished(self, message: str) -> int:
        """See :meth:`JobStore.fail_unfinished`."""
        with self._lock:
            cur = self._db.execute("UPDATE jobs SET status = 'failed', error = ?, updated_at = ? "
                                   "WHERE status IN ('queued', 'running')", (message, time.time()))
        return cur.rowcount

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()


class ResultStore(Protocol):
    """Blobs by name (``/``-separated, e.g. ``jobs/<id>.json``)."""

    def put(self, name: str, data: bytes) -> None:
        """Store ``data`` under ``name`` (replacing it atomically)."""

    def put_file(self, name: str, path: pathlib.Path) -> None:
        """Store the file at ``path`` under ``name`` without reading it into memory (it is consumed)."""

    def local_path(self, name: str) -> pathlib.Path | None:
        """A local file holding the blob (to stream it), or None when there is none."""

    def get(self, name: str) -> bytes | None:
        """The blob, or None."""

    def delete(self, name: str) -> None:
        """Remove the blob (no error when missing)."""

    def names(self, prefix: str) -> list[tuple[str, float]]:
        """(name, last-modified UNIX seconds) of the blobs under ``prefix``."""


class DirResultStore:
    """ResultStore in a local directory; writes go to a temp name and are renamed (atomic on POSIX)."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = pathlib.Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, name: str) -> pathlib.Path:
        p = (self.root / name).resolve()
        if self.root.resolve() not in p.parents:
            raise InvalidInput(f"invalid result name {name!r}")
        return p

    def put(self, name: str, data: bytes) -> None:
        """See :meth:`ResultStore.put`."""
        p = self._path(name)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(f".{p.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, p)

    def put_file(self, name: str, path: pathlib.Path) -> None:
        """See :meth:`ResultStore.put_file` (the file is moved into the store)."""
        p = self._path(name)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(f".{p.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        shutil.move(path, tmp)
        os.replace(tmp, p)

    def local_path(self, name: str) -> pathlib.Path | None:
        """See :meth:`ResultStore.local_path`."""
        p = self._path(name)
        return p if p.is_file() else None

    def get(self, name: str) -> bytes | None:
        """See :meth:`ResultStore.get`."""
        try:
            return self._path(name).read_bytes()
        except FileNotFoundError:
            return None

    def delete(self, name: str) -> None:
        """See :meth:`ResultStore.delete`."""
        self._path(name).unlink(missing_ok=True)

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
