"""Per-item errors (``ItemError`` in a stream that otherwise succeeds) keep their retry hint from the
replica that raised them to the gateway's retry loop."""

from __future__ import annotations

from decoder_service.convert import error_to_pb
from encoder_service.convert import error_response
from gateway.clients.calls import item_failure
from inkstream.errors import InvalidInput, ResourceExhausted


def test_retry_hint_travels_in_item_errors():
    busy = ResourceExhausted("decoder full: 64 running", retry_after_s=2.5)
    seg = error_to_pb(7, busy)
    page = error_response(3, busy, model_id="m")
    for err in (seg.error, page.error):
        assert (err.code, err.retry_after_s) == ("RESOURCE_EXHAUSTED", 2.5)
        failure = item_failure(err.code, err.message, err.retry_after_s)
        assert failure.transient and failure.error.retry_after_s == 2.5
        assert "decoder full" in failure.error.message


def test_item_error_without_hint():
    err = error_to_pb(1, InvalidInput("bad vision tokens")).error
    assert err.retry_after_s == 0
    failure = item_failure(err.code, err.message, err.retry_after_s)
    assert not failure.transient and failure.error.retry_after_s is None
