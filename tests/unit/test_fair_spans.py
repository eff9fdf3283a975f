"""bench/fair_spans.py: a request's stage times from a jsonl traces file."""

from __future__ import annotations

import json

import pytest

from bench.fair_spans import request_spans


def _span(name: str, trace: str, start: float, end: float, **attrs) -> str:
    return json.dumps({"name": name, "trace_id": trace, "start_ns": int(start * 1e9), "end_ns": int(end * 1e9),
                       "attributes": attrs})


def test_stage_times_per_request_from_the_spans_of_its_trace(tmp_path):
    lines = [
        _span("gateway.encode", "t1", 0.0, 3.0, **{"inkstream.request_id": "probe-0.1a2b3c4d"}),  # suffixed id
        _span("encoder.page", "t1", 0.5, 2.9, **{"inkstream.prepare_s": 1.5, "inkstream.thread_wait_s": 0.5,
                                                  "inkstream.queue_s": 0.1, "inkstream.forward_s": 0.8,
                                                  "inkstream.batch_pages": 2}),
        _span("gateway.decode", "t1", 3.0, 4.0, **{"inkstream.request_id": "probe-0.1a2b3c4d"}),
        _span("encoder.page", "t2", 0.0, 9.0),  # another request's trace
        _span("gateway.encode", "t2", 0.0, 9.5, **{"inkstream.request_id": "other"}),
        '{"name": "half a line',
    ]
    path = tmp_path / "spans.jsonl"
    path.write_text("\n".join(lines) + "\n")
    got = request_spans(path, {"probe-0", "missing"})
    assert set(got) == {"probe-0"}
    r = got["probe-0"]
    assert (r.pages, r.encoded, r.batch) == (1, 1, 2.0)
    assert r.encode == pytest.approx(3.0) and r.window == pytest.approx(0.6)  # 3.0 less the encoder's 2.4
    assert (r.prepare, r.thread_wait, r.queue, r.forward) == (1.5, 0.5, 0.1, 0.8)
    assert r.decode == pytest.approx(1.0)
    assert "thread wait 0.50" in r.describe()
