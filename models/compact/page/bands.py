"""Region groups cut into bands where the page's lines leave a gap across the whole page, so that the
reading order (:func:`models.compact.page.order.xy_cut`) can read a form or an invoice band by band.

Tesseract's blocks on forms and invoices are coarse: a column of key-value rows runs down the page
as one block past the sections beside it (the right-hand panel of section 1 was read after the
signature line), and an invoice's bill-to and ship-to panels come inside the items table's block (its
rows read across both panels). Blocks of labels and blocks of their values beside them are first joined
(:func:`join_key_values`); then two cuts, at gaps between the page's lines at least
:data:`BAND_GAP` line heights tall (every line of the page above or below them):

* a block that is not a column of text (:func:`text_column`) and has another block beside
  it (sharing some of its height, apart in x) is cut at every such gap within it (a table block's
  bands that are side-by-side panels become text blocks);
* a table block's bands that are side-by-side panels (:func:`models.compact.page.xycut.panel_cut`)
  are taken out of the table as text blocks of their own, and so are its bands that are one key-value
  panel (:func:`kv_list`: values left-aligned at one tab stop, not right-aligned numbers); its other
  bands stay one table (a table block that is two panels, uncut, is a text block).
"""

from __future__ import annotations

from models.compact.page.layout import IMAGE, TABLE, TEXT, interval_gaps
from models.compact.page.order import Group, lines_box
from models.compact.page.table import BESIDE_MAX_WIDTH
from models.compact.page.xycut import (
    PANEL_GAP,
    VALUE_ALIGN,
    is_panel,
    is_prose,
    panel_cut,
    row_groups,
    value_lefts,
)

#: Gap across the page (in median line heights) that separates bands: above a text's interline gap
#: (0.2-0.5) and a table's row gap, at or below a form's section gap or an invoice's band gap.
BAND_GAP = 0.8


#: A block of values beside a block of labels: the values start at most this many line heights right of
#: the labels' block (a form's tab stop; farther apart they are panels or columns) ...
KV_GAP = 3.0
#: ... and at least this share of each block's lines sit on a row of the other (centres within half a
#: line height).
KV_ROW_SHARE = 0.7
#: ... and the labels' median width is at most this many line heights (a label: "Signature date:", 6).
KV_LABEL_WIDTH = 8.0


#: A block is a column of text (not labels, not values) when at least this share of its lines, and
#: at least FILLED_MIN_LINES, end within FILLED_EDGE line heights of its right edge and its lines'
#: median width is at least FILLED_MIN_WIDTH line heights (a narrow column of a three-column page,
#: 9-10 line heights, is not prose by :func:`models.compact.page.xycut.is_prose`'s width, but its lines
#: fill it; a form's labels and values are ragged or short: 4-6 line heights).
FILLED_SHARE, FILLED_MIN_LINES, FILLED_EDGE, FILLED_MIN_WIDTH = 0.6, 4, 1.5, 7.0


