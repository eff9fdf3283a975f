"""Build the stores a gateway's ``stores`` settings name (engines imported only when chosen)."""

from __future__ import annotations

import pathlib
from dataclasses import dataclass
from typing import Any

from gateway.config import Stores
from gateway.stores.directory import DirResultStore
from gateway.stores.records import JobStore, ResultStore
from gateway.stores.sqlite import SqliteJobStore


@dataclass
class OpenStores:
    """The stores of one gateway process. ``redis``: the shared Redis client (None with SQLite);
    ``redis_url``: its URL ("" with SQLite).
    """

    jobs: JobStore
    results: ResultStore
    redis: Any = None
    redis_url: str = ""

    def close(self) -> None:
        """Close connections."""
        self.jobs.close()


def open_stores(st: Stores, data_dir: pathlib.Path) -> OpenStores:
    """The job store and result store of ``st``; SQLite / directory under ``data_dir`` by default.
    Opening sends no request (an unreachable engine shows at the first call and in readiness).
    """
    results: ResultStore
    if st.result_store == "s3":
        from gateway.stores.s3 import S3ResultStore
        results = S3ResultStore(st.s3_url, presign_endpoint=st.s3_presign_endpoint_url)
    else:
        results = DirResultStore(data_dir / "results")
    if st.job_store == "redis":
        from gateway.stores.redis_jobs import RedisJobStore
        jobs = RedisJobStore(st.redis_url, st.job_ttl_s)
        return OpenStores(jobs, results, jobs.client, st.redis_url)
    return OpenStores(SqliteJobStore(data_dir / "jobs.sqlite"), results)
