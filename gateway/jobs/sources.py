"""Documents that are not in the request body: ``source=s3://BUCKET/KEY`` objects, presigned
uploads (``POST /v1/uploads``), and a job's stored document read back by a worker.

Only the buckets the gateway is configured with (``stores.s3_url``'s and ``stores.source_buckets``)
are ever read — never an arbitrary URL (that would let any client make the gateway fetch from its
own network). A source object is streamed to a local temp file with the upload limits (size first
from its HEAD, 413 before any byte is read; then the running count), never held in memory.
"""

from __future__ import annotations

import asyncio
import hashlib
import pathlib
import uuid
from typing import Any

from gateway.ingest import UploadedFile, UploadSink, too_large
from gateway.ingest.sniff import SNIFF_BYTES
from gateway.stores.s3 import S3ResultStore, parse_s3_url
from inkstream.errors import FailedPrecondition, InvalidInput, NotFound

UPLOADS = "uploads"


def file_upload(path: pathlib.Path) -> UploadedFile:
    """Describe a local file (a job's document fetched by a worker) as an UploadedFile: size,
    SHA-256 and first bytes, read in chunks.
    """
    digest, size, head = hashlib.sha256(), 0, b""
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            if not head:
                head = chunk[:SNIFF_BYTES]
            digest.update(chunk)
            size += len(chunk)
    return UploadedFile(path, size, digest.hexdigest(), head)


class Sources:
    """Reads ``s3://`` sources and signs uploads through ``store`` (None: result_store is not s3, so
    sources and uploads are refused with FAILED_PRECONDITION). ``buckets``: extra readable buckets.
    """

    def __init__(self, store: S3ResultStore | None, buckets: list[str], expires_s: int):
        self.store = store
        self.buckets = ({store.bucket} if store else set()) | set(buckets)
        self.expires_s = expires_s

    def _need_store(self) -> S3ResultStore:
        if self.store is None:
            raise FailedPrecondition("this gateway has no object store (stores.result_store is not s3): "
                                     "send the document in the 'file' field")
        return self.store

    def check(self, uri: str) -> tuple[str, str]:
        """(bucket, key) of ``uri`` when it names an object in a configured bucket; InvalidInput (400)
        otherwise (another scheme, an unknown bucket, no key).
        """
        self._need_store()
        bucket, key = parse_s3_url(uri)
        if bucket not in self.buckets:
            raise InvalidInput(f"source bucket {bucket!r} is not one this gateway reads "
                               f"(configured: {', '.join(sorted(self.buckets))})")
        if not key:
            raise InvalidInput(f"source {uri!r} names no object (use s3://BUCKET/KEY)")
        return bucket, key

    def new_upload(self) -> dict[str, Any]:
        """``{upload_url, source, expires_in}``: a presigned PUT for a new object under ``uploads/``."""
        store = self._need_store()
        name = f"{UPLOADS}/{uuid.uuid4().hex}"
        return {"upload_url": store.upload_url(name, self.expires_s), "source": store.uri(name),
                "expires_in": self.expires_s}

    async def fetch(self, uri: str, directory: pathlib.Path, max_bytes: int) -> UploadedFile:
        """Stream object ``uri`` into ``directory/document``; NotFound (404) when it does not exist,
        PayloadTooLarge (413) over ``max_bytes``, Unavailable (503) when the store is unreachable.
        """
        bucket, key = self.check(uri)
        store = self._need_store()
        size = await asyncio.to_thread(store.head, bucket, key)
        if size is None:
            raise NotFound(f"source {uri} does not exist (was the upload PUT done?)")
        if size > max_bytes:
            raise too_large(max_bytes, size)
        return await asyncio.to_thread(self._copy, bucket, key, directory, max_bytes)

    def _copy(self, bucket: str, key: str, directory: pathlib.Path, max_bytes: int) -> UploadedFile:
        assert self.store is not None
        sink = UploadSink(directory, max_bytes)
        try:
            for chunk in self.store.open_object(bucket, key):
                sink.write(chunk)
        except BaseException:
            sink.abort()
            raise
        return sink.finish()
