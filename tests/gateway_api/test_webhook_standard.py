"""Standard Webhooks 1.0 signing, checked with the ``standardwebhooks`` package's own verifier: a
job's webhook received by a real loopback HTTP server verifies (``whsec_`` and plain secrets), a
replay with an old timestamp and a tampered body are refused, and the deprecated
X-Inkstream-Signature is still sent.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from gateway.apis.rest import create_app
from gateway.core import GatewayCore
from gateway.jobs.webhooks import WebhookSender, secret_key, standard_headers
from inkstream.errors import InvalidInput
from tests.gateway_api.conftest import FakePipeline, marked_pdf

pytestmark = pytest.mark.timeout(60)
KEY = b"0123456789abcdef0123456789abcdef"
WHSEC = "whsec_" + base64.b64encode(KEY).decode()


class Receiver(BaseHTTPRequestHandler):
    """Keeps (body, headers) of each POST and answers 204."""

    seen: list[tuple[bytes, dict[str, str]]] = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["content-length"]))
        Receiver.seen.append((body, {k.lower(): v for k, v in self.headers.items()}))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def receiver():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    Receiver.seen = []
    try:
        yield f"http://127.0.0.1:{srv.server_port}/hook"
    finally:
        srv.shutdown()
        srv.server_close()


async def job_with_webhook(gw_config, receiver, monkeypatch, document: bytes) -> tuple[dict, dict]:
    """Submits ``document`` as a job with ``receiver`` as its callback on an in-process gateway and waits
    for its webhook's outcome; returns (the 202 body, the job's last status)."""
    monkeypatch.setenv("INKSTREAM_WEBHOOK_SECRET", WHSEC)
    monkeypatch.setenv("INKSTREAM_WEBHOOK_ALLOWED_HOSTS", "127.0.0.1")
    fake = FakePipeline(delay_s=0.01)
    core = GatewayCore(gw_config, fake)
    core.start()
    try:
        app = create_app(gw_config, fake, core)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as c:
            job = (await c.post("/v1/jobs", files={"file": ("d.pdf", document)},
                                data={"callback_url": receiver})).json()
            for _ in range(400):
                rec = (await c.get(f"/v1/jobs/{job['job_id']}")).json()
                if rec["webhook"]:
                    break
                await asyncio.sleep(0.05)
    finally:
        await core.close()
    return job, rec


async def test_job_webhook_verifies_with_the_standard_library(gw_config, receiver, monkeypatch):
    job, rec = await job_with_webhook(gw_config, receiver, monkeypatch, marked_pdf([1, 2]))
    assert rec["webhook"] == "delivered", rec
    assert len(Receiver.seen) == 1
    body, headers = Receiver.seen[0]
    payload = Webhook(WHSEC).verify(body, headers)  # raises unless valid
    assert payload["job_id"] == job["job_id"] and payload["status"] == "done" and payload["pages_done"] == 2
    assert headers["webhook-id"] == f"msg_{job['job_id']}_done"
    assert headers["webhook-signature"].startswith("v1,")
    assert abs(int(headers["webhook-timestamp"]) - time.time()) < 60
    # the deprecated header, same key bytes, still there for one release
    assert headers["x-inkstream-signature"] == "sha256=" + hmac.new(KEY, body, hashlib.sha256).hexdigest()
    with pytest.raises(WebhookVerificationError):
        Webhook(WHSEC).verify(body.replace(b'"done"', b'"failed"'), headers)
    with pytest.raises(WebhookVerificationError):
        Webhook("whsec_" + base64.b64encode(b"another key").decode()).verify(body, headers)


async def test_a_failed_jobs_webhook_carries_the_same_error_as_its_status(gw_config, receiver, monkeypatch):
    # Found in a new-user tryout: GET /v1/jobs/{id} shows error {code, reason, message}, but the webhook
    # of the same failed job carried {code, message} only, so a receiver could not tell 422 NOTHING_TO_READ
    # from any other INVALID_ARGUMENT.
    from tests.gateway_api.test_jobs import zero_page_pdf

    _, rec = await job_with_webhook(gw_config, receiver, monkeypatch, zero_page_pdf())
    assert rec["status"] == "failed" and rec["webhook"] == "delivered", rec
    payload = Webhook(WHSEC).verify(*Receiver.seen[0])
    assert payload["status"] == "failed" and payload["error"] == rec["error"]
    assert payload["error"]["reason"] == "NOTHING_TO_READ"


async def test_replay_with_an_old_timestamp_is_refused(receiver):
    """A delivery signed 10 minutes ago (a captured request sent again) fails the verifier's 5-minute
    tolerance although its signature is right; the same body signed now passes.
    """
    body = b'{"job_id":"j1","status":"done"}'
    async with httpx.AsyncClient() as client:
        for ts in (time.time() - 600, time.time()):
            await client.post(receiver, content=body, headers=standard_headers(body, WHSEC, "msg_j1_done", ts))
    (old_body, old), (new_body, new) = Receiver.seen
    with pytest.raises(WebhookVerificationError, match="too old"):
        Webhook(WHSEC).verify(old_body, old)
    assert Webhook(WHSEC).verify(new_body, new)["job_id"] == "j1"


async def test_plain_secret_is_its_utf8_bytes(receiver):
    """A secret without ``whsec_`` keys the HMAC with its UTF-8 bytes: receivers verify with
    ``Webhook(secret.encode())`` or with ``"whsec_" + base64(secret)``.
    """
    sender = WebhookSender("plain s3cret", attempts=1)
    out = await sender.deliver(receiver, {"job_id": "j2", "status": "failed"})
    assert out.delivered
    body, headers = Receiver.seen[0]
    assert Webhook(b"plain s3cret").verify(body, headers)["status"] == "failed"
    assert Webhook("whsec_" + base64.b64encode(b"plain s3cret").decode()).verify(body, headers)
    assert secret_key(WHSEC) == KEY and secret_key("plain s3cret") == b"plain s3cret"


async def test_unsigned_without_secret_and_bad_whsec_refused(receiver):
    assert (await WebhookSender("", attempts=1).deliver(receiver, {"job_id": "j3", "status": "done"})).delivered
    assert not any(k.startswith("webhook-") or k == "x-inkstream-signature" for k in Receiver.seen[0][1])
    with pytest.raises(InvalidInput):
        secret_key("whsec_")
    out = await WebhookSender("whsec_", attempts=1).deliver(receiver, {"job_id": "j4", "status": "done"})
    assert not out.delivered and out.last == "bad secret" and len(Receiver.seen) == 1
