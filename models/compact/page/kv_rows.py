"""A column of values beside the column of their labels, read row by row with them.

An invoice's totals (Subtotal / Tax / Total) put their labels at a tab stop in the middle of the page
and their amounts right-aligned at the page's right margin, under the items table's amount column --
eight to ten line heights apart, as on the invoices of most billing software (the amounts stand in the
column they sum). The page analysis makes the labels one block (or one per row) and the amounts
another; too far apart for :func:`models.compact.page.bands.join_key_values` (a form's tab stop,
:data:`models.compact.page.bands.KV_GAP` line heights), they were read column by column: all the
labels, then all the amounts (``bench/doc_pages.py --seed 600`` page 10, a Chinese invoice: 6.0 % CER
at 0.8 % order-free). A form's key-value rows whose labels the analysis cut into two blocks (two rows
and one) beside one block of their values, left-aligned at the form's tab stop, were read the same way:
:func:`models.compact.page.bands.join_key_values` joins one block of labels to one block of values,
and neither label block sat on 70 % of the values' rows (seed 900 pages 0 and 6, English forms: 19 %
and 34 % CER at 0.2-0.4 % order-free).

:func:`join_far_values` makes them one text block, read row by row (its reading order,
:func:`models.compact.page.xycut.reading_order`, keeps a row's label and value together), when the
geometry says key-value rows: the values are a column of short lines, one per row, at one tab stop --
right-aligned (their right edges within :data:`models.compact.page.xycut.VALUE_ALIGN` line heights of
their median, :data:`models.compact.page.tab_stops.ALIGNED_SHARE` of them, as a column of amounts is, or
of a line leaning by up to :data:`models.compact.page.tab_stops.MAX_LEAN`; any distance from the labels)
or left-aligned (left edges so; at most ``KV_GAP`` line heights right of the labels, or farther but
starting left of the page's middle, :func:`_form_pairs`: a column starting in the page's right half
beside others is a panel, an address, read panel by panel) --, the labels are short lines of text
blocks wholly on the values' rows, one label for each value row and one value for each label row, and
nothing else on the page stands right of a label on those rows, between it and its value or after the
value, and no short line (a cell) before the label (two columns of a table with a third beside them
are the table's, not a key and its value; a note or bank details left of the totals, lines over
:data:`models.compact.page.bands.KV_LABEL_WIDTH` line heights, may be there). A column of prose is
not a label block (:func:`models.compact.page.bands.text_column`).

Scanned and photographed forms (:mod:`training.compact.scan_docs`: values typed at a tab stop 2.2 in
from the labels' margin, 4-10 line heights right of them, on underlines or in boxes) were read all
labels first, then all values (``bench/receipts.py --docs 12``: form_photo 48-54 % CER at under 1 %
order-free): the values were farther than ``KV_GAP`` and the analysis gives one block per field or
per few fields, so the labels of one column (:func:`_run`) and the values on their rows
(:func:`_stacked_values`) are gathered across blocks first. What tells such a pair of columns from
side-by-side panels (an invoice's bill-to | ship-to, its rows paired one for one too) is where the
right column starts: a page cut into two panels or two columns cuts it near its middle, a form's
tab stop stands in its left part (:data:`HALF_PAGE`). The joined group is read row by row
(:attr:`models.compact.page.order.Group.rows`): its reading order by XY-cut would take the gutter
between labels and values for a panel gutter (:data:`models.compact.page.xycut.PANEL_GAP`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from models.compact.page.bands import KV_GAP, KV_LABEL_WIDTH, text_column
from models.compact.page.boxes import centre_y
from models.compact.page.layout import TEXT, interval_gaps
from models.compact.page.order import Group, lines_box
from models.compact.page.tab_stops import aligned
from models.compact.page.xycut import PANEL_GAP, row_groups

#: Where a line's ink starts and ends (page x, pixels): a left-aligned column of values is aligned by its
#: ink, and a label's width measured on it, not on the detector's boxes, which reach up to 1 line height
#: past the print where the detector cut a label and its value out of one line (``bench/doc_pages.py
#: --seed 900`` page 0: value boxes at 418-449 px over values printed at 456, two in six off by more than
#: :data:`models.compact.page.xycut.VALUE_ALIGN`; a label's box 8.1 line heights wide over 7.6 of print).
InkSpan = Callable[[Any], tuple[float, float]]

#: A value column holds at least this many rows (one label beside one value is a line, not a list).
MIN_ROWS = 2


def _row_of(line, rows: list[float], med_h: float) -> int | None:
    """Index of the row centre in ``rows`` (page y, pixels) within half a line height of ``line``'s centre."""
    cy = centre_y(line)
    hits = [i for i, c in enumerate(rows) if abs(cy - c) < med_h / 2]
    return hits[0] if len(hits) == 1 else None


