"""Python client of the gateway's gRPC API (``inkstream.gateway.v1.OcrGateway``), sync and asyncio.

    with GatewayClient("127.0.0.1:50050") as c:          # the gateway's gRPC port
        result = c.recognize("scan.pdf", format="markdown", pages="1-3")
        print(result.document)

    async with AsyncGatewayClient("127.0.0.1:50050", api_key=KEY) as c:  # key: when the gateway has keys
        async for item in c.recognize_stream(pdf_bytes):   # PageResult ..., then DocumentSummary
            ...

``api_key`` is sent as ``authorization: Bearer <key>`` metadata on every call (gateway/apis/auth.py);
``credentials`` (``grpc.ssl_channel_credentials(...)``) makes the channel TLS.

Documents are sent in chunks of at most 1 MiB (the proto's limit) read lazily from a path, file
object or bytes. A document that cannot be sent is refused before any request: FileNotFoundError (no
such file), IsADirectoryError (a folder), TypeError (neither bytes, a path nor a binary file object,
e.g. a file opened in text mode). Failed calls raise the :mod:`inkstream.errors` exception for their status code
(e.g. ResourceExhausted with ``retry_after_s``, InvalidInput with the server's message).
"""

from __future__ import annotations

import io
import os
import pathlib
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import IO

import grpc

from client.results import DocumentSummary, JobError, JobStatus, PageResult, RecognizeResult
from inkstream.errors import InkstreamError, from_rpc_error
from inkstream.lifecycle import client_options
from inkstream.page_result_pb import page_from_pb
from inkstream.pb import gateway_pb2, gateway_pb2_grpc

Document = bytes | str | os.PathLike | IO[bytes]
CHUNK_BYTES = 1024 * 1024
_SERVICE = gateway_pb2.DESCRIPTOR.services_by_name["OcrGateway"].full_name


def _item(msg: gateway_pb2.RecognizeResponse) -> PageResult | DocumentSummary:
    if msg.WhichOneof("part") == "page":
        return page_from_pb(msg.page)
    s = msg.summary
    err = JobError(s.error.code, s.error.reason or s.error.code, s.error.message) \
        if s.HasField("error") and s.error.code else None
    return DocumentSummary(s.model_id, s.pages, s.pages_ok, s.pages_error, s.document, s.seconds, s.cached, err)


def _job(msg: gateway_pb2.Job) -> JobStatus:
    err = JobError(msg.error.code, msg.error.reason or msg.error.code, msg.error.message) \
        if msg.HasField("error") and msg.error.code else None
    return JobStatus(msg.job_id, msg.status, msg.pages_done, msg.pages_total, err)


def checked_document(document: object) -> Document:
    """``document`` when it can be sent (see the module docstring); raises FileNotFoundError for a
    path that does not exist, IsADirectoryError for a folder, TypeError for anything that is not bytes
    (``bytes`` / ``bytearray`` / ``memoryview``), a path (``str`` / ``os.PathLike``) or a binary file
    object (``read(n)`` giving bytes: a file opened with ``"rb"``, ``io.BytesIO``).
    """
    if isinstance(document, (bytes, bytearray, memoryview)):
        return document  # type: ignore[return-value] # bytearray / memoryview: sent as their bytes
    if isinstance(document, (str, os.PathLike)):
        path = pathlib.Path(os.fspath(document))
        if not path.exists():
            raise FileNotFoundError(f"no such file: {str(path)!r} (the document to read)")
        if path.is_dir():
            raise IsADirectoryError(f"{str(path)!r} is a directory, not a document: give one file")
        return document
    if isinstance(document, io.TextIOBase):
        raise TypeError("the document is a file opened in text mode; open it in binary mode (open(path, 'rb'))")
    if callable(getattr(document, "read", None)):
        return document  # type: ignore[return-value] # a binary file object
    raise TypeError(f"the document must be bytes, a path (str or os.PathLike) or a binary file object, "
                    f"not {type(document).__name__}")


#: what a call to a server that is not the gateway's gRPC port fails with says where the right one is
_GIVE_GRPC_PORT = "give the gateway's gRPC address ('inkstream up' prints it: 'gRPC 127.0.0.1:50050')"


def call_error(err: grpc.RpcError, target: str) -> InkstreamError:
    """The :mod:`inkstream.errors` exception of a failed call to ``target`` (:func:`from_rpc_error`),
    whose message says so when ``target`` is not the gateway's gRPC port: a gRPC server without the
    gateway's service (an encoder's or decoder's port: UNIMPLEMENTED, "Method not found!"), or an
    HTTP/1 server (the gateway's REST port, a metrics port: gRPC's "Failed parsing HTTP/2").
    """
    exc = from_rpc_error(err)
    code = err.code() if hasattr(err, "code") else None
    if code == grpc.StatusCode.UNIMPLEMENTED:
        return type(exc)(f"{target} is not an inkstream gateway: it does not serve {_SERVICE} (an encoder's or "
                         f"decoder's port?); {_GIVE_GRPC_PORT}")
    if code == grpc.StatusCode.UNAVAILABLE and "parsing HTTP/2" in exc.message:
        return type(exc)(f"{target} is not a gRPC server: it answers HTTP/1 (the gateway's REST port, or a "
                         f"metrics port?); {_GIVE_GRPC_PORT}")
    return exc


