"""One page of a response as the gateway hands it to every output format: :class:`PageResult` with its
:class:`Block` list (a ``table`` block carries its cells), and its JSON form (:meth:`PageResult.to_dict`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from gateway.output.tables import TableCell
from gateway.types import PageError

Box = tuple[float, float, float, float]

def _box(values: Sequence[float]) -> Box:
    """(x0, y0, x1, y1) as floats from any 4-sequence (JSON list, proto fields); ValueError otherwise."""
    x0, y0, x1, y1 = (float(v) for v in values)
    return (x0, y0, x1, y1)


@dataclass
class Block:
    """A region of a page: layout ``type`` ("text", "title", "table", "line", ...), its ``text`` and
    ``box`` (x0, y0, x1, y1) in page pixels (of the document page, see PageResult.width/height);
    ``confidence`` in [0, 1] and ``warnings`` (codes of :mod:`gateway.output.signal`) of the segment
    it was read from.
    """

    type: str
    text: str
    box: Box
    confidence: float = 0.0
    warnings: list[str] = field(default_factory=list)
    cells: list[TableCell] = field(default_factory=list)  # a ``table`` block's cells (gateway/output/tables.py)


@dataclass
class PageResult:
    """One page of a response. ``index`` is the 1-based page number; ``status`` "ok" | "error";
    ``confidence`` in [0, 1] and ``warnings`` (stable codes) from :func:`gateway.output.signal.page_warnings`
    (0.0 and none for an error page).
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
        """JSON-ready dict (the REST schema: blocks with ``box`` lists, ``error`` null or {code, message},
        confidences rounded to 4 decimals).
        """
        d = asdict(self)
        d["confidence"] = round(self.confidence, 4)
        d["blocks"] = [{"type": b.type, "text": b.text, "box": [round(v, 1) for v in b.box],
                        "confidence": round(b.confidence, 4), "warnings": list(b.warnings)} for b in self.blocks]
        for out, b in zip(d["blocks"], self.blocks, strict=True):
            if b.type == "table":
                out["cells"] = _cells_json(b.cells)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PageResult:
        """Inverse of :meth:`to_dict` (used by the result store and the clients)."""
        err = d.get("error")
        return cls(
            index=int(d["index"]), status=d["status"], text=d.get("text", ""),
            blocks=[Block(b["type"], b.get("text", ""), _box(b["box"]), float(b.get("confidence", 0.0)),
                          list(b.get("warnings", [])), _cells_from_json(b.get("cells", [])))
                    for b in d.get("blocks", [])],
            finish_reason=d.get("finish_reason", ""), vision_tokens=int(d.get("vision_tokens", 0)),
            generated_tokens=int(d.get("generated_tokens", 0)),
            error=PageError(err["code"], err["message"]) if err else None,
            width=int(d.get("width", 0)), height=int(d.get("height", 0)),
            confidence=float(d.get("confidence", 0.0)), warnings=list(d.get("warnings", [])),
        )


def _cells_json(cells: list[TableCell]) -> list[dict[str, Any]]:
    """A table block's cells as JSON: ``{row, column, text, box}`` each (box rounded to 0.1 px)."""
    return [{"row": c.row, "column": c.column, "text": c.text, "box": [round(v, 1) for v in c.box]} for c in cells]


def _cells_from_json(cells: list[dict[str, Any]]) -> list[TableCell]:
    """Inverse of :func:`_cells_json`."""
    return [TableCell(int(c["row"]), int(c["column"]), c.get("text", ""), _box(c["box"])) for c in cells]
