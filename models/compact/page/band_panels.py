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
panel's and the right panel's, read one after the other (:func:`regroup_panels`).
"""

from __future__ import annotations

from models.compact.page.bands import page_gaps, text_column
from models.compact.page.boxes import centre_x, centre_y
from models.compact.page.layout import IMAGE, TABLE, TEXT
from models.compact.page.order import Group, lines_box
from models.compact.page.xycut import panel_cut


def regroup_panels(groups: list[Group], med_h: float) -> list[Group]:
    """``groups`` with every band of side-by-side panels (module docstring) made two text groups, in
    the place of the first group of the band; groups are otherwise kept as given, in their order.
    A band is regrouped only when every group with lines in it lies wholly in it and none is a column
    of text (:func:`models.compact.page.bands.text_column`). ``med_h``: the page's median line height
    in pixels. Every line is kept exactly once.
    """
    cuts = page_gaps(groups, med_h)
    edges = [float("-inf"), *cuts, float("inf")]
    out = list(groups)
    for lo, hi in zip(edges, edges[1:], strict=False):
        members = [g for g in out if g.kind != IMAGE and any(lo <= centre_y(ln) < hi for ln in g.lines)]
        if len(members) < 2 and not (members and members[0].kind == TABLE):
            continue  # one text block: its own reading order finds its panels
        if any(not all(lo <= centre_y(ln) < hi for ln in g.lines) or text_column(g.lines, med_h) for g in members):
            continue
        lines = [ln for g in members for ln in g.lines]
        x = panel_cut(lines, med_h)
        if x is None:
            continue
        left = [ln for ln in lines if centre_x(ln) < x]
        right = [ln for ln in lines if centre_x(ln) >= x]
        at = out.index(members[0])
        out = [g for g in out if not any(g is m for m in members)]
        out[at:at] = [Group(TEXT, lines_box(left), left), Group(TEXT, lines_box(right), right)]
    return out
