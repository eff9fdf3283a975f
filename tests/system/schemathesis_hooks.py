"""Schemathesis hooks for tests/system/test_openapi_contract.py (loaded with ``SCHEMATHESIS_HOOKS``):
raw ``application/octet-stream`` bodies are real documents (a PNG, a JPEG or a one-page PDF with a line
of text), so job submissions are accepted and the stateful phase reaches a job's status, result and
cancel routes through the OpenAPI links. Random bytes still come in the multipart ``file`` field.
"""

from __future__ import annotations

import io

import schemathesis
from hypothesis import strategies as st
from PIL import Image, ImageDraw


def _page(fmt: str) -> bytes:
    img = Image.new("RGB", (320, 64), "white")
    ImageDraw.Draw(img).text((10, 24), "Invoice 42: total due 1,250.00", fill="black")
    buf = io.BytesIO()
    img.save(buf, fmt)
    return buf.getvalue()


schemathesis.openapi.media_type("application/octet-stream", st.sampled_from([_page(f) for f in ("PNG", "JPEG", "PDF")]))