def _requests(document: Document, options: gateway_pb2.OcrOptions, chunk_bytes: int,
              ) -> Iterator[gateway_pb2.RecognizeRequest]:
    yield gateway_pb2.RecognizeRequest(options=options)
    if isinstance(document, (bytes, bytearray, memoryview)):
        data = bytes(document)
        for i in range(0, len(data), chunk_bytes):
            yield gateway_pb2.RecognizeRequest(chunk=data[i:i + chunk_bytes])
        return
    if isinstance(document, (str, os.PathLike)):
        with open(document, "rb") as f:  # opened here, so closed here (also when the stream is abandoned)
            yield from _file_chunks(f, chunk_bytes)
    else:
        yield from _file_chunks(document, chunk_bytes)


def _file_chunks(f: IO[bytes], chunk_bytes: int) -> Iterator[gateway_pb2.RecognizeRequest]:
    while chunk := f.read(chunk_bytes):
        yield gateway_pb2.RecognizeRequest(chunk=chunk)


def _options(format: str, pages: str, mode: str, task: str, password: str,  # noqa: A002 - the proto field name
             idempotency_key: str = "") -> gateway_pb2.OcrOptions:
    return gateway_pb2.OcrOptions(format=format, pages=pages, mode=mode, task=task, password=password,
                                  idempotency_key=idempotency_key)


def _collect(items: Iterable[PageResult | DocumentSummary]) -> RecognizeResult:
    res = RecognizeResult()
    for it in items:
        if isinstance(it, DocumentSummary):
            res.summary = it
        else:
            res.pages.append(it)
    return res


def _metadata(api_key: str) -> tuple[tuple[str, str], ...] | None:
    """Call metadata carrying ``api_key`` (None without one)."""
    return (("authorization", f"Bearer {api_key}"),) if api_key else None


class GatewayClient:
    """Blocking client. ``target`` "host:port"; ``timeout_s`` per call (None = no deadline);
    ``api_key`` / ``credentials``: see the module docstring.
    """

    def __init__(self, target: str, *, timeout_s: float | None = None, chunk_bytes: int = CHUNK_BYTES,
                 api_key: str = "", credentials: grpc.ChannelCredentials | None = None):
        self.target = target
        if credentials is not None:
            self._channel = grpc.secure_channel(target, credentials, options=client_options())
        else:
            self._channel = grpc.insecure_channel(target, options=client_options())
        self._stub = gateway_pb2_grpc.OcrGatewayStub(self._channel)
        self.timeout_s = timeout_s
        self.chunk_bytes = chunk_bytes
        self._md = _metadata(api_key)

    def __enter__(self) -> GatewayClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the channel."""
        self._channel.close()

    def recognize_stream(self, document: Document, *,
                         format: str = "markdown",  # noqa: A002 - the API's option name
                         pages: str = "", mode: str = "", task: str = "", password: str = "",
                         ) -> Iterator[PageResult | DocumentSummary]:
        """Page results as each page is ready (page order), then a DocumentSummary."""
        reqs = _requests(checked_document(document), _options(format, pages, mode, task, password), self.chunk_bytes)
        try:
            for msg in self._stub.Recognize(reqs, timeout=self.timeout_s, metadata=self._md):
                yield _item(msg)
        except grpc.RpcError as err:
            raise call_error(err, self.target) from None

    def recognize(self, document: Document, **options: str) -> RecognizeResult:
        """All pages and the summary of ``document`` (options as in :meth:`recognize_stream`)."""
        return _collect(self.recognize_stream(document, **options))

    def submit_job(self, document: Document, *,
                   format: str = "markdown",  # noqa: A002 - the API's option name
                   pages: str = "", mode: str = "", task: str = "", password: str = "",
                   idempotency_key: str = "") -> JobStatus:
        """Start an asynchronous job; the same ``idempotency_key`` returns the same job."""
        reqs = _requests(checked_document(document), _options(format, pages, mode, task, password, idempotency_key),
                         self.chunk_bytes)
        try:
            return _job(self._stub.SubmitJob(reqs, timeout=self.timeout_s, metadata=self._md))
        except grpc.RpcError as err:
            raise call_error(err, self.target) from None

    def get_job(self, job_id: str) -> JobStatus:
        """The job's status and progress; raises NotFound for an unknown id."""
        return self._unary(self._stub.GetJob, job_id)

    def cancel_job(self, job_id: str) -> JobStatus:
        """Cancel a queued or running job; returns its status."""
        return self._unary(self._stub.CancelJob, job_id)

    def job_result(self, job_id: str) -> RecognizeResult:
        """Result of a done job; raises InvalidInput while it is not done, JobCancelled
        (FAILED_PRECONDITION) when it was cancelled, the job's error when it failed (JobFailed,
        FAILED_PRECONDITION, when it failed for a transient reason: submit it again).
        """
        try:
            stream = self._stub.GetJobResult(gateway_pb2.JobRef(job_id=job_id), timeout=self.timeout_s,
                                             metadata=self._md)
            return _collect(_item(m) for m in stream)
        except grpc.RpcError as err:
            raise call_error(err, self.target) from None

    def _unary(self, method, job_id: str) -> JobStatus:
        try:
            return _job(method(gateway_pb2.JobRef(job_id=job_id), timeout=self.timeout_s, metadata=self._md))
        except grpc.RpcError as err:
            raise call_error(err, self.target) from None


