"""What a page's warnings mean, in one line for a person (the ``inkstream ocr`` stderr list).

A page's ``low_confidence`` can come from one doubtful line while the page's confidence (a mean over
its lines) is high, so "low_confidence (confidence 0.98)" alone reads as a contradiction. The line
names the doubtful lines instead, from what the page result carries: its blocks' and table cells'
``low_confidence`` warnings and confidences (:mod:`inkstream.page_result`).
"""

from __future__ import annotations

from inkstream.page_result import LOW_CONFIDENCE, NO_TEXT_FOUND, PageResult

#: at most this many doubtful lines are named on a page's line (the rest are counted)
NAMED_LINES = 3


def _doubtful(page: PageResult) -> tuple[list[str], int, bool]:
    """(the doubtful places named as "line 4 (0.71)" / "table 1 row 2 column 3 (0.80)", in reading
    order; how many lines and cells the page has; whether it has a table). Lines are the page's
    non-table blocks with text (1-based in their order); a table counts its cells.
    """
    named: list[str] = []
    total = line_no = table_no = 0
    for block in page.blocks:
        if block.type == "table" or block.cells:
            table_no += 1
            for cell in block.cells:
                total += 1
                if LOW_CONFIDENCE in cell.warnings:
                    named.append(f"table {table_no} row {cell.row + 1} column {cell.column + 1} "
                                 f"({cell.confidence:.2f})")
            continue
        if not block.text.strip():
            continue
        line_no += 1
        total += 1
        if LOW_CONFIDENCE in block.warnings:
            named.append(f"line {line_no} ({block.confidence:.2f})")
    return named, total, table_no > 0


def warnings_note(page: PageResult) -> str:
    """One line of page ``page``'s warnings for a person: its codes, then for ``low_confidence`` how
    many of its lines (and table cells) are doubtful, naming the first :data:`NAMED_LINES` with their
    confidences in [0, 1], and the page's confidence; a page with ``no_text_found`` gets no confidence
    (it has none to give). E.g. ``"low_confidence: 1 of 12 lines doubtful: line 4 (0.71); page
    confidence 0.98"``.
    """
    codes = ", ".join(page.warnings)
    if NO_TEXT_FOUND in page.warnings:
        return codes
    page_conf = f"page confidence {page.confidence:.2f}"
    if LOW_CONFIDENCE not in page.warnings:
        return f"{codes} ({page_conf})"
    named, total, tables = _doubtful(page)
    if not named:
        return f"{codes}: the page as a whole is doubtful ({page_conf})"
    shown = "; ".join(named[:NAMED_LINES]) + ("; ..." if len(named) > NAMED_LINES else "")
    unit = "lines and table cells" if tables else "lines"
    return f"{codes}: {len(named)} of {total} {unit} doubtful: {shown} ({page_conf})"
