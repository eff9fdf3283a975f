"""Blobs in an S3-compatible object store (AWS S3, MinIO, Ceph, SeaweedFS) through boto3.

``s3://BUCKET/PREFIX`` names the store: a blob ``NAME`` is the object ``PREFIX/NAME``. The endpoint
and credentials come from the standard AWS variables (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_DEFAULT_REGION``), path-style addressing. Presigned URLs are signed
for ``presign_endpoint`` when given (the address clients reach; default the same endpoint). Every
S3 call that fails for the server's sake raises :class:`inkstream.errors.Unavailable` (503 +
Retry-After): unreachable, a timeout, any HTTP 5xx, any 4xx other than a missing object (403 from a
changed policy or credentials, 400/409 from a misconfigured bucket: the client can do nothing about
them), a failed multipart upload (boto3's ``S3UploadFailedError``), a body cut mid-read; the message
never names the endpoint (``where`` is for ``/readyz``'s admin details and logs). Objects are written
whole by one PUT (or a multipart upload
completed at once), so a reader never sees half an object.
"""

from __future__ import annotations

import functools
import logging
import pathlib
from collections.abc import Callable, Iterator
from typing import Any, TypeVar
from urllib.parse import urlparse

import boto3
import boto3.exceptions
import botocore.config
import botocore.exceptions

from inkstream.errors import InvalidInput, Unavailable

log = logging.getLogger("inkstream.gateway.s3")
T = TypeVar("T")
RETRY_AFTER_S = 5.0
_MISSING = ("404", "NoSuchKey", "NotFound")


def parse_s3_url(url: str) -> tuple[str, str]:
    """``s3://BUCKET/PREFIX`` -> (bucket, prefix without slashes at the ends); InvalidInput otherwise."""
    u = urlparse(url)
    if u.scheme != "s3" or not u.netloc:
        raise InvalidInput(f"not an s3:// URL: {url!r} (use s3://BUCKET/KEY)")
    return u.netloc, u.path.strip("/")


def _missing(exc: botocore.exceptions.ClientError) -> bool:
    return str(exc.response.get("Error", {}).get("Code", "")) in _MISSING


def _unavailable(exc: BaseException) -> Unavailable:
    status = 0
    if isinstance(exc, botocore.exceptions.ClientError):
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    if status:
        what = f"answered HTTP {status}"
    elif isinstance(exc, (botocore.exceptions.EndpointConnectionError, botocore.exceptions.ConnectTimeoutError)):
        what = "cannot be reached (it is down or unreachable)"
    else:
        what = f"failed ({type(exc).__name__})"
    return Unavailable(f"the object store {what}; retry shortly", retry_after_s=RETRY_AFTER_S)


def s3_errors(fn: Callable[..., T]) -> Callable[..., T]:
    """Decorator: every store failure but a missing object (which the methods answer themselves) ->
    Unavailable (see the module docstring); an iterator returned by ``fn`` is guarded the same way.
    """

    @functools.wraps(fn)
    def inner(self: Any, *args: Any, **kwargs: Any) -> T:
        try:
            out = fn(self, *args, **kwargs)
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError,
                boto3.exceptions.Boto3Error) as exc:
            log.warning("object store call %s failed: %s (%s)", fn.__name__, type(exc).__name__, self.where)
            raise _unavailable(exc) from exc
        if isinstance(out, Iterator):
            return _guarded(out, self.where)  # type: ignore[return-value]
        return out
    return inner


def _guarded(chunks: Iterator[bytes], where: str) -> Iterator[bytes]:
    """``chunks`` with a failure while reading turned into Unavailable."""
    try:
        yield from chunks
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError, OSError) as exc:
        log.warning("object store read failed: %s (%s)", type(exc).__name__, where)
        raise _unavailable(exc) from exc


def s3_client(endpoint: str | None = None) -> Any:
    """A boto3 S3 client (path-style, short timeouts, 2 attempts); ``endpoint`` None = AWS variables."""
    cfg = botocore.config.Config(s3={"addressing_style": "path"}, connect_timeout=3, read_timeout=30,
                                 retries={"max_attempts": 2, "mode": "standard"}, signature_version="s3v4")
    return boto3.session.Session().client("s3", endpoint_url=endpoint or None, config=cfg)


