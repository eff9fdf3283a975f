"""``POST /v1/jobs`` with an Idempotency-Key reused for the same document but other options
(``format=json`` after ``format=markdown``, or other ``pages``) returned 202 with the first job, whose
result is in the first options: the client silently got a different result than it asked for. The
IETF Idempotency-Key draft asks for 422 when a key is reused with a different payload."""

from __future__ import annotations

import httpx
import pytest

from gateway.apis.rest import create_app
from gateway.config import GatewayConfig
from gateway.core import GatewayCore
from tests.gateway_api.conftest import FakePipeline, marked_pdf

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def client(tmp_path):
    gw_config = GatewayConfig()
    gw_config.stores.data_dir = str(tmp_path / "data")
    fake = FakePipeline(delay_s=0.01)
    core = GatewayCore(gw_config, fake)
    core.start()
    app = create_app(gw_config, fake, core)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as c:
        yield c
    await core.close()


async def _submit(c, data: bytes, key: str, **fields):
    return await c.post("/v1/jobs", files={"file": ("d.pdf", data)}, data=fields, headers={"Idempotency-Key": key})


async def test_key_reused_with_other_options_is_422(client):
    pdf = marked_pdf([1, 2])
    first = await _submit(client, pdf, "k-1", format="markdown")
    assert first.status_code == 202
    for fields in ({"format": "json"}, {"pages": "2"}, {"mode": "small"}):
        again = await _submit(client, pdf, "k-1", **fields)
        assert again.status_code == 422, fields
        assert "different options" in again.json()["error"]["message"]


async def test_key_reused_with_same_options_returns_same_job(client):
    pdf = marked_pdf([3])
    a = await _submit(client, pdf, "k-2", format="text", pages="1")
    b = await _submit(client, pdf, "k-2", format="text", pages="1")
    assert a.status_code == b.status_code == 202
    assert a.json()["job_id"] == b.json()["job_id"]
    # differently written but equal options (surrounding spaces, upper case) are the same request
    c = await _submit(client, pdf, "k-2", format=" TEXT ", pages=" 1 ")
    assert c.status_code == 202 and c.json()["job_id"] == a.json()["job_id"]
