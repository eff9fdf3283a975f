"""Unit tests of the compact family's pure helpers: reading order, line normalisation, vocabulary,
evaluation scoring (no model needed)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from evaluation.engines import find_documents
from evaluation.score import fold, score
from models.compact.line.image import LINE_HEIGHT, WIDTH_MULTIPLE, normalise_line
from models.compact.page.boxes import LineBox
from models.compact.page.xycut import reading_order
from models.compact.vocab import UNK_ID, build_tokenizer, decode, encode


def _box(x0, y0, x1, y1) -> LineBox:
    q = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], dtype=np.float32)
    return LineBox(q, (x0, y0, x1, y1), 0.9)


def test_two_columns_under_a_title_read_column_by_column():
    title = _box(100, 50, 1500, 90)
    left = [_box(100, 150 + 40 * i, 760, 180 + 40 * i) for i in range(10)]
    right = [_box(840, 150 + 40 * i, 1500, 180 + 40 * i) for i in range(10)]
    shuffled = right[::-1] + [title] + left[::2] + left[1::2]
    assert reading_order(shuffled) == [title] + left + right


def test_column_beside_a_labelled_figure_is_still_a_column():
    """Two columns where the right one holds a diagram with many small labels (more boxes than its
    lines, as on page 2 of the tracemonkey paper): still read column by column."""
    left = [_box(100, 150 + 40 * i, 760, 180 + 40 * i) for i in range(30)]
    right_top = [_box(840, 150 + 40 * i, 1500, 180 + 40 * i) for i in range(6)]
    labels = [_box(860 + 160 * (k % 4), 420 + 60 * (k // 4), 960 + 160 * (k % 4), 450 + 60 * (k // 4))
              for k in range(28)]
    right_bottom = [_box(840, 900 + 40 * i, 1500, 930 + 40 * i) for i in range(6)]
    order = reading_order(labels + right_bottom + left[::-1] + right_top)
    assert order[:30] == left
    assert order[30:36] == right_top and order[-6:] == right_bottom


def test_table_rows_stay_rows():
    rows = []
    for i in range(8):  # short cells in 3 columns, row-aligned: a table, not text columns
        rows += [_box(100, 100 + 40 * i, 300, 130 + 40 * i), _box(500, 100 + 40 * i, 640, 130 + 40 * i),
                 _box(900, 100 + 40 * i, 1000, 130 + 40 * i)]
    assert reading_order(rows[::-1]) == rows


def test_normalise_line_shape_and_polarity():
    img = Image.new("L", (300, 60), 255)
    img.paste(0, (20, 20, 120, 40))
    x = normalise_line(img)
    assert x.shape[:2] == (1, LINE_HEIGHT) and x.shape[2] % WIDTH_MULTIPLE == 0
    assert x.shape[2] >= 160 and float(x.max()) == pytest.approx(1.0) and float(x[0, 0, 0]) == 0.0
    with pytest.raises(ValueError):
        normalise_line(Image.new("L", (0, 5)))


def test_vocab_roundtrip_and_unknown():
    tok = build_tokenizer()
    text = "Prix: 12,50 € — «Grüße» naïve café §3 ½"
    assert decode(tok, encode(tok, text)) == text
    assert encode(tok, "漢")[0] == UNK_ID
    assert decode(tok, encode(tok, "e\u0301")) == "é"  # NFC


def test_score_folds_whitespace_and_pages(tmp_path):
    s = score("Hello  world\n\fsecond page", "Hello world second page")
    assert s.char_edits == 0 and s.word_edits == 0
    s = score("Helo world", "Hello world")
    assert s.char_edits == 1 and s.ref_chars == 11 and s.word_edits == 1 and s.ref_words == 2
    assert fold(" a\t\tb \n") == "a b"
    (tmp_path / "sub").mkdir()
    Image.new("RGB", (10, 10)).save(tmp_path / "sub" / "p.png")
    (tmp_path / "sub" / "p.gt.txt").write_text("x")
    Image.new("RGB", (10, 10)).save(tmp_path / "nogt.png")
    assert [d.name for d, _ in find_documents(tmp_path)] == ["p.png"]


def test_upside_down_page_is_turned_and_upright_page_is_not():
    """A page of real text turned by 180 degrees is detected as such (rapidocr's direction classifier,
    voting over its lines); the same page upright is left alone."""
    from PIL import Image, ImageDraw, ImageFont

    from models.compact.page.detect import LineDetector

    font = ImageFont.load_default(size=28)
    page = Image.new("RGB", (1100, 900), "white")
    draw = ImageDraw.Draw(page)
    text = ["The quick brown fox jumps over the lazy dog.", "Pack my box with five dozen liquor jugs.",
            "Sphinx of black quartz, judge my vow today.", "How vexingly quick daft zebras jump!",
            "The five boxing wizards jump quickly again.", "Jackdaws love my big sphinx of quartz."]
    for i, line in enumerate(text * 2):
        draw.text((60, 40 + 64 * i), line, fill="black", font=font)
    det = LineDetector()
    _, lines, rotation = det.detect(page)
    assert rotation == 0 and len(lines) >= 10
    _, lines, rotation = det.detect(page.rotate(180))
    assert rotation == 180 and len(lines) >= 10


def test_full_width_small_print_is_not_turned_upside_down():
    """Full-width lines of 8 pt print on a letter page at 200 dpi (each ~1,550 x 28 px): the direction
    classifier votes on windows of its own aspect, not on the whole line squeezed 14 x into its
    192 x 48 input, whose votes turned such upright pages by 180 degrees (and their text to garbage)."""
    import random

    from PIL import Image, ImageDraw, ImageFont

    from models.compact.page.detect import LineDetector

    words = ("river stone garden window paper letter market station silver morning number yellow travel "
             "summer winter family kitchen reading history picture").split()
    det = LineDetector()
    for seed, name in enumerate(("DejaVuSerif.ttf", "DejaVuSans.ttf")):
        path = f"/usr/share/fonts/truetype/dejavu/{name}"
        font = ImageFont.truetype(path, round(8 * 200 / 72))
        page = Image.new("RGB", (1700, 2200), "white")
        draw, rng = ImageDraw.Draw(page), random.Random(seed)
        for i in range(10):
            line = " ".join(rng.choice(words) for _ in range(60))
            while font.getlength(line) > 1580:
                line = line.rsplit(" ", 1)[0]
            draw.text((60, 60 + 30 * i), line, fill="black", font=font)
        _, lines, rotation = det.detect(page)
        assert rotation == 0 and len(lines) == 10, (name, rotation, len(lines))
        _, lines, rotation = det.detect(page.rotate(180))
        assert rotation == 180 and len(lines) == 10, (name, rotation, len(lines))


@pytest.mark.parametrize("angle", [93, 183, 267, 87])
def test_turned_and_skewed_page_is_brought_upright(angle):
    """A page turned by a quarter or half turn plus a few degrees of skew (a scan fed crooked): the
    direction classifier votes on each line straightened (its quad warped), not on the axis-aligned
    box of a slanted line holding its neighbours too, whose votes chose 90 instead of 270 or left a
    page upside down (found by a break test: a small page turned by 93 degrees read as garbage)."""
    from PIL import ImageDraw, ImageFont

    from models.compact.page.detect import LineDetector

    font = ImageFont.truetype("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", 24)
    page = Image.new("RGB", (1000, 420), "white")  # lines 40 px apart: a slanted line's box holds its neighbours
    draw = ImageDraw.Draw(page)
    text = ["The quick brown fox jumps over the lazy dog again.", "Pack my box with five dozen liquor jugs today.",
            "Sphinx of black quartz, judge my vow for the record.", "How vexingly quick daft zebras jump at noon!",
            "The five boxing wizards jump quickly over the wall.", "Jackdaws love my big sphinx of quartz and tin."]
    for i, line in enumerate(text + text[:2]):
        draw.text((40, 50 + 40 * i), line, fill="black", font=font)
    turned = page.rotate(angle, expand=True, fillcolor=(255, 255, 255), resample=Image.Resampling.BICUBIC)
    _, lines, rotation = LineDetector().detect(turned)
    residual = ((angle + rotation) % 360 + 180) % 360 - 180  # 0 when the page came back upright
    assert abs(residual) < 1.5 and len(lines) == 8, (angle, rotation, len(lines))


@pytest.mark.parametrize("angle", [90, 270])
def test_sideways_transcript_with_margin_numbers_is_turned_upright(angle):
    """A transcript page (a margin column of line numbers beside double-spaced lines) turned by a quarter
    turn: the numbers' short square boxes outnumber the tall text lines, and the page used to be read
    sideways (as symbols) because fewer than 60 % of its boxes were tall."""
    from PIL import ImageDraw, ImageFont

    from models.compact.page.detect import LineDetector

    font = ImageFont.truetype("/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf", 24)
    page = Image.new("RGB", (1100, 1500), "white")
    draw = ImageDraw.Draw(page)
    words = "court argument counsel petitioner respondent justice case question record honor".split()
    for i in range(22):
        draw.text((40, 60 + 62 * i), str(i + 1), fill="black", font=font)
        if i % 3 != 2:  # some numbered lines are blank, as in a transcript
            draw.text((140, 60 + 62 * i), " ".join(words[(i + k) % 10] for k in range(6)), fill="black", font=font)
    turned = page.rotate(angle, expand=True)
    _, lines, rotation = LineDetector().detect(turned)
    assert (angle + rotation) % 360 == 0, (angle, rotation)


def test_pieces_of_long_lines_are_marked_whatever_the_page_rotation():
    """A line too long for the recogniser is cut into pieces; every piece after the first is marked
    as the next piece of its line (joined with a space: cut at a word gap), on an upright page as on
    the same page upside down or sideways, where the pieces' page boxes run the other way."""
    from PIL import ImageDraw, ImageFont

    from launcher.model_dir import default_model_dir
    from models.compact.encoder_half import CompactEncoderHalf

    enc = CompactEncoderHalf.load(default_model_dir())
    font = ImageFont.load_default(size=24)
    page = Image.new("RGB", (1700, 700), "white")
    draw = ImageDraw.Draw(page)
    long_line = "The quick brown fox jumps over the lazy dog while five boxing wizards jump quickly past."
    for i in range(5):
        draw.text((40, 60 + 110 * i), long_line, fill="black", font=font)
    for rot in (0, 180, 90):
        joins = enc.preprocess(page.rotate(rot, expand=True), "lines").meta["joins"]
        assert joins.count("line") == 5, (rot, joins)
        assert set(joins) == {"line", "space"} and len(joins) >= 10, (rot, joins)


