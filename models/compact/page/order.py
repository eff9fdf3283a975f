"""Reading order of detected text lines from the page's regions (:mod:`models.compact.page.layout`).

1. Each line goes to the text / heading / caption / table region holding most of its area; a line
   that the detector ran across a gutter (large parts in two side-by-side regions) is cut at the
   gutter first -- where the page image shows a gutter's gap in it; a line with ink all across the
   gap between two side-by-side regions makes them one region (:func:`assign`).
   Regions that overlap much (a drop cap's block and its paragraph) are merged.
2. Lines in no such region but inside an image region (figure labels, text in a photo) are that
   region's group, read after the block just above the figure; any other line is a region of its own.
3. A page with a margin column of line numbers (a transcript) keeps its line-level order: the
   numbers are read with their rows (:func:`numbered_lines`).
4. Headers and footers (thin regions in the top / bottom band of the page) are taken out of the
   flow: headers are read first, footers (running footers, page numbers) last.
5. The body's regions are ordered by a recursive XY-cut over region boxes (Nagy & Seth 1984): at
   each step the widest empty band, across or down, splits the set -- a band down the page only
   where both sides are text columns or nothing cuts across (forms and invoices read band by band);
   within a region the lines are ordered by :func:`models.compact.page.xycut.reading_order` (rows of
   a table stay rows, side-by-side panels are read panel by panel).

Every line given comes back exactly once (pieces of a cut line replace it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from models.compact.page.layout import CAPTION, HEADING, IMAGE, TABLE, TEXT, Box, PageLayout, interval_gaps
from models.compact.page.xycut import PANEL_GAP, ROW_BAND_GAP, SECTION_GAP, SECTION_RATIO, is_prose, median_row_gap

#: Share of a line's width that must lie in each of two side-by-side regions for the line to be cut
#: at their gutter (below it, the overhang is the detector's loose box, not a second column's text).
SPLIT_SHARE = 0.2
#: Overlap (of the smaller region's area) above which two regions are one (a drop cap's own block).
MERGE_OVERLAP = 0.3
#: A margin line number is one line at most this many line heights wide ...
LABEL_MAX_WIDTH = 3.0
#: ... and a margin column of them holds at least this many (a few stray labels are not one).
LABEL_MIN_COUNT = 5
#: Header / footer band: this share of the page height at its top and bottom.
MARGIN_BAND = 0.08
#: A header / footer region is at most this many median line heights tall (not a body paragraph).
MARGIN_MAX_LINES = 2.5


@dataclass(eq=False)  # compared by identity: a group is one place on the page
class Group:
    """Lines read together: a region's ``kind``, its ``box`` and its ``lines`` (detector lines);
    ``rows``: read row by row, each row left to right, whatever gutters its columns leave (a form's
    labels and their values, :mod:`models.compact.page.kv_rows`), instead of by XY-cut.
    """

    kind: str
    box: Box
    lines: list = field(default_factory=list)
    rows: bool = False


def _area(b: Box) -> float:
    return max(0.0, b[2] - b[0]) * max(0.0, b[3] - b[1])


def _inter(a: Box, b: Box) -> Box:
    return (max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3]))


def _union(a: Box, b: Box) -> Box:
    return (min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3]))


def lines_box(lines: list) -> Box:
    """The union of the lines' boxes."""
    return (min(ln.box[0] for ln in lines), min(ln.box[1] for ln in lines),
            max(ln.box[2] for ln in lines), max(ln.box[3] for ln in lines))


def _merge_overlapping(groups: list[Group]) -> list[Group]:
    """Groups whose boxes overlap by more than MERGE_OVERLAP of the smaller one merged (repeatedly)."""
    out = list(groups)
    merged = True
    while merged:
        merged = False
        for i in range(len(out)):
            for j in range(i + 1, len(out)):
                a, b = out[i], out[j]
                small = min(_area(a.box), _area(b.box))
                if small > 0 and _area(_inter(a.box, b.box)) > MERGE_OVERLAP * small:
                    kind = TABLE if TABLE in (a.kind, b.kind) else a.kind
                    out[i] = Group(kind, _union(a.box, b.box), a.lines + b.lines)
                    del out[j]
                    merged = True
                    break
            if merged:
                break
    return out


