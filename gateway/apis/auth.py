"""API-key access control for the gateway's public APIs (REST and gRPC).

Keys come from (first found): the ``api_keys_file`` argument, env ``INKSTREAM_API_KEYS_FILE`` (a file
with one line per key, ``KEY TENANT [admin]``, ``#`` comments; in Kubernetes the ``inkstream-api-keys``
Secret mounted at ``/etc/inkstream/api-keys/keys``), or env ``INKSTREAM_API_KEYS`` (comma-separated
``KEY[:TENANT[:admin]]``). A key alone belongs to tenant ``default`` (:mod:`gateway.tenancy`); a valid
key's :class:`gateway.tenancy.Principal` (tenant, admin role, key id) is what the request acts as:
the middleware and the interceptor make it :func:`gateway.tenancy.current` for the request, and a
refused key writes an audit line (:mod:`gateway.audit`). When none is
configured, :func:`load_api_keys` returns None and the APIs are open (local ``inkstream up``); the
gateway logs that at start-up. Keys shorter than :data:`MIN_KEY_CHARS` characters are refused.

A client sends its key as ``Authorization: Bearer <key>`` or ``X-API-Key: <key>`` (HTTP headers,
or the same names lower-cased as gRPC metadata).

Checking: the presented key and every stored key are hashed with SHA-256 and compared with
:func:`hmac.compare_digest` against *all* stored keys without stopping at a match, so the time taken
does not depend on which key matched, how many leading characters agree, or the key's length
(Python docs, ``hmac.compare_digest``: "designed to prevent timing analysis"). Failures answer
HTTP 401 / gRPC UNAUTHENTICATED with the same fixed message whatever was wrong (missing, malformed,
unknown) and never echo the presented value.

Key files are re-read when their modification time changes (checked at most every
``reload_interval_s`` seconds), so rotating the Secret needs no restart.

TLS helpers for the internal gateway -> encoder / decoder hops are in :mod:`inkstream.tls`
(re-exported here).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import pathlib
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import grpc
from fastapi import HTTPException, Request

from gateway.audit import audit
from gateway.tenancy import DEFAULT_TENANT, OPEN, Principal, acting_as, check_tenant_name, key_id, set_current
from inkstream.tls import TlsConfig, channel_credentials, open_channel, server_credentials  # re-export

__all__ = [
    "ApiKeys", "load_api_keys", "key_from_headers", "ApiKeyMiddleware", "require_api_key", "ApiKeyInterceptor",
    "FAILURE_MESSAGE", "MIN_KEY_CHARS", "TlsConfig", "channel_credentials", "server_credentials", "open_channel",
]

log = logging.getLogger("inkstream.gateway.auth")

MIN_KEY_CHARS = 16
FAILURE_MESSAGE = "missing or invalid API key"
OPEN_PATHS = ("/healthz", "/readyz", "/livez", "/metrics")
#: routes of the OpenAI-compatible API (:mod:`gateway.apis.openai_api`): their 401 has OpenAI's error shape.
OPENAI_PATHS = ("/v1/models", "/v1/chat/completions")
#: the principal of a request to an open path (probes) without a valid key: no tenant, no role.
ANONYMOUS = Principal("", admin=False, key_id="")
OPEN_GRPC_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).digest()


def _parse_keys(lines: Iterable[str], source: str) -> list[tuple[str, Principal]]:
    """(key, principal) of each ``KEY [TENANT [admin]]`` line (see the module docstring)."""
    keys = []
    for n, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, *rest = line.split()
        rest = rest[:next((i for i, t in enumerate(rest) if t.startswith("#")), len(rest))]  # "# comment" after
        if len(key) < MIN_KEY_CHARS:
            raise ValueError(f"API key on line {n} of {source} is shorter than {MIN_KEY_CHARS} characters")
        if len(rest) > 2 or (len(rest) == 2 and rest[1] != "admin"):
            raise ValueError(f"line {n} of {source} is not 'KEY [TENANT [admin]]'")
        try:
            tenant = check_tenant_name(rest[0]) if rest else DEFAULT_TENANT
        except ValueError as exc:
            raise ValueError(f"line {n} of {source}: {exc}") from None
        keys.append((key, Principal(tenant, admin=len(rest) == 2, key_id=key_id(key))))
    return keys


class ApiKeys:
    """A set of accepted API keys (stored as SHA-256 digests only).

    ``keys``: the accepted keys. ``path``: the file they came from, re-read when it changes.
    Raises ValueError when a key is shorter than :data:`MIN_KEY_CHARS` or no key is given.
    """

    def __init__(self, keys: Sequence[str], path: str | None = None, reload_interval_s: float = 10.0):
        if not keys:
            raise ValueError("no API keys given")
        self._entries = [(_digest(k), p) for k, p in _parse_keys(keys, "the key list")]
        self.path = path
        self.reload_interval_s = reload_interval_s
        self._mtime = os.stat(path).st_mtime_ns if path else None
        self._checked_at = time.monotonic()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], reload_interval_s: float = 10.0) -> ApiKeys:
        """Keys from a file, one per line (``#`` comments and blank lines ignored)."""
        p = pathlib.Path(path)
        if not p.is_file():
            raise ValueError(f"API keys file {p} does not exist")
        lines = p.read_text().splitlines()
        if not _parse_keys(lines, str(p)):
            raise ValueError(f"API keys file {p} holds no key")
        return cls([ln for ln in lines if ln.strip()], path=str(p), reload_interval_s=reload_interval_s)

    def _maybe_reload(self) -> None:
        if not self.path or time.monotonic() - self._checked_at < self.reload_interval_s:
            return
        with self._lock:
            self._checked_at = time.monotonic()
            try:
                mtime = os.stat(self.path).st_mtime_ns
                if mtime == self._mtime:
                    return
                keys = _parse_keys(pathlib.Path(self.path).read_text().splitlines(), self.path)
            except (OSError, ValueError) as exc:
                log.warning("API keys file could not be re-read; keeping the previous keys",
                            extra={"error": type(exc).__name__})
                return
            if keys:
                self._entries = [(_digest(k), p) for k, p in keys]
                self._mtime = mtime
                log.info("API keys reloaded", extra={"keys": len(keys)})

    def identify(self, presented: str | None) -> Principal | None:
        """The principal (tenant, role, key id) of key ``presented``, or None when it is no key of
        ours; constant time over all keys (see the module docstring).
        """
        self._maybe_reload()
        candidate = _digest(presented or "")
        found: Principal | None = None
        for d, principal in self._entries:  # no early exit
            if hmac.compare_digest(candidate, d):
                found = principal
        return found if presented else None

    def check(self, presented: str | None) -> bool:
        """True when ``presented`` equals one of the keys (:meth:`identify`)."""
        return self.identify(presented) is not None


def load_api_keys(api_keys_file: str | None = None, environ: Mapping[str, str] | None = None) -> ApiKeys | None:
    """The configured keys (sources in the module docstring), or None when none is configured.

    Raises ValueError when a configured source is missing, empty or holds a too-short key.
    """
    env = os.environ if environ is None else environ
    path = api_keys_file or env.get("INKSTREAM_API_KEYS_FILE")
    if path:
        return ApiKeys.from_file(path)
    listed = [k.strip().replace(":", " ") for k in env.get("INKSTREAM_API_KEYS", "").split(",") if k.strip()]
    return ApiKeys(listed) if listed else None


def key_from_headers(headers: Mapping[str, str]) -> str | None:
    """The API key in lower-cased ``headers`` / metadata: ``authorization: Bearer K`` or ``x-api-key: K``."""
    auth = headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip() or None
    return headers.get("x-api-key") or None


# ---------------------------------------------------------------------------------------------------
# REST (ASGI / FastAPI)


class ApiKeyMiddleware:
    """ASGI middleware: every HTTP request except :data:`OPEN_PATHS` needs a valid key, else
    401 ``{"error": {"code": "UNAUTHENTICATED", "reason": "UNAUTHENTICATED", "message": "missing or
    invalid API key"}}`` with ``WWW-Authenticate: Bearer``. ``keys=None`` lets everything through.
    Install: ``app.add_middleware(ApiKeyMiddleware, keys=load_api_keys())``.
    """

    def __init__(self, app: Any, keys: ApiKeys | None, open_paths: Sequence[str] = OPEN_PATHS,
                 openai_paths: Sequence[str] = OPENAI_PATHS):
        self.app = app
        self.keys = keys
        self.open_paths = tuple(open_paths)
        self.openai_paths = tuple(openai_paths)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        """ASGI entry point: pass the request on, or answer 401 (see the class docstring)."""
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        presented = key_from_headers(headers)
        principal = OPEN if self.keys is None else self.keys.identify(presented)
        if principal is None and scope.get("path", "") in self.open_paths:
            principal = ANONYMOUS
        if principal is not None:
            scope.setdefault("state", {})["principal"] = principal
            with acting_as(principal):  # the request's principal (gateway.tenancy.current)
                await self.app(scope, receive, send)
            return
        audit("refused_key", outcome="denied", principal=Principal("", key_id=key_id(presented) if presented else ""),
              route=scope.get("path", ""))
        error: dict[str, Any] = {"code": "UNAUTHENTICATED", "reason": "UNAUTHENTICATED", "message": FAILURE_MESSAGE}
        if scope.get("path", "") in self.openai_paths:  # OpenAI clients read their own error shape
            error = {"message": FAILURE_MESSAGE, "type": "invalid_request_error", "param": None,
                     "code": "invalid_api_key"}
        body = json.dumps({"error": error}).encode()
        await send({"type": "http.response.start", "status": 401, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", b'Bearer realm="inkstream"')]})
        await send({"type": "http.response.body", "body": body})


def require_api_key(keys: ApiKeys | None):
    """FastAPI dependency for single routes: ``Depends(require_api_key(keys))`` -> 401 on failure."""
    async def dependency(request: Request) -> None:
        if keys is None:
            return
        headers = {k.lower(): v for k, v in request.headers.items()}
        if not keys.check(key_from_headers(headers)):
            raise HTTPException(status_code=401, detail=FAILURE_MESSAGE,
                                headers={"WWW-Authenticate": 'Bearer realm="inkstream"'})

    return dependency


# ---------------------------------------------------------------------------------------------------
# gRPC


async def _deny(request_or_iterator: Any, context: grpc.aio.ServicerContext) -> None:
    await context.abort(grpc.StatusCode.UNAUTHENTICATED, FAILURE_MESSAGE)


async def _deny_stream(request_or_iterator: Any, context: grpc.aio.ServicerContext):
    await context.abort(grpc.StatusCode.UNAUTHENTICATED, FAILURE_MESSAGE)
    yield  # pragma: no cover - abort raises


class ApiKeyInterceptor(grpc.aio.ServerInterceptor):
    """grpc.aio server interceptor: calls without a valid key in ``authorization: Bearer`` /
    ``x-api-key`` metadata end with UNAUTHENTICATED before the handler runs (health checks and
    reflection are open); a valid key's handler runs as its principal (tenant, role). ``keys=None``
    lets everything through as :data:`gateway.tenancy.OPEN`.
    Install: ``grpc.aio.server(interceptors=[..., ApiKeyInterceptor(keys)])``.
    """

    def __init__(self, keys: ApiKeys | None):
        self.keys = keys

    async def intercept_service(self, continuation, handler_call_details):
        """The method's handler run as the key's principal (:mod:`gateway.tenancy`), or one that
        aborts with UNAUTHENTICATED when the key is missing / wrong.
        """
        handler = await continuation(handler_call_details)
        if handler is None or handler_call_details.method.startswith(OPEN_GRPC_PREFIXES):
            return handler
        meta = {k.lower(): v for k, v in (handler_call_details.invocation_metadata or ()) if isinstance(v, str)}
        presented = key_from_headers(meta)
        principal = OPEN if self.keys is None else self.keys.identify(presented)
        if principal is not None:
            return _as_principal(handler, principal)
        audit("refused_key", outcome="denied", principal=Principal("", key_id=key_id(presented) if presented else ""),
              route=handler_call_details.method)
        if handler.unary_unary is not None:
            return handler._replace(unary_unary=_deny)
        if handler.stream_unary is not None:
            return handler._replace(stream_unary=_deny)
        if handler.unary_stream is not None:
            return handler._replace(unary_stream=_deny_stream)
        return handler._replace(stream_stream=_deny_stream)


def _as_principal(handler: Any, principal: Principal) -> Any:
    """``handler`` whose behaviour runs with ``principal`` as :func:`gateway.tenancy.current`."""
    if handler.unary_unary is not None or handler.stream_unary is not None:
        field = "unary_unary" if handler.unary_unary is not None else "stream_unary"
        inner = getattr(handler, field)

        async def unary(request_or_iterator: Any, context: Any) -> Any:
            set_current(principal)
            return await inner(request_or_iterator, context)

        return handler._replace(**{field: unary})
    field = "unary_stream" if handler.unary_stream is not None else "stream_stream"
    inner_stream = getattr(handler, field)

    async def stream(request_or_iterator: Any, context: Any) -> Any:
        set_current(principal)
        async for item in inner_stream(request_or_iterator, context):
            yield item

    return handler._replace(**{field: stream})
