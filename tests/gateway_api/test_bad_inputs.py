"""Every file of /work/shared/bad_inputs through POST /v1/ocr: a 4xx with a message, or a 200 whose
unreadable pages carry errors; never a 5xx, never past its time bound, bounded memory.
Expected outcomes from the corpus README."""

from __future__ import annotations

import asyncio
import builtins
import io
import pathlib
import re
import resource
import time

import httpx
import pytest
from PIL import Image, PngImagePlugin

pytestmark = pytest.mark.timeout(120)



@pytest.fixture
def corpus(shared_dir: pathlib.Path) -> pathlib.Path:
    """``../shared/bad_inputs`` (tests/conftest.py's ``shared_dir`` skips when it is absent)."""
    return shared_dir / "bad_inputs"

# file -> (allowed statuses, text the error message must contain (lower case), pages on success)
EXPECTED: dict[str, tuple[set[int], str, int]] = {
    "empty_0byte.pdf": ({400}, "empty", 0),
    "invalid_header_eof_only.pdf": ({400}, "not a readable pdf", 0),
    "zero_pages.pdf": ({422}, "no pages", 0),
    "truncated_half_tracemonkey.pdf": ({400, 200}, "damaged", 0),
    "encrypted_user_password.pdf": ({400}, "password", 0),
    "pdf_decompression_bomb_content_stream.pdf": ({200, 400, 413, 422}, "", 1),
    "huge_35000x35000_mono_image.pdf": ({200, 413}, "", 1),
    "decompression_bomb_65535x66601.gif": ({413}, "pixels", 0),
    "bmp_3158064x48_bogus_header.bmp": ({400, 413}, "pixels", 0),
    "truncated.png": ({400}, "truncated", 0),
    "zero_width.gif": ({400}, "invalid", 0),
    "cmyk_map_with_text.jpg": ({200}, "", 1),
    "rgba_map_with_text.png": ({200}, "", 1),
    "16bit_gray_trns.png": ({200}, "", 1),
    "1x1_palette_trns.png": ({200, 422}, "too small", 1),
    "multipage_fax_g3_3p.tif": ({200}, "", 3),
    "jbig2_page.pdf": ({200}, "", 1),
}


def test_corpus_is_fully_covered(corpus):
    on_disk = {p.name for p in corpus.iterdir() if p.name != "README.md"}
    assert on_disk == set(EXPECTED), on_disk ^ set(EXPECTED)


@pytest.fixture
def client(rest_client):
    return rest_client


@pytest.mark.parametrize("name", sorted(EXPECTED))
async def test_bad_input(client, corpus, name):
    statuses, needle, pages = EXPECTED[name]
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.monotonic()
    r = await asyncio.wait_for(
        client.post("/v1/ocr", files={"file": (name, (corpus / name).read_bytes())}, data={"format": "json"}),
        timeout=30)
    elapsed = time.monotonic() - t0
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    assert r.status_code in statuses, (r.status_code, r.text)
    assert elapsed < 20 and grown_mb < 400, (elapsed, grown_mb)
    if r.status_code == 200:
        doc = r.json()
        assert len(doc["pages"]) == pages
        for p in doc["pages"]:
            assert p["status"] == "ok" or p["error"]["message"]
            if p["status"] == "ok":
                assert 0 < max(p["width"], p["height"])
        if name.startswith(("cmyk", "rgba", "16bit", "multipage", "jbig2", "huge")):
            assert all(p["status"] == "ok" for p in doc["pages"])
        if name == "multipage_fax_g3_3p.tif":
            assert [p["index"] for p in doc["pages"]] == [1, 2, 3]
    else:
        err = r.json()["error"]
        assert err["message"] and err["code"] in ("INVALID_ARGUMENT",)
        assert needle in err["message"].lower(), err["message"]


async def test_password_option_opens_encrypted_pdf_or_says_wrong(client, corpus):
    data = (corpus / "encrypted_user_password.pdf").read_bytes()
    r = await client.post("/v1/ocr", files={"file": ("e.pdf", data)}, data={"password": "not-it"})
    assert r.status_code == 400 and "wrong" in r.json()["error"]["message"]
    r = await client.post("/v1/ocr", files={"file": ("e.pdf", data)}, data={"password": "test", "format": "json"})
    assert r.status_code == 200 and r.json()["pages_ok"] == 4  # the corpus file's user password is "test"


async def test_wrong_type_is_415(client):
    r = await client.post("/v1/ocr", files={"file": ("doc.pdf", b"PK\x03\x04 this is a zip file")})
    assert r.status_code == 415
    assert "PDF, PNG" in r.json()["error"]["message"]


_EXCEPTION_NAMES = sorted({n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)}
                          | {"UnidentifiedImageError", "DecompressionBombError", "PdfiumError"})


def _internals_in(message: str) -> list[str]:
    """Library internals a message for a person must not carry: Pillow / PDFium names, exception classes."""
    found = [w for w in ("PIL",) if re.search(rf"\b{w}\b", message)]
    found += [w for w in ("plugin", "pdfium", "errno", "traceback") if w in message.lower()]
    found += [n for n in _EXCEPTION_NAMES if re.search(rf"\b{n}\b", message)]
    return found


def _messages(r: httpx.Response) -> list[str]:
    body = r.json()
    if "error" in body:
        return [body["error"]["message"]]
    return [p["error"]["message"] for p in body["pages"] if p.get("error")]


@pytest.mark.parametrize("zip_", [True, False], ids=["zTXt", "iTXt"])
async def test_png_with_a_huge_text_chunk_is_explained_in_plain_words(client, zip_):
    # Pillow refuses a text chunk that decompresses past PngImagePlugin.MAX_TEXT_CHUNK (1 MB) with
    # "Decompressed data too large for PngImagePlugin.MAX_TEXT_CHUNK"; the client is told what that means.
    info = PngImagePlugin.PngInfo()
    if zip_:
        info.add_text("comment", "x" * (2 << 20), zip=True)
    else:
        info.add_itxt("comment", "x" * (2 << 20), zip=True)
    buf = io.BytesIO()
    Image.new("RGB", (600, 800), "white").save(buf, format="PNG", pnginfo=info)
    r = await client.post("/v1/ocr", files={"file": ("meta.png", buf.getvalue())}, data={"format": "json"})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["code"] == "INVALID_ARGUMENT"
    assert "text (metadata) chunk" in err["message"] and "1 MB" in err["message"], err["message"]
    assert not _internals_in(err["message"]), err["message"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
async def test_bad_input_messages_name_no_library_internals(client, corpus, name):
    r = await client.post("/v1/ocr", files={"file": (name, (corpus / name).read_bytes())}, data={"format": "json"})
    for message in _messages(r):
        assert not _internals_in(message), (name, message)


def test_internals_check_catches_the_old_messages():
    assert _internals_in("the image cannot be read: Decompressed data too large for PngImagePlugin.MAX_TEXT_CHUNK")
    assert _internals_in("the file is not a readable PDF: it is damaged or truncated (PDFium could not parse it)")
    assert _internals_in("page 2 could not be rendered (ValueError)")
    assert not _internals_in("the image is truncated: the file ends before the image data does")