def text_column(lines: list, med_h: float) -> bool:
    """Whether ``lines`` read as a column of text: prose (:func:`is_prose`) or filled to its right edge
    (:data:`FILLED_SHARE`); ``med_h``: the page's median line height in pixels.
    """
    if is_prose(lines, med_h):
        return True
    widths = sorted(ln.box[2] - ln.box[0] for ln in lines)
    if len(lines) < FILLED_MIN_LINES or widths[len(widths) // 2] < FILLED_MIN_WIDTH * med_h:
        return False
    right = max(ln.box[2] for ln in lines)
    return sum(1 for ln in lines if right - ln.box[2] <= FILLED_EDGE * med_h) >= FILLED_SHARE * len(lines)


def join_key_values(groups: list[Group], med_h: float) -> list[Group]:
    """``groups`` with each pair of side-by-side text blocks that are a column of labels and the column
    of their values made one block (read row by row: a label with its value, not all the labels
    first): neither is prose, both hold two lines or more, the labels are short
    (:data:`KV_LABEL_WIDTH`), the right one starts within :data:`KV_GAP` line heights of the left
    one's right edge, and :data:`KV_ROW_SHARE` of the lines of each share a row with a line of the
    other. A non-prose block of cells right of a table block (its lines' median width at most
    :data:`models.compact.page.table.BESIDE_MAX_WIDTH` line heights), :data:`KV_ROW_SHARE` of its lines
    on the table's rows, joins the table whatever the gap (an invoice's amount column, the values of its
    totals); a block of the next text column's lines does not (see :func:`_key_values`). A text block
    inside another's box, on its rows, joins it (:func:`_inside`). ``med_h``: the page's median line
    height in pixels. Every line is kept exactly once.
    """
    out = list(groups)
    joined = True
    while joined:
        joined = False
        for a in out:
            b = next((b for b in out if b is not a and (_key_values(a, b, med_h) or _inside(b, a, med_h))), None)
            parts = [b] if b is not None else _split_values(a, out, med_h)
            if parts:
                lines = a.lines + [ln for p in parts for ln in p.lines]
                out[out.index(a)] = Group(a.kind, lines_box(lines), lines)
                for p in parts:
                    out.remove(p)
                joined = True
                break
    return out


def _key_values(a: Group, b: Group, med_h: float) -> bool:
    """Whether ``b`` is the column of values of the labels ``a``, or a column of the table ``a``, to
    its right (see :func:`join_key_values`).
    """
    if IMAGE in (a.kind, b.kind) or b.kind == TABLE or not a.lines or not b.lines or b.box[0] < a.box[2]:
        return False
    if text_column(a.lines, med_h) or text_column(b.lines, med_h):
        return False
    if a.kind == TABLE:  # a column the analysis left out of its table, however far right ...
        # ... but cells, not lines of text: a two-column paper's references (first entries a table
        # region of the left column) took in the right column's two lines on their rows, 23 line
        # heights wide (pdfjs_tracemonkey_14p page 14: both columns' lines read interleaved).
        b_widths = sorted(ln.box[2] - ln.box[0] for ln in b.lines)
        return (b_widths[len(b_widths) // 2] <= BESIDE_MAX_WIDTH * med_h
                and _on_rows(b.lines, a.lines, med_h) >= KV_ROW_SHARE)
    widths = sorted(ln.box[2] - ln.box[0] for ln in a.lines)
    if min(len(a.lines), len(b.lines)) < 2 or widths[len(widths) // 2] > KV_LABEL_WIDTH * med_h:
        return False  # one line beside one line, or long lines: headings or text of adjacent columns
    return (b.box[0] - a.box[2] <= KV_GAP * med_h and _on_rows(a.lines, b.lines, med_h) >= KV_ROW_SHARE
            and _on_rows(b.lines, a.lines, med_h) >= KV_ROW_SHARE)


def _split_values(a: Group, groups: list[Group], med_h: float) -> list[Group]:
    """The text blocks holding the values of the labels ``a`` when the analysis split its column of
    values into two blocks or more (a long value, an address, a block of its own above the others:
    ``bench/doc_pages.py --seed 3300`` page 3, a Chinese form's section heading and four labels beside
    one value and a block of three, 3 of 5 labels on the larger block's rows, read all the labels first):
    every block right of ``a`` within :data:`KV_GAP` line heights, not a column of text, whose lines
    are :data:`KV_ROW_SHARE` on ``a``'s rows, when there are two or more and together they hold a value
    on the rows of :data:`KV_ROW_SHARE` of ``a``'s lines (``a`` labels as in :func:`_key_values`);
    else []. ``med_h``: the page's median line height in pixels.
    """
    if a.kind != TEXT or len(a.lines) < 2 or text_column(a.lines, med_h):
        return []
    widths = sorted(ln.box[2] - ln.box[0] for ln in a.lines)
    if widths[len(widths) // 2] > KV_LABEL_WIDTH * med_h:
        return []
    parts = [b for b in groups if b is not a and b.kind == TEXT and b.lines
             and 0 <= b.box[0] - a.box[2] <= KV_GAP * med_h and not text_column(b.lines, med_h)
             and _on_rows(b.lines, a.lines, med_h) >= KV_ROW_SHARE]
    values = [ln for b in parts for ln in b.lines]
    if len(parts) < 2 or _on_rows(a.lines, values, med_h) < KV_ROW_SHARE:
        return []
    return parts


#: A block lies inside another when its box is inside the other's grown by this many line heights.
INSIDE_PAD = 0.5


def _inside(b: Group, a: Group, med_h: float) -> bool:
    """Whether the text block ``b`` lies inside the box of the text block ``a`` (grown by
    :data:`INSIDE_PAD` line heights), every line of ``b`` on a row of ``a``'s lines: a piece of ``a``
    the analysis made a block of its own (a key-value panel's last label, its value in the panel's
    value block: ``bench/doc_pages.py --seed 1200`` page 6, the label was read after the panel).
    """
    if TABLE in (a.kind, b.kind) or IMAGE in (a.kind, b.kind) or not a.lines or not b.lines:
        return False
    pad = INSIDE_PAD * med_h
    if not (b.box[0] >= a.box[0] - pad and b.box[1] >= a.box[1] - pad
            and b.box[2] <= a.box[2] + pad and b.box[3] <= a.box[3] + pad):
        return False
    return _on_rows(b.lines, a.lines, med_h) == 1.0


def _on_rows(lines: list, others: list, med_h: float) -> float:
    """Share of ``lines`` whose centre lies within half a line height of the centre of one of ``others``."""
    cy = [(ln.box[1] + ln.box[3]) / 2 for ln in others]
    hits = sum(1 for ln in lines if any(abs((ln.box[1] + ln.box[3]) / 2 - c) < med_h / 2 for c in cy))
    return hits / len(lines)


def page_gaps(groups: list[Group], med_h: float) -> list[float]:
    """Page y (pixels) of the middles of the gaps at least :data:`BAND_GAP` x ``med_h`` tall between
    the y extents of all the groups' lines (images' lines included).
    """
    spans = [(ln.box[1], ln.box[3]) for g in groups for ln in g.lines]
    return [(a + b) / 2 for a, b in interval_gaps(spans) if b - a >= BAND_GAP * med_h]


def _beside(g: Group, others: list[Group]) -> bool:
    """Whether a non-image group other than ``g`` shares some of ``g``'s height, apart from it in x."""
    return any(o is not g and o.kind != IMAGE and o.lines and min(g.box[3], o.box[3]) > max(g.box[1], o.box[1])
               and (o.box[0] >= g.box[2] or o.box[2] <= g.box[0]) for o in others)


def _pieces(g: Group, cuts: list[float]) -> list[list]:
    """``g``'s lines split at the y positions ``cuts`` (by line centre), top to bottom, empty ones left out."""
    edges = [float("-inf"), *sorted(c for c in cuts if g.box[1] < c < g.box[3]), float("inf")]
    out = [[ln for ln in g.lines if a <= (ln.box[1] + ln.box[3]) / 2 < b]
           for a, b in zip(edges, edges[1:], strict=False)]
    return [p for p in out if p]


def split_bands(groups: list[Group], med_h: float) -> list[Group]:
    """``groups`` with the cuts of the module docstring made (every line kept exactly once, in one
    group); ``med_h``: the page's median line height in pixels. Groups come back in the order given,
    each cut group's pieces in its place, top to bottom.
    """
    cuts = page_gaps(groups, med_h)
    out: list[Group] = []
    for g in groups:
        if g.kind == IMAGE or not g.lines:
            out.append(g)
            continue
        pieces = _pieces(g, cuts)
        if len(pieces) < 2:  # a table block that is two panels (a form's key-value halves) is text
            out.append(Group(TEXT, g.box, g.lines) if g.kind == TABLE and panel_cut(g.lines, med_h) else g)
        elif not text_column(g.lines, med_h) and _beside(g, groups):
            for p in pieces:
                if g.kind != TABLE or _table_band(p, med_h):
                    out.append(Group(g.kind, lines_box(p), p))
                else:  # one row, or panels, of a table block: text, apart where its parts are far apart
                    out += [Group(TEXT, lines_box(c), c) for c in _apart(p, med_h)]
        elif g.kind == TABLE:
            out += _peel_panels(pieces, med_h)
        else:
            out.append(g)
    return out


def _apart(lines: list, med_h: float) -> list[list]:
    """``lines`` in clusters left to right, cut at gaps across at least :data:`PANEL_GAP` line heights."""
    cuts = [(a + b) / 2 for a, b in interval_gaps([(ln.box[0], ln.box[2]) for ln in lines])
            if b - a >= PANEL_GAP * med_h]
    edges = [float("-inf"), *cuts, float("inf")]
    out = [[ln for ln in lines if a <= (ln.box[0] + ln.box[2]) / 2 < b]
           for a, b in zip(edges, edges[1:], strict=False)]
    return [c for c in out if c]


def _table_band(lines: list, med_h: float) -> bool:
    """Whether a band cut from a table block is still table: more than one row, not panels."""
    rows = interval_gaps([(ln.box[1], ln.box[3]) for ln in lines])
    return bool(rows) and panel_cut(lines, med_h) is None


def _peel_panels(pieces: list[list], med_h: float) -> list[Group]:
    """A table group's bands (``pieces``, top to bottom): each band of side-by-side panels, or that
    is one key-value panel (:func:`kv_list`), a text group; each run of other bands one table group.
    """
    out: list[Group] = []
    run: list = []
    for p in pieces:
        if panel_cut(p, med_h) is not None or kv_list(p, med_h):
            if run:
                out.append(Group(TABLE, lines_box(run), run))
                run = []
            out.append(Group(TEXT, lines_box(p), p))
        else:
            run = run + p
    if run:
        out.append(Group(TABLE, lines_box(run), run))
    return out


def kv_list(lines: list, med_h: float) -> bool:
    """Whether ``lines`` (a band of a table block) are one key-value panel rather than a table: a
    panel (:func:`models.compact.page.xycut.is_panel`) with at least two rows of a label and a value,
    the values left-aligned (their left edges within :data:`models.compact.page.xycut.VALUE_ALIGN`
    line heights) and more ragged on the right than on the left (a column of right-aligned numbers,
    equal in length or not, is a table's). ``med_h``: the median line height in pixels.
    """
    if not is_panel(lines, med_h):
        return False
    rows = row_groups(lines, med_h)
    values = [max(row, key=lambda ln: ln.box[0]).box for row in rows if len(row) == 2]
    if len(values) < 2:
        return False
    lefts = value_lefts(rows, med_h)  # a value's box reaching back to its label: not measured
    left_spread = max(lefts) - min(lefts) if lefts else 0.0
    right_spread = max(v[2] for v in values) - min(v[2] for v in values)
    return left_spread <= VALUE_ALIGN * med_h and right_spread > left_spread