def _split_at_gutters(line, groups: list[Group], make_piece: Callable) -> list:
    """``line`` cut where it runs across side-by-side groups (each holding >= SPLIT_SHARE of its
    width, disjoint in x, :func:`_gutter_hits`); [line] when it does not. ``make_piece(line, x0, x1)``
    builds a piece.
    """
    x0, _, x1, _ = line.box
    cuts = [(a.box[2] + b.box[0]) / 2 for a, b in _gutter_hits(line, groups)]
    if not cuts:
        return [line]
    edges = [x0, *cuts, x1]
    return [make_piece(line, a, b) for a, b in zip(edges, edges[1:], strict=False) if b - a >= 2]


def _gutter_hits(line, groups: list[Group]) -> list[tuple[Group, Group]]:
    """The pairs of side-by-side groups (disjoint in x, left first) that ``line`` runs across, each
    holding at least SPLIT_SHARE of its width.
    """
    x0, _, x1, _ = line.box
    w = max(1.0, x1 - x0)
    hits = sorted((g for g in groups if g.kind != IMAGE and _area(_inter(line.box, g.box)) > 0
                   and (min(x1, g.box[2]) - max(x0, g.box[0])) >= SPLIT_SHARE * w), key=lambda g: g.box[0])
    return [(a, b) for a, b in zip(hits, hits[1:], strict=False) if a.box[2] <= b.box[0]]


#: A block of the analysis that holds no line but the piece of the one line running into it from the
#: block beside it is no column: the line is cut at the gap between them only where its blank run is
#: at least this many line heights wide. Hanzi set solid leave up to ~1.1 line heights of paper
#: inside a line at a run of full-width punctuation (``：“`` , ``。`` before a narrow character:
#: 0.72-1.07 measured on the Chinese report pages of ``bench/doc_pages.py`` seed 400), above
#: ``GUTTER_GAP`` of :mod:`models.compact.page.regions`; a report's prose line was cut after a ``。``
#: into a one-line block and its tail read after the next line (seed 400 page 11: 5.8 % CER at
#: 0.0 % order-free).
LONE_GUTTER = 1.5


def _alone(line, g: Group, lines: list) -> bool:
    """Whether no line of ``lines`` but ``line`` has half its area or more inside ``g``'s box."""
    return not any(ln is not line and _area(_inter(ln.box, g.box)) >= 0.5 * max(1e-6, _area(ln.box)) for ln in lines)


def _join_spanned(lines: list, groups: list[Group], blank: Callable) -> list[Group]:
    """``groups`` (without lines yet) with each pair of side-by-side groups that a line runs across
    without a gutter's gap (``blank(line, x0, x1)`` False between them; ``blank(line, x0, x1,
    LONE_GUTTER)`` False where one of the two holds no other line, :data:`LONE_GUTTER`) made one group
    (the union of the boxes; a table if either is): the analysis cut one block in two, the line
    shows it is one.
    """
    out = list(groups)
    joined = True
    while joined:
        joined = False
        for line in lines:
            pair = next(((a, b) for a, b in _gutter_hits(line, out)
                         if not blank(line, a.box[2], b.box[0])
                         or ((_alone(line, a, lines) or _alone(line, b, lines))
                             and not blank(line, a.box[2], b.box[0], LONE_GUTTER))), None)
            if pair is not None:
                a, b = pair
                out[out.index(a)] = Group(TABLE if TABLE in (a.kind, b.kind) else a.kind, _union(a.box, b.box))
                out.remove(b)
                joined = True
                break
    return out


def _backdrop(box: Box, layout: PageLayout) -> bool:
    """Whether the image region ``box`` is a backdrop, not a figure: it holds a text, heading, caption
    or table block of the analysis (half its area or more inside). A photographed page's paper, shaded
    and curved, is one image block under the page's text blocks (``bench/receipts.py`` form_photo
    seeds 32008, 33004: the whole page); the lines in it that no text block holds are the page's text
    (a form's labels and values), not a figure's labels read after the block above it.
    """
    return any(r.kind != IMAGE and _area(_inter(r.box, box)) >= 0.5 * max(1e-6, _area(r.box)) for r in layout.regions)


def _in_backdrop(kind: str, box: Box, backdrops: list[Box]) -> str:
    """``kind`` of a block, text for a caption inside a backdrop (:func:`_backdrop`): no figure there
    for it to caption (a form's label the analysis took for one, ``bench/receipts.py`` seed 32008).
    """
    inside = any(_area(_inter(box, b)) >= 0.5 * max(1e-6, _area(box)) for b in backdrops)
    return TEXT if kind == CAPTION and inside else kind


