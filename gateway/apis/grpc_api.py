"""gRPC front end: ``inkstream.gateway.v1.OcrGateway`` (see protos/inkstream/gateway/v1/gateway.proto).

Handlers only convert messages (the ``*_to_pb`` / ``*_from_pb`` functions below are the one place
for that; a page result's conversion is the contract's, :func:`inkstream.page_result_pb.page_to_pb`)
and call :class:`gateway.service.OcrService` / :class:`gateway.jobs.manager.JobManager`; errors go
through :func:`inkstream.errors.grpc_guard`. The server also offers ``grpc.health.v1``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc

from gateway import tenancy
from gateway.apis.auth import ApiKeyInterceptor, ApiKeys
from gateway.audit import audited
from gateway.core import GatewayCore
from gateway.ingest import UploadedFile, UploadSink, upload_too_slow
from gateway.output.stitch import TEXT_FORMATS, render_document
from gateway.service import OcrRequest, run_id, unknown_format
from gateway.session import OcrSession
from gateway.stores import JobRecord
from inkstream import refused_stream, trace_interceptors
from inkstream.errors import InkstreamError, InvalidInput, JobCancelled, grpc_guard
from inkstream.lifecycle import Lifecycle, listener_options
from inkstream.page_errors import error_body
from inkstream.page_result import PageResult
from inkstream.page_result_pb import page_to_pb
from inkstream.pb import gateway_pb2, gateway_pb2_grpc
from inkstream.request_id import current_request_id

SERVICE_NAME = "inkstream.gateway.v1.OcrGateway"
DRAIN_S = 5.0  # longest wait for the rest of a refused upload (see OcrGatewayServicer._drain)


# ---- conversions -------------------------------------------------------------------------------

#: the output formats gRPC serves: every text format (pdf, a binary document, is REST's)
GRPC_FORMATS = TEXT_FORMATS


def options_from_pb(o: gateway_pb2.OcrOptions) -> OcrRequest:
    """OcrOptions -> OcrRequest (not yet validated). ``format=pdf`` is refused (InvalidInput): the
    searchable PDF is a binary document served by REST (``POST /v1/ocr``, job results); so is a
    format not in :data:`GRPC_FORMATS`, with those listed (not REST's, which include pdf).
    """
    fmt = o.format.strip().lower()
    if fmt == "pdf":
        raise InvalidInput("format=pdf (searchable PDF) is served over REST: POST /v1/ocr or a job's result; "
                           f"over gRPC use {', '.join(GRPC_FORMATS)}")
    if fmt and fmt not in GRPC_FORMATS:
        raise InvalidInput(unknown_format(o.format, GRPC_FORMATS))
    return OcrRequest(format=o.format, pages=o.pages, mode=o.mode, task=o.task, password=o.password)


def summary_to_pb(pages: list[PageResult], model_id: str, fmt: str, seconds: float,
                  cached: bool = False) -> gateway_pb2.Summary:
    """Summary with the stitched document in ``fmt`` (JSON for "json"); ``cached``: the pages came
    from the result cache; ``error`` set when no page was read (a job's error of the same pages).
    """
    msg = gateway_pb2.Summary(
        model_id=model_id, pages=len(pages), pages_ok=sum(p.status == "ok" for p in pages),
        pages_error=sum(p.status != "ok" for p in pages), document=render_document(pages, fmt, model_id),
        seconds=seconds, cached=cached,
    )
    if (err := error_body(pages)) is not None:
        msg.error.code, msg.error.reason, msg.error.message = err["code"], err["reason"], err["message"]
    return msg


def job_to_pb(job: JobRecord) -> gateway_pb2.Job:
    """JobRecord -> gateway.v1.Job."""
    msg = gateway_pb2.Job(job_id=job.job_id, status=job.status, pages_done=job.pages_done,
                          pages_total=job.pages_total, error_text=job.error)
    if job.error_code:  # the same {code, reason, message} as the REST job (rest_jobs.job_json)
        msg.error.code, msg.error.message = job.error_code, job.error_message
        msg.error.reason = job.error_reason or job.error_code
    return msg


# ---- servicer ----------------------------------------------------------------------------------

class OcrGatewayServicer(gateway_pb2_grpc.OcrGatewayServicer):
    """Implements OcrGateway on a :class:`GatewayCore`."""

    def __init__(self, core: GatewayCore):
        self.core = core

    @staticmethod
    async def _options(requests: AsyncIterator[gateway_pb2.RecognizeRequest]) -> gateway_pb2.OcrOptions:
        first = await anext(requests, None)
        if first is None or first.WhichOneof("part") != "options":
            raise InvalidInput("the first RecognizeRequest must carry 'options' (then the document in 'chunk's)")
        return first.options

    async def _drain(self, requests: AsyncIterator[gateway_pb2.RecognizeRequest]) -> None:
        """Discard the rest of a refused upload (at most ``max_upload_bytes`` more, for at most
        ``DRAIN_S`` seconds) before the error is sent: a grpc.aio client still writing chunks to a
        call the server has ended reports a bare INTERNAL ("Internal error from Core") instead of
        the real status (observed with grpcio 1.85). Callers release the request's admission slot
        first, so a client that keeps trickling holds nothing but this bounded wait.
        """
        await refused_stream.discard(requests, DRAIN_S, self.core.config.limits.max_upload_bytes,
                                     lambda msg: len(msg.chunk))

    async def _receive(self, requests: AsyncIterator[gateway_pb2.RecognizeRequest], directory: Any,
                       options: gateway_pb2.OcrOptions | None = None) -> tuple[UploadedFile, OcrRequest, str]:
        """Options (first message, unless already read), then chunks (each at most
        ``limits.upload_chunk_bytes``) streamed into ``directory``.
        """
        limits = self.core.config.limits
        opts = options if options is not None else await self._options(requests)
        sink = UploadSink(directory, limits.max_upload_bytes)
        try:
            async with asyncio.timeout(limits.upload_timeout_s):
                async for msg in requests:
                    if msg.WhichOneof("part") != "chunk":
                        raise InvalidInput("only 'chunk' messages may follow the options")
                    if len(msg.chunk) > limits.upload_chunk_bytes:
                        raise InvalidInput(f"chunks must be at most {limits.upload_chunk_bytes} bytes")
                    sink.write(msg.chunk)
        except TimeoutError:
            sink.abort()
            raise upload_too_slow(limits.upload_timeout_s) from None
        except BaseException:
            sink.abort()
            raise
        upload = sink.finish()
        self.core.metrics.upload_bytes.add(upload.size)
        return upload, options_from_pb(opts), opts.idempotency_key

    @grpc_guard
    async def Recognize(self, request_iterator, context):  # gRPC method name
        """Options, then document chunks -> one PageResult per page in page order, then a Summary.

        The request's resources and metrics are :class:`gateway.session.OcrSession`'s (as for REST);
        its options (the first message) are checked before admission, so a wrong request gets
        INVALID_ARGUMENT, not RESOURCE_EXHAUSTED, from a full gateway; a request refused before its
        whole upload was read is drained after its slot is freed.
        """
        supplied = any(k == "x-request-id" for k, _ in (context.invocation_metadata() or ()))
        request_id = run_id(current_request_id(), supplied)
        received = False
        try:
            with self.core.track():
                options = await self._options(request_iterator)

                async def check() -> None:  # the options, before admission (a wrong request hears so)
                    await self.core.service.check_options(options_from_pb(options))

                async with OcrSession(self.core, request_id, api="grpc", route="Recognize",
                                      check=check) as session:
                    upload, opts, _ = await self._receive(request_iterator, session.tmp, options)
                    received = True
                    prepared = await session.prepare(upload, opts)
                    pages: list[PageResult] = []
                    while (page := await session.next_page()) is not None:  # Unavailable: drain gave up
                        pages.append(page)
                        yield gateway_pb2.RecognizeResponse(page=page_to_pb(page))
                    yield gateway_pb2.RecognizeResponse(summary=summary_to_pb(
                        pages, prepared.model_id, prepared.request.format, time.monotonic() - session.started,
                        session.cache_hit))
        except InkstreamError:
            if not received:  # slot, temp dir and in-flight count are released: drain, then report
                await self._drain(request_iterator)
            raise

    @grpc_guard
    async def SubmitJob(self, request_iterator, context):
        """Options (with idempotency_key), then chunks -> the created (or existing) Job."""
        with self.core.request_dir() as tmp:
            try:
                self.core.check_accepting()
                upload, opts, key = await self._receive(request_iterator, tmp)
            except InkstreamError:
                await self._drain(request_iterator)
                raise
            with audited("job_submit", api="grpc") as a:
                job = await self.core.jobs.submit(upload, opts, key, tenant=tenancy.current().tenant)
                a.fields["job_id"] = job.job_id
        return job_to_pb(job)

    @grpc_guard
    async def GetJob(self, request, context):
        """The job's status and progress; NOT_FOUND for an unknown id."""
        with audited("job_read", api="grpc", job_id=request.job_id):
            return job_to_pb(await self.core.jobs.get(request.job_id, tenancy.current().tenant))

    @grpc_guard
    async def GetJobResult(self, request, context):
        """A done job's pages then its Summary; INVALID_ARGUMENT while it runs, its error when it failed
        (FAILED_PRECONDITION, reason JOB_FAILED, for a transient one: :meth:`JobRecord.failure`),
        FAILED_PRECONDITION (reason JOB_CANCELLED) when it was cancelled.
        """
        with audited("result_read", api="grpc", job_id=request.job_id):
            res = await self.core.jobs.result(request.job_id, tenancy.current().tenant)
        if isinstance(res, JobRecord):
            if res.status == "cancelled":
                raise JobCancelled(f"job {res.job_id} was cancelled; it has no result")
            if res.status == "failed":
                raise res.failure()
            raise InvalidInput(f"job {res.job_id} is {res.status} ({res.pages_done}/{res.pages_total} pages); "
                               "poll GetJob until it is done")
        for page in res.pages:
            yield gateway_pb2.RecognizeResponse(page=page_to_pb(page))
        fmt = OcrRequest(format=res.job.options.get("format", "markdown")).validated().format
        yield gateway_pb2.RecognizeResponse(summary=summary_to_pb(res.pages, res.model_id, fmt, res.seconds,
                                                                  res.cached))

    @grpc_guard
    async def CancelJob(self, request, context):
        """Cancel a queued or running job; returns it."""
        with audited("job_cancel", api="grpc", job_id=request.job_id):
            return job_to_pb(await self.core.jobs.cancel(request.job_id, tenancy.current().tenant))


async def build_grpc_server(core: GatewayCore, port: int = 0, host: str = "127.0.0.1",
                            api_keys: ApiKeys | None = None) -> tuple[grpc.aio.Server, int, Lifecycle]:
    """Create and start the gRPC server on ``host:port`` (0 = free port); returns (server, bound port,
    lifecycle). Health is SERVING once started; ``lifecycle.drain(server, grace_s)`` stops it.
    Interceptors: trace context / request id (:mod:`inkstream.tracing`) and, with ``api_keys``, the
    API-key check (:mod:`gateway.apis.auth`). Raises OSError when the port cannot be bound.
    """
    interceptors = [*trace_interceptors.server_interceptors(), ApiKeyInterceptor(api_keys)]
    server = grpc.aio.server(options=listener_options(core.config.max_message_bytes), interceptors=interceptors)
    gateway_pb2_grpc.add_OcrGatewayServicer_to_server(OcrGatewayServicer(core), server)
    lifecycle = Lifecycle([SERVICE_NAME])
    lifecycle.register(server)
    bound = server.add_insecure_port(f"{host}:{port}")
    if bound == 0:
        raise OSError(f"cannot bind the gRPC port {host}:{port}")
    await server.start()
    await lifecycle.set_serving()
    return server, bound, lifecycle
