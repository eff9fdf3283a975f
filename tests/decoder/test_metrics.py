"""Decoder metrics on the Prometheus endpoint (OpenTelemetry -> prometheus exporter)."""

from __future__ import annotations

import asyncio
import re

import httpx
import pytest

from decoder_service.sampling import SamplingParams
from decoder_service.scheduler import DecodeEngine
from inkstream import telemetry
from tests.decoder.conftest import vision_tokens

pytestmark = pytest.mark.integration


def _value(text: str, metric: str, engine: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(metric) and f'engine="{engine}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return None


async def test_running_kv_and_token_metrics_are_exported(endless_half):
    telemetry.setup_metrics("inkstream-decoder-test")
    port = telemetry.serve_metrics(0)
    eng = DecodeEngine(endless_half, max_running=4, kv_cache_budget_tokens=4096, name="metrics-test")
    await eng.start()
    try:
        stream = await eng.submit(vision_tokens(endless_half, 8, seed=1),
                                  SamplingParams(max_new_tokens=300, repetition_guard=False), "ocr")
        n = 0
        async for ev in stream:
            n += len(ev.token_ids)
            if n >= 5:
                break
        async with httpx.AsyncClient() as client:
            text = (await client.get(f"http://127.0.0.1:{port}/metrics")).text
        names = set(re.findall(r"^(inkstream_decoder_[a-z_]+)", text, re.M))
        running = next(m for m in names if m.startswith("inkstream_decoder_sequences_running"))
        used = next(m for m in names if m.startswith("inkstream_decoder_kv_cache_used"))
        usage = next(m for m in names if m.startswith("inkstream_decoder_kv_cache_usage"))
        tokens = next(m for m in names if m.startswith("inkstream_decoder_generated_tokens"))
        assert any(m.startswith("inkstream_decoder_ttft") for m in names)
        assert _value(text, running, "metrics-test") == 1
        assert _value(text, used, "metrics-test") >= stream.prompt_tokens + 5
        assert 0 < _value(text, usage, "metrics-test") < 1
        assert _value(text, tokens, "metrics-test") >= 5
        stream.cancel()
        await asyncio.sleep(0)
        async with httpx.AsyncClient() as client:
            text = (await client.get(f"http://127.0.0.1:{port}/metrics")).text
        assert _value(text, running, "metrics-test") == 0
        assert _value(text, used, "metrics-test") == 0
    finally:
        await eng.stop()
