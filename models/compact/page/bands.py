"""Region groups cut into bands where the page's lines leave a gap across the whole page, so that the
reading order (:func:`models.compact.page.order.xy_cut`) can read a form or an invoice band by band.

Tesseract's blocks on forms and invoices are coarse: a column of key-value rows runs down the page
as one block past the sections beside it (the right-hand panel of section 1 was read after the
signature line), and an invoice's bill-to and ship-to panels come inside the items table's block (its
rows read across both panels). Two cuts, at gaps between the page's lines at least
:data:`BAND_GAP` line heights tall (every line of the page above or below them):

* a block that is not prose (:func:`models.compact.page.xycut.is_prose`) and has another block beside
  it (sharing some of its height, apart in x) is cut at every such gap within it (a table block's
  bands that are side-by-side panels become text blocks);
* a table block's bands that are side-by-side panels (:func:`models.compact.page.xycut.panel_cut`)
  are taken out of the table as text blocks of their own; its other bands stay one table.
"""

from __future__ import annotations

from models.compact.page.layout import IMAGE, TABLE, TEXT, interval_gaps
from models.compact.page.order import Group, lines_box
from models.compact.page.xycut import is_prose, panel_cut

#: Gap across the page (in median line heights) that separates bands: above a text's interline gap
#: (0.2-0.5) and a table's row gap, at or below a form's section gap or an invoice's band gap.
BAND_GAP = 0.8


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
    out = [[ln for ln in g.lines if a <= (ln.box[1] + ln.box[3]) / 2 < b] for a, b in zip(edges, edges[1:], strict=False)]
    return [p for p in out if p]


def split_bands(groups: list[Group], med_h: float) -> list[Group]:
    """``groups`` with the cuts of the module docstring made (every line kept exactly once, in one
    group); ``med_h``: the page's median line height in pixels. Groups come back in the order given,
    each cut group's pieces in its place, top to bottom.
    """
    cuts = page_gaps(groups, med_h)
    if not cuts:
        return list(groups)
    out: list[Group] = []
    for g in groups:
        if g.kind == IMAGE or not g.lines:
            out.append(g)
            continue
        pieces = _pieces(g, cuts)
        if len(pieces) < 2:
            out.append(g)
        elif not is_prose(g.lines, med_h) and _beside(g, groups):
            out += [Group(TEXT if g.kind == TABLE and panel_cut(p, med_h) is not None else g.kind, lines_box(p), p)
                    for p in pieces]
        elif g.kind == TABLE:
            out += _peel_panels(pieces, med_h)
        else:
            out.append(g)
    return out


def _peel_panels(pieces: list[list], med_h: float) -> list[Group]:
    """A table group's bands (``pieces``, top to bottom): each band of side-by-side panels a text
    group, each run of other bands one table group.
    """
    out: list[Group] = []
    run: list = []
    for p in pieces:
        if panel_cut(p, med_h) is not None:
            if run:
                out.append(Group(TABLE, lines_box(run), run))
                run = []
            out.append(Group(TEXT, lines_box(p), p))
        else:
            run = run + p
    if run:
        out.append(Group(TABLE, lines_box(run), run))
    return out
