"""Documents that are not in the request body: ``source=s3://BUCKET/KEY`` objects, presigned
uploads (``POST /v1/uploads``), and a job's stored document read back by a worker.

Only the buckets the gateway is configured with (``stores.s3_url``'s and ``stores.source_buckets``)
are ever read — never an arbitrary URL (that would let any client make the gateway fetch from its
own network). Within them a tenant reads only (:meth:`Sources.check`): its own presigned uploads
(``<store prefix>/uploads/<tenant>/``) and the operator's read prefixes (``stores.source_buckets``
entries ``BUCKET`` or ``BUCKET/PREFIX``, where ``{tenant}`` stands for the caller's tenant), never
the store's own objects (job documents, results, cache, other tenants' uploads): those answer 403.
A key with ``..`` / ``.`` / empty segments or control characters is 400.
A source object is streamed to a local temp file with the upload limits (size first
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
from gateway.tenancy import DEFAULT_TENANT, check_object_key, upload_prefix
from inkstream.errors import FailedPrecondition, InvalidInput, NotFound, PermissionDenied
from inkstream.masking import mask_url

UPLOADS = "uploads"


def urlparse_path(uri: str) -> str:
    """The raw key part of ``s3://BUCKET/KEY`` (``parse_s3_url`` strips slashes at the ends, which
    would hide a leading or trailing empty segment).
    """
    rest = uri.split("://", 1)[1]
    return rest.split("/", 1)[1] if "/" in rest else ""


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
    sources and uploads are refused with FAILED_PRECONDITION). ``buckets``: the operator's read
    prefixes (``BUCKET`` or ``BUCKET/PREFIX``, ``{tenant}`` allowed; see the module docstring).
    """

    def __init__(self, store: S3ResultStore | None, buckets: list[str], expires_s: int):
        self.store = store
        self.read_prefixes = [(b.split("/", 1)[0], b.split("/", 1)[1].strip("/") if "/" in b else "")
                              for b in buckets if b.strip("/")]
        self.buckets = ({store.bucket} if store else set()) | {b for b, _ in self.read_prefixes}
        self.expires_s = expires_s

    def _need_store(self) -> S3ResultStore:
        if self.store is None:
            raise FailedPrecondition("this gateway has no object store (stores.result_store is not s3): "
                                     "send the document in the 'file' field")
        return self.store

    def check(self, uri: str, tenant: str = DEFAULT_TENANT) -> tuple[str, str]:
        """(bucket, key) of ``uri`` when ``tenant`` may read it (module docstring). InvalidInput (400):
        another scheme, an unknown bucket, no key, a malformed key; PermissionDenied (403): a key
        outside the tenant's uploads and the read prefixes (e.g. a job's document).
        """
        store = self._need_store()
        bucket, key = parse_s3_url(uri)
        if bucket not in self.buckets:
            raise InvalidInput(f"source bucket {bucket!r} is not one this gateway reads "
                               f"(configured: {', '.join(sorted(self.buckets))})")
        if not key:
            raise InvalidInput(f"source {uri!r} names no object (use s3://BUCKET/KEY)")
        check_object_key(urlparse_path(uri))
        internal = bucket == store.bucket and (not store.prefix or key.startswith(store.prefix + "/"))
        if bucket == store.bucket and key.startswith(store.key(upload_prefix(tenant))):
            return bucket, key
        for b, prefix in self.read_prefixes:
            prefix = prefix.replace("{tenant}", tenant)
            if b == bucket and (not prefix or key.startswith(prefix + "/")) and not internal:
                return bucket, key
        raise PermissionDenied(f"source {mask_url(uri)} is not readable with this API key: use an upload of "
                               "this tenant (POST /v1/uploads) or a read prefix the operator configured")

    def new_upload(self, tenant: str = DEFAULT_TENANT) -> dict[str, Any]:
        """``{upload_url, source, expires_in}``: a presigned PUT for a new object under the tenant's
        ``uploads/<tenant>/``. Blocking (call it on a thread): the store is asked first (HEAD of its
        bucket, the S3 client's short timeouts), since signing needs no store and a URL into a store
        that is down would only fail at the client's PUT: Unavailable (503 + Retry-After) then;
        FailedPrecondition (400) for a gateway without an object store.
        """
        store = self._need_store()
        store.ping()
        name = f"{upload_prefix(tenant)}{uuid.uuid4().hex}"
        return {"upload_url": store.upload_url(name, self.expires_s), "source": store.uri(name),
                "expires_in": self.expires_s}

    async def fetch(self, uri: str, directory: pathlib.Path, max_bytes: int,
                    tenant: str = DEFAULT_TENANT) -> UploadedFile:
        """Stream object ``uri`` into ``directory/document`` after :meth:`check` for ``tenant`` (400 /
        403); NotFound (404) when it does not exist, PayloadTooLarge (413) over ``max_bytes``,
        Unavailable (503) when the store is unreachable.
        """
        bucket, key = self.check(uri, tenant)
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
