"""The embedded job store: one SQLite file (WAL journal), the default of ``inkstream up``."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from dataclasses import asdict
from typing import Any

from gateway.stores.records import FIELDS, FINISHED, JobRecord
from inkstream.errors import InvalidInput

_TYPES = {"pages_done": "INTEGER", "pages_total": "INTEGER", "webhook_attempts": "INTEGER", "attempts": "INTEGER",
          "created_at": "REAL", "updated_at": "REAL"}


class SqliteJobStore:
    """:class:`gateway.stores.JobStore` in one SQLite file (``path``; ":memory:" for tests).
    Thread-safe via one lock. Columns missing from a file written by an older version are added.
    """

    def __init__(self, path: str | os.PathLike[str]):
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        cols = ", ".join(f"{f} {_TYPES.get(f, 'TEXT')}" for f in FIELDS[1:])
        self._db.execute(f"CREATE TABLE IF NOT EXISTS jobs (job_id TEXT PRIMARY KEY, {cols})")
        have = {row[1] for row in self._db.execute("PRAGMA table_info(jobs)")}
        for f in FIELDS:
            if f not in have:
                default = "0" if _TYPES.get(f) else "''"
                self._db.execute(f"ALTER TABLE jobs ADD COLUMN {f} {_TYPES.get(f, 'TEXT')} DEFAULT {default}")
        self._db.execute(
            "CREATE UNIQUE INDEX IF NOT EXISTS jobs_idem ON jobs(idempotency_key) WHERE idempotency_key != ''")
        self._db.execute("CREATE TABLE IF NOT EXISTS pages (job_id TEXT, idx INTEGER, body TEXT, "
                         "PRIMARY KEY (job_id, idx))")
        self._select = f"SELECT {','.join(FIELDS)} FROM jobs"

    @staticmethod
    def _row(row: tuple[Any, ...] | None) -> JobRecord | None:
        if row is None:
            return None
        d = dict(zip(FIELDS, row, strict=True))
        d["options"] = json.loads(d["options"] or "{}")
        d = {k: ("" if v is None and not _TYPES.get(k) else v) for k, v in d.items()}
        return JobRecord(**d)

    def create(self, job: JobRecord) -> tuple[JobRecord, bool]:
        """See :meth:`JobStore.create`."""
        d = asdict(job)
        d["options"] = json.dumps(d["options"])
        marks = ",".join("?" for _ in FIELDS)
        with self._lock:
            try:
                self._db.execute(f"INSERT INTO jobs ({','.join(FIELDS)}) VALUES ({marks})", [d[c] for c in FIELDS])
            except sqlite3.IntegrityError:
                if not job.idempotency_key:
                    raise
                existing = self._row(self._db.execute(f"{self._select} WHERE idempotency_key = ?",
                                                      (job.idempotency_key,)).fetchone())
                if existing is None:  # deleted between the two statements
                    raise InvalidInput("idempotency key conflict; retry the request") from None
                return existing, False
        return job, True

    def get(self, job_id: str) -> JobRecord | None:
        """See :meth:`JobStore.get`."""
        with self._lock:
            return self._row(self._db.execute(f"{self._select} WHERE job_id = ?", (job_id,)).fetchone())

    def get_by_key(self, idempotency_key: str) -> JobRecord | None:
        """See :meth:`JobStore.get_by_key`."""
        with self._lock:
            return self._row(self._db.execute(f"{self._select} WHERE idempotency_key = ?",
                                              (idempotency_key,)).fetchone())

    def update(self, job_id: str, *, unless_finished: bool = False, **fields: Any) -> bool:
        """See :meth:`JobStore.update`."""
        fields["updated_at"] = time.time()
        if "options" in fields:
            fields["options"] = json.dumps(fields["options"])
        sets = ",".join(f"{k} = ?" for k in fields)
        where = "job_id = ?"
        if unless_finished:
            where += f" AND status NOT IN ({','.join('?' for _ in FINISHED)})"
        with self._lock:
            cur = self._db.execute(f"UPDATE jobs SET {sets} WHERE {where}",
                                   [*fields.values(), job_id, *(FINISHED if unless_finished else ())])
        return cur.rowcount > 0

    def put_page(self, job_id: str, index: int, page: dict[str, Any]) -> int:
        """See :meth:`JobStore.put_page`."""
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO pages VALUES (?, ?, ?)", (job_id, index, json.dumps(page)))
            return int(self._db.execute("SELECT COUNT(*) FROM pages WHERE job_id = ?", (job_id,)).fetchone()[0])

    def pages(self, job_id: str) -> dict[int, dict[str, Any]]:
        """See :meth:`JobStore.pages`."""
        with self._lock:
            rows = self._db.execute("SELECT idx, body FROM pages WHERE job_id = ?", (job_id,)).fetchall()
        return {int(i): json.loads(b) for i, b in rows}

    def delete(self, job_id: str) -> None:
        """See :meth:`JobStore.delete`."""
        with self._lock:
            self._db.execute("DELETE FROM jobs WHERE job_id = ?", (job_id,))
            self._db.execute("DELETE FROM pages WHERE job_id = ?", (job_id,))

    def expired(self, before: float) -> list[str]:
        """See :meth:`JobStore.expired`."""
        marks = ",".join("?" for _ in FINISHED)
        with self._lock:
            rows = self._db.execute(f"SELECT job_id FROM jobs WHERE status IN ({marks}) AND updated_at < ?",
                                    (*FINISHED, before)).fetchall()
        return [r[0] for r in rows]

    def unfinished(self) -> list[JobRecord]:
        """See :meth:`JobStore.unfinished`."""
        with self._lock:
            rows = self._db.execute(f"{self._select} WHERE status IN ('queued', 'running') "
                                    "ORDER BY created_at").fetchall()
        return [job for row in rows if (job := self._row(row)) is not None]

    def ping(self) -> None:
        """A local file is always reachable."""

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()
