"""gRPC OcrGateway with the client classes (sync and asyncio), server in-process on a free port."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from client.gateway_client import AsyncGatewayClient, DocumentSummary, GatewayClient
from gateway.apis.grpc_api import SERVICE_NAME, build_grpc_server
from gateway.core import GatewayCore
from gateway.session import SHUTDOWN_MESSAGE
from inkstream.errors import InvalidInput, JobCancelled, PayloadTooLarge, ResourceExhausted, Unavailable
from tests.gateway_api.conftest import MODEL_ID, expected_text, marked_pdf

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def grpc_env(gw_config, fake):
    core = GatewayCore(gw_config, fake)
    core.start()
    server, port, _ = await build_grpc_server(core, 0)
    yield f"127.0.0.1:{port}", fake, core
    await server.stop(None)
    await core.close()


async def test_recognize_streams_pages_then_summary(grpc_env):
    target, fake, _ = grpc_env
    numbers = [8, 2, 5]
    async with AsyncGatewayClient(target, timeout_s=30) as c:
        items = [it async for it in c.recognize_stream(marked_pdf(numbers), format="text", pages="1-3")]
    pages, summary = items[:-1], items[-1]
    assert isinstance(summary, DocumentSummary)
    assert [p.index for p in pages] == [1, 2, 3]
    assert [p.text for p in pages] == [expected_text(n) for n in numbers]
    assert pages[0].blocks[0].type == "title" and pages[0].blocks[0].box[2] > pages[0].blocks[0].box[0]
    assert summary.model_id == MODEL_ID and summary.pages == 3 and summary.pages_ok == 3
    assert summary.document.count("\f") == 2


async def test_small_chunks_and_errors(grpc_env):
    target, fake, _ = grpc_env
    async with AsyncGatewayClient(target, chunk_bytes=1000) as c:
        res = await c.recognize(marked_pdf([4, 6]), format="json")
        assert [p.text for p in res.pages] == [expected_text(4), expected_text(6)]
        with pytest.raises(InvalidInput, match="unsupported file type"):  # 415 is INVALID_ARGUMENT on gRPC
            await c.recognize(b"hello world")
        with pytest.raises(InvalidInput, match="does not exist"):
            await c.recognize(marked_pdf([1]), pages="2")
        fake.capacity = 0
        with pytest.raises(ResourceExhausted) as ei:
            await c.recognize(marked_pdf([1]))
        assert ei.value.retry_after_s == pytest.approx(3.0)


async def test_sync_client_jobs(grpc_env, tmp_path):
    target, fake, _ = grpc_env
    path = tmp_path / "doc.pdf"
    path.write_bytes(marked_pdf([11, 12]))

    def run_jobs():
        with GatewayClient(target, timeout_s=30) as c:
            job = c.submit_job(str(path), format="markdown", idempotency_key="k1")
            again = c.submit_job(str(path), idempotency_key="k1")
            assert again.job_id == job.job_id and job.pages_total == 0  # known once a worker opened it
            for _ in range(400):
                st = c.get_job(job.job_id)
                if st.status == "done":
                    break
                import time
                time.sleep(0.05)
            assert st.status == "done" and st.pages_done == 2 and st.pages_total == 2
            res = c.job_result(job.job_id)
            assert [p.text for p in res.pages] == [expected_text(11), expected_text(12)]
            assert "<!-- page 2 -->" in res.document
            direct = c.recognize(path, format="text")
            assert direct.document.strip().split("\f")[0].strip() == expected_text(11)
            with pytest.raises(Exception) as ei:
                c.get_job("missing")
            assert "no job" in str(ei.value)

    await asyncio.to_thread(run_jobs)


async def test_get_job_reports_a_failed_jobs_error_as_rest_does(grpc_env):
    # Found in the new-user tryout: GetJob gave a failed job's error as one string "CODE: message" (no
    # reason), where GET /v1/jobs/{id} has {code, reason, message}; a client could not tell 422
    # NOTHING_TO_READ from any other INVALID_ARGUMENT without parsing the text.
    from client.results import JobError
    from inkstream.errors import Unprocessable
    from tests.gateway_api.test_jobs import zero_page_pdf

    target, _, _ = grpc_env
    async with AsyncGatewayClient(target, timeout_s=30) as c:
        with pytest.raises(Unprocessable) as direct:
            await c.recognize(zero_page_pdf())
        job = await c.submit_job(zero_page_pdf())
        assert job.error is None
        for _ in range(400):
            st = await c.get_job(job.job_id)
            if st.status in ("failed", "done"):
                break
            await asyncio.sleep(0.05)
        assert st.status == "failed"
        assert st.error == JobError("INVALID_ARGUMENT", "NOTHING_TO_READ", direct.value.message)
        with pytest.raises(Unprocessable) as res:  # the result answers the same error
            await c.job_result(job.job_id)
        assert res.value.message == st.error.message


@pytest.mark.parametrize("fail", [{1, 2}, {2}], ids=["every-page-failed", "one-page-failed"])
async def test_the_summary_agrees_with_the_job_of_the_same_pages(grpc_env, fail):
    # Found by tryout7: a Recognize stream whose every page failed ended with a Summary of pages_ok 0 and
    # no error, where GetJob of the same pages has the job's {code, reason, message}: Summary.error now
    # carries it (unset when a page was read).
    target, fake, core = grpc_env
    core.config.stores.job_deadline_s = 1.0
    fake.fail = fail
    async with AsyncGatewayClient(target, timeout_s=30) as c:
        res = await c.recognize(marked_pdf([1, 2]), format="text")
        job = await c.submit_job(marked_pdf([1, 2]), format="text")
        for _ in range(400):
            st = await c.get_job(job.job_id)
            if st.status in ("failed", "done"):
                break
            await asyncio.sleep(0.05)
    summary = res.summary
    assert summary is not None
    assert st.status == ("failed" if fail == {1, 2} else "done"), st
    assert (summary.pages, summary.pages_ok, summary.pages_error) == (st.pages_total, 2 - len(fail), len(fail))
    assert summary.error == st.error, (summary, st)
    if st.error is not None:
        assert st.error.code == "UNAVAILABLE" and "pages 1-2" in st.error.message


async def test_an_unknown_output_format_lists_the_formats_grpc_serves(grpc_env):
    # Found by tryout7: gRPC answered an unknown format with REST's list "markdown, text, json, hocr, pdf",
    # then refused pdf; and a document type given as the format ("png") was not told apart.
    target, _, _ = grpc_env
    async with AsyncGatewayClient(target, timeout_s=30) as c:
        for fmt in ("xlsx", "png", ".TIFF"):
            for call in (c.recognize, c.submit_job):
                with pytest.raises(InvalidInput) as ei:
                    await call(marked_pdf([1]), format=fmt)
                msg = ei.value.message
                assert f"unknown format {fmt!r}; format is the output, one of: markdown, text, json, hocr" in msg, msg
                assert "pdf" not in msg.lower(), msg
                assert ("is a document type" in msg) == (fmt != "xlsx"), msg
        with pytest.raises(InvalidInput, match="over gRPC use markdown, text, json, hocr"):
            await c.recognize(marked_pdf([1]), format="pdf")


async def test_a_huge_option_value_gets_its_own_error_not_a_trailer_overflow(grpc_env):
    # Found by tryout7: task="x" * 10000 was echoed in its INVALID_ARGUMENT message, twice in the trailers
    # (grpc-message, grpc-status-details-bin): 20 KB, over the client's 16 KiB metadata limit, so the client
    # got RESOURCE_EXHAUSTED "Stream removed (received metadata size exceeds hard limit ...)". Cut now.
    target, _, _ = grpc_env
    async with AsyncGatewayClient(target, timeout_s=30) as c:
        for opts in ({"task": "x" * 10000}, {"format": "\u00e9" * 10000}):
            with pytest.raises(InvalidInput) as ei:
                await c.recognize(marked_pdf([1]), **opts)
            assert ei.value.message.endswith(" ... (cut)") and len(ei.value.message.encode()) <= 2048, opts


async def test_cancel_job_and_health(grpc_env):
    target, fake, _ = grpc_env
    fake.delay_s = 0.3
    async with AsyncGatewayClient(target) as c:
        job = await c.submit_job(marked_pdf(list(range(1, 11))))
        await asyncio.sleep(0.4)
        st = await c.cancel_job(job.job_id)
        assert st.status == "cancelled" and st.pages_done < 10
        with pytest.raises(JobCancelled, match="cancelled") as ei:
            await c.job_result(job.job_id)
        assert ei.value.code_name == "FAILED_PRECONDITION" and ei.value.reason_name == "JOB_CANCELLED"
        assert ei.value.http_status == 409
    async with grpc.aio.insecure_channel(target) as ch:
        resp = await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=SERVICE_NAME))
        assert resp.status == health_pb2.HealthCheckResponse.SERVING


async def test_first_message_must_be_options(grpc_env):
    target, _, _ = grpc_env
    from inkstream.pb import gateway_pb2, gateway_pb2_grpc

    async with grpc.aio.insecure_channel(target) as ch:
        stub = gateway_pb2_grpc.OcrGatewayStub(ch)
        call = stub.Recognize(iter([gateway_pb2.RecognizeRequest(chunk=b"%PDF-")]))
        with pytest.raises(grpc.aio.AioRpcError) as ei:
            async for _ in call:
                pass
        assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "options" in ei.value.details()


async def test_too_large_upload_reports_its_status(gw_config, fake):
    doc = marked_pdf([1, 2, 3, 4, 5])
    gw_config.limits.max_upload_bytes = len(doc) * 2 // 3  # the server drains up to the limit again
    core = GatewayCore(gw_config, fake)
    server, port, _ = await build_grpc_server(core, 0)
    try:
        async with AsyncGatewayClient(f"127.0.0.1:{port}", chunk_bytes=4096) as c:
            with pytest.raises(PayloadTooLarge, match="too large"):  # INVALID_ARGUMENT + ErrorInfo reason on gRPC
                await c.recognize(doc)
    finally:
        await server.stop(None)
        await core.close()


async def test_api_keys_required_when_configured(gw_config, fake):
    from gateway.apis.auth import ApiKeys
    from inkstream.errors import Unauthenticated

    core = GatewayCore(gw_config, fake)
    core.start()
    key = "k" * 32
    server, port, _ = await build_grpc_server(core, 0, api_keys=ApiKeys([key]))
    try:
        async with AsyncGatewayClient(f"127.0.0.1:{port}") as c:
            with pytest.raises(Unauthenticated):
                await c.get_job("x")
        async with AsyncGatewayClient(f"127.0.0.1:{port}", api_key=key) as c:
            res = await c.recognize(marked_pdf([3]))
            assert [p.text for p in res.pages] == [expected_text(3)]
            job = await c.submit_job(marked_pdf([2]))
            assert (await c.get_job(job.job_id)).job_id == job.job_id

        def sync_read() -> list[str]:  # the blocking client, off the event loop that runs the server
            with GatewayClient(f"127.0.0.1:{port}", api_key=key, timeout_s=30) as c:
                return [p.text for p in c.recognize(marked_pdf([4])).pages]

        assert await asyncio.to_thread(sync_read) == [expected_text(4)]
    finally:
        await server.stop(None)
        await core.close()


async def test_refused_upload_frees_its_slot_before_draining_the_rest(grpc_env):
    """An upload refused mid-stream (here: an oversized chunk) while the client keeps trickling
    chunks: the admission slot and in-flight count are released at once, the rest of the upload is
    drained for at most DRAIN_S seconds, and the client gets the real error."""
    from gateway.apis.grpc_api import DRAIN_S
    from inkstream.pb import gateway_pb2, gateway_pb2_grpc

    target, fake, core = grpc_env
    limit = core.config.limits.upload_chunk_bytes

    async def trickle():
        yield gateway_pb2.RecognizeRequest(options=gateway_pb2.OcrOptions())
        yield gateway_pb2.RecognizeRequest(chunk=b"%PDF-1.7\n" + b"x" * limit)
        for _ in range(int(4 * DRAIN_S) + 20):  # longer than DRAIN_S
            yield gateway_pb2.RecognizeRequest(chunk=b"y" * 100)
            await asyncio.sleep(0.25)

    async with grpc.aio.insecure_channel(target) as ch:
        call = gateway_pb2_grpc.OcrGatewayStub(ch).Recognize(trickle())
        t0 = asyncio.get_running_loop().time()
        answer = asyncio.ensure_future(call.code())
        await asyncio.sleep(0.8)
        assert fake.admitted == 0 and core.inflight == 0  # released while draining
        code = await asyncio.wait_for(answer, 20)
        assert asyncio.get_running_loop().time() - t0 < DRAIN_S + 2
        # The client is still writing when the drain gives up: grpc.aio may then report its bare
        # "Internal error from Core" instead of the status (see OcrGatewayServicer._drain).
        assert code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.INTERNAL)
        if code == grpc.StatusCode.INVALID_ARGUMENT:
            assert f"at most {limit} bytes" in await call.details()


async def test_summary_says_when_the_answer_came_from_the_cache(grpc_env):
    target, fake, _ = grpc_env
    pdf = marked_pdf([3, 4])
    async with AsyncGatewayClient(target, timeout_s=30) as c:
        first = await c.recognize(pdf, format="text")
        second = await c.recognize(pdf, format="markdown")
    assert first.summary is not None and second.summary is not None
    assert first.summary.cached is False and second.summary.cached is True
    assert fake.pages_run == 2 and second.summary.pages_ok == 2


async def test_recognize_stream_ends_with_unavailable_when_the_drain_gives_up(grpc_env):
    """The decoder hangs after two pages and the stack is stopped: the stream's pages so far, then
    UNAVAILABLE with the shutdown message and a retry hint (not a stream cut without a status).
    """
    target, fake, core = grpc_env
    fake.raise_after = (2, None)

    async def stop_the_stack_after_two_pages() -> None:
        while fake.pages_run < 2:
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.2)
        await core.drain(0.3)

    stopper = asyncio.create_task(stop_the_stack_after_two_pages())
    got = []
    async with AsyncGatewayClient(target, timeout_s=30) as c:
        with pytest.raises(Unavailable) as ei:
            async for item in c.recognize_stream(marked_pdf([1, 2, 3, 4]), format="text"):
                got.append(item)
    await stopper
    assert [p.index for p in got] == [1, 2]
    assert ei.value.message == SHUTDOWN_MESSAGE and ei.value.retry_after_s == pytest.approx(1.0)


def _bad_documents(tmp_path):
    text_file = open(tmp_path / "t.txt", "w")  # noqa: SIM115 - closed by the test
    return [(str(tmp_path / "missing.pdf"), FileNotFoundError, "no such file: '.*missing.pdf'"),
            (tmp_path / "missing.pdf", FileNotFoundError, "no such file"),
            (str(tmp_path), IsADirectoryError, "is a directory, not a document"),
            (text_file, TypeError, "opened in text mode; open it in binary mode"),
            (42, TypeError, "must be bytes, a path .* or a binary file object, not int"),
            (None, TypeError, "not NoneType"),
            ([b"%PDF"], TypeError, "not list")], text_file


async def test_a_document_that_cannot_be_sent_is_refused_before_any_request(tmp_path):
    """A missing file, a folder or a wrong type raise FileNotFoundError / IsADirectoryError /
    TypeError saying what is wrong, before any call: the channel's target has no server, so a call
    would be UNAVAILABLE (a missing file used to surface as the call's own error, a folder and a wrong
    type as gRPC's "Exception iterating requests").
    """
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        target = f"127.0.0.1:{s.getsockname()[1]}"  # nobody listens once closed
    cases, text_file = _bad_documents(tmp_path)
    try:
        with GatewayClient(target, timeout_s=5) as c:
            for doc, exc, match in cases:
                with pytest.raises(exc, match=match):
                    c.recognize(doc)
                with pytest.raises(exc, match=match):
                    c.submit_job(doc)
        async with AsyncGatewayClient(target, timeout_s=5) as ac:
            for doc, exc, match in cases:
                with pytest.raises(exc, match=match):
                    await ac.recognize(doc)
                with pytest.raises(exc, match=match):
                    await ac.submit_job(doc)
    finally:
        text_file.close()


async def test_a_server_that_is_not_the_gateways_grpc_port_is_named_as_such():
    """The client pointed at an encoder's port (gRPC without the gateway's service) or at an HTTP/1
    port (the gateway's REST port, a metrics port) says the address is not the gateway's gRPC one and
    where it is printed; it said "Method not found!" and gRPC's "Failed parsing HTTP/2 ... frame type 80".
    """
    import http.server
    import threading
    from concurrent import futures

    from grpc_health.v1 import health

    other = grpc.server(futures.ThreadPoolExecutor(2))
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), other)
    grpc_port = other.add_insecure_port("127.0.0.1:0")
    other.start()
    web = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=web.serve_forever, daemon=True).start()
    cases = [(f"127.0.0.1:{grpc_port}", "is not an inkstream gateway: it does not serve inkstream.gateway.v1.OcrGateway"
              ),
             (f"127.0.0.1:{web.server_port}", "is not a gRPC server: it answers HTTP/1")]
    try:
        for target, says in cases:
            with GatewayClient(target, timeout_s=10) as c:
                for call in (lambda: c.recognize(marked_pdf([1])), lambda: c.get_job("abc")):
                    with pytest.raises(Exception, match=f"{target} {says}.*'inkstream up' prints it"):
                        await asyncio.to_thread(call)
            async with AsyncGatewayClient(target, timeout_s=10) as ac:
                # a unary call: grpc.aio may end an upload stream refused at once with INTERNAL
                # "Internal error from Core" instead of UNIMPLEMENTED
                with pytest.raises(Exception, match=f"{target} {says}"):
                    await ac.get_job("abc")
    finally:
        other.stop(0)
        web.shutdown()
