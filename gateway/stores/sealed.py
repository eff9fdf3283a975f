"""Secrets at rest in job records: a PDF password and a webhook URL are stored sealed (Fernet:
AES-128-CBC + HMAC-SHA256, from the ``cryptography`` package), never in plain text.

Why Fernet with a key from a Secret, rather than keeping the password only in the gateway that runs
the job: a job is taken over by another gateway when its worker dies, and that gateway must open the
document; with a shared key every gateway can, and a Redis dump, an AOF file or a backup holds only
ciphertext. The key comes from env ``INKSTREAM_SECRETS_KEY_FILE`` (in Kubernetes the
``inkstream-secrets`` Secret mounted at ``/etc/inkstream/secrets/fernet.key``; one key per line, the
first seals, all open, so keys rotate by adding a new first line and removing the old one once no job
sealed with it is left) or ``INKSTREAM_SECRETS_KEY`` (comma-separated). Without either, the process
makes a random key at start: fine for one process (the embedded stores), but a job taken over by
another gateway then fails with FAILED_PRECONDITION naming the missing key (logged at start-up).
"""

from __future__ import annotations

import functools
import logging
import os
import pathlib
from collections.abc import Mapping

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from inkstream.errors import FailedPrecondition

__all__ = ["SecretBox", "secret_box", "SEALED_PREFIX"]

log = logging.getLogger("inkstream.gateway.secrets")
SEALED_PREFIX = "fernet:"


class SecretBox:
    """Seals and opens short secrets with Fernet keys ``keys`` (url-safe base64, 32 bytes each; the
    first seals). ``ephemeral``: the key was made at start (see the module docstring).
    """

    def __init__(self, keys: list[bytes], ephemeral: bool = False):
        if not keys:
            raise ValueError("no Fernet key given")
        self._fernet = MultiFernet([Fernet(k) for k in keys])
        self.ephemeral = ephemeral

    def seal(self, value: str) -> str:
        """``value`` sealed (``fernet:<token>``); "" stays ""."""
        if not value:
            return ""
        return SEALED_PREFIX + self._fernet.encrypt(value.encode()).decode()

    def open(self, stored: str) -> str:
        """The plain value of ``stored`` (a value without the prefix is returned as is: records written
        before sealing). FailedPrecondition when no key of this process opens it.
        """
        if not stored.startswith(SEALED_PREFIX):
            return stored
        try:
            return self._fernet.decrypt(stored[len(SEALED_PREFIX):].encode()).decode()
        except InvalidToken:
            raise FailedPrecondition("a secret of this job (PDF password or webhook URL) was sealed with a key "
                                     "this gateway does not have: set INKSTREAM_SECRETS_KEY_FILE to the same "
                                     "key on every gateway, and submit the job again") from None


def load_keys(environ: Mapping[str, str]) -> list[bytes]:
    """The configured Fernet keys (module docstring), [] when none; ValueError for a malformed key."""
    path = environ.get("INKSTREAM_SECRETS_KEY_FILE", "")
    text = pathlib.Path(path).read_text() if path else environ.get("INKSTREAM_SECRETS_KEY", "").replace(",", "\n")
    keys = [ln.strip().encode() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    for k in keys:
        Fernet(k)  # raises ValueError when malformed
    return keys


@functools.cache
def secret_box() -> SecretBox:
    """The process's SecretBox (configured keys, else one random key; see the module docstring)."""
    keys = load_keys(os.environ)
    if keys:
        return SecretBox(keys)
    log.warning("no INKSTREAM_SECRETS_KEY(_FILE): job secrets are sealed with a key of this process only; "
                "another gateway cannot take over a job with a PDF password or a webhook")
    return SecretBox([Fernet.generate_key()], ephemeral=True)
