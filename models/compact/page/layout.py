"""Page-layout analysis for the compact model: Tesseract's own page segmentation (column finding,
text / image / table blocks, rule lines, skew) through the ``tesserocr`` binding, layout only.

Tesseract (``InitForAnalysePage`` + ``AnalyseLayout`` at ``PSM_AUTO_ONLY``: no language data, no
recognition) finds tab stops and column partitions (R. Smith, "Hybrid Page Layout Analysis via
Tab-Stop Detection", ICDAR 2009), so it keeps columns apart across inset photos, spanning titles and
drop caps, marks table regions and finds horizontal / vertical rule lines. We use its blocks as
regions (:class:`Region`) and its rules (:attr:`PageLayout.rules`) to keep table borders out of the
line crops; the text lines themselves still come from the PP-OCR detector (``detect.py``), whose
crops the recogniser was trained on.

The page is analysed at most ``ANALYSIS_LONG_SIDE`` pixels on its long side (the work grows with
the pixel count; 2,200 px = US letter at 200 dpi takes ~0.6 s on one core); boxes come back in the
pixels of the image given. When ``tesserocr`` cannot be imported the analyser is unavailable and the
caller keeps its line-based reading order (:attr:`LayoutAnalyser.available`).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field

import numpy as np
from PIL import Image

from models.compact.page.rule_band import crossing_strokes, rule_band
from models.compact.page.rule_hooks import descender_hooks

Box = tuple[float, float, float, float]

#: Long side of the image Tesseract analyses: 200 dpi for a letter page, where its defaults are tuned.
ANALYSIS_LONG_SIDE = 2200

TEXT, HEADING, TABLE, IMAGE, CAPTION = "text", "heading", "table", "image", "caption"
#: Tesseract ``PolyBlockType`` names -> our region kinds (rules and noise are not regions).
_KINDS = {
    "FLOWING_TEXT": TEXT, "PULLOUT_TEXT": TEXT, "VERTICAL_TEXT": TEXT, "EQUATION": TEXT,
    "INLINE_EQUATION": TEXT, "UNKNOWN": TEXT, "HEADING_TEXT": HEADING, "CAPTION_TEXT": CAPTION,
    "TABLE": TABLE, "FLOWING_IMAGE": IMAGE, "HEADING_IMAGE": IMAGE, "PULLOUT_IMAGE": IMAGE,
}
_RULES = ("HORZ_LINE", "VERT_LINE")


@dataclass(frozen=True)
class Region:
    """A block of the page: ``kind`` (text, heading, caption, table, image), ``box`` (x0, y0, x1, y1)
    in pixels of the analysed image, ``order``: Tesseract's reading-order position (0-based).
    """

    kind: str
    box: Box
    order: int


@dataclass
class PageLayout:
    """Regions of a page, its rule lines (thin boxes, page pixels, horizontal and vertical) and the
    skew Tesseract measured, in degrees counter-clockwise (the page's text rises to the right by it).
    """

    regions: list[Region] = field(default_factory=list)
    rules: list[Box] = field(default_factory=list)
    skew_deg: float = 0.0


class LayoutAnalyser:
    """Tesseract page-layout analysis (one API instance, calls serialised by a lock: the Tesseract
    API is not thread-safe). ``available`` is False when the ``tesserocr`` binding is missing.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        try:
            import tesserocr  # type: ignore[import-untyped]  # heavy native binding: only when a detector is built
        except ImportError:  # pragma: no cover - tesserocr is a declared dependency
            self._api = None
            return
        self._tess = tesserocr
        self._api = tesserocr.PyTessBaseAPI(init=False)
        self._api.InitForAnalysePage()
        self._api.SetPageSegMode(tesserocr.PSM.AUTO_ONLY)
        self._names = {getattr(tesserocr.PT, k): k for k in dir(tesserocr.PT) if k.isupper()}

    @property
    def available(self) -> bool:
        """Whether Tesseract's layout analysis can run here."""
        return self._api is not None

    def analyse(self, image: Image.Image) -> PageLayout:
        """Regions, rules and skew of ``image`` (any mode; boxes in its pixels). An empty layout when
        the analyser is unavailable or Tesseract finds no block.
        """
        if self._api is None:
            return PageLayout()
        scale = min(1.0, ANALYSIS_LONG_SIDE / max(image.width, image.height))
        gray = image.convert("L")
        if scale < 1.0:
            gray = gray.resize((max(1, round(image.width * scale)), max(1, round(image.height * scale))),
                               Image.Resampling.BOX)
        ril = self._tess.RIL.BLOCK
        out = PageLayout()
        with self._lock:
            self._api.SetImage(gray)
            it = self._api.AnalyseLayout()
            if it is None:
                return out
            try:
                out.skew_deg = -math.degrees(float(it.Orientation()[3]))  # Tesseract: clockwise
            except (RuntimeError, IndexError, TypeError):  # no text lines to measure the skew on
                out.skew_deg = 0.0
            order = 0
            while True:
                bb = it.BoundingBox(ril)
                if bb is not None:
                    name = self._names.get(it.BlockType(), "UNKNOWN")
                    box = tuple(v / scale for v in bb)
                    x0, y0, x1, y1 = box
                    if name in _RULES:
                        out.rules.append((x0, y0, x1, y1))
                    elif name in _KINDS:
                        out.regions.append(Region(_KINDS[name], (x0, y0, x1, y1), order))
                        order += 1
                if not it.Next(ril):
                    break
            self._api.Clear()
        return out


#: Pixels a rule is painted out beyond its box on every side (:func:`erase_rules`): its anti-aliased edge.
RULE_PAD_PX = 1.5


def erase_rules(image: Image.Image, rules: list[Box], pad_px: float = RULE_PAD_PX) -> Image.Image:
    """A copy of ``image`` with each rule box (page pixels, grown by ``pad_px`` on every side, default
    :data:`RULE_PAD_PX`) painted with the page's paper colour (its median edge colour), so
    that table borders and rules are not read as characters. ``image`` itself when ``rules`` is empty.
    A thick box holding a slanted rule is painted only along the rule's own band
    (:func:`models.compact.page.rule_band.rule_band`), sparing descenders and commas beside it; in the
    grown edge, the ink of a stroke reaching into it from beyond (a descender on a tight row) is kept
    (:func:`models.compact.page.rule_band.crossing_strokes`); under the bottom of a descender's hook
    inside the rule's own rows, the rule is left (:func:`models.compact.page.rule_hooks.descender_hooks`).
    """
    return erase_rules_twice(image, rules, pad_px)[1]


def erase_rules_twice(image: Image.Image, rules: list[Box],
                      pad_px: float = RULE_PAD_PX) -> tuple[Image.Image, Image.Image]:
    """(``image`` with its rules erased whole, the same with the rule left under descenders' hooks) for
    :func:`erase_rules`' ``image`` and ``rules``; ``(image, image)`` when ``rules`` is empty. The first
    is for finding the lines (a stub of rule is no layout; the detector's boxes all over a
    straightened page moved by a pixel or two with it), the second for reading them.
    """
    if not rules:
        return image, image
    from PIL import ImageDraw, ImageStat  # light; kept local to the one caller

    rgb = image.convert("RGB")
    border = Image.new("RGB", (rgb.width, 2))
    border.paste(rgb.crop((0, 0, rgb.width, 1)), (0, 0))
    border.paste(rgb.crop((0, rgb.height - 1, rgb.width, rgb.height)), (0, 1))
    paper = tuple(int(v) for v in ImageStat.Stat(border).median)
    gray = np.asarray(rgb.convert("L"))
    painted, own = Image.new("L", rgb.size, 0), Image.new("L", rgb.size, 0)
    draw_painted, draw_own = ImageDraw.Draw(painted), ImageDraw.Draw(own)
    for x0, y0, x1, y1 in rules:
        band = rule_band(gray, (x0, y0, x1, y1), pad_px)  # a slanted rule: its own band, not its box
        if band is not None:
            draw_painted.polygon(band, fill=255)
            draw_own.polygon(rule_band(gray, (x0, y0, x1, y1), -0.5) or band, fill=255)
        else:
            draw_painted.rectangle((x0 - pad_px, y0 - pad_px, x1 + pad_px, y1 + pad_px), fill=255)
            draw_own.rectangle((x0, y0, x1, y1), fill=255)
    erase, rule = np.asarray(painted) > 0, np.asarray(own) > 0
    erase &= ~crossing_strokes(gray, erase, rule)
    hooks = descender_hooks(gray, erase, rule, rules)
    out = np.array(rgb)
    out[erase] = paper
    whole = Image.fromarray(out)
    if not hooks.any():
        return whole, whole
    out[hooks] = np.asarray(rgb)[hooks]
    return whole, Image.fromarray(out)


def interval_gaps(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Empty stretches between the union of ``intervals`` (pixel (start, end) pairs, any order),
    as (start, end) pairs in increasing order; [] for fewer than two. Shared by the XY-cut of
    :mod:`models.compact.page.order` and the line order of :mod:`models.compact.page.detect`.
    """
    if not intervals:
        return []
    iv = sorted(intervals)
    out, end = [], iv[0][1]
    for a, b in iv[1:]:
        if a > end:
            out.append((end, a))
        end = max(end, b)
    return out
