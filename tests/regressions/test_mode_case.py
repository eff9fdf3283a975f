"""``mode=GUNDAM`` was refused with 400 "unknown mode" although ``format=JSON`` and ``task=OCR`` are
accepted case-insensitively; the mode is now matched the same way and the encoder is sent its own
spelling ("gundam"), so it does not reject the page later."""

from __future__ import annotations

import pytest

from gateway.config import GatewayConfig
from gateway.ingest import UploadSink
from gateway.service import OcrRequest, OcrService
from gateway.types import EncoderInfo, ModeInfo
from inkstream.errors import InvalidInput
from tests.gateway_api.conftest import FakePipeline, marked_pdf

pytestmark = pytest.mark.timeout(60)


def test_mode_lookup_is_case_insensitive_but_still_strict():
    info = EncoderInfo("m", (ModeInfo("gundam", 1024, 1121), ModeInfo("small", 768, 145)), "gundam", 1 << 20)
    assert info.mode("GUNDAM").name == "gundam"
    assert info.mode("Small").name == "small"
    assert info.mode("").name == "gundam"
    with pytest.raises(InvalidInput, match="unknown mode 'huge'"):
        info.mode("huge")


async def test_pipeline_gets_the_encoders_spelling_of_the_mode(tmp_path):
    fake = FakePipeline()
    sink = UploadSink(tmp_path, 1 << 20)
    sink.write(marked_pdf([1]))
    svc = OcrService(GatewayConfig(), fake)
    async with await svc.prepare(sink.finish(), OcrRequest(mode="SMALL")) as prepared:
        pages = [p async for p in prepared.pages(30.0)]
    assert [p.status for p in pages] == ["ok"]
    assert fake.options_seen[0].mode == "small"
