"""Key-value panels of a form read panel by panel across the page analysis' blocks.

Tesseract's blocks do not follow a form's panels: two key-value panels side by side come as one
table block read row by row across both (the label of the left panel, its value, then the label of
the right one), or a panel's last rows fall into a block of their own below the first rows and the
panel beside them (read after the right-hand panel). Where the page's lines leave a gap across the
whole page (:func:`models.compact.page.bands.page_gaps`), the lines between two such gaps are a band;
a band held by several blocks (or by a table block), none of them a column of text, whose lines are
two panels side by side (:func:`models.compact.page.xycut.panel_cut`: each side left-aligned rows of
a label or a label and its value, the labels ragged, the values at one tab stop, a gutter of at
least :data:`models.compact.page.xycut.PANEL_GAP` line heights) is made two text blocks, the left
panel's and the right panel's, read one after the other (:func:`regroup_panels`). A block that runs
on out of the band (one table block holding a panel's last row and the whole next section below the
gap) gives up its lines in the band and keeps the rest: the analysis' blocks do not stop at a form's
section gaps, and a band was left unread as panels whenever one of them ran across (a form at 36 %
CER, 0.2 % order-free: the right panel read first, as table cells).
"""

from __future__ import annotations

from models.compact.page.bands import page_gaps, text_column
from models.compact.page.layout import IMAGE, TABLE, TEXT
from models.compact.page.order import Group, lines_box
from models.compact.page.xycut import panel_cut


def _cy(line) -> float:
    return (line.box[1] + line.box[3]) / 2


def _cx(line) -> float:
    return (line.box[0] + line.box[2]) / 2


def regroup_panels(groups: list[Group], med_h: float) -> list[Group]:
    """``groups`` with every band of side-by-side panels (module docstring) made two text groups, in
    the place of the first group of the band; groups are otherwise kept as given, in their order.
    A band is regrouped only when none of the groups with lines in it is a column of text
    (:func:`models.compact.page.bands.text_column`). A group that runs on above or below the band (a
    block of the analysis holding one panel's last row and the rows of the next section) gives up its
    lines in the band; what it keeps above and below the band stay groups of its kind, in its place.
    ``med_h``: the page's median line height in pixels. Every line is kept exactly once.
    """
    cuts = page_gaps(groups, med_h)
    edges = [float("-inf"), *cuts, float("inf")]
    out = list(groups)
    for lo, hi in zip(edges, edges[1:], strict=False):
        members = [g for g in out if g.kind != IMAGE and any(lo <= _cy(ln) < hi for ln in g.lines)]
        if len(members) < 2 and not (members and members[0].kind == TABLE):
            continue  # one text block: its own reading order finds its panels
        if any(text_column(g.lines, med_h) for g in members):
            continue
        lines = [ln for g in members for ln in g.lines if lo <= _cy(ln) < hi]
        x = panel_cut(lines, med_h)
        if x is None:
            continue
        left = [ln for ln in lines if _cx(ln) < x]
        right = [ln for ln in lines if _cx(ln) >= x]
        at = out.index(members[0])
        rest = [_outside(g, lo, hi) if any(g is m for m in members) else [g] for g in out]
        out = [h for part in rest[:at] for h in part] + [Group(TEXT, lines_box(left), left),
                                                         Group(TEXT, lines_box(right), right)]
        out += [h for part in rest[at:] for h in part]
    return out


def _outside(g: Group, lo: float, hi: float) -> list[Group]:
    """What is left of ``g`` without its lines whose centres lie in [``lo``, ``hi``): a group of its
    kind with its lines above the band and one with those below it, each only if it holds lines.
    """
    above = [ln for ln in g.lines if _cy(ln) < lo]
    below = [ln for ln in g.lines if _cy(ln) >= hi]
    return [Group(g.kind, lines_box(part), part) for part in (above, below) if part]
