"""Masking of secrets in text that leaves the process (log lines, job records shown to clients).

:func:`mask_text` rewrites, anywhere in a string:

* URLs (``scheme://...``): user info, path and query are replaced by ``***``; scheme, host and port
  stay (``https://hooks.example/T0/B0/secret?token=x`` -> ``https://hooks.example/***``), so a
  webhook's token, a presigned URL's signature or an object key is never written whole;
* ``password=...``, ``token=...``, ``secret=...``, ``key=...`` style pairs (``=`` or ``:``): the value;
* ``Bearer <token>``: the token.

:func:`mask_url` is the URL rule alone. Both are pure functions over str.
"""

from __future__ import annotations

import re

__all__ = ["mask_text", "mask_url", "MASK"]

MASK = "***"
_URL = re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]{1,15})://([^\s\"'<>/?#]*)([^\s\"'<>]*)")
_PAIR = re.compile(r"(?i)\b((?:doc_)?password|passwd|token|secret|api[_-]?key|access[_-]?key|signature|"
                   r"x-amz-signature|x-amz-credential|sig)(\"?\s*[=:]\s*\"?)([^\s\"'&,;}]+)")
_BEARER = re.compile(r"(?i)\b(bearer\s+)([A-Za-z0-9._~+/=-]+)")


def mask_url(url: str) -> str:
    """``url`` with user info, path and query masked (see the module docstring)."""
    return _URL.sub(_url_repl, url)


def _url_repl(m: re.Match[str]) -> str:
    scheme, authority, rest = m.group(1), m.group(2), m.group(3)
    host = authority.rsplit("@", 1)[-1]
    userinfo = f"{MASK}@" if "@" in authority else ""
    return f"{scheme}://{userinfo}{host}{'/' + MASK if rest.strip('/') else ''}"


def mask_text(text: str) -> str:
    """``text`` with URLs, secret-named pairs and bearer tokens masked (see the module docstring)."""
    if "://" in text:
        text = _URL.sub(_url_repl, text)
    text = _PAIR.sub(lambda m: m.group(1) + m.group(2) + MASK, text)
    return _BEARER.sub(lambda m: m.group(1) + MASK, text)
