"""Where a request's pages spent their time, from a jsonl traces file (``INKSTREAM_TRACES_FILE``).

Used by ``bench/fairness.py --spans``: every process of the stack appends its finished spans to one
file (:mod:`inkstream.tracing`, exporter ``jsonl``); the spans of one request share its trace id,
and the gateway's page spans name its request id (``inkstream.request_id``: the client's
``x-request-id`` and a suffix ``.<8 hex>``). Per request this
gives, in seconds (summed over its pages; a 1-page probe has one of each):

- ``encode``: the gateway's ``gateway.encode`` span (waiting for a slot of the encoder's window,
  plus the ``Encode`` call);
- ``window``: ``encode`` less the encoder's own ``encoder.page`` span (the gateway's window wait
  and the wire);
- ``prepare`` / ``queue`` / ``forward``: the encoder's split of ``encoder.page``
  (``inkstream.prepare_s``: waiting for a preprocessing thread, ``thread_wait``, and
  preprocessing; ``queue_s``:
  waiting for a forward pass, the one in progress included; ``forward_s``: its own forward pass),
  and ``batch``: pages in its forward passes, on average;
- ``decode``: the gateway's ``gateway.decode`` span (segment window waits in the gateway, the
  decoder's admission and the decode steps).
"""

from __future__ import annotations

import collections
import json
import pathlib
from dataclasses import dataclass


@dataclass
class RequestSpans:
    """Seconds per stage of one request (module docstring); ``pages``: its ``gateway.encode`` spans,
    ``encoded``: its ``encoder.page`` spans.
    """

    pages: int = 0
    encoded: int = 0
    encode: float = 0.0
    window: float = 0.0
    prepare: float = 0.0
    thread_wait: float = 0.0
    queue: float = 0.0
    forward: float = 0.0
    batch_pages: int = 0  # summed over its encoder.page spans
    decode: float = 0.0

    @property
    def batch(self) -> float:
        """Mean pages in the forward passes of its pages (0.0 without encoder spans)."""
        return self.batch_pages / self.encoded if self.encoded else 0.0

    def describe(self) -> str:
        """One line: ``encode X (window X, prepare X, queue X, forward X at N pages), decode X``."""
        return (f"encode {self.encode:.2f} (window {self.window:.2f}, prepare {self.prepare:.2f} (thread wait "
                f"{self.thread_wait:.2f}), "
                f"queue {self.queue:.2f}, forward {self.forward:.2f} at {self.batch:.1f} pages), "
                f"decode {self.decode:.2f}")


def _seconds(span: dict) -> float:
    return (span["end_ns"] - span["start_ns"]) / 1e9


def request_spans(path: str | pathlib.Path, request_ids: set[str]) -> dict[str, RequestSpans]:
    """Stage times of each request in ``request_ids`` found in the jsonl file ``path`` (module
    docstring); requests without spans are left out. Lines that are not JSON are skipped (a
    process may be writing one as it is read). Raises OSError when the file cannot be read.
    """
    spans = []
    for line in pathlib.Path(path).read_text().splitlines():
        try:
            spans.append(json.loads(line))
        except ValueError:
            continue
    rid_of_trace: dict[str, str] = {}
    for s in spans:
        rid = str(s.get("attributes", {}).get("inkstream.request_id", ""))
        rid = rid if rid in request_ids else rid.rsplit(".", 1)[0]  # the gateway suffixes a client's id
        if s.get("name") in ("gateway.encode", "gateway.decode") and rid in request_ids:
            rid_of_trace[s["trace_id"]] = rid
    out: dict[str, RequestSpans] = collections.defaultdict(RequestSpans)
    encoder_s: dict[str, float] = collections.defaultdict(float)
    for s in spans:
        rid = rid_of_trace.get(s.get("trace_id", ""))
        if rid is None:
            continue
        r, attrs = out[rid], s.get("attributes", {})
        if s["name"] == "gateway.encode":
            r.pages += 1
            r.encode += _seconds(s)
        elif s["name"] == "gateway.decode":
            r.decode += _seconds(s)
        elif s["name"] == "encoder.page":
            encoder_s[rid] += _seconds(s)
            r.prepare += float(attrs.get("inkstream.prepare_s", 0.0))
            r.thread_wait += float(attrs.get("inkstream.thread_wait_s", 0.0))
            r.queue += float(attrs.get("inkstream.queue_s", 0.0))
            r.forward += float(attrs.get("inkstream.forward_s", 0.0))
            r.encoded += 1
            r.batch_pages += int(attrs.get("inkstream.batch_pages", 0))
    for rid, r in out.items():
        r.window = max(0.0, r.encode - encoder_s[rid])
    return dict(out)
