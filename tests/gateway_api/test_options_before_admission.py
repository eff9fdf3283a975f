"""A wrong request is told what is wrong even when the gateway is full (issue #39 follow-up).

Admission runs before the body is read (a full gateway refuses before the upload), so options that
arrive before the body — REST query parameters, the gRPC options message — are checked before it:
a bad option answers 400 / INVALID_ARGUMENT, not 429 / RESOURCE_EXHAUSTED. The fake pipeline's
``capacity = 0`` makes every admission fail; a well-formed request is the control (429).
"""

from __future__ import annotations

import base64

import httpx
import pytest

from client.gateway_client import AsyncGatewayClient
from gateway.apis.grpc_api import build_grpc_server
from gateway.core import GatewayCore
from inkstream.errors import InvalidInput, ResourceExhausted
from tests.gateway_api.conftest import marked_pdf

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def client(rest_client):
    return rest_client


@pytest.fixture
async def full_client(client, fake):
    fake.capacity = 0  # every admission fails: the gateway is at its page bound
    return client


async def _post(client: httpx.AsyncClient, query: str, **headers: str) -> httpx.Response:
    return await client.post(f"/v1/ocr?{query}", files={"file": ("d.pdf", marked_pdf([1]), "application/pdf")},
                             headers=headers)


@pytest.mark.parametrize(("query", "words"), [
    ("format=xyz", "unknown format"),
    ("pages=5-2", "reversed"),
    ("pages=0", "numbered from 1"),
    ("pages=one", "not a page number"),
    ("mode=huge", "unknown mode"),
    ("temperature=0.5", "unknown query parameter"),
    ("format=text&format=json", "twice"),
])
async def test_rest_bad_query_option_is_400_when_full(full_client, query, words):
    r = await _post(full_client, query)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == "INVALID_ARGUMENT"
    assert words in r.json()["error"]["message"].lower().replace("'", "")


async def test_rest_unknown_task_and_streamed_pdf_are_400_when_full(full_client, fake):
    fake.tasks = ("ocr", "markdown")
    r = await _post(full_client, "task=poem")
    assert r.status_code == 400 and "unknown task" in r.json()["error"]["message"]
    r = await _post(full_client, "format=pdf", Accept="application/x-ndjson")
    assert r.status_code == 400 and "binary document" in r.json()["error"]["message"]


async def test_rest_good_query_is_still_429_when_full(full_client):
    r = await _post(full_client, "format=text&pages=1")
    assert r.status_code == 429 and r.headers["retry-after"] == "3"
    r = await _post(full_client, "format=pdf")  # pdf without NDJSON is a good request
    assert r.status_code == 429


async def test_rest_options_in_the_form_still_answered_after_admission(client, fake):
    """Form fields come with the body (read after admission): still refused with 400 when not full."""
    r = await client.post("/v1/ocr", files={"file": ("d.pdf", marked_pdf([1]), "application/pdf")},
                          data={"format": "xyz"})
    assert r.status_code == 400 and "unknown format" in r.json()["error"]["message"]


@pytest.fixture
async def full_grpc(gw_config, fake):
    fake.capacity = 0
    core = GatewayCore(gw_config, fake)
    core.start()
    server, port, _ = await build_grpc_server(core, 0)
    yield f"127.0.0.1:{port}"
    await server.stop(None)
    await core.close()


@pytest.mark.parametrize(("options", "words"), [
    ({"format": "xyz"}, "unknown format"),
    ({"pages": "3-1"}, "reversed"),
    ({"mode": "huge"}, "unknown mode"),
    ({"format": "pdf"}, "served over rest"),
])
async def test_grpc_bad_option_is_invalid_argument_when_full(full_grpc, options, words):
    async with AsyncGatewayClient(full_grpc, timeout_s=30) as c:
        with pytest.raises(InvalidInput) as ei:
            await c.recognize(marked_pdf([1]), **options)
    assert words in str(ei.value).lower()


async def test_grpc_good_options_are_still_resource_exhausted_when_full(full_grpc):
    async with AsyncGatewayClient(full_grpc, timeout_s=30) as c:
        with pytest.raises(ResourceExhausted) as ei:
            await c.recognize(marked_pdf([1]), format="text", pages="1")
    assert ei.value.retry_after_s == pytest.approx(3.0)


async def test_chat_completion_bad_parameter_is_400_when_full(full_client):
    """The chat body is parsed (and its parameters checked) before admission already: a guard."""
    image = "data:application/pdf;base64," + base64.b64encode(marked_pdf([1])).decode()
    body = {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": image}}]}]}
    r = await full_client.post("/v1/chat/completions", json={**body, "temperature": 5})
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    r = await full_client.post("/v1/chat/completions", json=body)
    assert r.status_code == 429


@pytest.mark.parametrize("task", ["Mark Down!", "<script>", "markdown", "poem"])
async def test_a_wrong_task_lists_only_the_served_models_tasks(client, fake, gw_config, task):
    """Found by tryout8: a task that was not a name ("Mark Down!") was answered "use 'ocr' (free OCR) or
    'markdown' (layout)" by REST and gRPC whatever the model served; a model serving only ``ocr`` now
    lists ``ocr`` alone, for the synchronous routes and a job's submission alike."""
    fake.tasks = ("ocr",)
    want = f"unknown task {task.lower()!r}; this model supports: ocr"
    r = await _post(client, f"task={task}")
    assert r.status_code == 400 and r.json()["error"]["message"] == want, r.text
    r = await client.post("/v1/jobs", files={"file": ("d.pdf", marked_pdf([1]), "application/pdf")},
                          data={"task": task})
    assert r.status_code == 400 and r.json()["error"]["message"] == want, r.text
    core = GatewayCore(gw_config, fake)
    core.start()
    server, port, _ = await build_grpc_server(core, 0)
    try:
        async with AsyncGatewayClient(f"127.0.0.1:{port}", timeout_s=30) as c:
            for call in (c.recognize, c.submit_job):
                with pytest.raises(InvalidInput) as ei:
                    await call(marked_pdf([1]), task=task)
                assert ei.value.message == want, ei.value.message
    finally:
        await server.stop(None)
        await core.close()
