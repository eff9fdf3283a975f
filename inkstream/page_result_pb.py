"""The page-result contract on gRPC: :class:`inkstream.page_result.PageResult` <->
``inkstream.gateway.v1.PageResult``, one conversion per direction, used by the gateway's gRPC front
end (:func:`page_to_pb`) and by the client (:func:`page_from_pb`).

Boxes travel as four ``float`` fields (page pixels; float32, so about 7 significant digits), spans
as ``int32`` with 0 read as 1 (a message from a gateway that predates spans).
"""

from __future__ import annotations

from inkstream.page_result import Block, PageError, PageResult, TableCell, Word
from inkstream.pb import gateway_pb2


def _cell_to_pb(c: TableCell) -> gateway_pb2.TableCell:
    return gateway_pb2.TableCell(row=c.row, column=c.column, rowspan=c.rowspan, colspan=c.colspan, text=c.text,
                                 x0=c.box[0], y0=c.box[1], x1=c.box[2], y1=c.box[3], confidence=c.confidence,
                                 warnings=c.warnings)


def _cell_from_pb(m: gateway_pb2.TableCell) -> TableCell:
    return TableCell(m.row, m.column, m.text, (m.x0, m.y0, m.x1, m.y1), m.confidence,
                     max(1, m.rowspan), max(1, m.colspan), list(m.warnings))


def _word_to_pb(w: Word) -> gateway_pb2.Word:
    return gateway_pb2.Word(text=w.text, x0=w.box[0], y0=w.box[1], x1=w.box[2], y1=w.box[3], confidence=w.confidence)


def _block_to_pb(b: Block) -> gateway_pb2.Block:
    return gateway_pb2.Block(type=b.type, text=b.text, x0=b.box[0], y0=b.box[1], x1=b.box[2], y1=b.box[3],
                             cells=[_cell_to_pb(c) for c in b.cells], confidence=b.confidence, warnings=b.warnings,
                             words=[_word_to_pb(w) for w in b.words], angle=b.angle)


def _block_from_pb(m: gateway_pb2.Block) -> Block:
    return Block(m.type, m.text, (m.x0, m.y0, m.x1, m.y1), m.confidence, list(m.warnings),
                 [_cell_from_pb(c) for c in m.cells],
                 [Word(w.text, (w.x0, w.y0, w.x1, w.y1), w.confidence) for w in m.words], m.angle)


def page_to_pb(p: PageResult) -> gateway_pb2.PageResult:
    """PageResult -> ``gateway.v1.PageResult`` (1-based index, boxes in page pixels, every block's cells)."""
    msg = gateway_pb2.PageResult(
        index=p.index, status=p.status, text=p.text, finish_reason=p.finish_reason,
        vision_tokens=p.vision_tokens, generated_tokens=p.generated_tokens, width=p.width, height=p.height,
        blocks=[_block_to_pb(b) for b in p.blocks], confidence=p.confidence, warnings=p.warnings,
    )
    if p.error is not None:
        msg.error.code, msg.error.message, msg.error.reason = p.error.code, p.error.message, p.error.reason
    return msg


def page_from_pb(msg: gateway_pb2.PageResult) -> PageResult:
    """Inverse of :func:`page_to_pb` (floats come back as float32 values); an ``error`` with an empty
    code reads as none.
    """
    return PageResult(
        index=msg.index, status=msg.status, text=msg.text, blocks=[_block_from_pb(b) for b in msg.blocks],
        finish_reason=msg.finish_reason, vision_tokens=msg.vision_tokens, generated_tokens=msg.generated_tokens,
        error=(PageError(msg.error.code, msg.error.message, msg.error.reason)
               if msg.HasField("error") and msg.error.code else None),
        width=msg.width, height=msg.height, confidence=msg.confidence, warnings=list(msg.warnings),
    )
