"""Archive image formats: JPEG 2000 (.jp2 container and bare .j2k codestream) and the TIFF
compressions archives use (LZW, ZIP, JPEG, CCITT G3/G4, multi-page), sniffed by magic bytes and read
like their PNG equivalents; hOCR and searchable PDF answers of /v1/ocr."""

from __future__ import annotations

import io

import httpx
import pikepdf
import pytest

from gateway.apis.rest import create_app
from gateway.ingest.sniff import detect_type
from tests.gateway_api.conftest import marked_page, marked_pdf, png_bytes


@pytest.fixture
async def client(gw_config, fake):
    app = create_app(gw_config, fake)
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as c:
            yield c


def _jp2(n: int, fmt: str = "JPEG2000", **kw) -> bytes:
    buf = io.BytesIO()
    marked_page(n).save(buf, fmt, **kw)
    return buf.getvalue()


def _tiff(numbers: list[int], compression: str) -> bytes:
    mode = "1" if compression.startswith("group") else "RGB" if compression == "jpeg" else "L"
    frames = [marked_page(n).convert(mode) for n in numbers]
    buf = io.BytesIO()
    frames[0].save(buf, "TIFF", save_all=True, append_images=frames[1:], compression=compression)
    return buf.getvalue()


async def _texts(client: httpx.AsyncClient, data: bytes) -> list[str]:
    r = await client.post("/v1/ocr", files={"file": ("doc", data)}, data={"format": "json"})
    assert r.status_code == 200, r.text
    return [p["text"] for p in r.json()["pages"]]


def test_sniffing():
    assert detect_type(_jp2(1)) == "jp2"
    assert detect_type(_jp2(1, no_jp2=True)) == "jp2"  # bare J2K codestream


@pytest.mark.parametrize("no_jp2", [False, True])
async def test_jpeg2000_reads_like_png(client, no_jp2):
    assert await _texts(client, _jp2(37, no_jp2=no_jp2)) == await _texts(client, png_bytes(marked_page(37)))


@pytest.mark.parametrize("compression", ["tiff_lzw", "tiff_adobe_deflate", "jpeg", "group4", "group3"])
async def test_tiff_compressions_multi_page(client, compression):
    texts = await _texts(client, _tiff([5, 6, 7], compression))
    expected = [(await _texts(client, png_bytes(marked_page(n))))[0] for n in (5, 6, 7)]
    assert texts == expected