def _value_column(g: Group, med_h: float, ink: InkSpan | None = None) -> tuple[list[float], bool] | None:
    """The row centres (page y, pixels, top to bottom) of ``g`` when it is a column of short values at
    one tab stop (module docstring), and whether they are right-aligned (else left-aligned); None
    when it is not such a column. ``ink``: a line's ink span (page x, pixels) for the left-aligned
    test (:data:`InkSpan`); default its detector box's.
    """
    if g.kind != TEXT or len(g.lines) < MIN_ROWS or text_column(g.lines, med_h):
        return None
    rows = row_groups(g.lines, med_h)
    if len(rows) != len(g.lines):  # two lines on one row: not one column
        return None
    ys = [centre_y(ln) for ln in g.lines]
    right = aligned([ln.box[2] for ln in g.lines], med_h, ys)
    if right and any(ln.box[2] - ln.box[0] > KV_LABEL_WIDTH * med_h for ln in g.lines):
        return None
    if not right and not aligned([ink(ln)[0] if ink else ln.box[0] for ln in g.lines], med_h, ys):
        return None
    return [centre_y(r[0]) for r in rows], right


def _title(g: Group, values: Group, med_h: float) -> object | None:
    """The first line of ``g`` when it is a title over the labels of ``values``: the one line of ``g``
    that ends above the values' top (by a quarter line height), topmost, over other lines; else None.
    The analysis made a form's title and its first labels one block (``bench/receipts.py`` seed
    35011: "INVOICE" over "City:", "Employer:", "Address:", read before all the labels and values).
    """
    above = [ln for ln in g.lines if ln.box[3] <= values.box[1] + 0.25 * med_h]
    return above[0] if len(above) == 1 and len(g.lines) > 1 else None


def _labels_for(values: Group, rows: list[float], groups: list[Group], med_h: float,
                ink: InkSpan | None = None, panel_from: float | None = None) -> list[Group] | None:
    """The text groups left of ``values`` that hold its labels, or None: taken nearest first (by right
    edge), each with every line on one of ``rows`` and none on a row already labelled, until every row
    has one label (text further left on those rows -- a note, bank details beside an invoice's
    totals -- is not a label). None too when the labels are long lines or a column of text, or when
    another line stands right of a label on its row (between it and its value or after the value),
    or left of it and short (a cell: the labels are then a table's middle column). Lines starting at
    or right of ``panel_from`` (page x, pixels; :func:`_panel_from`) are a panel beside, not a third column.
    """
    left = sorted((g for g in groups if g is not values and g.kind == TEXT and g.lines
                   and g.box[2] <= values.box[0] and min(g.box[3], values.box[3]) > max(g.box[1], values.box[1])),
                  key=lambda g: -g.box[2])
    labels: list[Group] = []
    taken: set[int] = set()
    titles: list = []
    for g in left:
        title = _title(g, values, med_h)
        at = [_row_of(ln, rows, med_h) for ln in g.lines if ln is not title]
        if any(i is None or i in taken for i in at) or len(set(at)) != len(at):
            continue
        labels.append(g)
        titles += [title] if title is not None else []
        taken.update(i for i in at if i is not None)
        if len(taken) == len(rows):
            break
    lines = [ln for g in labels for ln in g.lines if not any(ln is t for t in titles)]
    if len(taken) != len(rows) or len(lines) != len(rows):
        return None
    spans = [ink(ln) if ink else (ln.box[0], ln.box[2]) for ln in lines]
    if text_column(lines, med_h) or any(x1 - x0 > KV_LABEL_WIDTH * med_h for x0, x1 in spans):
        return None
    label_end = {_row_of(ln, rows, med_h): ln.box[2] for ln in lines}
    for g in groups:
        if g is values or any(g is lb for lb in labels):
            continue
        for ln in g.lines:
            i = _row_of(ln, rows, med_h)
            if panel_from is not None and ln.box[0] >= panel_from:
                continue
            if i is not None and ((ln.box[0] + ln.box[2]) / 2 >= label_end[i]
                                  or ln.box[2] - ln.box[0] <= KV_LABEL_WIDTH * med_h):
                return None  # a third column between them, after them or short before: a table's
    return labels


#: A column starting at or right of this share of the page's width is the right half of a page cut in
#: two (side-by-side panels: bill-to | ship-to, two prose columns, a form's two key-value panels, all at
#: 0.49-0.53 of the width on ``bench/doc_pages.py`` pages); a form's tab stop stands after its labels, in the
#: page's left part (0.33-0.35 on the forms of :mod:`training.compact.scan_docs`, scanned or photographed).
HALF_PAGE = 0.45


