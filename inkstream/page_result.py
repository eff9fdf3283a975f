"""The one page-result contract: what a page of an answer is, for the gateway, its gRPC conversion
(:mod:`inkstream.page_result_pb`) and the client alike.

A :class:`PageResult` holds the page's text, its :class:`Block` list (layout regions or text lines,
boxes in page pixels), a block's :class:`Word` list (each word's box), a ``table`` block's
:class:`TableCell` list, confidences, warning codes and,
for a failed page, a :class:`PageError`. :meth:`PageResult.to_dict` / :meth:`PageResult.from_dict`
are its REST JSON form (README "REST API", ``DocumentResult`` in ``/openapi.json``; the NDJSON
``page`` lines and the result store use the same), :func:`document_json` the whole JSON result.

Units: boxes are (x0, y0, x1, y1) in pixels of the page's ``width`` x ``height`` (x to the right, y
down, x0 <= x1, y0 <= y1); confidences in [0, 1]. The JSON form rounds boxes to 0.1 px and
confidences to 4 decimals.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

Box = tuple[float, float, float, float]

NO_TEXT_FOUND = "no_text_found"
LOW_CONFIDENCE = "low_confidence"
#: a segment (a region the encoder found ink in) came back empty: text lost, flagged (issue 37)
UNREAD_REGION = "unread_region"
UNSUPPORTED_SCRIPT = "unsupported_script"
#: text-like ink lies outside every segment the page was read in (text the detector missed, e.g. a form
#: field printed on its underline): at least 1 % of the page's characters are expected missing
UNREAD_INK = "unread_ink"
#: a password was sent with a document that opens without one (an image, a PDF that is not
#: encrypted or has an owner password only): it was not needed; carried by the first selected page
#: only (``gateway/service.py``)
PASSWORD_UNUSED = "password_unused"
#: every warning code a page or block can carry, in the order they are listed on a page (the rules
#: that set them: ``gateway/output/signal.py``, README "Confidence and warnings")
WARNING_CODES = (NO_TEXT_FOUND, UNREAD_REGION, UNREAD_INK, UNSUPPORTED_SCRIPT, LOW_CONFIDENCE, PASSWORD_UNUSED)

#: ``PageResult.status`` values
STATUS_OK, STATUS_ERROR = "ok", "error"


def as_box(values: Sequence[float]) -> Box:
    """(x0, y0, x1, y1) as floats from any 4-sequence (a JSON list, proto fields, a tuple).

    Raises ValueError when ``values`` does not hold exactly 4 numbers.
    """
    x0, y0, x1, y1 = (float(v) for v in values)
    return (x0, y0, x1, y1)


def _box_json(box: Box) -> list[float]:
    return [round(v, 1) for v in box]


@dataclass(frozen=True)
class PageError:
    """Why a page has no text: ``code`` a gRPC status code name (e.g. "INVALID_ARGUMENT",
    "UNAVAILABLE", "INTERNAL"), ``message`` for a person, ``reason`` the finer cause when the error
    has one (:attr:`inkstream.errors.InkstreamError.reason`, e.g. "PAYLOAD_TOO_LARGE": the page is over
    a limit of the replica or gateway that read it; "" = the code says it all).
    """

    code: str
    message: str
    reason: str = ""

    def detail(self, index: int) -> str:
        """``message`` without its own mention of page ``index`` (1-based) at its start, for a line that
        names the page already (a document's error line, a failed job's list of page reasons): "page 3:
        X" -> "X", "page 3 could not be rendered: X" -> "could not be rendered: X"; any other message
        (another page's number included, e.g. "page 31: ..." for page 3) unchanged.
        """
        return re.sub(rf"^page {index}(?::\s*|\s+)(?=\S)", "", self.message, count=1)

    def to_dict(self) -> dict[str, str]:
        """JSON form: ``{code, message}``, plus ``reason`` when it has one."""
        d = {"code": self.code, "message": self.message}
        if self.reason:
            d["reason"] = self.reason
        return d


@dataclass
class TableCell:
    """One cell of a ``table`` block: ``row`` and ``column`` (0-based, top to bottom / left to right),
    its ``text``, ``box`` in page pixels (the union of the boxes of the segments it was read from),
    ``confidence`` in [0, 1] (as a block's, over those segments: 1 - their expected CER for a
    calibrated model, else their token-weighted geometric mean; 0.0 when unknown),
    ``rowspan`` / ``colspan`` >= 1 (rows / columns the cell covers from ``row`` / ``column``;
    1 unless the model says otherwise: the embedded ``compact`` model gives no spans) and ``warnings``
    (stable codes, :data:`WARNING_CODES`: ``low_confidence`` when the cell is doubtful, e.g. a number
    with a doubtful digit; :func:`gateway.output.signal.cell_signal`).
    """

    row: int
    column: int
    text: str
    box: Box
    confidence: float = 0.0
    rowspan: int = 1
    colspan: int = 1
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON form: ``{row, column, rowspan, colspan, text, box, confidence, warnings}``."""
        return {"row": self.row, "column": self.column, "rowspan": self.rowspan, "colspan": self.colspan,
                "text": self.text, "box": _box_json(self.box), "confidence": round(self.confidence, 4),
                "warnings": list(self.warnings)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TableCell:
        """Inverse of :meth:`to_dict` (spans default to 1, confidence to 0.0, warnings to none). Raises KeyError without
        ``row`` / ``column`` / ``box``, ValueError for a malformed box, a negative place or a span < 1.
        """
        cell = cls(int(d["row"]), int(d["column"]), str(d.get("text", "")), as_box(d["box"]),
                   float(d.get("confidence", 0.0)), int(d.get("rowspan", 1)), int(d.get("colspan", 1)),
                   [str(w) for w in d.get("warnings") or []])
        if cell.row < 0 or cell.column < 0 or cell.rowspan < 1 or cell.colspan < 1:
            raise ValueError(f"table cell out of range (row, column >= 0; spans >= 1): {d!r}")
        return cell


@dataclass
class Word:
    """One word of a block: its ``text`` (no whitespace) and ``box`` in page pixels (the word's ink:
    its horizontal extent as the model's segment and the ink found in it give it, the line's height),
    ``confidence`` in [0, 1] (that of the segment it was read from; 0.0 when unknown).
    """

    text: str
    box: Box
    confidence: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON form: ``{text, box, confidence}``."""
        return {"text": self.text, "box": _box_json(self.box), "confidence": round(self.confidence, 4)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Word:
        """Inverse of :meth:`to_dict`; raises KeyError without ``box``, ValueError for a malformed box."""
        return cls(str(d.get("text", "")), as_box(d["box"]), float(d.get("confidence", 0.0)))


@dataclass
class Block:
    """A region of a page: layout ``type`` ("text", "title", "table", "line", ...), its ``text`` and
    ``box`` in page pixels; ``confidence`` in [0, 1] and ``warnings`` (codes of :data:`WARNING_CODES`)
    of the segment it was read from; ``cells``: a ``table`` block's cells, row-major (empty otherwise);
    ``words``: the block's words in reading order with their boxes (empty when the page's words were
    not located: a page read without its image, a block whose words did not match its ink);
    ``angle``: degrees counter-clockwise (0, 90, 180, 270) the block's text runs at on the page as
    received (0: left to right; 90: bottom to top, as on a page fed in turned clockwise; the hOCR
    ``textangle``).
    """

    type: str
    text: str
    box: Box
    confidence: float = 0.0
    warnings: list[str] = field(default_factory=list)
    cells: list[TableCell] = field(default_factory=list)
    words: list[Word] = field(default_factory=list)
    angle: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON form: ``{type, text, box, confidence, warnings, words, angle}``, plus ``cells`` for a ``table``
        block (or any block that has cells).
        """
        out: dict[str, Any] = {"type": self.type, "text": self.text, "box": _box_json(self.box),
                               "confidence": round(self.confidence, 4), "warnings": list(self.warnings),
                               "words": [w.to_dict() for w in self.words], "angle": self.angle}
        if self.type == "table" or self.cells:
            out["cells"] = [c.to_dict() for c in self.cells]
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Block:
        """Inverse of :meth:`to_dict`; raises KeyError without ``type`` / ``box``, ValueError for a
        malformed box or cell.
        """
        return cls(str(d["type"]), str(d.get("text", "")), as_box(d["box"]), float(d.get("confidence", 0.0)),
                   list(d.get("warnings", [])), [TableCell.from_dict(c) for c in d.get("cells") or []],
                   [Word.from_dict(w) for w in d.get("words") or []], int(d.get("angle", 0)) % 360)


@dataclass
class PageResult:
    """One page of an answer (REST ``pages[]`` item / NDJSON ``page`` line, ``gateway.v1.PageResult``).

    ``index``: 1-based page number in the document; ``status``: "ok" | "error" (``error`` set);
    ``finish_reason``: "stop" | "length" | "repetition" | "cancelled" ("" for an error page);
    ``vision_tokens`` / ``generated_tokens``: token counts; ``width`` / ``height``: the page's size in
    pixels (the frame of every box); ``confidence`` in [0, 1]: the token-weighted geometric mean of
    the page's token probabilities (0.0 for an error page or one without text); ``warnings``: codes of
    :data:`WARNING_CODES`, each at most once.
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
        """The REST JSON form (``error`` null or ``{code, message}``; boxes rounded to 0.1 px and
        confidences to 4 decimals, see the module docstring).
        """
        return {
            "index": self.index, "status": self.status, "text": self.text,
            "blocks": [b.to_dict() for b in self.blocks], "finish_reason": self.finish_reason,
            "vision_tokens": self.vision_tokens, "generated_tokens": self.generated_tokens,
            "error": self.error.to_dict() if self.error else None,
            "width": self.width, "height": self.height, "confidence": round(self.confidence, 4),
            "warnings": list(self.warnings),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PageResult:
        """Inverse of :meth:`to_dict` (the result store, the REST clients). Raises KeyError without
        ``index`` / ``status`` (or a malformed block / cell / error), ValueError for a malformed number.
        """
        err = d.get("error")
        return cls(
            index=int(d["index"]), status=str(d["status"]), text=d.get("text", ""),
            blocks=[Block.from_dict(b) for b in d.get("blocks", [])],
            finish_reason=d.get("finish_reason", ""), vision_tokens=int(d.get("vision_tokens", 0)),
            generated_tokens=int(d.get("generated_tokens", 0)),
            error=PageError(err["code"], err["message"], str(err.get("reason") or "")) if err else None,
            width=int(d.get("width", 0)), height=int(d.get("height", 0)),
            confidence=float(d.get("confidence", 0.0)), warnings=list(d.get("warnings", [])),
        )


def document_json(pages: Iterable[PageResult], model_id: str, seconds: float | None = None,
                  cached: bool | None = None) -> dict[str, Any]:
    """The JSON result ``{"model_id", "pages": [...], "pages_ok", "pages_error"[, "seconds"][, "cached"]}``:
    pages in index order; ``seconds`` (wall time, rounded to ms) and ``cached`` (the pages came from
    the gateway's result cache) only when given.
    """
    ordered = sorted(pages, key=lambda p: p.index)
    out: dict[str, Any] = {
        "model_id": model_id,
        "pages": [p.to_dict() for p in ordered],
        "pages_ok": sum(p.status == STATUS_OK for p in ordered),
        "pages_error": sum(p.status != STATUS_OK for p in ordered),
    }
    if seconds is not None:
        out["seconds"] = round(seconds, 3)
    if cached is not None:
        out["cached"] = cached
    return out
