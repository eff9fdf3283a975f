"""/openapi.json describes the REST API as README.md does: every option (form field and query
parameter), the Idempotency-Key header, the JSON result's schema, each route's error statuses with
the error body; and real answers have exactly the documented fields."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from gateway.apis import rest_bodies
from gateway.apis.rest import create_app
from gateway.core import GatewayCore
from tests.gateway_api.conftest import marked_pdf

pytestmark = pytest.mark.timeout(60)

OPTIONS = {"format", "pages", "mode", "task", "password"}


@pytest.fixture
async def client(gw_config, fake):
    core = GatewayCore(gw_config, fake)
    core.start()
    app = create_app(gw_config, fake, core)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as c:
        yield c
    await core.close()


@pytest.fixture
async def spec(client) -> dict:
    r = await client.get("/openapi.json")
    assert r.status_code == 200
    return r.json()


def resolve(spec: dict, node: dict) -> dict:
    """``node`` with its ``$ref`` (``#/components/schemas/NAME``) followed."""
    while "$ref" in node:
        node = spec["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
    return node


def prop(spec: dict, schema: dict, name: str) -> dict:
    """The schema of property ``name`` of ``schema`` (refs and ``anyOf [X, null]`` unwrapped)."""
    node = resolve(spec, schema)["properties"][name]
    if "anyOf" in node:
        node = next(n for n in node["anyOf"] if n.get("type") != "null")
    return resolve(spec, node)


@pytest.mark.parametrize("path", ["/v1/ocr", "/v1/jobs"])
def test_every_option_is_declared_as_form_field_and_query_parameter(spec, path):
    op = spec["paths"][path]["post"]
    form = op["requestBody"]["content"]["multipart/form-data"]["schema"]
    extra = {"source"} | ({"callback_url"} if path == "/v1/jobs" else set())
    assert set(form["properties"]) == {"file"} | OPTIONS | extra
    assert form["anyOf"] == [{"required": ["file"]}, {"required": ["source"]}]
    assert form["properties"]["format"]["enum"] == ["markdown", "text", "json", "hocr", "pdf"]
    assert "application/octet-stream" in op["requestBody"]["content"]
    query = {p["name"] for p in op["parameters"] if p["in"] == "query"}
    assert query == OPTIONS | extra


def test_idempotency_key_header_on_job_submission(spec):
    headers = {p["name"]: p for p in spec["paths"]["/v1/jobs"]["post"]["parameters"] if p["in"] == "header"}
    assert "Idempotency-Key" in headers and headers["Idempotency-Key"]["required"] is False
    assert not any(p["name"] == "Idempotency-Key" for p in spec["paths"]["/v1/ocr"]["post"]["parameters"])


@pytest.mark.parametrize("path,method", [("/v1/ocr", "post"), ("/v1/jobs/{job_id}/result", "get")])
def test_json_result_schema(spec, path, method):
    content = spec["paths"][path][method]["responses"]["200"]["content"]
    assert {"application/json", "text/markdown; charset=utf-8", "text/plain; charset=utf-8"} <= set(content)
    doc = resolve(spec, content["application/json"]["schema"])
    assert {"model_id", "pages", "pages_ok", "pages_error", "seconds", "cached"} <= set(doc["properties"])
    page = resolve(spec, prop(spec, doc, "pages")["items"])
    assert set(page["properties"]) == {"index", "status", "text", "blocks", "finish_reason", "vision_tokens",
                                       "generated_tokens", "width", "height", "error", "confidence",
                                       "warnings"}
    assert page["properties"]["status"]["enum"] == ["ok", "error"]
    block = resolve(spec, prop(spec, page, "blocks")["items"])
    assert set(block["properties"]) == {"type", "text", "box", "confidence", "warnings", "cells", "words", "angle"}
    assert block["properties"]["box"]["minItems"] == block["properties"]["box"]["maxItems"] == 4
    assert set(prop(spec, page, "error")["properties"]) == {"code", "message", "reason"}


def test_ndjson_lines_are_described(spec):
    line = spec["paths"]["/v1/ocr"]["post"]["responses"]["200"]["content"]["application/x-ndjson"]["schema"]
    kinds = {next(iter(alt["properties"])): alt["properties"] for alt in line["oneOf"]}
    assert set(kinds) == {"page", "summary"}
    assert "index" in resolve(spec, kinds["page"]["page"])["properties"]
    assert {"cached", "document", "pages_ok"} <= set(kinds["summary"]["summary"]["properties"])


ROUTE_ERRORS = {
    ("/v1/ocr", "post"): {400, 401, 403, 405, 408, 409, 413, 415, 422, 429, 500, 503, 504},
    ("/v1/jobs", "post"): {400, 401, 403, 405, 408, 409, 413, 415, 422, 429, 500, 503},
    ("/v1/jobs/{job_id}", "get"): {401, 404, 500},
    ("/v1/jobs/{job_id}/result", "get"): {400, 401, 404, 409, 500},
    ("/v1/jobs/{job_id}", "delete"): {401, 404, 500},
}


@pytest.mark.parametrize("route", sorted(ROUTE_ERRORS))
def test_error_statuses_with_the_error_body(spec, route):
    path, method = route
    responses = spec["paths"][path][method]["responses"]
    declared = {int(s) for s in responses if s.isdigit() and int(s) >= 400}
    assert declared == ROUTE_ERRORS[route]
    for status in declared:
        body = resolve(spec, responses[str(status)]["content"]["application/json"]["schema"])
        detail = prop(spec, body, "error")
        assert set(detail["properties"]) == {"code", "reason", "message"}, (route, status)
        assert responses[str(status)]["description"]
    assert "HTTPValidationError" not in json.dumps(responses)  # validation errors are our 400s


def test_job_routes_answer_with_the_job_schema(spec):
    for path, method, status in [("/v1/jobs", "post", "202"), ("/v1/jobs/{job_id}", "get", "200"),
                                 ("/v1/jobs/{job_id}", "delete", "200"), ("/v1/jobs/{job_id}/result", "get", "202")]:
        job = resolve(spec, spec["paths"][path][method]["responses"][status]["content"]["application/json"]["schema"])
        assert {"job_id", "status", "pages_done", "pages_total", "error"} <= set(job["properties"]), path


async def test_real_answers_have_exactly_the_documented_fields(client):
    pdf = marked_pdf([1, 2])
    r = await client.post("/v1/ocr", files={"file": ("d.pdf", pdf)}, data={"format": "json"})
    assert r.status_code == 200
    doc = rest_bodies.DocumentResult.model_validate(r.json())
    assert set(r.json()) == set(rest_bodies.DocumentResult.model_fields)
    assert all(set(p) == set(rest_bodies.Page.model_fields) for p in r.json()["pages"])
    # "cells" is only in a "table" block
    assert set(r.json()["pages"][0]["blocks"][0]) == set(rest_bodies.Block.model_fields) - {"cells"}
    assert doc.pages_ok == 2

    r = await client.post("/v1/ocr", files={"file": ("d.pdf", pdf)}, headers={"Accept": "application/x-ndjson"})
    lines = [json.loads(ln) for ln in r.text.splitlines() if ln.strip()]
    rest_bodies.Page.model_validate(lines[0]["page"])
    assert set(lines[-1]["summary"]) == set(rest_bodies.Summary.model_fields)
    rest_bodies.Summary.model_validate(lines[-1]["summary"])

    r = await client.post("/v1/ocr", files={"file": ("d.pdf", b"not a document")})
    assert r.status_code == 415
    rest_bodies.ErrorBody.model_validate(r.json())
    assert set(r.json()["error"]) == set(rest_bodies.ErrorDetail.model_fields)

    r = await client.post("/v1/jobs", files={"file": ("d.pdf", pdf)}, headers={"Idempotency-Key": "k"})
    assert r.status_code == 202
    assert set(r.json()) == set(rest_bodies.Job.model_fields)
    job = rest_bodies.Job.model_validate(r.json())
    for _ in range(200):
        st = (await client.get(f"/v1/jobs/{job.job_id}")).json()
        if st["status"] == "done":
            break
        await asyncio.sleep(0.05)
    rest_bodies.Job.model_validate(st)
    r = await client.get(f"/v1/jobs/{job.job_id}/result", params={"format": "json"})
    rest_bodies.DocumentResult.model_validate(r.json())
    assert set(r.json()) == set(rest_bodies.DocumentResult.model_fields)


def test_metrics_is_documented_as_prometheus_text(spec):
    content = spec["paths"]["/metrics"]["get"]["responses"]["200"]["content"]
    assert list(content) == ["text/plain"]


def test_documented_statuses_of_chat_and_job_submission(spec):
    chat = spec["paths"]["/v1/chat/completions"]["post"]
    assert chat["requestBody"]["required"] and "messages" in chat["requestBody"]["content"]["application/json"][
        "schema"]["properties"]
    assert {"400", "401", "404", "413", "429", "503"} <= set(chat["responses"])
    assert "n > 1" in chat["responses"]["400"]["description"]
    for path in ("/v1/jobs", "/v1/ocr"):
        assert "409" in spec["paths"][path]["post"]["responses"], path
    links = spec["paths"]["/v1/jobs"]["post"]["responses"]["202"]["links"]
    assert {v["operationId"] for v in links.values()} == {"get_job", "job_result", "cancel_job"}
    ops = {op["operationId"] for item in spec["paths"].values() for op in item.values()}
    assert {"get_job", "job_result", "cancel_job", "submit_job"} <= ops


async def test_405_allow_lists_every_documented_method(client, spec):
    r = await client.put("/v1/jobs/0123")
    assert r.status_code == 405 and r.headers["allow"] == "DELETE, GET"
    assert set(r.headers["allow"].lower().split(", ")) == set(spec["paths"]["/v1/jobs/{job_id}"])
    r = await client.get("/v1/ocr")
    assert r.status_code == 405 and r.headers["allow"] == "POST"


@pytest.mark.parametrize(("path", "status"), [("/v1/ocr", 200), ("/v1/jobs", 202)])
async def test_raw_octet_stream_body_is_the_document(client, spec, path, status):
    """``curl --data-binary @doc.pdf -H 'Content-Type: application/octet-stream'``: documented and
    accepted, the type from the magic bytes, options from the query."""
    assert "application/octet-stream" in spec["paths"][path]["post"]["requestBody"]["content"]
    r = await client.post(f"{path}?format=text", content=marked_pdf([2]),
                          headers={"content-type": "application/octet-stream"})
    assert r.status_code == status, r.text


async def test_an_option_given_twice_must_agree(client):
    r = await client.post("/v1/ocr?format=json", files={"file": ("d.pdf", marked_pdf([1]))}, data={"format": "text"})
    assert r.status_code == 400 and "'format'" in r.json()["error"]["message"]
    r = await client.post("/v1/ocr?format=text", files={"file": ("d.pdf", marked_pdf([1]))}, data={"format": "text"})
    assert r.status_code == 200