def test_cells_of_one_row_stay_in_x_order_when_their_centres_differ():
    # "Payment (gross)" has descenders, "$1,234" none: their centres differ by a few pixels, which
    # must not put the right cell first (a bucket boundary between the two centres did).
    row = [_box(100, 100, 400, 131), _box(600, 100, 760, 126)]  # centres 115.5 and 113
    for y in range(0, 40, 3):
        shifted = [_box(b.box[0], b.box[1] + y, b.box[2], b.box[3] + y) for b in row]
        assert reading_order(shifted[::-1]) == shifted, y


def test_title_and_centred_page_number_around_two_columns():
    title = _box(100, 50, 1500, 90)
    left = [_box(100, 150 + 40 * i, 760, 180 + 40 * i) for i in range(20)]
    right = [_box(840, 150 + 40 * i, 1500, 180 + 40 * i) for i in range(20)]
    footer = _box(700, 1000, 900, 1030)  # "- 3 -", centred across the gutter
    assert reading_order([footer] + right + [title] + left) == [title] + left + right + [footer]


@pytest.mark.parametrize("first_y", [30, 27, 25, 28])
def test_tall_receipt_is_detected_in_bands_each_line_once(first_y):
    """A receipt 520 px wide and 6,000 px tall: fitted whole into the detector's 1,600 px its 18-px
    text would shrink to ~5 px; detected band by band every line is found once, in page pixels,
    including lines centred right on the cut between two bands (1,440 px: ``first_y`` 27-28)."""
    from PIL import ImageDraw, ImageFont

    font = ImageFont.load_default(size=18)
    page = Image.new("RGB", (520, 6000), "white")
    draw = ImageDraw.Draw(page)
    ys = list(range(first_y, 5950, 50))
    for i, y in enumerate(ys):
        draw.text((20, y), f"ITEM {i:03d} COFFEE BEANS    {i * 3 + 1}.99", fill="black", font=font)
    _, lines, rotation = _detector().detect(page)
    assert rotation == 0
    centres = [(ln.box[1] + ln.box[3]) / 2 for ln in lines]
    assert len(centres) == len(ys), (len(centres), len(ys))
    assert centres == sorted(centres)  # reading order: top to bottom
    for c, y in zip(centres, ys, strict=True):
        assert abs(c - (y + 11)) < 12  # each line where it was drawn (18-px text below its y)