def assign(lines: list, layout: PageLayout, make_piece: Callable, blank: Callable | None = None) -> list[Group]:
    """Groups of the page with their lines (an image region's lines, e.g. a figure's labels, are a
    group of kind ``image`` at the region's place in the flow). Lines are objects with a
    ``box`` (x0, y0, x1, y1); ``make_piece(line, x0, x1)`` cuts one (see :func:`_split_at_gutters`).
    ``blank(line, x0, x1[, least])``: whether the line's pixels there hold a gutter's gap (a blank run at
    least ``least`` line heights wide); where given, a line
    is cut at a gutter between two blocks only where it has one (Tesseract cuts a paragraph of
    hanzi, no spaces, into side-by-side blocks: its lines were cut and read as two columns).
    """
    backdrops = [r.box for r in layout.regions if r.kind == IMAGE and _backdrop(r.box, layout)]
    text_groups = _merge_overlapping([Group(_in_backdrop(r.kind, r.box, backdrops), r.box) for r in layout.regions
                                      if r.kind != IMAGE])
    if blank is not None:
        text_groups = _merge_overlapping(_join_spanned(lines, text_groups, blank))
    images = [r.box for r in layout.regions if r.kind == IMAGE and r.box not in backdrops]
    in_images: dict[int, list] = {}  # image region -> its lines
    loose: list[Group] = []
    for line in lines:
        for piece in _split_at_gutters(line, text_groups, make_piece):
            area = max(1e-6, _area(piece.box))
            best = max(text_groups, key=lambda g: _area(_inter(piece.box, g.box)), default=None)
            if best is not None and _area(_inter(piece.box, best.box)) > 0.5 * area:
                best.lines.append(piece)
            elif any(_area(_inter(piece.box, b)) > 0.5 * area for b in images):
                k = max(range(len(images)), key=lambda i: _area(_inter(piece.box, images[i])))
                in_images.setdefault(k, []).append(piece)
            elif best is not None and _area(_inter(piece.box, best.box)) > 0:
                best.lines.append(piece)
            else:
                loose.append(Group("text", piece.box, [piece]))
    figures = [Group(IMAGE, images[k], found) for k, found in in_images.items()]
    for g in (g for g in text_groups if g.lines):
        # the region's box where its lines are (Tesseract's blocks can be loose), but never wider
        # than the region: a line's overhang into the gutter must not close the gutter
        span = lines_box(g.lines)
        inner = _inter(g.box, span)
        g.box = inner if inner[0] < inner[2] and inner[1] < inner[3] else span
    groups = [g for g in text_groups if g.lines] + loose
    for f in figures:
        f.box = lines_box(f.lines)
    return _merge_overlapping(groups) + figures


def numbered_lines(groups: list[Group], med_h: float) -> bool:
    """Whether the page has a column of line numbers in its margin (a transcript, a pleading, a code
    listing): at least LABEL_MIN_COUNT one-line groups, each at most LABEL_MAX_WIDTH line heights
    wide, stacked at one x (centres within two line heights) left or right of every other group.
    Such a page is one text column read row by row, number first: its blocks are not reordered.
    """
    labels = [g for g in groups if len(g.lines) == 1 and g.box[2] - g.box[0] <= LABEL_MAX_WIDTH * med_h]
    others = [g for g in groups if g not in labels]
    for g in labels:
        cx = (g.box[0] + g.box[2]) / 2
        stack = [h for h in labels if abs((h.box[0] + h.box[2]) / 2 - cx) < 2 * med_h]
        if len(stack) < LABEL_MIN_COUNT:
            continue
        left, right = max(h.box[2] for h in stack), min(h.box[0] for h in stack)
        if all(o.box[0] >= left - med_h for o in others) or all(o.box[2] <= right + med_h for o in others):
            return True
    return False


