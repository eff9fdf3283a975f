"""A document none of whose pages can be read, through a real stack (LocalStack: encoder, decoder and
gateway processes, the embedded compact model): the NDJSON stream and the gRPC stream end with a
summary whose ``error`` is the whole-document answer's (422 NOTHING_TO_READ), and ``inkstream ocr``
exits 2 with that error on one line (tryout8, item 4: checks commit 1fc46ca end to end, not only on
the fake pipeline).

The document: a PDF of 14400 x 3 pt pages, which render under the gateway's minimum page side
(NOTHING_TO_READ per page, before any encoder). About 25 s of stack start-up, well under a second
per request.
"""

from __future__ import annotations

import io
import json

import httpx
import pikepdf
import pytest

from client import ocr_cli
from client.gateway_client import DocumentSummary, GatewayClient
from launcher.local_stack import LocalStack

pytestmark = [pytest.mark.slow, pytest.mark.system, pytest.mark.timeout(300)]


def sliver_pdf(pages: int) -> bytes:
    """A PDF of ``pages`` pages of 14400 x 3 pt (pikepdf's extremes): each renders under 8 px high."""
    pdf = pikepdf.new()
    for _ in range(pages):
        pdf.add_blank_page(page_size=(14400, 3))
    out = io.BytesIO()
    pdf.save(out)
    return out.getvalue()


def _is_nothing_to_read(err: dict, pages: int) -> None:
    assert err["code"] == "INVALID_ARGUMENT" and err["reason"] == "NOTHING_TO_READ", err
    assert err["message"].startswith(f"no page could be read ({pages} of {pages} failed): pages 1-{pages}:"), err


def test_every_page_failed_ends_each_stream_with_the_documents_error(compact_checkpoint, tmp_path, capsys):
    with LocalStack(compact_checkpoint, encoders=1, decoders=1, gateway=True, startup_timeout_s=240) as st, \
            httpx.Client(timeout=120) as client:
        # NDJSON: pages, then a summary carrying the error the whole-document answer has
        r = client.post(f"{st.gateway_url}/v1/ocr", files={"file": ("d.pdf", sliver_pdf(3), "application/pdf")},
                        data={"format": "json"}, headers={"Accept": "application/x-ndjson"})
        assert r.status_code == 200, r.text
        lines = [json.loads(line) for line in r.text.splitlines()]
        assert [line["page"]["error"]["reason"] for line in lines[:-1]] == ["NOTHING_TO_READ"] * 3
        summary = lines[-1]["summary"]
        assert summary["pages_ok"] == 0 and summary["pages_error"] == 3
        _is_nothing_to_read(summary["error"], 3)
        whole = client.post(f"{st.gateway_url}/v1/ocr", data={"format": "json"},
                            files={"file": ("d.pdf", sliver_pdf(3), "application/pdf")})
        assert whole.status_code == 422 and whole.json()["error"] == summary["error"], whole.text
        # gRPC (another page count: not the cached answer of the requests above)
        with GatewayClient(st.gateway_grpc_addr, timeout_s=120) as g:
            items = list(g.recognize_stream(sliver_pdf(2), format="json"))
        last = items[-1]
        assert isinstance(last, DocumentSummary) and last.pages_ok == 0 and not last.cached
        assert last.error is not None
        _is_nothing_to_read({"code": last.error.code, "reason": last.error.reason, "message": last.error.message}, 2)
        # the CLI: nothing written, exit 2, the error on one line
        doc, out = tmp_path / "slivers.pdf", tmp_path / "out.md"
        doc.write_bytes(sliver_pdf(4))
        assert ocr_cli.main([str(doc), "--gateway", st.gateway_url, "-o", str(out)]) == 2
        err = capsys.readouterr().err
        assert "inkstream ocr: NOTHING_TO_READ: no page could be read (4 of 4 failed)" in err, err
        assert not out.exists()
