"""Tenants: who a request acts for, and the names (idempotency keys, object prefixes, cache keys)
scoped to that tenant. Plain data and functions; the API key check that produces a
:class:`Principal` is :mod:`gateway.apis.auth`.

Every API key belongs to one tenant (``KEY TENANT [admin]`` in the key file; a key alone belongs to
tenant :data:`DEFAULT_TENANT`). A tenant sees only its own jobs (another tenant's job answers 404,
so its existence is not revealed), its own idempotency keys and its own uploads (``uploads/<tenant>/``);
the admin role is needed for the queue admin routes and the details of ``/readyz``. Without API keys
(local ``inkstream up``) every request acts as :data:`OPEN`: tenant ``default`` with the admin role.

The principal of the request being served is a context variable (:func:`current`), set by the
authentication middleware / interceptor and by a job's worker (:func:`acting_as`), so code deep in
the page path (the result cache key) scopes by tenant without every call passing it on.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass

from inkstream.errors import InvalidInput, PermissionDenied

__all__ = ["Principal", "DEFAULT_TENANT", "OPEN", "current", "acting_as", "key_id", "check_tenant_name",
           "scoped_idempotency_key", "upload_prefix", "require_admin"]

DEFAULT_TENANT = "default"
_TENANT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


@dataclass(frozen=True)
class Principal:
    """Who a request acts for: ``tenant`` name, ``admin`` role, ``key_id`` (a hash prefix of the API
    key, safe to log; never the key).
    """

    tenant: str
    admin: bool = False
    key_id: str = ""


OPEN = Principal(DEFAULT_TENANT, admin=True, key_id="open")
_current: contextvars.ContextVar[Principal] = contextvars.ContextVar("inkstream_principal", default=OPEN)


def key_id(key: str) -> str:
    """A 12-hex-digit id of API key ``key`` (SHA-256 prefix) for logs and audit lines."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def check_tenant_name(name: str) -> str:
    """``name`` when it is a valid tenant name (letters, digits, ``_ . -``, up to 63 characters, not
    starting with punctuation, never ``..``); ValueError otherwise.
    """
    if not _TENANT_NAME.match(name) or ".." in name:
        raise ValueError(f"invalid tenant name {name!r} (letters, digits, '_', '.', '-'; at most 63)")
    return name


def current() -> Principal:
    """The principal of the request (or job) being served; :data:`OPEN` outside any."""
    return _current.get()


@contextlib.contextmanager
def acting_as(principal: Principal) -> Iterator[Principal]:
    """Make ``principal`` :func:`current` inside the block (restored after)."""
    token = _current.set(principal)
    try:
        yield principal
    finally:
        _current.reset(token)


def set_current(principal: Principal) -> contextvars.Token[Principal]:
    """Set the current principal for the rest of this context (an ASGI request, a gRPC call)."""
    return _current.set(principal)


def scoped_idempotency_key(tenant: str, key: str) -> str:
    """The stored form of a client's ``Idempotency-Key``: per tenant, so two tenants' keys never meet
    ("" stays "").
    """
    return f"{tenant}/{key}" if key else ""


def upload_prefix(tenant: str) -> str:
    """Object-key prefix (under the store's prefix) of tenant ``tenant``'s presigned uploads."""
    return f"uploads/{tenant}/"


def require_admin(principal: Principal) -> None:
    """PermissionDenied (403) unless ``principal`` has the admin role."""
    if not principal.admin:
        raise PermissionDenied("this route needs an API key with the admin role")


def check_object_key(key: str) -> str:
    """``key`` when it is a plain object key; InvalidInput (400) for ``..`` / ``.`` segments, empty
    segments, backslashes or control characters (keys that could escape a prefix).
    """
    parts = key.split("/")
    if (not key or any(p in ("", ".", "..") for p in parts) or "\\" in key
            or any(ord(c) < 32 or ord(c) == 127 for c in key)):
        raise InvalidInput(f"source key {key!r} is malformed (no '..', '.', empty segments or control characters)")
    return key
