"""A password sent for a document that is not encrypted is accepted, and said so: the first selected
page carries the ``password_unused`` warning (a client who sends one expects it to be needed)."""

from __future__ import annotations

import asyncio
import io

import httpx
import pikepdf
import pytest

from gateway.apis.rest import create_app
from gateway.core import GatewayCore
from inkstream.page_result import PASSWORD_UNUSED, WARNING_CODES
from tests.gateway_api.conftest import FakePipeline, expected_text, marked_page, marked_pdf, png_bytes

pytestmark = pytest.mark.timeout(60)
PASSWORD = "s3cret-pw"


@pytest.fixture
async def client(gw_config):
    fake = FakePipeline()
    core = GatewayCore(gw_config, fake)
    core.start()
    app = create_app(gw_config, fake, core)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as c:
        yield c
    await core.close()


def encrypted(pdf: bytes, user: str) -> bytes:
    out = io.BytesIO()
    with pikepdf.open(io.BytesIO(pdf)) as doc:
        doc.save(out, encryption=pikepdf.Encryption(user=user, owner="owner-" + PASSWORD, R=6))
    return out.getvalue()


def flagged(pages: list[dict]) -> list[bool]:
    """Per page: whether it carries ``password_unused`` (the fake's pages carry other warnings too)."""
    return [PASSWORD_UNUSED in p["warnings"] for p in pages]


async def ocr(c: httpx.AsyncClient, name: str, data: bytes, **fields: str) -> list[dict]:
    r = await c.post("/v1/ocr", files={"file": (name, data)}, data={"format": "json", **fields})
    assert r.status_code == 200, r.text
    return list(r.json()["pages"])


async def test_a_password_for_an_unencrypted_pdf_is_flagged_on_its_first_page(client):
    pdf = marked_pdf([1, 2])
    pages = await ocr(client, "d.pdf", pdf, password=PASSWORD)
    assert flagged(pages) == [True, False]
    assert [p["text"] for p in pages] == [expected_text(1), expected_text(2)]
    # the cached pages do not keep it: the same document without a password is not flagged
    assert flagged(await ocr(client, "d.pdf", pdf)) == [False, False]
    assert flagged(await ocr(client, "d.pdf", pdf, password=PASSWORD, pages="2")) == [True]
    assert flagged(await ocr(client, "p.png", png_bytes(marked_page(5)), password=PASSWORD)) == [True]


async def test_a_needed_password_is_not_flagged(client):
    pages = await ocr(client, "e.pdf", encrypted(marked_pdf([3, 4]), PASSWORD), password=PASSWORD)
    assert flagged(pages) == [False, False] and pages[0]["text"] == expected_text(3)



async def test_a_password_for_a_pdf_with_an_owner_password_only_is_not_needed(client):
    # it opens without one: before, an unrelated password made it a 400 "the password ... is wrong"
    owner_only = encrypted(marked_pdf([6]), "")
    for password in (PASSWORD, "owner-" + PASSWORD, "anything"):
        pages = await ocr(client, "o.pdf", owner_only, password=password)
        assert flagged(pages) == [True] and pages[0]["text"] == expected_text(6)
    r = await client.post("/v1/ocr", files={"file": ("e.pdf", encrypted(marked_pdf([3]), PASSWORD))},
                          data={"password": "wrong"})
    assert r.status_code == 400 and "password given for this PDF is wrong" in r.text


async def test_a_jobs_result_carries_it_too(client):
    r = await client.post("/v1/jobs", files={"file": ("d.pdf", marked_pdf([7, 8]))},
                          data={"format": "json", "password": PASSWORD})
    job_id = r.json()["job_id"]
    for _ in range(400):
        if (await client.get(f"/v1/jobs/{job_id}")).json()["status"] in ("done", "failed"):
            break
        await asyncio.sleep(0.05)
    pages = (await client.get(f"/v1/jobs/{job_id}/result")).json()["pages"]
    assert flagged(pages) == [True, False]


def test_it_is_a_listed_warning_code():
    assert PASSWORD_UNUSED in WARNING_CODES


async def test_a_pdf_sent_without_its_password_names_the_option_of_each_client(client):
    # Before: only "send its password in the 'password' option"; a person at `inkstream ocr` (whose
    # flag is --password) got the REST field name.
    r = await client.post("/v1/ocr", files={"file": ("d.pdf", encrypted(marked_pdf([1]), PASSWORD))})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    message = err["message"]
    # tryout8: a REST client was told about the CLI's flag; each API now names its own option
    assert message == "the PDF is password-protected; send its password in the 'password' form field", message
    assert err["reason"] == "PASSWORD_REQUIRED", err


async def test_grpc_and_the_cli_are_told_their_own_password_option(gw_config, tmp_path, monkeypatch, capsys):
    from client import ocr_cli
    from client.gateway_client import AsyncGatewayClient
    from gateway.apis.grpc_api import build_grpc_server
    from inkstream.errors import PasswordRequired

    fake = FakePipeline()
    core = GatewayCore(gw_config, fake)
    core.start()
    server, port, _ = await build_grpc_server(core, 0)
    try:
        async with AsyncGatewayClient(f"127.0.0.1:{port}", timeout_s=30) as c:
            with pytest.raises(PasswordRequired) as ei:
                await c.recognize(encrypted(marked_pdf([1]), PASSWORD))
        assert ei.value.message == ("the PDF is password-protected; send its password in the 'password' field "
                                    "of the request's OcrOptions"), ei.value.message
    finally:
        await server.stop(None)
        await core.close()
    # the CLI turns the REST answer's PASSWORD_REQUIRED into its own flag
    doc = tmp_path / "d.pdf"
    doc.write_bytes(encrypted(marked_pdf([1]), PASSWORD))
    answer = httpx.Response(400, json={"error": {"code": "INVALID_ARGUMENT", "reason": "PASSWORD_REQUIRED", "message":
                                                 "the PDF is password-protected; send its password in the "
                                                 "'password' form field"}})
    refusal = ocr_cli._refusal(answer, "http://gw/v1/ocr")
    assert str(refusal) == ("PASSWORD_REQUIRED: the PDF is password-protected; send its password with "
                            "inkstream ocr --password"), refusal
