"""One list of accepted document types (inkstream/doc_types.py): the sniffer recognises each, its
415 message, ``inkstream ocr --help`` and the README name each; the help and README name every output format."""

from __future__ import annotations

import io
import pathlib

import pytest
from PIL import Image

from client.ocr_cli import FORMAT_HELP, _parser
from client.results import FORMATS
from gateway.ingest.sniff import KINDS, MEDIA_TYPES, detect_type
from inkstream.doc_types import DOC_TYPES
from inkstream.errors import UnsupportedMediaType

README = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text()
PIL_FORMATS = {"png": "PNG", "jpeg": "JPEG", "jp2": "JPEG2000", "tiff": "TIFF", "webp": "WEBP", "bmp": "BMP",
               "gif": "GIF", "pdf": "PDF"}


def _sample(kind: str) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (32, 24), "white").save(buf, PIL_FORMATS[kind])
    return buf.getvalue()


@pytest.mark.parametrize("kind", [t.kind for t in DOC_TYPES])
def test_every_listed_type_is_sniffed(kind):
    assert detect_type(_sample(kind)[:1024]) == kind
    assert kind in KINDS and MEDIA_TYPES[kind]


def test_help_415_and_readme_name_every_type_and_format():
    text = " ".join(_parser().format_help().split())
    with pytest.raises(UnsupportedMediaType) as info:
        detect_type(b"plain text, not a document")
    for t in DOC_TYPES:
        assert t.label in text and t.label in info.value.message and t.label in README, t.label
        for ext in t.extensions:
            assert ext in text and f"`{ext}`" in README, ext
    assert set(FORMAT_HELP) == set(FORMATS)
    for f in FORMATS:
        assert f in text and f"`{f}`" in README
    assert "JPEG 2000" in text