async def test_hocr_answer(client):
    r = await client.post("/v1/ocr", files={"file": ("d.pdf", marked_pdf([1, 2]))}, data={"format": "hocr"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/xhtml+xml")
    assert r.text.count("class='ocr_page'") == 2 and "ocrx_word" in r.text


async def test_searchable_pdf_answer_and_refusals(client):
    src = marked_pdf([3, 4, 5])
    r = await client.post("/v1/ocr", files={"file": ("d.pdf", src)}, data={"format": "pdf", "pages": "2-3"})
    assert r.status_code == 200 and r.headers["content-type"] == "application/pdf"
    with pikepdf.open(io.BytesIO(r.content)) as pdf:
        assert len(pdf.pages) == 2
    r = await client.post("/v1/ocr", files={"file": ("d.pdf", src)}, data={"format": "pdf"},
                          headers={"Accept": "application/x-ndjson"})
    assert r.status_code == 400 and "binary document" in r.json()["error"]["message"]


async def _job_result(client, job: str):
    """The job's result response once it is no longer 202 (at most 10 s, polled every 50 ms)."""
    import asyncio

    for _ in range(200):
        r = await client.get(f"/v1/jobs/{job}/result")
        if r.status_code != 202:
            return r
        await asyncio.sleep(0.05)
    return r


async def test_job_with_format_pdf(client):
    import asyncio

    r = await client.post("/v1/jobs", files={"file": ("d.tif", _tiff([8, 9], "group4"))}, data={"format": "pdf"})
    assert r.status_code == 202
    job = r.json()["job_id"]
    r = await _job_result(client, job)
    assert r.status_code == 200 and r.headers["content-type"] == "application/pdf"
    with pikepdf.open(io.BytesIO(r.content)) as pdf:
        assert len(pdf.pages) == 2
    assert (await client.get(f"/v1/jobs/{job}/result", params={"format": "json"})).status_code == 200
    r = await client.post("/v1/jobs", files={"file": ("p.png", png_bytes(marked_page(1)))}, data={"format": "text"})
    job = r.json()["job_id"]
    for _ in range(200):
        if (await client.get(f"/v1/jobs/{job}")).json()["status"] == "done":
            break
        await asyncio.sleep(0.05)
    r = await client.get(f"/v1/jobs/{job}/result", params={"format": "pdf"})
    assert r.status_code == 409 and "format=pdf" in r.json()["error"]["message"]


async def test_job_with_format_pdf_of_a_password_protected_pdf(client):
    """A job's searchable PDF opens the source with the job's password: the worker was given the
    sealed (encrypted) value, so the job failed 500 INTERNAL "PasswordError" after reading every page
    (found by the tryout on samples/scotus_p01.pdf encrypted with pikepdf); /v1/ocr was right.
    """
    src = io.BytesIO()
    with pikepdf.open(io.BytesIO(marked_pdf([4, 5]))) as pdf:
        pdf.save(src, encryption=pikepdf.Encryption(user="secret", owner="owner"))
    r = await client.post("/v1/jobs", files={"file": ("d.pdf", src.getvalue())},
                          data={"format": "pdf", "password": "secret"})
    assert r.status_code == 202, r.text
    r = await _job_result(client, r.json()["job_id"])
    assert r.status_code == 200, r.text
    with pikepdf.open(io.BytesIO(r.content), password="secret") as pdf:
        assert len(pdf.pages) == 2


def _encrypted(numbers: list[int], **enc) -> bytes:
    src = io.BytesIO()
    with pikepdf.open(io.BytesIO(marked_pdf(numbers))) as pdf:
        pdf.save(src, encryption=pikepdf.Encryption(user="secret", owner="owner", **enc))
    return src.getvalue()


@pytest.mark.parametrize("enc", [{}, {"R": 4, "aes": True}, {"allow": pikepdf.Permissions(extract=False)}],
                         ids=["aes256", "aes128", "no-extract"])
async def test_searchable_pdf_of_an_encrypted_pdf_stays_encrypted(client, enc):
    """The searchable PDF of a password-protected PDF keeps its encryption (the same user and owner
    passwords, algorithm and permissions), from /v1/ocr and from a job: it came out unencrypted,
    openable by anyone (found by the tryout).
    """
    src = _encrypted([4, 5], **enc)
    with pikepdf.open(io.BytesIO(src), password="secret") as pdf:
        want = (pdf.encryption.R, pdf.encryption.stream_method, pdf.allow)
    r = await client.post("/v1/ocr", files={"file": ("d.pdf", src)}, data={"format": "pdf", "password": "secret"})
    assert r.status_code == 200, r.text
    r2 = await client.post("/v1/jobs", files={"file": ("d.pdf", src)}, data={"format": "pdf", "password": "secret"})
    assert r2.status_code == 202, r2.text
    r2 = await _job_result(client, r2.json()["job_id"])
    assert r2.status_code == 200, r2.text
    for out in (r.content, r2.content):
        with pytest.raises(pikepdf.PasswordError):
            pikepdf.open(io.BytesIO(out))
        with pikepdf.open(io.BytesIO(out), password="secret") as pdf:
            assert len(pdf.pages) == 2 and pdf.is_encrypted
            assert (pdf.encryption.R, pdf.encryption.stream_method, pdf.allow) == want
        with pikepdf.open(io.BytesIO(out), password="owner") as pdf:
            assert len(pdf.pages) == 2


async def test_searchable_pdf_of_a_plain_pdf_is_not_encrypted(client):
    r = await client.post("/v1/ocr", files={"file": ("d.pdf", marked_pdf([1]))}, data={"format": "pdf"})
    assert r.status_code == 200
    with pikepdf.open(io.BytesIO(r.content)) as pdf:
        assert not pdf.is_encrypted


@pytest.mark.parametrize("kind", ["png", "pdf"])
async def test_pages_are_scaled_to_the_encoders_pixel_limit(client, fake, kind):
    """A page within the gateway's pixel limit (``limits.max_page_pixels``, 50 M) but over the
    encoder's (``max_image_pixels``, 40 M, said in its Info) is scaled to fit the encoder: an
    800x60000 receipt came back as the page error "page image is 800x60000 = 48000000 pixels; the
    limit is 40000000 pixels" (found by the tryout). Here the encoder takes 100,000 pixels.
    """
    from gateway.types import EncoderInfo, ModeInfo
    from tests.gateway_api.conftest import MODEL_ID

    async def info() -> EncoderInfo:  # a long side far above the pixel limit's: only that limit binds
        return EncoderInfo(MODEL_ID, (ModeInfo("base", 2000, 256),), "base", 8 << 20, max_image_pixels=100_000)

    fake.encoder_info = info
    data = png_bytes(marked_page(7)) if kind == "png" else marked_pdf([7])  # 600 x 800
    r = await client.post("/v1/ocr", files={"file": ("d", data)}, data={"format": "json"})
    assert r.status_code == 200, r.text
    page = r.json()["pages"][0]
    assert page["status"] == "ok" and page["text"].startswith("# Page 7"), page
    assert fake.long_sides and 350 <= fake.long_sides[-1] <= 366  # sqrt(100000 * 4 / 3) = 365
