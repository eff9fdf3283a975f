"""Text-line detection with the PP-OCR DB detector shipped in the rapidocr wheel, reading order, and
line crops in page pixels.

Detection: ``PP-OCRv6_det_small.onnx`` (PaddleOCR DB text detector, Liao et al., "Real-time Scene
Text Detection with Differentiable Binarization", AAAI 2020) run with onnxruntime, with rapidocr's
own pre-processing (``DetPreProcess``: resize to a multiple of 32, mean/std 0.5) and post-processing
(``DBPostProcess``: threshold 0.3, box threshold 0.5, unclip ratio 1.6, dilation), the settings of
rapidocr's ``config.yaml``. The page is padded with a white border first so that text touching the
image edge (single-line images) is still found, and downscaled so its long side is at most
``det_long_side`` pixels (speed; boxes are mapped back to page pixels by ``DBPostProcess``).

Orientation: if most detected boxes are taller than wide the page is rotated by 90 degrees and
detected again; the rapidocr 0/180 text-direction classifier (``ch_ppocr_mobile_v2.0_cls``) then
decides between the two 90-degree turns, and turns a page that looks upright by 180 degrees only on
a clear vote over at least 4 lines (up to 16 lines x 3 windows of the classifier's aspect, under
0.15 s a page). Boxes are reported in the pixels of the
page as received.

Layout (:meth:`LineDetector.detect`, when ``tesserocr`` is installed): once the page is upright,
Tesseract's page-layout analysis (:mod:`models.compact.page.layout`) measures its skew -- a page skewed by
``MIN_SKEW_DEG`` to ``MAX_SKEW_DEG`` degrees is rotated straight and detected again -- and finds its
regions and rule lines; rules are painted out of the returned image (borders are not read as
characters; a stub is left under a descender's hook inside a rule, the lines being found on the
page without it: :func:`models.compact.page.layout.erase_rules_twice`) and the lines are ordered
region by region (:mod:`models.compact.page.order`), table
regions cell by cell (:mod:`models.compact.page.table`). Without it, the whole page is ordered by
:func:`reading_order`.

Reading order (:func:`reading_order`): recursive XY-cut (Nagy & Seth 1984) on the line boxes. A
vertical cut (a column gutter: an x-range crossed by at most 5 % of the boxes) is preferred, but only
where both sides hold prose lines (several boxes much wider than tall), so table rows and margin line
numbers stay with their rows; otherwise the block is cut at its widest horizontal gap.
"""

from __future__ import annotations

import pathlib
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import rapidocr
from PIL import Image
from rapidocr.ch_ppocr_det.utils import DBPostProcess, DetPreProcess

from models.compact.page import dup_boxes, large_print, levels, nil_marks, rowsplit, wide
from models.compact.page.boxes import LineBox, _same_line, crop_line
from models.compact.page.det_net import DetNetwork, onnx_session
from models.compact.page.direction import _cls_input, _cls_windows
from models.compact.page.layout import LayoutAnalyser, PageLayout, erase_rules_twice
from models.compact.page.rule_clip import clip_at_rules
from models.compact.page.xycut import reading_order

RAPIDOCR_MODELS = pathlib.Path(rapidocr.__file__).parent / "models"
#: The detector rapidocr ships (float32); calibration and comparisons run it.
DET_FLOAT_MODEL = RAPIDOCR_MODELS / "PP-OCRv6_det_small.onnx"
#: The detector the encoder runs: DET_FLOAT_MODEL quantised to int8 by
#: :mod:`training.compact.quantize_detector` (see there for the figures).
DET_MODEL = pathlib.Path(__file__).resolve().parent.parent / "detector" / "PP-OCRv6_det_small.int8.onnx"
CLS_MODEL = RAPIDOCR_MODELS / "ch_ppocr_mobile_v2.0_cls_mobile.onnx"

#: A page whose short side is below this many pixels is enlarged for detection (rapidocr's default
#: ``limit_side_len``; see :meth:`LineDetector._pre_for`).
MIN_SHORT_SIDE = 736


