"""What a client gets back from the gateway, as plain dataclasses (no server code imported).

These mirror the gateway's public contract: the ``inkstream.gateway.v1`` messages (``PageResult``,
``DocumentSummary``, ``Job``) and the REST JSON result documented in README.md. They are built from
either the gRPC messages (:mod:`client.gateway_client`) or the REST NDJSON lines
(:mod:`client.ocr_cli`), so the client library depends only on the generated stubs and on HTTP.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

FORMATS = ("markdown", "text", "json", "hocr", "pdf")
"""Output formats the gateway renders (REST ``format`` / gRPC ``OcrOptions.format``)."""

Box = tuple[float, float, float, float]

WARNING_CODES = ("no_text_found", "unsupported_script", "low_confidence")
"""The page / block warning codes the gateway sends (README "Confidence and warnings")."""


@dataclass
class Block:
    """A region of a page: layout ``type`` ("text", "line", "title", ...), its ``text`` and ``box``
    (x0, y0, x1, y1) in page pixels of the page's ``width`` x ``height``; ``confidence`` in [0, 1]
    (geometric mean of the model's token probabilities over the block's segment) and ``warnings``
    (stable codes, e.g. "low_confidence").
    """

    type: str
    text: str
    box: Box
    confidence: float = 0.0
    warnings: list[str] = field(default_factory=list)


@dataclass
class PageError:
    """Why a page has no text: ``code`` a gRPC status code name, ``message`` for a person."""

    code: str
    message: str


@dataclass
class PageResult:
    """One page of an answer (``inkstream.gateway.v1.PageResult`` / a REST ``pages[]`` item).

    ``index`` is the 1-based page number, ``status`` "ok" | "error"; ``vision_tokens`` and
    ``generated_tokens`` are token counts, ``width`` / ``height`` the page's size in pixels;
    ``confidence`` in [0, 1] is the geometric mean of the page's token probabilities (0 for an error
    page or one without text) and ``warnings`` its stable codes (:data:`WARNING_CODES`).
    """

    index: int
    status: str
    text: str = ""
    blocks: list[Block] = field(default_factory=list)
    finish_reason: str = ""
    vision_tokens: int = 0
    generated_tokens: int = 0
    error: PageError | None = None
    width: int = 0
    height: int = 0
    confidence: float = 0.0
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The REST JSON form (``box`` as a list rounded to 0.1 px, ``error`` null or {code, message},
        confidences rounded to 4 decimals).
        """
        d = asdict(self)
        d["confidence"] = round(self.confidence, 4)
        d["blocks"] = [{"type": b.type, "text": b.text, "box": [round(v, 1) for v in b.box],
                        "confidence": round(b.confidence, 4), "warnings": list(b.warnings)} for b in self.blocks]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PageResult:
        """Parse one REST ``page`` object; raises KeyError / ValueError on a malformed one."""
        err = d.get("error")
        blocks = []
        for b in d.get("blocks", []):
            x0, y0, x1, y1 = (float(v) for v in b["box"])
            blocks.append(Block(b["type"], b.get("text", ""), (x0, y0, x1, y1), float(b.get("confidence", 0.0)),
                                list(b.get("warnings", []))))
        return cls(
            index=int(d["index"]), status=d["status"], text=d.get("text", ""), blocks=blocks,
            finish_reason=d.get("finish_reason", ""), vision_tokens=int(d.get("vision_tokens", 0)),
            generated_tokens=int(d.get("generated_tokens", 0)),
            error=PageError(err["code"], err["message"]) if err else None,
            width=int(d.get("width", 0)), height=int(d.get("height", 0)),
            confidence=float(d.get("confidence", 0.0)), warnings=list(d.get("warnings", [])),
        )


@dataclass
class DocumentSummary:
    """The last message of a recognition: page counts, the stitched ``document``, wall time in seconds,
    and whether the answer came from the gateway's result cache.
    """

    model_id: str
    pages: int
    pages_ok: int
    pages_error: int
    document: str
    seconds: float
    cached: bool = False


@dataclass
class RecognizeResult:
    """A whole recognition: page results in page order and the summary."""

    pages: list[PageResult] = field(default_factory=list)
    summary: DocumentSummary | None = None

    @property
    def document(self) -> str:
        """The stitched document in the requested format ("" before the summary arrived)."""
        return self.summary.document if self.summary else ""


@dataclass
class JobStatus:
    """A job's state: ``status`` queued | running | done | failed | cancelled, progress in pages."""

    job_id: str
    status: str
    pages_done: int
    pages_total: int
    error: str


def document_json(pages: list[PageResult], model_id: str, seconds: float | None = None,
                  cached: bool | None = None) -> dict[str, Any]:
    """The REST JSON result ``{"model_id", "pages": [...], "pages_ok", "pages_error"[, "seconds"][, "cached"]}``,
    pages in index order (the same shape the gateway answers with ``format=json``).
    """
    ordered = sorted(pages, key=lambda p: p.index)
    out: dict[str, Any] = {
        "model_id": model_id,
        "pages": [p.to_dict() for p in ordered],
        "pages_ok": sum(p.status == "ok" for p in ordered),
        "pages_error": sum(p.status != "ok" for p in ordered),
    }
    if seconds is not None:
        out["seconds"] = round(seconds, 3)
    if cached is not None:
        out["cached"] = cached
    return out