def xy_cut(groups: list[Group], med_h: float | None = None) -> list[Group]:
    """Groups in reading order: recursive XY-cut at the widest empty band between group boxes
    (columns left to right, bands top to bottom); groups that overlap everywhere: top to bottom.
    A cut down the page is taken over a cut across it only when both sides read as text columns
    (:func:`models.compact.page.xycut.is_prose`), or when nothing cuts across but the gaps between
    rows (under :data:`models.compact.page.xycut.ROW_BAND_GAP` line heights, and no section gap
    between stacked blocks, :data:`models.compact.page.xycut.SECTION_GAP`) and the cut down is a
    panels' gutter (:data:`models.compact.page.xycut.PANEL_GAP` line heights; a list's numbers beside
    their items are not cut off them): side-by-side panels of
    a form or an invoice (key-value pairs, addresses) are read band by band -- the panels of one band
    left to right -- not as two page-tall columns that put the right-hand panels after the page's end.
    ``med_h``: the median line height in pixels (default: measured on the groups' lines).
    """
    if len(groups) <= 1:
        return list(groups)
    med_h = _median_height(groups) if med_h is None else med_h
    best = None  # (gap width, axis, position)
    down = None  # the widest cut down the page, columns or not
    row_gap = median_row_gap([g.lines for g in groups], med_h)
    for k in (0, 1):
        for g0, g1 in interval_gaps([(g.box[k], g.box[k + 2]) for g in groups]):
            if k == 0 and (down is None or g1 - g0 > down[0]):
                down = (g1 - g0, 0, (g0 + g1) / 2)
            if k == 0 and not _columns(groups, (g0 + g1) / 2, med_h):
                continue
            if (k == 1 and g1 - g0 < ROW_BAND_GAP * med_h and down is not None and down[0] >= PANEL_GAP * med_h
                    and not (row_gap is not None and g1 - g0 >= max(SECTION_GAP * med_h, SECTION_RATIO * row_gap))):
                continue  # a gap between two rows of side-by-side panels: the panels are cut first
            if best is None or g1 - g0 > best[0]:
                best = (g1 - g0, k, (g0 + g1) / 2)
    best = best or down
    if best is None:
        return sorted(groups, key=lambda g: (g.box[1], g.box[0]))
    _, k, mid = best
    first = [g for g in groups if (g.box[k] + g.box[k + 2]) / 2 < mid]
    second = [g for g in groups if (g.box[k] + g.box[k + 2]) / 2 >= mid]
    return xy_cut(first, med_h) + xy_cut(second, med_h)


def _columns(groups: list[Group], x_mid: float, med_h: float) -> bool:
    """Whether the groups left and right of ``x_mid`` both read as text columns (:func:`is_prose`)."""
    left = [ln for g in groups if (g.box[0] + g.box[2]) / 2 < x_mid for ln in g.lines]
    right = [ln for g in groups if (g.box[0] + g.box[2]) / 2 >= x_mid for ln in g.lines]
    return is_prose(left, med_h) and is_prose(right, med_h)


def _median_height(groups: list[Group]) -> float:
    hs = [ln.box[3] - ln.box[1] for g in groups for ln in g.lines]
    return float(np.median(hs)) if hs else 1.0


def _place_figures(ordered: list[Group], figures: list[Group]) -> list[Group]:
    """``ordered`` with each figure group put right after the group just above it (the nearest whose
    x range overlaps the figure's and that ends above the figure's middle), else right before the
    nearest one below it, else at the end. Figures stay out of the XY-cut: a photo's box often
    runs across a column gutter and would hide it.
    """
    out = list(ordered)
    for f in sorted(figures, key=lambda g: (g.box[1], g.box[0])):
        mid = (f.box[1] + f.box[3]) / 2
        beside = [g for g in out if g.kind != IMAGE and min(g.box[2], f.box[2]) > max(g.box[0], f.box[0])]
        above = [g for g in beside if g.box[3] <= mid]
        below = [g for g in beside if g.box[1] >= mid]
        if above:
            out.insert(out.index(max(above, key=lambda g: g.box[3])) + 1, f)
        elif below:
            out.insert(out.index(min(below, key=lambda g: g.box[1])), f)
        else:
            out.append(f)
    return out


def order_groups(groups: list[Group], page_height: float) -> list[Group]:
    """Headers first (left to right), the body by :func:`xy_cut` with figures placed by
    :func:`_place_figures`, footers last (left to right).
    """
    figures = [g for g in groups if g.kind == IMAGE]
    groups = [g for g in groups if g.kind != IMAGE]
    if not groups:
        return xy_cut(figures)
    med_h = _median_height(groups)
    top, bottom = MARGIN_BAND * page_height, (1 - MARGIN_BAND) * page_height
    head, body, foot = [], [], []
    for g in groups:
        thin = g.box[3] - g.box[1] <= MARGIN_MAX_LINES * med_h and g.kind not in (TABLE, HEADING)
        if thin and g.box[3] <= top:
            head.append(g)
        elif thin and g.box[1] >= bottom:
            foot.append(g)
        else:
            body.append(g)
    if not body:  # only margin lines: nothing to keep apart
        return _place_figures(xy_cut(head + foot), figures)
    return (sorted(head, key=lambda g: g.box[0]) + _place_figures(xy_cut(body), figures)
            + sorted(foot, key=lambda g: g.box[0]))
