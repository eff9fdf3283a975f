"""Detections and rule lines that are not what they seem, for
:meth:`models.compact.page.detect.LineDetector.detect`: a "rule" that is a stroke of a detected line's
characters (:func:`character_strokes_dropped`) or not one unbroken run of ink (:func:`unbroken_rules`),
and a detected "line" that is a rule (:func:`inside_rule`) unless text is left on it once the rules are
erased (:func:`erased_ink`, :func:`holds_text`).
"""

from __future__ import annotations

import numpy as np

from models.compact.line.image import gray_percentiles
from models.compact.page.boxes import LineBox

#: A detected "line" lying this much inside a rule box is the rule itself, not text.
RULE_COVER = 0.6

#: A "rule" lying inside a detected text line, its centre in the middle band of the line's height
#: (this fraction of the height off the top and off the bottom), is part of the characters, not a rule:
#: Tesseract reports the long horizontal strokes of hanzi such as 董, 事 or 三 (alone or several side by
#: side) and dashes as rule lines, and erasing them loses the characters. Underlines (at the bottom edge)
#: and table borders (between lines) are outside that band.
STROKE_BAND = 0.2
#: ... and so is a "rule" inside a line at any height that is at most this many line heights long:
#: the top stroke of 三, 币, 万 or 生 lies in the top band of a tight box (the detector's box of a 36 px
#: Noto Sans CJK line is 38-44 px tall), and erasing it reads 二, 巾, 力, 牛 (a rendered page of six
#: report lines: 18 % CER). Underlines and rules run along words, longer than a character or two.
STROKE_MAX_EM = 2.5
#: Share of a rule's length that must be ink for it to be a rule (:func:`unbroken_rules`).
RULE_INK_SHARE = 0.9
#: A detection over this many median line heights tall and over TALL_ASPECT times as tall as wide is
#: a box over several rows of a table column (:mod:`models.compact.page.rowsplit` could not split it),
#: not a line: the rules inside it are not its characters' strokes. Such a 958 x 201 px box over two
#: columns of a skewed, vertically ruled table took four of its column rules for strokes and they were
#: kept (``bench/tables.py`` seed 2 page 6: three columns read as one cell, cell recall 45 %).
TALL_LINE = 2.0
TALL_ASPECT = 1.5


