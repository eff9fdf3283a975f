"""Lines of prose the page analysis took into a table region: the last lines of the paragraph above the
table, or the first of the one below, run across its columns. Read as the table's rows, each was cut at
the table's column gutters into pieces (at the blanks after ``，`` and ``：`` of a Chinese line), read one
a line (``bench/doc_pages.py --seed 3900`` page 11, a Chinese report: 2.5 % CER at 0.6 % order-free).

:func:`prose_rows` takes them out, top and bottom: a row of the table's lines that is one line, wide as
a line of text is (:data:`PROSE_WIDTH` line heights, :data:`PROSE_SHARE` of the table's width), without
a blank in its print as wide as a column gutter (a table row the detector found as one box, a header
across the table, has its cells' gutters: it stays the table's).
"""

from __future__ import annotations

from collections.abc import Callable

from models.compact.page.table import table_rows

#: A line of prose is at least this many line heights wide (:func:`models.compact.page.xycut.is_prose`'s
#: wide lines) ...
PROSE_WIDTH = 10.0
#: ... and at least this share of the width of the table's lines (a caption or a note is shorter: it
#: stays a row of the table, uncut) ...
PROSE_SHARE = 0.6
#: ... and its print holds no blank run this many times its height wide (between hanzi ~0.1, after
#: ``，`` or ``：`` under 0.7, between two words ~0.3; between a table's cells 0.8 or more).
PROSE_BLANK = 1.0
#: A table keeps at least this many rows (a table block of a few rows of prose is left as it is).
MIN_TABLE_ROWS = 2

#: ``gapped(line, least)``: whether ``line``'s print holds a blank run at least ``least`` times its
#: height wide (:func:`models.compact.page.regions.gutter_gap` over the line's width).
Gapped = Callable[[object, float], bool]


def prose_rows(lines: list, med_h: float, gapped: Gapped | None = None) -> tuple[list, list, list]:
    """``lines`` (a table's lines: objects with ``box`` x0, y0, x1, y1 in page pixels) as (prose rows on
    top, the table's lines, prose rows at the bottom), each list of lines top to bottom (module
    docstring); ``med_h``: the page's median line height in pixels; ``gapped``: the ink test of a
    line's blanks (:data:`Gapped`; None: none made, the boxes alone decide). Every line is kept once;
    ``([], lines, [])`` when fewer than :data:`MIN_TABLE_ROWS` rows would be left.
    """
    rows = table_rows(lines, med_h)
    if not rows:
        return [], list(lines), []
    x0, x1 = min(ln.box[0] for ln in lines), max(ln.box[2] for ln in lines)

    def prose(row: list) -> bool:
        if len(row) != 1:
            return False
        w = row[0].box[2] - row[0].box[0]
        return (w >= PROSE_WIDTH * med_h and w >= PROSE_SHARE * (x1 - x0)
                and (gapped is None or not gapped(row[0], PROSE_BLANK)))

    lo, hi = 0, len(rows)
    while lo < hi and prose(rows[lo]):
        lo += 1
    while hi > lo and prose(rows[hi - 1]):
        hi -= 1
    if hi - lo < MIN_TABLE_ROWS:
        return [], list(lines), []
    return ([ln for r in rows[:lo] for ln in r], [ln for r in rows[lo:hi] for ln in r],
            [ln for r in rows[hi:] for ln in r])
