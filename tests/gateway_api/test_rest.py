"""REST API: formats, page selection, errors, cache, readiness, metrics, OpenAPI (in-process ASGI)."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from gateway.apis.rest import create_app
from gateway.core import GatewayCore
from tests.gateway_api.conftest import (
    MODEL_ID,
    FakePipeline,
    expected_text,
    marked_page,
    marked_pdf,
    marked_tiff,
    png_bytes,
)

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def client(gw_config, fake):
    core = GatewayCore(gw_config, fake)
    core.start()
    app = create_app(gw_config, fake, core)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as c:
        c.core = core
        yield c
    await core.close()


async def ocr(client, data: bytes, name: str = "doc.bin", **fields):
    return await client.post("/v1/ocr", files={"file": (name, data, "application/octet-stream")}, data=fields)


async def test_markdown_pages_in_order(client, fake):
    r = await ocr(client, marked_pdf([7, 3, 9]))
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/markdown")
    body = r.text
    parts = [body.index(f"<!-- page {i} -->") for i in (1, 2, 3)]
    assert parts == sorted(parts)
    for i, n in enumerate([7, 3, 9], start=1):
        seg = body[parts[i - 1]:(parts[i] if i < 3 else len(body))]
        assert expected_text(n) in seg
    assert "<|ref|>" not in body and "<|det|>" not in body
    assert fake.long_sides == [640, 640, 640]  # rendered at the encoder's default mode


async def test_text_format_and_mode(client, fake):
    r = await ocr(client, marked_pdf([1, 2]), format="text", mode="small")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    pages = r.text.rstrip("\n").split("\f")
    assert [p.strip() for p in pages] == [expected_text(1), expected_text(2)]
    assert fake.long_sides == [320, 320]


async def test_json_blocks_mapped_to_page_pixels(client):
    # a 1200x1600 PNG is downscaled to 480x640 for the encoder; boxes come back in original pixels
    r = await ocr(client, png_bytes(marked_page(5, (1200, 1600))), format="json")
    assert r.status_code == 200
    doc = r.json()
    assert doc["model_id"] == MODEL_ID and doc["pages_ok"] == 1 and doc["pages_error"] == 0
    (page,) = doc["pages"]
    assert page["index"] == 1 and page["status"] == "ok" and page["error"] is None
    assert (page["width"], page["height"]) == (1200, 1600)
    assert page["vision_tokens"] == 256 and page["generated_tokens"] == 12 and page["finish_reason"] == "stop"
    title, text = page["blocks"]
    assert title["type"] == "title" and title["text"] == "# Page 5"
    sx, sy = 1200 / 999, 1600 / 999  # 0-999 grid -> original page pixels
    assert title["box"] == pytest.approx([100 * sx, 50 * sy, 899 * sx, 150 * sy], abs=0.2)
    assert text["type"] == "text" and text["text"] == "body of page 5"


async def test_line_segments_become_line_blocks(gw_config):
    fake = FakePipeline(line_mode=True)
    core = GatewayCore(gw_config, fake)
    app = create_app(gw_config, fake, core)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as c:
        r = await ocr(c, png_bytes(marked_page(4, (320, 400))), format="json")
    await core.close()
    page = r.json()["pages"][0]
    assert [b["type"] for b in page["blocks"]] == ["line", "line"]
    assert page["blocks"][1]["box"] == [0.0, 200.0, 320.0, 400.0]
    assert page["text"] == "line one of page 4\nline two of page 4"


async def test_an_unknown_format_lists_the_output_formats_and_tells_a_document_type_apart(client):
    # Found by tryout7: format=png answered "unknown format 'png'; use one of: ..." as if any name would do.
    r = await client.post("/v1/ocr", files={"file": ("d.pdf", marked_pdf([1]))}, data={"format": "png"})
    msg = r.json()["error"]["message"]
    assert r.status_code == 400 and msg == ("unknown format 'png'; format is the output, one of: markdown, text, "
                                            "json, hocr, pdf (PNG is a document type: the gateway recognises it "
                                            "from the file's bytes)"), msg


async def test_page_selection(client):
    r = await ocr(client, marked_pdf([10, 11, 12, 13, 14]), pages="4-5,1", format="json")
    assert r.status_code == 200
    pages = r.json()["pages"]
    assert [p["index"] for p in pages] == [1, 4, 5]
    assert [p["text"].split()[-1] for p in pages] == ["10", "13", "14"]


@pytest.mark.parametrize("spec,needle", [("0", "numbered from 1"), ("2-1", "reversed"), ("9", "does not exist"),
                                         ("1-x", "not a page number"), ("1,,2", "not a page number")])
async def test_page_selection_errors(client, spec, needle):
    r = await ocr(client, marked_pdf([1, 2, 3]), pages=spec)
    assert r.status_code == 400
    assert needle in r.json()["error"]["message"]


async def test_bad_options(client):
    r = await ocr(client, marked_pdf([1]), format="docx")
    assert r.status_code == 400 and "markdown" in r.json()["error"]["message"]
    r = await ocr(client, marked_pdf([1]), mode="huge")
    assert r.status_code == 400 and "base" in r.json()["error"]["message"]


async def test_missing_file_and_raw_body(client):
    r = await client.post("/v1/ocr", data={"format": "text"}, files={"other": ("x", b"abc")})
    assert r.status_code == 400 and "file" in r.json()["error"]["message"]
    r = await client.post("/v1/ocr?format=text", content=marked_tiff([21, 22]),
                          headers={"content-type": "application/octet-stream"})
    assert r.status_code == 200
    assert [p.strip() for p in r.text.rstrip("\n").split("\f")] == [expected_text(21), expected_text(22)]


async def test_finish_reason_and_page_errors_are_explicit(client, fake):
    fake.finish[2] = "length"
    fake.fail.add(3)
    r = await ocr(client, marked_pdf([1, 2, 3]), format="json")
    pages = r.json()["pages"]
    assert [p["status"] for p in pages] == ["ok", "ok", "error"]
    assert pages[1]["finish_reason"] == "length"
    assert pages[2]["error"]["code"] == "UNAVAILABLE"
    md = (await ocr(client, marked_pdf([1, 2, 3]))).text
    assert "page 2: output truncated" in md and "page 3: error UNAVAILABLE" in md


async def test_cache_hit(client, fake):
    pdf = marked_pdf([1, 2])
    r1 = await ocr(client, pdf, format="json")
    assert r1.headers["x-inkstream-cache"] == "miss" and fake.pages_run == 2
    assert r1.json()["cached"] is False
    r2 = await ocr(client, pdf, format="text")
    assert r2.headers["x-inkstream-cache"] == "hit" and fake.pages_run == 2
    assert expected_text(2) in r2.text
    r2j = await ocr(client, pdf, format="json")
    assert r2j.headers["x-inkstream-cache"] == "hit" and r2j.json()["cached"] is True
    r3 = await ocr(client, pdf, format="text", pages="2")  # different options -> miss
    assert r3.headers["x-inkstream-cache"] == "miss" and fake.pages_run == 3
    fake.fail.add(9)
    bad = marked_pdf([9])
    await ocr(client, bad)
    await ocr(client, bad)  # transient page error is not cached
    assert fake.pages_run == 5


async def test_cache_is_reported_in_ndjson_headers_and_summary(client, fake):
    pdf = marked_pdf([4, 5])

    async def ndjson():
        r = await client.post("/v1/ocr", files={"file": ("d.pdf", pdf)}, data={"format": "markdown"},
                              headers={"Accept": "application/x-ndjson"})
        assert r.status_code == 200, r.text
        lines = [json.loads(ln) for ln in r.text.splitlines() if ln.strip()]
        return r.headers["x-inkstream-cache"], lines[-1]["summary"]

    header, summary = await ndjson()
    assert header == "miss" and summary["cached"] is False and fake.pages_run == 2
    header, summary = await ndjson()
    assert header == "hit" and summary["cached"] is True and fake.pages_run == 2
    assert summary["pages_ok"] == 2 and "<!-- page 2 -->" in summary["document"]


async def test_overload_is_429_with_retry_after(client, fake):
    fake.capacity = 0
    r = await ocr(client, marked_pdf([1]))
    assert r.status_code == 429
    assert r.headers["retry-after"] == "3"
    assert r.json()["error"]["code"] == "RESOURCE_EXHAUSTED"


async def test_upload_limit_streaming(gw_config, fake):
    gw_config.limits.max_upload_bytes = 50_000
    core = GatewayCore(gw_config, fake)
    app = create_app(gw_config, fake, core)

    async def body():  # chunked upload without Content-Length: the running count must stop it
        for _ in range(100):
            yield b"%PDF-" + b"x" * 9995

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as c:
        r = await c.post("/v1/ocr", content=body(), headers={"content-type": "application/pdf"})
    await core.close()
    assert r.status_code == 413
    assert r.json()["error"]["reason"] == "PAYLOAD_TOO_LARGE" and r.json()["error"]["code"] == "INVALID_ARGUMENT"
    assert "limit" in r.json()["error"]["message"]


async def test_health_ready_metrics_openapi(client, fake):
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    assert (await client.get("/readyz")).status_code == 200
    fake.healthy = False
    r = await client.get("/readyz")
    assert r.status_code == 503 and "decoder" in r.json()["reason"]
    await ocr(client, marked_pdf([1]))
    metrics = (await client.get("/metrics")).text
    assert "inkstream_gateway_pages" in metrics and "inkstream_gateway_requests" in metrics
    assert "inkstream_gateway_requests_inflight" in metrics  # the gateway HPA's metric (k8s/)
    assert 'inkstream_gateway_cache_lookups_total{' in metrics and 'result="miss"' in metrics
    spec = (await client.get("/openapi.json")).json()
    assert "/v1/ocr" in spec["paths"] and "/v1/jobs/{job_id}/result" in spec["paths"]
    body = spec["paths"]["/v1/ocr"]["post"]["requestBody"]["content"]["multipart/form-data"]["schema"]
    assert "file" in body["properties"]


async def test_api_keys_required_when_configured(gw_config, fake):
    from gateway.apis.auth import ApiKeys

    core = GatewayCore(gw_config, fake)
    app = create_app(gw_config, fake, core, api_keys=ApiKeys(["s" * 32]))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as c:
        assert (await ocr(c, marked_pdf([1]))).status_code == 401
        assert (await c.get("/healthz")).status_code == 200
        r = await c.post("/v1/ocr", files={"file": ("d", marked_pdf([1]))},
                         headers={"Authorization": "Bearer " + "s" * 32})
        assert r.status_code == 200
    await core.close()


async def test_reused_client_request_id_gets_its_own_admission(client, fake):
    seen = []
    orig = fake.admit

    def spy(request_id):
        seen.append(request_id)
        return orig(request_id)

    fake.admit = spy
    doc = marked_pdf([1])  # once: Pillow's PDF writer stamps the creation time, and the cache keys on the bytes
    for _ in range(2):
        r = await client.post("/v1/ocr", files={"file": ("d", doc)}, headers={"X-Request-Id": "retry-1"})
        assert r.status_code == 200 and r.headers["x-request-id"] == "retry-1"
    await ocr(client, marked_pdf([2]))
    assert seen[0].startswith("retry-1.") and seen[1].startswith("retry-1.") and seen[0] != seen[1], seen
    assert "." not in seen[2], seen  # a gateway-made id is used as is (one id through every replica)
    # the pipeline gets the admission key (the second request was a cache hit: no pipeline run)
    assert [o.request_id for o in fake.options_seen] == [seen[0], seen[2]], (seen, fake.options_seen)


@pytest.mark.parametrize("fmt,kw", [("JPEG", {"quality": 90}), ("WEBP", {"quality": 90}), ("BMP", {}), ("GIF", {}),
                                    ("TIFF", {"compression": "tiff_deflate"}), ("PNG", {})])
async def test_every_image_type_is_read(client, fmt, kw):
    import io

    buf = io.BytesIO()
    marked_page(37, (500, 700)).save(buf, format=fmt, **kw)
    r = await ocr(client, buf.getvalue(), name="no-extension", format="text")  # type from magic bytes only
    assert r.status_code == 200, r.text
    assert r.text.strip() == expected_text(37)


async def test_animated_gif_reads_its_first_frame(client):
    import io

    buf = io.BytesIO()
    frames = [marked_page(n, (300, 400), "L").convert("P") for n in (5, 6, 7)]
    frames[0].save(buf, format="GIF", save_all=True, append_images=frames[1:], duration=100)
    r = await ocr(client, buf.getvalue(), format="json")
    assert [p["text"] for p in r.json()["pages"]] == [expected_text(5)]


async def test_unknown_options_wrong_methods_and_routes_answer_in_the_error_shape(client):
    r = await client.post("/v1/ocr", files={"upload": ("d.pdf", marked_pdf([1]) + b"%" * 40000)})
    assert r.status_code == 400
    msg = r.json()["error"]["message"]
    assert "unknown form field 'upload'" in msg and "'file'" in msg  # not "longer than 16384 bytes"
    r = await ocr(client, marked_pdf([1]), fromat="text")
    assert r.status_code == 400 and "unknown form field 'fromat'" in r.json()["error"]["message"]
    r = await client.post("/v1/ocr?fromat=text", content=marked_tiff([21]),
                          headers={"content-type": "application/octet-stream"})
    assert r.status_code == 400 and "unknown query parameter 'fromat'" in r.json()["error"]["message"]
    r = await client.get("/v1/ocr")
    assert r.status_code == 405 and r.headers["allow"] == "POST"
    assert r.json()["error"]["reason"] == "METHOD_NOT_ALLOWED" and "does not take GET" in r.json()["error"]["message"]
    r = await client.get("/v1/nothing-here")
    assert r.status_code == 404 and r.json()["error"]["code"] == "NOT_FOUND"


async def test_an_option_given_twice_with_different_values_is_refused(client):
    # Before: the last value silently won (`?pages=1&pages=2` read page 2, `-F format=json -F format=text`
    # answered text), so a client's mistake went unnoticed.
    pdf = marked_pdf([1, 2])
    r = await client.post("/v1/ocr?pages=1&pages=2", content=pdf, headers={"content-type": "application/pdf"})
    assert r.status_code == 400, r.text
    assert "option 'pages' given twice as a query parameter" in r.json()["error"]["message"]
    r = await client.post("/v1/ocr", files=[("file", ("d.pdf", pdf)), ("format", (None, "json")),
                                            ("format", (None, "text"))])
    assert r.status_code == 400 and "option 'format' given twice as a form field" in r.json()["error"]["message"]
    r = await client.post("/v1/ocr", content=b"format=json&format=text",
                          headers={"content-type": "application/x-www-form-urlencoded"})
    assert r.status_code == 400 and "given twice as a form field" in r.json()["error"]["message"]
    r = await client.post("/v1/ocr?pages=2&pages=2&format=text", content=pdf,  # the same value twice: fine
                          headers={"content-type": "application/pdf"})
    assert r.status_code == 200, r.text


async def test_a_malformed_multipart_body_says_what_to_send_instead(client):
    r = await client.post("/v1/ocr", content=marked_pdf([1]),
                          headers={"content-type": "multipart/form-data; boundary=xyz"})
    assert r.status_code == 400, r.text
    msg = r.json()["error"]["message"]
    assert "do not follow the boundary" in msg and "application/octet-stream" in msg
    assert "index" not in msg  # the parser's own words ("Expected boundary character 45 ...") stay in the log


async def test_a_document_whose_every_page_failed_answers_the_jobs_error(client, fake):
    """Found by the tryout: ``POST /v1/ocr`` answered 200 with nothing but page errors where a job of
    the same document fails with 422 NOTHING_TO_READ (pages too small) or 503 UNAVAILABLE (every
    replica down): one document, one answer, whichever route (every whole-document format; a page read
    keeps the 200)."""
    import io

    from PIL import Image

    tiny = Image.new("L", (4, 4), 255)
    many = io.BytesIO()
    tiny.save(many, "TIFF", save_all=True, append_images=[tiny, tiny])
    for fmt in ("markdown", "text", "json", "hocr", "pdf"):
        r = await ocr(client, many.getvalue(), format=fmt)
        err = r.json()["error"]
        assert (r.status_code, err["code"], err["reason"]) == (422, "INVALID_ARGUMENT", "NOTHING_TO_READ"), r.text
        assert err["message"].startswith("no page could be read (3 of 3 failed): pages 1-3: "), err
    fake.fail.update({31, 32})
    r = await ocr(client, marked_pdf([31, 32]), format="json")
    assert r.status_code == 503 and r.json()["error"]["code"] == "UNAVAILABLE", r.text
    assert "pages 1-2: UNAVAILABLE: " in r.json()["error"]["message"]
    r = await ocr(client, marked_pdf([31, 33]), format="json")
    assert r.status_code == 200 and [p["status"] for p in r.json()["pages"]] == ["error", "ok"], r.text


async def test_a_pdf_page_too_thin_to_read_is_nothing_to_read_as_an_image_is(client, fake):
    """Found by the tryout: a PDF page of 14400 x 0.5 pt rendered to 2200 x 1 px went to the encoder,
    which refused it with INVALID_ARGUMENT ("page 1 encode: page of 2200x1 px is too small"), so a
    document of such pages answered 400 where an image or TIFF frame that small is 422 NOTHING_TO_READ;
    the gateway now checks a rendered page's side as it checks an image's, before any encoder call."""
    import io

    import pikepdf

    def pdf(sizes: list[tuple[float, float]]) -> bytes:
        doc = pikepdf.new()
        for w, h in sizes:
            doc.add_blank_page().obj.MediaBox = pikepdf.Array([0, 0, w, h])  # add_blank_page refuses < 3 pt
        out = io.BytesIO()
        doc.save(out)
        return out.getvalue()

    r = await ocr(client, pdf([(14400, 0.5), (14400, 0.5)]), format="json")
    err = r.json()["error"]
    assert (r.status_code, err["reason"]) == (422, "NOTHING_TO_READ"), r.text
    assert fake.pages_run == 0  # refused by the gateway, not by an encoder
    r = await ocr(client, pdf([(612, 792), (14400, 0.5)]), format="json")
    pages = r.json()["pages"]
    assert r.status_code == 200 and [p["status"] for p in pages] == ["ok", "error"], r.text
    assert pages[1]["error"]["reason"] == "NOTHING_TO_READ" and "too small" in pages[1]["error"]["message"]


async def test_hocr_names_the_served_model_on_every_route(client):
    """Found by tryout9: hOCR's ``<meta name="ocr-system">`` read "inkstream " (no model) from
    ``POST /v1/ocr``, its NDJSON summary and a job's result, while gRPC's said "inkstream MODEL":
    ``render_document`` took the model id as an optional argument those routes left out."""
    want = f'<meta name="ocr-system" content="inkstream {MODEL_ID}"/>'
    r = await ocr(client, marked_pdf([4]), format="hocr")
    assert r.status_code == 200 and want in r.text, r.text[:600]
    r = await client.post("/v1/ocr", files={"file": ("d.pdf", marked_pdf([4]))}, data={"format": "hocr"},
                          headers={"Accept": "application/x-ndjson"})
    summary = json.loads(r.text.strip().splitlines()[-1])["summary"]
    assert want in summary["document"], summary["document"][:600]
    job = (await client.post("/v1/jobs", files={"file": ("d.pdf", marked_pdf([5]))}, data={"format": "hocr"})).json()
    for _ in range(400):
        if (await client.get(f"/v1/jobs/{job['job_id']}")).json()["status"] in ("done", "failed"):
            break
        await asyncio.sleep(0.05)
    r = await client.get(f"/v1/jobs/{job['job_id']}/result")
    assert r.status_code == 200 and want in r.text, r.text[:600]


async def test_a_document_sent_as_form_data_is_refused_naming_the_content_type(client):
    """Found by tryout9: ``curl --data-binary @doc.pdf URL`` (no Content-Type header: curl sends
    application/x-www-form-urlencoded) answered "unknown form field '%PDF-1.3\\n...'" repeating the
    whole document (under 96 KiB), or "the form body is larger than 98304 bytes" (over it), neither
    saying what to change; both now name the Content-Type to send, and no message repeats the body."""
    import io

    from PIL import Image

    big = io.BytesIO()
    Image.effect_noise((400, 400), 60).convert("RGB").save(big, "PNG")
    assert len(big.getvalue()) > 98304
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    small = png_bytes(Image.new("L", (64, 32), 255))
    for body, label in ((marked_pdf([2]), "PDF"), (big.getvalue(), "PNG"), (small, "PNG")):
        for route in ("/v1/ocr?format=text", "/v1/jobs"):
            r = await client.post(route, content=body, headers=form)
            msg = r.json()["error"]["message"]
            assert r.status_code == 400 and f"the body is a {label} document sent as form data" in msg, (route, msg)
            assert "Content-Type: application/octet-stream" in msg and len(msg) < 400, msg
    r = await client.post("/v1/ocr", content=b"x" * 300 + b"=1", headers=form)  # a form, with a long bad name
    msg = r.json()["error"]["message"]
    assert r.status_code == 400 and msg.startswith("unknown form field '" + "x" * 40 + "...'"), msg
    r = await client.post("/v1/ocr", content=b"format=text", headers=form)  # a form without a document
    msg = r.json()["error"]["message"]
    assert r.status_code == 400 and msg.startswith("no document in the request"), msg
    assert "curl --data-binary @doc.pdf -H 'Content-Type: application/octet-stream'" in msg, msg
