"""Job webhooks: a signed POST to the job's ``callback_url`` when it finishes.

Body: JSON ``{job_id, status, pages_done, pages_total, result_url?, error?: {code, message}}``;
header ``X-Inkstream-Signature: sha256=<hex HMAC-SHA256 of the raw body>`` keyed by
``INKSTREAM_WEBHOOK_SECRET`` (no header when it is unset). A non-2xx answer or a timeout is retried
with exponential backoff and full jitter (``base_s`` * 2^n, at most ``max_s``), :data:`ATTEMPTS`
deliveries at most; the outcome is recorded on the job, and a failed delivery never fails or reruns
it. Destinations must match ``INKSTREAM_WEBHOOK_ALLOWED_HOSTS`` (comma-separated ``host`` or
``host:port``), checked at submission (400 otherwise); the gateway never follows redirects.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import os
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import httpx

from inkstream.errors import InvalidInput

log = logging.getLogger("inkstream.gateway.webhooks")

ATTEMPTS = 5
TIMEOUT_S = 10.0


def sign(body: bytes, secret: str) -> str:
    """``sha256=<hex HMAC-SHA256 of body keyed by secret>`` (the X-Inkstream-Signature value)."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


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

    async def deliver(self, url: str, payload: dict[str, Any]) -> Outcome:
        """POST ``payload`` to ``url`` until a 2xx or :attr:`attempts` tries; never raises."""
        body = json.dumps(payload, separators=(",", ":")).encode()
        headers = {"Content-Type": "application/json", "User-Agent": "inkstream-webhook/1"}
        if self.secret:
            headers["X-Inkstream-Signature"] = sign(body, self.secret)
        last = ""
        async with httpx.AsyncClient(timeout=self.timeout_s, follow_redirects=False) as client:
            for n in range(1, self.attempts + 1):
                try:
                    r = await client.post(url, content=body, headers=headers)
                    last = str(r.status_code)
                    if 200 <= r.status_code < 300:
                        self._count("delivered")
                        return Outcome(True, n, last)
                except httpx.HTTPError as exc:
                    last = type(exc).__name__
                if n < self.attempts:
                    self._count("retried")
                    await asyncio.sleep(random.uniform(0, min(self.max_s, self.base_s * 2 ** (n - 1))))
        self._count("failed")
        log.warning("webhook to %s failed after %d attempts (last: %s)", url, self.attempts, last)
        return Outcome(False, self.attempts, last)
