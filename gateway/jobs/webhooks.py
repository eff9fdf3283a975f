"""Job webhooks: a signed POST to the job's ``callback_url`` when it finishes.

Body: JSON ``{job_id, status, pages_done, pages_total, result_url?, error?: {code, message}}``.
Signed per Standard Webhooks 1.0 (https://www.standardwebhooks.com, the ``standardwebhooks``
package) when ``INKSTREAM_WEBHOOK_SECRET`` is set (no signature headers when it is unset):
``webhook-id`` (``msg_<job id>_<status>``, the same on every retry of one event),
``webhook-timestamp`` (Unix seconds of the attempt) and ``webhook-signature: v1,<base64 HMAC-SHA256
of "<id>.<timestamp>.<body>">``. The secret is either the standard's ``whsec_<base64 key>`` (the key
is the decoded bytes) or a plain string, whose UTF-8 bytes are the key (a receiver verifies it with
``Webhook(secret.encode())`` or as ``"whsec_" + base64(secret)``). Deprecated, kept for one
release: ``X-Inkstream-Signature: sha256=<hex HMAC-SHA256 of the raw body>`` keyed by the same key
bytes. A non-2xx answer or a timeout is retried
with exponential backoff and full jitter (``base_s`` * 2^n, at most ``max_s``), :data:`ATTEMPTS`
deliveries at most; the outcome is recorded on the job, and a failed delivery never fails or reruns
it. Destinations must match ``INKSTREAM_WEBHOOK_ALLOWED_HOSTS`` (comma-separated ``host`` or
``host:port``), checked at submission (400 otherwise); the gateway never follows redirects.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import json
import logging
import os
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlparse

import httpx
from standardwebhooks.webhooks import Webhook

from inkstream.errors import InvalidInput

log = logging.getLogger("inkstream.gateway.webhooks")

ATTEMPTS = 5
TIMEOUT_S = 10.0


SECRET_PREFIX = "whsec_"


def secret_key(secret: str) -> bytes:
    """The HMAC key for ``secret``: the base64-decoded part after ``whsec_``, else the UTF-8 bytes.

    Raises InvalidInput for a ``whsec_`` secret whose rest is not base64 or is empty.
    """
    if not secret.startswith(SECRET_PREFIX):
        return secret.encode()
    try:
        key = base64.b64decode(secret[len(SECRET_PREFIX):] + "==", validate=False)
    except (binascii.Error, ValueError) as exc:
        raise InvalidInput(f"INKSTREAM_WEBHOOK_SECRET: the part after whsec_ is not base64 ({exc})") from exc
    if not key:
        raise InvalidInput("INKSTREAM_WEBHOOK_SECRET: whsec_ with an empty key")
    return key


def sign(body: bytes, secret: str) -> str:
    """``sha256=<hex HMAC-SHA256 of body>`` keyed by :func:`secret_key` (the deprecated
    X-Inkstream-Signature value).
    """
    return "sha256=" + hmac.new(secret_key(secret), body, hashlib.sha256).hexdigest()


def standard_headers(body: bytes, secret: str, msg_id: str, now_s: float | None = None) -> dict[str, str]:
    """The Standard Webhooks headers (``webhook-id``, ``webhook-timestamp``, ``webhook-signature``)
    for ``body`` sent at ``now_s`` (Unix seconds; default now). Raises InvalidInput for a bad secret.
    """
    ts = int(time.time() if now_s is None else now_s)
    sig = Webhook(secret_key(secret)).sign(msg_id, datetime.fromtimestamp(ts, tz=UTC), body)
    return {"webhook-id": msg_id, "webhook-timestamp": str(ts), "webhook-signature": sig}


def message_id(payload: Mapping[str, Any]) -> str:
    """``msg_<job id>_<status>``: one id per job event, the same on every retry (receivers dedupe on it)."""
    return f"msg_{payload.get('job_id', '')}_{payload.get('status', '')}"


def allowed_hosts(environ: Mapping[str, str] | None = None) -> set[str]:
    """The allowlist from ``INKSTREAM_WEBHOOK_ALLOWED_HOSTS`` (lower-case ``host`` / ``host:port``)."""
    raw = (environ if environ is not None else os.environ).get("INKSTREAM_WEBHOOK_ALLOWED_HOSTS", "")
    return {h.strip().lower() for h in raw.split(",") if h.strip()}


def check_callback_url(url: str, allowed: set[str]) -> str:
    """``url`` when it is http(s) to an allowed host (``host`` allows every port, ``host:port`` one);
    raises InvalidInput (400) otherwise.
    """
    u = urlparse(url)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise InvalidInput(f"callback_url {url!r} is not an http(s) URL")
    host = u.hostname.lower()
    port = u.port or (443 if u.scheme == "https" else 80)
    if host not in allowed and f"{host}:{port}" not in allowed:
        hint = "set INKSTREAM_WEBHOOK_ALLOWED_HOSTS on the gateway" if not allowed else \
            f"allowed: {', '.join(sorted(allowed))}"
        raise InvalidInput(f"callback_url host {host}:{port} is not allowed ({hint})")
    return url


@dataclass
class Outcome:
    """A delivery's result: ``delivered`` (a 2xx came back) after ``attempts`` tries; ``last``: the
    last status code or error.
    """

    delivered: bool
    attempts: int
    last: str


class WebhookSender:
    """Delivers webhooks (see the module docstring). ``counter``: optional OTel counter of
    deliveries by ``outcome`` (``delivered``, ``retried``, ``failed``).
    """

    def __init__(self, secret: str | None = None, *, attempts: int = ATTEMPTS, base_s: float = 1.0,
                 max_s: float = 60.0, timeout_s: float = TIMEOUT_S, counter: Any = None):
        self.secret = secret if secret is not None else os.environ.get("INKSTREAM_WEBHOOK_SECRET", "")
        self.attempts, self.base_s, self.max_s, self.timeout_s = attempts, base_s, max_s, timeout_s
        self.counter = counter

    def _count(self, outcome: str) -> None:
        if self.counter is not None:
            self.counter.add(1, {"outcome": outcome})

    def headers(self, body: bytes, msg_id: str) -> dict[str, str]:
        """The request headers for one attempt: content type, and the signatures when a secret is set
        (Standard Webhooks, signed at the attempt's time, plus the deprecated X-Inkstream-Signature).
        """
        headers = {"Content-Type": "application/json", "User-Agent": "inkstream-webhook/1"}
        if self.secret:
            headers.update(standard_headers(body, self.secret, msg_id))
            headers["X-Inkstream-Signature"] = sign(body, self.secret)  # deprecated; removed next release
        return headers

    async def deliver(self, url: str, payload: dict[str, Any]) -> Outcome:
        """POST ``payload`` to ``url`` until a 2xx or :attr:`attempts` tries; never raises (a bad
        secret is logged and counted as a failed delivery).
        """
        body = json.dumps(payload, separators=(",", ":")).encode()
        msg_id = message_id(payload)
        last = ""
        async with httpx.AsyncClient(timeout=self.timeout_s, follow_redirects=False) as client:
            for n in range(1, self.attempts + 1):
                try:
                    r = await client.post(url, content=body, headers=self.headers(body, msg_id))
                    last = str(r.status_code)
                    if 200 <= r.status_code < 300:
                        self._count("delivered")
                        return Outcome(True, n, last)
                except httpx.HTTPError as exc:
                    last = type(exc).__name__
                except InvalidInput as exc:
                    self._count("failed")
                    log.warning("webhook to %s not sent: %s", url, exc.message)
                    return Outcome(False, n, "bad secret")
                if n < self.attempts:
                    self._count("retried")
                    await asyncio.sleep(random.uniform(0, min(self.max_s, self.base_s * 2 ** (n - 1))))
        self._count("failed")
        log.warning("webhook to %s failed after %d attempts (last: %s)", url, self.attempts, last)
        return Outcome(False, self.attempts, last)