def character_strokes_dropped(rules: list[tuple[float, float, float, float]],
                              lines: list[LineBox]) -> list[tuple[float, float, float, float]]:
    """``rules`` without those that are strokes of the characters of a detected line (see
    :data:`STROKE_BAND`); boxes in page pixels. Detections over several rows (:data:`TALL_LINE`) are
    not lines here.
    """
    heights = sorted(ln.box[3] - ln.box[1] for ln in lines)
    med_h = heights[len(heights) // 2] if heights else 0.0
    lines = [ln for ln in lines if not (ln.box[3] - ln.box[1] > TALL_LINE * med_h
                                        and ln.box[3] - ln.box[1] > TALL_ASPECT * (ln.box[2] - ln.box[0]))]
    kept = []
    for r in rules:
        cy = (r[1] + r[3]) / 2
        area = max(1e-6, (r[2] - r[0] + 1) * (r[3] - r[1] + 1))
        stroke = False
        for ln in lines:
            x0, y0, x1, y1 = ln.box
            w = min(x1, r[2] + 1) - max(x0, r[0])
            h = min(y1, r[3] + 1) - max(y0, r[1])
            band = STROKE_BAND * (y1 - y0)
            short = r[2] - r[0] + 1 <= STROKE_MAX_EM * (y1 - y0)  # a glyph's width, not an underline's
            if w > 0 and h > 0 and w * h >= RULE_COVER * area and (y0 + band <= cy <= y1 - band or short):
                stroke = True
                break
        if not stroke:
            kept.append(r)
    return kept


def unbroken_rules(rules: list[tuple[float, float, float, float]],
                   gray: np.ndarray) -> list[tuple[float, float, float, float]]:
    """``rules`` (page pixel boxes) without those that are not one unbroken run of ink along their
    length, in ``gray`` uint8 [H, W] (the page, dark ink on light paper): at least
    :data:`RULE_INK_SHARE` of the columns of a horizontal rule (rows of a vertical one) must hold a
    pixel darker than halfway from the page's paper to its ink. Why: Tesseract joins strokes that
    line up into one "rule" -- the top strokes of a run of hanzi (人民币贰万叁 -> one 243 px rule), the
    left strokes of the first characters of three lines (one 176 px vertical rule across the gaps
    between them) -- and erasing them deletes those strokes (币 -> 巾, 万 -> 力; 18 % CER on a
    rendered page). A table border or an underline is solid ink from end to end.
    """
    paper, ink = gray_percentiles(gray, (90.0, 1.0))
    dark = gray < (paper + ink) / 2.0
    h, w = dark.shape
    kept = []
    for r in rules:
        x0, y0 = max(0, int(r[0]) - 1), max(0, int(r[1]) - 1)
        x1, y1 = min(w, int(r[2]) + 2), min(h, int(r[3]) + 2)
        if x1 <= x0 or y1 <= y0:
            continue
        patch = dark[y0:y1, x0:x1]
        along = patch.any(axis=0) if (x1 - x0) >= (y1 - y0) else patch.any(axis=1)
        if along.mean() >= RULE_INK_SHARE:
            kept.append(r)
    return kept


def inside_rule(line: LineBox, rules: list[tuple[float, float, float, float]], pad: float = 2.0,
                dark: np.ndarray | None = None) -> bool:
    """Whether ``line`` lies at least RULE_COVER inside one rule box (grown by ``pad`` pixels) and,
    given ``dark`` (bool [H, W]: the page's ink once its rules are erased, :func:`erased_ink`), holds
    no text there (:func:`holds_text`). A slanted underline's box is as tall as the text typed on it
    (a photographed form: 34 px for a 43 px line), so the box alone took the typed value for the rule.
    """
    x0, y0, x1, y1 = line.box
    area = max(1e-6, (x1 - x0) * (y1 - y0))
    for r in rules:
        w = min(x1, r[2] + pad) - max(x0, r[0] - pad)
        h = min(y1, r[3] + pad) - max(y0, r[1] - pad)
        if w > 0 and h > 0 and w * h >= RULE_COVER * area:
            return dark is None or not holds_text(dark, line.box)
    return False


#: A box holds text when ink is left, once the rules are erased, in at least this share of its
#: columns (a typed value on an underline: 0.95-0.99 on photographed forms) ...
TEXT_COLUMNS = 0.5
#: ... and of its rows (the same values: 0.63-0.67; a rule's unerased edge is a thin band).
TEXT_ROWS = 0.3


def erased_ink(gray: np.ndarray, erased: np.ndarray) -> np.ndarray:
    """Ink of the page ``erased`` (uint8 [H, W], its rules painted paper) as bool [H, W]: darker than
    halfway from the paper to the ink of ``gray`` (uint8 [H, W], the page before the erasure; its 90th
    and 1st gray percentiles, as :func:`unbroken_rules` measures them).
    """
    paper, ink = gray_percentiles(gray, (90.0, 1.0))
    return erased < (paper + ink) / 2.0


def holds_text(dark: np.ndarray, box: tuple[float, float, float, float]) -> bool:
    """Whether the page pixels of ``box`` (x0, y0, x1, y1) in ``dark`` (bool [H, W], :func:`erased_ink`)
    hold ink in at least :data:`TEXT_COLUMNS` of the columns and :data:`TEXT_ROWS` of the rows: text
    left once the rules are erased, not a rule detected as a line. False for a box off the page.
    """
    h, w = dark.shape
    x0, y0 = max(0, int(round(box[0]))), max(0, int(round(box[1])))
    x1, y1 = min(w, int(round(box[2]))), min(h, int(round(box[3])))
    if x1 <= x0 or y1 <= y0:
        return False
    patch = dark[y0:y1, x0:x1]
    return bool(patch.any(axis=0).mean() >= TEXT_COLUMNS and patch.any(axis=1).mean() >= TEXT_ROWS)
