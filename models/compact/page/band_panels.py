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
from models.compact.page.boxes import centre_x, centre_y
from models.compact.page.layout import IMAGE, TABLE, TEXT, interval_gaps
from models.compact.page.order import Group, lines_box
from models.compact.page.xycut import SECTION_GAP, SECTION_RATIO, median_row_gap, panel_cut


def regroup_panels(groups: list[Group], med_h: float) -> list[Group]:
    """``groups`` with every band of side-by-side panels (module docstring) made two text groups, in
    the place of the first group of the band; groups are otherwise kept as given, in their order.
    A band cut by section gaps (:data:`models.compact.page.xycut.SECTION_GAP`) is taken section by
    section, when one of its sections is panels. A band is
    regrouped only when none of the groups with lines in it is a column of text
    (:func:`models.compact.page.bands.text_column`). A group that runs on above or below the band (a
    block of the analysis holding one panel's last row and the rows of the next section) gives up its
    lines in the band; what it keeps above and below the band stay groups of its kind, in its place.
    ``med_h``: the page's median line height in pixels. Every line is kept exactly once.
    """
    cuts = page_gaps(groups, med_h)
    edges = [float("-inf"), *cuts, float("inf")]
    out = list(groups)
    for lo, hi in zip(edges, edges[1:], strict=False):
        sections = [lo, *_section_cuts(out, lo, hi, med_h), hi]
        regrouped = out
        for s_lo, s_hi in zip(sections, sections[1:], strict=False):
            regrouped = _regroup_band(regrouped, s_lo, s_hi, med_h)
        # no section is panels (a heading cut off its panels): the band as a whole
        out = regrouped if len(sections) > 2 and regrouped is not out else _regroup_band(out, lo, hi, med_h)
    return out


def _band_lines(g: Group, lo: float, hi: float) -> list:
    return [ln for ln in g.lines if lo <= centre_y(ln) < hi]


def _section_cuts(groups: list[Group], lo: float, hi: float, med_h: float) -> list[float]:
    """Page y (pixels) of the middles of the section gaps (:data:`models.compact.page.xycut.SECTION_GAP`)
    between the lines of ``groups`` whose centres lie in [``lo``, ``hi``); [] when no block there has
    two rows (no row gap to measure against).
    """
    typical = median_row_gap([_band_lines(g, lo, hi) for g in groups if g.kind != IMAGE], med_h)
    if typical is None:
        return []
    least = max(SECTION_GAP * med_h, SECTION_RATIO * typical)
    spans = [(ln.box[1], ln.box[3]) for g in groups if g.kind != IMAGE for ln in _band_lines(g, lo, hi)]
    return [(a + b) / 2 for a, b in interval_gaps(spans) if b - a >= least]


def _regroup_band(out: list[Group], lo: float, hi: float, med_h: float) -> list[Group]:
    """``out`` with the lines whose centres lie in [``lo``, ``hi``) made two panels' text groups when
    they are (see :func:`regroup_panels`), else ``out`` unchanged.
    """
    members = [g for g in out if g.kind != IMAGE and _band_lines(g, lo, hi)]
    if len(members) < 2 and not (members and members[0].kind == TABLE):
        return out  # one text block: its own reading order finds its panels
    if any(text_column(g.lines, med_h) for g in members):
        return out
    lines = [ln for g in members for ln in _band_lines(g, lo, hi)]
    x = panel_cut(lines, med_h)
    if x is None:
        return out
    left = [ln for ln in lines if centre_x(ln) < x]
    right = [ln for ln in lines if centre_x(ln) >= x]
    at = out.index(members[0])
    rest = [_outside(g, lo, hi) if any(g is m for m in members) else [g] for g in out]
    return ([h for part in rest[:at] for h in part] + [Group(TEXT, lines_box(left), left),
                                                       Group(TEXT, lines_box(right), right)]
            + [h for part in rest[at:] for h in part])


def _outside(g: Group, lo: float, hi: float) -> list[Group]:
    """What is left of ``g`` without its lines whose centres lie in [``lo``, ``hi``): a group of its
    kind with its lines above the band and one with those below it, each only if it holds lines.
    """
    above = [ln for ln in g.lines if centre_y(ln) < lo]
    below = [ln for ln in g.lines if centre_y(ln) >= hi]
    return [Group(g.kind, lines_box(part), part) for part in (above, below) if part]