class S3ResultStore:
    """:class:`gateway.stores.ResultStore` under ``s3://BUCKET/PREFIX`` (``url``)."""

    def __init__(self, url: str, presign_endpoint: str = ""):
        self.bucket, self.prefix = parse_s3_url(url)
        self.client = s3_client()
        self.where = f"{self.client.meta.endpoint_url}, bucket {self.bucket}"
        self._presigner = s3_client(presign_endpoint) if presign_endpoint else self.client

    def key(self, name: str) -> str:
        """The object key of blob ``name``."""
        if ".." in name.split("/"):
            raise InvalidInput(f"invalid result name {name!r}")
        return f"{self.prefix}/{name}" if self.prefix else name

    def uri(self, name: str) -> str:
        """``s3://BUCKET/KEY`` of blob ``name``."""
        return f"s3://{self.bucket}/{self.key(name)}"

    @s3_errors
    def put(self, name: str, data: bytes, content_type: str = "application/octet-stream") -> None:
        """See :meth:`ResultStore.put`."""
        self.client.put_object(Bucket=self.bucket, Key=self.key(name), Body=data, ContentType=content_type)

    @s3_errors
    def put_file(self, name: str, path: pathlib.Path) -> None:
        """See :meth:`ResultStore.put_file` (streamed from disk; the local file is removed after)."""
        self.client.upload_file(str(path), self.bucket, self.key(name))
        pathlib.Path(path).unlink(missing_ok=True)

    def local_path(self, name: str) -> pathlib.Path | None:
        """Objects are remote: always None."""
        return None

    @s3_errors
    def fetch_to(self, name: str, path: pathlib.Path) -> bool:
        """See :meth:`ResultStore.fetch_to`."""
        return self.fetch_object_to(self.bucket, self.key(name), path)

    def fetch_object_to(self, bucket: str, key: str, path: pathlib.Path) -> bool:
        """Copy object ``bucket/key`` to ``path`` in chunks (boto3's transfer manager); False if missing."""
        try:
            self.client.download_file(bucket, key, str(path))
        except botocore.exceptions.ClientError as exc:
            if _missing(exc):
                return False
            raise
        return True

    @s3_errors
    def chunks(self, name: str, chunk_bytes: int = 1 << 20) -> Iterator[bytes] | None:
        """See :meth:`ResultStore.chunks`."""
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=self.key(name))["Body"]
        except botocore.exceptions.ClientError as exc:
            if _missing(exc):
                return None
            raise
        return iter(lambda: body.read(chunk_bytes), b"")

    @s3_errors
    def get(self, name: str) -> bytes | None:
        """See :meth:`ResultStore.get`."""
        try:
            return bytes(self.client.get_object(Bucket=self.bucket, Key=self.key(name))["Body"].read())
        except botocore.exceptions.ClientError as exc:
            if _missing(exc):
                return None
            raise

    @s3_errors
    def delete(self, name: str) -> None:
        """See :meth:`ResultStore.delete`."""
        self.client.delete_object(Bucket=self.bucket, Key=self.key(name))

    @s3_errors
    def delete_prefix(self, prefix: str) -> None:
        """See :meth:`ResultStore.delete_prefix`."""
        for name, _ in self.names(prefix):
            self.delete(name)

    @s3_errors
    def names(self, prefix: str) -> list[tuple[str, float]]:
        """See :meth:`ResultStore.names`."""
        out: list[tuple[str, float]] = []
        strip = len(self.key(""))
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.key(prefix)):
            out += [(o["Key"][strip:], o["LastModified"].timestamp()) for o in page.get("Contents", [])]
        return out

    def url(self, name: str, expires_s: int) -> str:
        """See :meth:`ResultStore.url` (signing is local: no request is sent)."""
        return str(self._presigner.generate_presigned_url(
            "get_object", Params={"Bucket": self.bucket, "Key": self.key(name)}, ExpiresIn=expires_s))

    def upload_url(self, name: str, expires_s: int) -> str:
        """A presigned PUT URL of blob ``name`` valid ``expires_s`` seconds."""
        return str(self._presigner.generate_presigned_url(
            "put_object", Params={"Bucket": self.bucket, "Key": self.key(name)}, ExpiresIn=expires_s))

    @s3_errors
    def head(self, bucket: str, key: str) -> int | None:
        """Size in bytes of object ``bucket/key``, or None when it does not exist."""
        try:
            return int(self.client.head_object(Bucket=bucket, Key=key)["ContentLength"])
        except botocore.exceptions.ClientError as exc:
            if _missing(exc):
                return None
            raise

    @s3_errors
    def open_object(self, bucket: str, key: str, chunk_bytes: int = 1 << 20) -> Iterator[bytes]:
        """The bytes of object ``bucket/key`` as a stream of chunks (never held whole)."""
        body = self.client.get_object(Bucket=bucket, Key=key)["Body"]
        return iter(lambda: body.read(chunk_bytes), b"")

    @s3_errors
    def ping(self) -> None:
        """See :meth:`ResultStore.ping` (HEAD of the bucket). Raises Unavailable; a bucket that does
        not exist (HTTP 404 to the HEAD) is named as such, since retrying never helps: create it.
        """
        try:
            self.client.head_bucket(Bucket=self.bucket)
        except botocore.exceptions.ClientError as exc:
            if not _missing(exc):
                raise
            log.warning("object store bucket missing (%s)", self.where)
            raise Unavailable("the object store's bucket (stores.s3_url) does not exist; create it",
                              retry_after_s=RETRY_AFTER_S) from exc