def _form_pairs(labels: list[Group], values: Group, med_h: float, page_width: float | None) -> bool:
    """Whether left-aligned ``values`` stand at a form's tab stop from ``labels``: within
    :data:`models.compact.page.bands.KV_GAP` line heights of the labels, or farther but left of the
    page's middle (:data:`HALF_PAGE` of ``page_width`` pixels; None: not farther).
    """
    gap = values.box[0] - max(g.box[2] for g in labels)
    if gap <= KV_GAP * med_h:
        return True
    return page_width is not None and values.box[0] < HALF_PAGE * page_width


#: Stacked blocks of one form's labels are at most this many line heights apart (a form's row pitch
#: leaves 0.5-1.5 between rows; a section gap, 2 or more, ends the column).
RUN_GAP = 2.0


def _run(seed: Group, groups: list[Group], med_h: float) -> list[Group]:
    """``seed`` and the text groups stacked above and below it at its left edge (within a line height)
    with nothing but such groups between: the page analysis' blocks of one column of a form's labels,
    a block per field or per few fields (top to bottom); [] when ``seed`` is not a column of short
    lines, one per row (:data:`models.compact.page.bands.KV_LABEL_WIDTH`).
    """
    def short_column(g: Group) -> bool:
        return (g.kind == TEXT and not g.rows and bool(g.lines)
                and all(ln.box[2] - ln.box[0] <= KV_LABEL_WIDTH * med_h for ln in g.lines)
                and len(row_groups(g.lines, med_h)) == len(g.lines))

    if not short_column(seed):
        return []
    x0 = seed.box[0]
    stack = sorted((g for g in groups if short_column(g) and abs(g.box[0] - x0) <= med_h), key=lambda g: g.box[1])
    at = next(i for i, g in enumerate(stack) if g is seed)
    lo = hi = at
    while lo > 0 and stack[lo].box[1] - stack[lo - 1].box[3] <= RUN_GAP * med_h:
        lo -= 1
    while hi + 1 < len(stack) and stack[hi + 1].box[1] - stack[hi].box[3] <= RUN_GAP * med_h:
        hi += 1
    return stack[lo:hi + 1]


def _stacked_values(labels: Group, groups: list[Group], med_h: float) -> list[list[Group]]:
    """Columns of values beside the column ``labels`` (lines one per row): the text groups right of
    it, taken nearest first (by left edge), each with every line on one of its rows (centres within
    half a line height) and none on a row already taken; cut where a row of ``labels`` has no value
    (a title, a section's heading: the column of one section ends there). Each column holds groups
    with at least :data:`MIN_ROWS` rows, top to bottom; [] when there is none.
    """
    rows = row_groups(labels.lines, med_h)
    if len(labels.lines) < MIN_ROWS or len(rows) != len(labels.lines):
        return []
    centres = [centre_y(r[0]) for r in rows]
    right = sorted((g for g in groups if g.kind == TEXT and not g.rows and g.lines
                    and g.box[0] >= labels.box[2] and min(g.box[3], labels.box[3]) > max(g.box[1], labels.box[1])),
                   key=lambda g: g.box[0])
    owner: dict[int, Group] = {}
    for v in right:
        at = [_row_of(ln, centres, med_h) for ln in v.lines]
        if any(i is None or i in owner for i in at) or len(set(at)) != len(at):
            continue
        owner.update((i, v) for i in at if i is not None)
    columns: list[list[Group]] = []
    run: list[Group] = []
    for i in range(len(rows) + 1):
        value = owner.get(i)
        if value is None:  # no value on this row (or past the last): the column so far ends
            if sum(len(v.lines) for v in run) >= MIN_ROWS:
                columns.append(run)
            run = []
        elif not any(value is v for v in run):
            run.append(value)
    return columns


def _panel_from(values: Group, med_h: float, page_width: float | None) -> float | None:
    """Page x (pixels) from which lines right of ``values`` are a panel beside its key-value rows, not a
    third column of theirs: in the page's right half (:data:`HALF_PAGE` of ``page_width``; None when
    unknown) and a panel gutter (:data:`models.compact.page.xycut.PANEL_GAP` line heights) past the
    values (``bench/doc_pages.py --seed 1200`` page 0: a form's two key-value panels side by side, the
    left one's labels cut into two blocks, read all labels then all values: 7.2 % CER at 0.0 % order-free).
    """
    return None if page_width is None else max(HALF_PAGE * page_width, values.box[2] + PANEL_GAP * med_h)