_DETECTOR = []


def _detector():
    from models.compact.page.detect import LineDetector

    if not _DETECTOR:
        _DETECTOR.append(LineDetector())
    return _DETECTOR[0]


@pytest.mark.parametrize("first_y", [30, 54])
def test_letter_page_detection_finds_each_line_once_and_whole(first_y):
    """A letter page of 44 lines at 200 dpi: the detection pass finds each line once, where it was
    drawn, neither cut nor merged with its neighbours."""
    from PIL import ImageDraw, ImageFont

    font = ImageFont.load_default(size=24)
    page = Image.new("RGB", (1700, 2200), "white")
    draw = ImageDraw.Draw(page)
    ys = list(range(first_y, 2120, 48))
    for i, y in enumerate(ys):
        draw.text((100, y), f"Line {i:02d}: the quick brown fox jumps over the lazy dog {i * 7}", fill="black",
                  font=font)
    lines = _detector()._detect(np.asarray(page))  # the detection pass itself (no orientation vote)
    boxes = sorted((ln.box for ln in lines), key=lambda b: b[1])
    assert len(boxes) == len(ys), (len(boxes), len(ys))
    for b, y in zip(boxes, ys, strict=True):
        assert abs((b[1] + b[3]) / 2 - (y + 14)) < 12 and b[3] - b[1] < 45  # where drawn, not cut or merged
        assert b[2] - b[0] > 550  # whole width (~600 px)


def test_layout_analysed_beside_detection_gives_the_serial_result(shared_dir):
    """:meth:`LineDetector.detect` starts Tesseract's layout analysis of the page while the detector
    runs; on an upright page (a two-column paper, a table page) the result is what detection followed
    by the analysis gives: the same lines, in the same order, the same rules erased."""
    from models.compact.page.detect import LineDetector

    det = LineDetector()
    for name in ("pdfjs_tracemonkey_p01.png", "pdfplumber_warn_p01.png"):
        page = Image.open(shared_dir / "eval" / "pages" / name).convert("RGB")
        image, lines, rotation = det.detect(page)
        serial_image, serial_lines, serial_rotation = det._layout(page, det._detect(np.asarray(page)), 0)
        assert rotation == serial_rotation == 0
        assert [ln.box for ln in lines] == [ln.box for ln in serial_lines]
        assert [ln.join for ln in lines] == [ln.join for ln in serial_lines]
        assert np.array_equal(np.asarray(image.convert("RGB")), np.asarray(serial_image.convert("RGB")))
