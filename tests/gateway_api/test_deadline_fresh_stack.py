"""Deadlines that fit the work on a fresh stack (gateway.routing.deadline_fit): before the gateway has
measured a page, the encoders' own rate (``InfoResponse.seconds_per_page``, estimated at their
warm-up) is what a synchronous request is checked with, through REST and gRPC alike; the jobs API is
never refused for size. A real gateway process in front of fake replicas (tests/gateway_pipeline/fakes.py).
"""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from client.gateway_client import GatewayClient
from inkstream import errors
from tests.gateway_api.conftest import marked_pdf
from tests.gateway_api.test_main_e2e import running_gateway
from tests.gateway_pipeline.fakes import FakeDecoder, FakeEncoder

pytestmark = [pytest.mark.timeout(120), pytest.mark.integration]

# The encoder reports 2 s a page; a synchronous request may take 30 s: 20 pages (40 s) are refused,
# 3 pages (6 s) are read (the fakes answer in ~10 ms a page).
SECONDS_PER_PAGE, REQUEST_TIMEOUT_S, BIG, SMALL = 2.0, 30, 20, 3


@pytest.fixture
async def slow_fresh_gateway(tmp_path):
    enc = FakeEncoder()
    enc.seconds_per_page = SECONDS_PER_PAGE
    async with running_gateway(tmp_path, enc, FakeDecoder(),
                               INKSTREAM_GATEWAY__REQUEST_TIMEOUT_S=str(REQUEST_TIMEOUT_S)) as (url, grpc_addr, _):
        yield url, grpc_addr, enc


async def test_a_big_synchronous_request_is_refused_before_any_work_on_rest_and_grpc(slow_fresh_gateway):
    url, grpc_addr, enc = slow_fresh_gateway
    big, small = marked_pdf(list(range(1, BIG + 1))), marked_pdf(list(range(1, SMALL + 1)))
    async with httpx.AsyncClient(timeout=60) as c:
        for headers in ({}, {"Accept": "application/x-ndjson"}):
            r = await c.post(f"{url}/v1/ocr", files={"file": ("big.pdf", big)}, data={"format": "json"},
                             headers=headers)
            assert r.status_code == 413, r.text
            err = r.json()["error"]
            assert (err["code"], err["reason"]) == ("INVALID_ARGUMENT", "TOO_LONG_FOR_DEADLINE")
            assert "40 s at the encoders' reported 2.00 s a page" in err["message"]
            assert "POST /v1/jobs" in err["message"]

        def via_grpc():
            with GatewayClient(grpc_addr, timeout_s=60) as g:
                return g.recognize(big, format="text")

        with pytest.raises(errors.TooLongForDeadline, match="POST /v1/jobs"):
            await asyncio.to_thread(via_grpc)
        assert sum(enc.calls.values()) == 0  # no page of the big document was encoded

        r = await c.post(f"{url}/v1/ocr", files={"file": ("small.pdf", small)}, data={"format": "json"})
        assert r.status_code == 200 and r.json()["pages_ok"] == SMALL

        # The same big document as a job: accepted and read whole.
        r = await c.post(f"{url}/v1/jobs", files={"file": ("big.pdf", big)}, data={"format": "json"})
        assert r.status_code == 202, r.text
        job = r.json()["job_id"]
        end = time.monotonic() + 60
        while (status := (await c.get(f"{url}/v1/jobs/{job}")).json())["status"] not in ("done", "failed"):
            assert time.monotonic() < end, status
            await asyncio.sleep(0.2)
        assert status["status"] == "done" and status["pages_done"] == BIG, status
        result = (await c.get(f"{url}/v1/jobs/{job}/result")).json()
        assert result["pages_ok"] == BIG