def _pairs(values: Group, groups: list[Group], med_h: float, page_width: float | None,
           ink: InkSpan | None = None) -> list[Group] | None:
    """The label groups of the value column ``values`` (module docstring), or None."""
    column = _value_column(values, med_h, ink)
    labels = None if column is None else _labels_for(values, column[0], groups, med_h, ink,
                                                     _panel_from(values, med_h, page_width))
    if not labels or not (column and column[1]) and not _form_pairs(labels, values, med_h, page_width):
        return None  # left-aligned values farther right than a form's tab stop: a panel beside
    return labels


def _joined(out: list[Group], members: list[Group]) -> list[Group]:
    """``out`` with ``members`` made one text group read row by row, in the place of the first of them."""
    lines = [ln for g in members for ln in g.lines]
    at = min(i for i, g in enumerate(out) if any(g is m for m in members))
    out = [g for g in out if not any(g is m for m in members)]
    out.insert(at, Group(TEXT, lines_box(lines), lines, rows=True))
    return out


def _paired_inside(g: Group, groups: list[Group], med_h: float, page_width: float | None,
                   ink: InkSpan | None = None) -> list[Group] | None:
    """The text group ``g`` (one block of the analysis, or blocks joined by the steps before) as
    [title, key-value rows] ([key-value rows] without a title) when it is a column of labels and the
    column of their values (module docstring) under at most one title row: its rows but a first one
    of one line (a title standing over the fields, at the labels' margin) cut at the widest gap
    between their lines' x extents into a left and a right column that :func:`_pairs` pairs,
    ``groups`` the page's other groups; None when it is not. Such a block (a scanned form's fields
    that the analysis found as one table block, ``bench/receipts.py`` seed 10009; a photographed
    form's title and first two fields one block, seed 10000) was read by XY-cut as two side-by-side
    panels, all labels then all values (55 % and 11 % CER at 0.4 % and 0.2 % order-free).
    """
    if g.kind != TEXT or g.rows:
        return None
    rows = row_groups(g.lines, med_h)
    title = rows[0] if len(rows) > 1 and len(rows[0]) == 1 else []
    lines = [ln for ln in g.lines if not any(ln is t for t in title)]
    gaps = interval_gaps([(ln.box[0], ln.box[2]) for ln in lines])
    if len(lines) < 2 * MIN_ROWS or not gaps:
        return None
    g0, g1 = max(gaps, key=lambda ab: ab[1] - ab[0])
    mid = (g0 + g1) / 2
    left = [ln for ln in lines if (ln.box[0] + ln.box[2]) / 2 < mid]
    right = [ln for ln in lines if (ln.box[0] + ln.box[2]) / 2 >= mid]
    lg, rg = Group(TEXT, lines_box(left), left), Group(TEXT, lines_box(right), right)
    labels = _pairs(rg, [lg, rg, *(o for o in groups if o is not g)], med_h, page_width, ink)
    if labels is None or len(labels) != 1 or labels[0] is not lg:
        return None
    kv = Group(TEXT, lines_box(lines), lines, rows=True)
    return [Group(TEXT, lines_box(title), title), kv] if title else [kv]


def join_far_values(groups: list[Group], med_h: float, page_width: float | None = None,
                    ink: InkSpan | None = None) -> list[Group]:
    """``groups`` with each column of values at a tab stop and the text groups of its labels left of it
    (module docstring) made one text group, in the place of the first of them; other groups
    unchanged, in their order. ``med_h``: the page's median line height in pixels; ``ink``: where a
    line's print starts and ends (:data:`InkSpan`; default its detector box's edges). Every line is kept
    exactly once.
    """
    out = list(groups)
    for g in list(groups):
        if not any(g is o for o in out):
            continue
        inside = _paired_inside(g, out, med_h, page_width, ink)
        if inside is not None:
            at = next(i for i, o in enumerate(out) if o is g)
            out[at:at + 1] = inside
            continue
        labels = _pairs(g, out, med_h, page_width, ink)
        if labels:
            out = _joined(out, [*labels, g])
            continue
        run = _run(g, out, med_h)
        llines = [ln for r in run for ln in r.lines]
        for stacked in _stacked_values(Group(TEXT, lines_box(llines), llines), out, med_h) if run else []:
            if len(stacked) < 2:
                continue  # one block of values: tried as such
            vlines = [ln for v in stacked for ln in v.lines]
            column = Group(TEXT, lines_box(vlines), vlines)
            trial = [column if o is stacked[0] else o for o in out if not any(o is v for v in stacked[1:])]
            labels = _pairs(column, trial, med_h, page_width, ink)
            if labels:
                out = _joined(out, [*labels, *stacked])
    return out