class LineDetector:
    """PP-OCR line detector + orientation fix. ``threads``: onnxruntime intra-op threads; ``det_model``:
    the DB network's ONNX file (default :data:`DET_MODEL`).
    """

    def __init__(self, det_long_side: int = 1600, threads: int = 1, pad_px: int = 24,
                 det_model: pathlib.Path = DET_MODEL):
        self.det_long_side, self.pad = det_long_side, pad_px
        self.layout = LayoutAnalyser()
        # Tesseract's layout analysis of a page runs beside its detector forward (both release the
        # GIL): see :meth:`detect`. One worker: the analyser serialises its calls anyway.
        self._layout_pool = ThreadPoolExecutor(1, thread_name_prefix="layout") if self.layout.available else None
        self.det = DetNetwork(onnx_session(det_model, threads, arena=True))
        self.cls = onnx_session(CLS_MODEL, threads) if CLS_MODEL.is_file() else None
        self.pre = DetPreProcess(limit_side_len=det_long_side, limit_type="max")
        self.post = DBPostProcess(thresh=0.3, box_thresh=0.5, max_candidates=2000, unclip_ratio=1.6,
                                  score_mode="fast", use_dilation=True)

    def _detect(self, rgb: np.ndarray) -> list[LineBox]:
        """Lines of ``rgb`` [H, W, 3] uint8. A tall page (receipt, long scroll: height > 2 x width and
        > ``det_long_side``) is detected in overlapping horizontal bands of ``max(det_long_side, W)``
        pixels, so its text is not shrunk below the detector's reach by fitting the whole height
        into ``det_long_side``; each band keeps the lines whose centre lies in its own part (between
        the middles of its overlaps, ``max(256, band / 5)`` pixels), and of a line found by two
        bands the copy farther from its band's edge (lines up to a quarter of the overlap tall are
        never cut); a wide page (width > 2 x height and > ``det_long_side``) likewise in vertical strips
        (:mod:`models.compact.page.wide`). A page of faint print is detected at full contrast
        (:func:`levels.for_detection`).
        """
        h, w = rgb.shape[:2]
        band = max(self.det_long_side, w)
        seen = levels.for_detection(rgb)  # faint print at full contrast; the rows are split on the page itself
        if w > 2 * h and w > self.det_long_side:  # a wide page: in vertical strips (models.compact.page.wide)
            return _finished(rgb, wide.detect_in_strips(seen, self._detect_band, self.det_long_side))
        if h <= 2 * w or h <= self.det_long_side:  # display type found by a coarse pass (large_print)
            lines = large_print.with_large_lines(seen, self._detect_band(seen), self._detect_coarse)
            return _finished(rgb, lines)
        overlap = max(256, band // 5)
        starts = list(range(0, h - band, band - overlap)) + [h - band]
        starts = sorted(set(starts))
        # Band i owns the page rows between the middles of its overlaps with its neighbours. The
        # same line comes back a pixel or two apart from two bands, so a line whose centre lies
        # near a cut is taken from both and the copy nearer its band's edge is dropped.
        cuts = [0.0] + [(starts[i + 1] + starts[i] + band) / 2 for i in range(len(starts) - 1)] + [float(h)]
        slack = overlap / 4
        found: list[tuple[float, int, LineBox]] = []  # (distance to the band's edge, band, line)
        for i, y in enumerate(starts):
            for ln in self._detect_band(seen[y: y + band]):
                x0, y0, x1, y1 = ln.box
                if cuts[i] - slack <= (y0 + y1) / 2 + y < cuts[i + 1] + slack:
                    q = ln.quad.copy()
                    q[:, 1] += y
                    edge = min(y0, band - y1) if 0 < i < len(starts) - 1 else (band - y1 if i == 0 else y0)
                    found.append((edge, i, LineBox(q, (x0, y0 + y, x1, y1 + y), ln.score)))
        kept: list[tuple[int, LineBox]] = []
        for _, i, ln in sorted(found, key=lambda f: -f[0]):
            if not any(j != i and _same_line(ln.box, other.box) for j, other in kept):
                kept.append((i, ln))
        return _finished(rgb, [ln for _, ln in kept])

    def _detect_coarse(self, small: np.ndarray) -> list[LineBox]:
        """Lines of the large-print pass's shrunk page (:mod:`models.compact.page.large_print`), detected at
        its own size: the small-page enlargement of :meth:`_pre_for` would undo the shrinking (a
        480 x 371 coarse image went in at 928 x 736, 0.4-0.5 s a letter page instead of 0.1 s).
        """
        return self._detect_band(small, enlarge=False)

    def _detect_band(self, rgb: np.ndarray, enlarge: bool = True) -> list[LineBox]:
        p = self.pad
        padded = np.pad(rgb, ((p, p), (p, p), (0, 0)), constant_values=255)
        pre = self._pre_for(padded.shape[:2]) if enlarge else self.pre
        small = pre.resize(padded)  # per channel: the same pixels as resizing BGR, on a copy 2-3 x smaller
        if small is None:
            return []
        bgr = np.ascontiguousarray(small[:, :, ::-1])  # BGR like OpenCV
        pred = self.det.probability_map(bgr)
        quads, scores = self.post(pred, padded.shape[:2])
        h, w = rgb.shape[:2]
        out = []
        for q, s in zip(quads, scores, strict=True):
            q = q.astype(np.float32) - p
            q[:, 0] = q[:, 0].clip(0, w)
            q[:, 1] = q[:, 1].clip(0, h)
            x0, y0, x1, y1 = float(q[:, 0].min()), float(q[:, 1].min()), float(q[:, 0].max()), float(q[:, 1].max())
            if x1 - x0 >= 2 and y1 - y0 >= 2:
                out.append(LineBox(q, (x0, y0, x1, y1), float(s)))
        return out

    def _upside_down(self, rgb: np.ndarray, lines: list[LineBox], min_lines: int = 1, margin: float = 0.0) -> bool:
        """Vote of the 0/180 classifier over up to 16 of the widest lines: True when at least
        ``min_lines`` lines were classified and the mean of P(180) - P(0) exceeds ``margin``. A line
        votes with the mean over up to :data:`CLS_WINDOWS` windows of the classifier's own aspect
        (:func:`_cls_windows`): the whole of a long line squeezed into its 192 x 48 input is no longer
        legible (a 1,550 x 27 px line of 8 pt print, 14 x narrower), and such votes turned upright
        pages of full-width small print upside down (11 of 16 rendered 6-10 pt letter pages).
        """
        if self.cls is None or len(lines) < min_lines:
            return False
        votes, n = 0.0, 0
        name = self.cls.get_inputs()[0].name
        for ln in sorted(lines, key=lambda b: b.box[2] - b.box[0], reverse=True)[:16]:
            # a tilted line straightened (its quad warped), as its crop for reading will be: the
            # axis-aligned box of a long line on a page turned by 93 or 183 degrees held the slanted
            # line and its neighbours, and the vote came out wrong (upside-down text read as garbage)
            line = crop_line(None, ln, rgb)
            batch = np.stack([_cls_input(w) for w in _cls_windows(line)])
            prob = self.cls.run(None, {name: batch})[0]
            votes += float((prob[:, 1] - prob[:, 0]).mean())  # labels ["0", "180"]
            n += 1
        return n >= min_lines and votes / n > margin

    def _pre_for(self, shape: tuple[int, int]) -> DetPreProcess:
        """The detector's resize for an image of ``shape`` (h, w) pixels: down to ``det_long_side`` on
        the long side, or for a small image up until its short side is :data:`MIN_SHORT_SIDE` (never
        past ``det_long_side``), as rapidocr's own default (``limit_type: min``, 736) does. Why: at
        its native size a small page's boxes come out tight (a rendered 880 x 520 page of six 36 px
        Noto Sans CJK lines: boxes 38 px tall, 44 px enlarged, rapidocr's 46 px; 2.2 -> 0 % CER).
        """
        short, long_ = min(shape), max(shape)
        ratio = min(MIN_SHORT_SIDE / max(1, short), self.det_long_side / max(1, long_))
        if ratio <= 1.0:
            return self.pre
        return DetPreProcess(limit_side_len=int(round(short * ratio)), limit_type="min")

    def detect(self, image: Image.Image) -> tuple[Image.Image, list[LineBox], float]:
        """Find the text lines of ``image``. Returns (upright page image, with rule lines painted
        out when the layout analysis ran; lines in reading order with boxes in the upright image's
        pixels; rotation applied in degrees counter-clockwise: 0, 90, 180 or 270 plus the deskew
        angle, the image turned by PIL ``rotate(rotation, expand=True)``).
        """
        from models.compact.page.regions import MAX_SKEW_DEG, MIN_SKEW_DEG, line_skew_deg

        image.load()  # decoded once, here: the layout thread reads the same image
        # The layout analysis of the page as received runs while the detector looks for its lines:
        # it is the analysis :meth:`_layout` needs for an upright, straight page (most pages), and a
        # letter page's detection then takes the longer of the two (fedreg page: 0.39 s + 0.70 s
        # one after the other, 0.76 s side by side). A page found turned or skewed is analysed again
        # once upright, the early analysis wasted.
        early = self._layout_pool.submit(self.layout.analyse, image) if self._layout_pool is not None else None
        rgb = np.asarray(image.convert("RGB"))
        lines = self._detect(rgb)
        rotation: float = 0
        tall, wide = _elongated(lines)
        # Sideways: most lines tall. Or most of the *elongated* lines tall, when short squarish boxes
        # (a transcript's margin line numbers, table cells of one number) are the rest: such a page
        # turned by 90 degrees kept 19 tall, 0 wide and 24 square boxes and was read sideways as
        # symbols; it is turned only if the turned page then shows more wide lines than it had.
        if lines and (tall > 0.6 * len(lines) or (tall >= 3 and tall > 3 * wide)):
            turned = image.rotate(90, expand=True)
            t_rgb = np.asarray(turned.convert("RGB"))
            t_lines = self._detect(t_rgb)
            if tall > 0.6 * len(lines) or _elongated(t_lines)[1] > wide:
                image, rotation, rgb, lines = turned, 90.0, t_rgb, t_lines
        sideways = rotation == 90
        # A skewed page is straightened before the direction classifier votes: on slanted lines its
        # votes were unreliable (an upright page at 8 degrees voted +0.196 towards 180, its 0.2 margin
        # only just holding; pages at 93 / 183 degrees were turned the wrong way).
        skew = line_skew_deg(lines)
        if skew is not None and MIN_SKEW_DEG <= abs(skew) <= MAX_SKEW_DEG:
            image, rotation = _deskewed(image, skew), rotation - skew
            rgb = np.asarray(image)
            lines = self._detect(rgb)
        # Found sideways: the classifier decides between 90 and 270. Upright-looking: turned only on a
        # clear vote over several lines (one line's vote is unreliable: measured +0.9 on an upright
        # UW-III line; upright eval pages vote -0.46 to -1.0 per line, a 180-degree page +0.28).
        if self._upside_down(rgb, lines) if sideways else self._upside_down(rgb, lines, min_lines=4, margin=0.2):
            image, rotation = image.rotate(180, expand=True), (rotation + 180) % 360
            rgb = np.asarray(image.convert("RGB"))
            lines = self._detect(rgb)
        if early is None:
            return image, reading_order(lines), rotation
        if rotation:
            early.cancel()  # not started yet (pages of other threads ahead of it): never run
            early = None
        return self._layout(image, lines, rotation, early)

    def _layout(self, image: Image.Image, lines: list[LineBox], rotation: float,
                early: Future[PageLayout] | None = None) -> tuple[Image.Image, list[LineBox], float]:
        """Deskew, rule removal and region-based reading order of an upright page (see the module
        docstring); same return value as :meth:`detect`. ``early``: the layout analysis of ``image``
        already under way (:meth:`detect`), used instead of analysing it again.
        """
        from models.compact.page.regions import MAX_SKEW_DEG, MIN_SKEW_DEG, line_skew_deg, region_order
        from models.compact.page.rule_lines import character_strokes_dropped, erased_ink, inside_rule, unbroken_rules

        skew = line_skew_deg(lines)
        page = PageLayout()
        if skew is None or abs(skew) < MIN_SKEW_DEG:
            page = early.result() if early is not None else self.layout.analyse(image)
        elif early is not None:
            early.cancel()
        if skew is None:  # too few long lines to measure: Tesseract's estimate
            skew = page.skew_deg
        if MIN_SKEW_DEG <= abs(skew) <= MAX_SKEW_DEG:  # (only when detect() could not measure it)
            image, rotation = _deskewed(image, skew), rotation - skew
            lines = self._detect(np.asarray(image))
            page = self.layout.analyse(image)
        gray = np.asarray(image.convert("L"))
        page.rules = unbroken_rules(character_strokes_dropped(page.rules, lines), gray)
        read = image
        if page.rules:
            image, read = erase_rules_twice(image, page.rules)  # lines found without hooks' stubs, read with
            if rotation % 90:
                # Straightened by resampling, a table's rules are faint grey bands the detector bridged:
                # two rows' cells found as one box and read as a stray mark (the shared report page at
                # 2 degrees lost `70.22%` and `-111.96%`). With the rules erased the cells come apart.
                lines = self._detect(np.asarray(image))
            erased = np.asarray(image.convert("L"))
            dark = erased_ink(gray, erased)  # text typed on a slanted underline is not the rule
            lines = [ln for ln in lines if not inside_rule(ln, page.rules, dark=dark)]
            lines = clip_at_rules(lines, page.rules)  # no sliver of the next cell's paper past a rule
            gray = erased
        return read, region_order(lines, page, image.height, gray, image.width), rotation


def _finished(rgb: np.ndarray, lines: list[LineBox]) -> list[LineBox]:
    """The detector's ``lines`` on the page ``rgb`` [H, W, 3] uint8 (boxes in its pixels) made lines, the
    last step of every path of :meth:`LineDetector._detect` (a page whole, in bands, in strips): a box
    over several table rows becomes one line per row (:func:`rowsplit.split_rows`), then a box whose ink
    another box on its row holds is dropped or trimmed (:func:`dup_boxes.drop_duplicates`), and a lone nil dash
    beside a row's boxes gets a line (:func:`nil_marks.add_nil_dashes`).
    """
    return nil_marks.add_nil_dashes(rgb, dup_boxes.drop_duplicates(rgb, rowsplit.split_rows(rgb, lines)))


def _deskewed(image: Image.Image, skew_deg: float) -> Image.Image:
    """``image`` (RGB) turned back clockwise by ``skew_deg`` degrees (bicubic, canvas expanded, white
    fill): the page straight, as PIL ``rotate(-skew_deg, expand=True)``.
    """
    return image.convert("RGB").rotate(-skew_deg, resample=Image.Resampling.BICUBIC, expand=True,
                                       fillcolor=(255, 255, 255))


def _elongated(lines: list[LineBox]) -> tuple[int, int]:
    """(lines at least 1.5 x taller than wide, lines at least 1.5 x wider than tall) among ``lines``."""
    tall = sum(1 for ln in lines if (ln.box[3] - ln.box[1]) > 1.5 * (ln.box[2] - ln.box[0]))
    wide = sum(1 for ln in lines if (ln.box[2] - ln.box[0]) > 1.5 * (ln.box[3] - ln.box[1]))
    return tall, wide




