"""Where jobs, results and the cache live: small interfaces and their engines.

* :class:`JobStore` — job records, page checkpoints, idempotency keys. Embedded
  :class:`SqliteJobStore` (default); :class:`RedisJobStore` shared by every gateway (``job_store: redis``).
* :class:`ResultStore` — blobs by name (job documents and results, cached pages). Embedded
  :class:`DirResultStore` (default); :class:`S3ResultStore` (``result_store: s3``).

:func:`gateway.stores.factory.open_stores` builds them from the gateway's ``stores`` settings.
"""

from gateway.stores.directory import DirResultStore
from gateway.stores.records import FINISHED, JOB_STATUSES, JobRecord, JobStore, ResultStore
from gateway.stores.sqlite import SqliteJobStore

__all__ = ["FINISHED", "JOB_STATUSES", "DirResultStore", "JobRecord", "JobStore", "ResultStore", "SqliteJobStore"]
