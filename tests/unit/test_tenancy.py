"""Tenants from the key file, secret masking, sealed job secrets and the new reasons of the error map."""

from __future__ import annotations

import grpc
import pytest
from cryptography.fernet import Fernet

from gateway.apis.auth import ApiKeys, load_api_keys
from gateway.stores.sealed import SEALED_PREFIX, SecretBox, load_keys
from gateway.tenancy import OPEN, Principal, acting_as, check_object_key, current, key_id, require_admin
from inkstream.errors import (
    FailedPrecondition,
    IdempotencyConflict,
    InvalidInput,
    PermissionDenied,
    error_for_code,
    http_status,
    to_status,
)
from inkstream.masking import mask_text

A, B, OPS, OLD = "tenant-a-key-0001", "tenant-b-key-0002", "operator-key-0003", "legacy-key-000004"


def test_key_file_lines_give_tenant_and_role(tmp_path):
    f = tmp_path / "keys"
    f.write_text(f"# comment\n{A} acme   # the main key\n{B}   globex\n{OPS} ops admin #operators\n{OLD}\n\n")
    keys = ApiKeys.from_file(f)
    assert keys.identify(A) == Principal("acme", False, key_id(A))
    assert keys.identify(B).tenant == "globex"
    assert keys.identify(OPS) == Principal("ops", True, key_id(OPS))
    assert keys.identify(OLD) == Principal("default", False, key_id(OLD))  # a bare key: tenant default
    assert keys.identify("unknown-key-00000") is None and keys.identify("") is None and keys.identify(None) is None
    assert len(key_id(A)) == 12 and key_id(A) not in A
    env = load_api_keys(environ={"INKSTREAM_API_KEYS": f"{A}:acme,{OPS}:ops:admin"})
    assert env is not None and env.identify(OPS).admin and env.identify(A).tenant == "acme"


@pytest.mark.parametrize("line", [f"{A} acme root", f"{A} acme admin extra", f"{A} ../etc", f"{A} a/b", "short acme"])
def test_malformed_key_lines_are_refused(tmp_path, line):
    f = tmp_path / "keys"
    f.write_text(line + "\n")
    with pytest.raises(ValueError):
        ApiKeys.from_file(f)


def test_reload_moves_a_key_to_another_tenant(tmp_path):
    f = tmp_path / "keys"
    f.write_text(f"{A} acme\n")
    keys = ApiKeys.from_file(f, reload_interval_s=0.0)
    assert keys.identify(A).tenant == "acme"
    f.write_text(f"{A} globex admin\n")
    import os
    os.utime(f, ns=(1, 10**18))
    assert keys.identify(A) == Principal("globex", True, key_id(A))


def test_principal_context_and_admin():
    assert current() == OPEN
    with acting_as(Principal("acme")):
        assert current().tenant == "acme"
        with pytest.raises(PermissionDenied):
            require_admin(current())
    assert current() == OPEN
    require_admin(OPEN)


@pytest.mark.parametrize("key", ["a/../b", "../a", "a/./b", "a//b", "/a", "a\\b", "a\x00b", ""])
def test_escaping_object_keys_are_400(key):
    with pytest.raises(InvalidInput):
        check_object_key(key)


def test_masking_of_urls_passwords_and_tokens():
    line = ("webhook https://user:pw@hooks.example.com:8443/T01/B02/s3cr3t?token=abc failed, password=hunter22 "
            "Authorization: Bearer eyJ.abc.def presigned http://s3:8333/bucket/key?X-Amz-Signature=ff")
    out = mask_text(line)
    for secret in ("pw@", "s3cr3t", "token=abc", "hunter22", "eyJ.abc.def", "X-Amz-Signature=ff", "bucket/key"):
        assert secret not in out, (secret, out)
    assert "https://***@hooks.example.com:8443/***" in out and "http://s3:8333/***" in out
    assert mask_text("a plain line with 3 pages") == "a plain line with 3 pages"


def test_secret_box_seals_opens_and_rotates():
    k1, k2 = Fernet.generate_key(), Fernet.generate_key()
    box = SecretBox([k1])
    sealed = box.seal("Pw-123")
    assert sealed.startswith(SEALED_PREFIX) and "Pw-123" not in sealed and box.seal("") == ""
    assert box.open(sealed) == "Pw-123" and box.open("legacy-plain") == "legacy-plain"
    rotated = SecretBox([k2, k1])  # new key first: opens the old tokens, seals with the new one
    assert rotated.open(sealed) == "Pw-123"
    assert SecretBox([k2]).open(rotated.seal("x")) == "x"
    with pytest.raises(FailedPrecondition):
        SecretBox([k2]).open(sealed)
    assert load_keys({"INKSTREAM_SECRETS_KEY": f"{k1.decode()},{k2.decode()}"}) == [k1, k2]
    with pytest.raises(ValueError):
        load_keys({"INKSTREAM_SECRETS_KEY": "not-a-fernet-key"})


def test_new_reasons_in_the_one_error_map():
    exc = IdempotencyConflict("this Idempotency-Key was already used for a different document")
    assert http_status(exc) == 422 and exc.reason_name == "IDEMPOTENCY_CONFLICT"
    assert isinstance(error_for_code("INVALID_ARGUMENT", "m", reason="IDEMPOTENCY_CONFLICT"), IdempotencyConflict)
    assert to_status(exc).code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    denied = PermissionDenied("admin role needed")
    assert http_status(denied) == 403
    assert isinstance(error_for_code("PERMISSION_DENIED", "m"), PermissionDenied)