class AsyncGatewayClient:
    """asyncio client with the same methods as :class:`GatewayClient` (coroutines / async iterators)."""

    def __init__(self, target: str, *, timeout_s: float | None = None, chunk_bytes: int = CHUNK_BYTES,
                 api_key: str = "", credentials: grpc.ChannelCredentials | None = None):
        self.target = target
        if credentials is not None:
            self._channel = grpc.aio.secure_channel(target, credentials, options=client_options())
        else:
            self._channel = grpc.aio.insecure_channel(target, options=client_options())
        self._stub = gateway_pb2_grpc.OcrGatewayStub(self._channel)
        self.timeout_s = timeout_s
        self.chunk_bytes = chunk_bytes
        self._md = _metadata(api_key)

    async def __aenter__(self) -> AsyncGatewayClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the channel."""
        await self._channel.close()

    async def recognize_stream(self, document: Document, *,
                               format: str = "markdown",  # noqa: A002 - the API's option name
                               pages: str = "", mode: str = "", task: str = "", password: str = "",
                               ) -> AsyncIterator[PageResult | DocumentSummary]:
        """Page results as each page is ready (page order), then a DocumentSummary."""
        reqs = _requests(checked_document(document), _options(format, pages, mode, task, password), self.chunk_bytes)
        try:
            async for msg in self._stub.Recognize(reqs, timeout=self.timeout_s, metadata=self._md):
                yield _item(msg)
        except grpc.RpcError as err:
            raise call_error(err, self.target) from None

    async def recognize(self, document: Document, **options: str) -> RecognizeResult:
        """All pages and the summary of ``document`` (options as in :meth:`recognize_stream`)."""
        res = RecognizeResult()
        async for it in self.recognize_stream(document, **options):
            if isinstance(it, DocumentSummary):
                res.summary = it
            else:
                res.pages.append(it)
        return res

    async def submit_job(self, document: Document, *,
                         format: str = "markdown",  # noqa: A002 - the API's option name
                         pages: str = "", mode: str = "", task: str = "", password: str = "",
                         idempotency_key: str = "") -> JobStatus:
        """Start an asynchronous job; the same ``idempotency_key`` returns the same job."""
        reqs = _requests(checked_document(document), _options(format, pages, mode, task, password, idempotency_key),
                         self.chunk_bytes)
        try:
            return _job(await self._stub.SubmitJob(reqs, timeout=self.timeout_s, metadata=self._md))
        except grpc.RpcError as err:
            raise call_error(err, self.target) from None

    async def get_job(self, job_id: str) -> JobStatus:
        """The job's status and progress; raises NotFound for an unknown id."""
        return await self._unary(self._stub.GetJob, job_id)

    async def cancel_job(self, job_id: str) -> JobStatus:
        """Cancel a queued or running job; returns its status."""
        return await self._unary(self._stub.CancelJob, job_id)

    async def job_result(self, job_id: str) -> RecognizeResult:
        """Result of a done job (see :meth:`GatewayClient.job_result`)."""
        res = RecognizeResult()
        try:
            stream = self._stub.GetJobResult(gateway_pb2.JobRef(job_id=job_id), timeout=self.timeout_s,
                                             metadata=self._md)
            async for msg in stream:
                it = _item(msg)
                if isinstance(it, DocumentSummary):
                    res.summary = it
                else:
                    res.pages.append(it)
        except grpc.RpcError as err:
            raise call_error(err, self.target) from None
        return res

    async def _unary(self, method, job_id: str) -> JobStatus:
        try:
            return _job(await method(gateway_pb2.JobRef(job_id=job_id), timeout=self.timeout_s, metadata=self._md))
        except grpc.RpcError as err:
            raise call_error(err, self.target) from None
