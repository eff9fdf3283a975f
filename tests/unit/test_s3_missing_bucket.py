"""A result store whose bucket does not exist (``stores.s3_url`` names a bucket nobody created) says so
in ``/readyz``'s reason, instead of "the object store answered HTTP 404; retry shortly": retrying
never helps, creating the bucket does (found in the new-user tryout)."""

from __future__ import annotations

import pytest
from botocore.stub import Stubber

from gateway.stores.s3 import S3ResultStore
from inkstream.errors import Unavailable


@pytest.fixture
def store(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    return S3ResultStore("s3://never-created/jobs")


def test_a_missing_bucket_is_named_as_such(store):
    with Stubber(store.client) as stub:
        stub.add_client_error("head_bucket", service_error_code="404", http_status_code=404)
        with pytest.raises(Unavailable) as info:
            store.ping()
    message = str(info.value)
    assert "bucket" in message and "does not exist" in message and "retry shortly" not in message
    assert "127.0.0.1" not in message  # never the endpoint: that is for the admin details


def test_another_failure_is_still_transient(store):
    with Stubber(store.client) as stub:
        stub.add_client_error("head_bucket", service_error_code="503", http_status_code=503)
        with pytest.raises(Unavailable) as info:
            store.ping()
    assert "retry shortly" in str(info.value)
