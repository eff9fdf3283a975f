"""Word boxes (issue 42): words found on a segment's ink, carried through the page result to the
searchable PDF and hOCR, and read back by poppler (``pdftotext`` default mode and ``-bbox-layout``)
and OCRmyPDF's hOCR renderer on seeded rendered pages whose word ink boxes are known, upright,
turned by 90/180/270 degrees, in a PDF page with ``/Rotate`` and in an image with EXIF orientation.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from bench.word_box_pages import make_page, turned
from bench.word_boxes import (
    cer,
    iou,
    measure,
    measure_exif,
    measure_rotate_pdf,
    pdftotext,
)
from gateway.output.hocr import render_hocr
from gateway.output.lines import page_regions
from gateway.output.searchable_pdf import page_turn, write_searchable_pdf
from gateway.output.stitch import page_result
from gateway.output.word_boxes import locate_words, turn_box
from gateway.types import PageOutcome, SegmentText

needs_poppler = pytest.mark.skipif(shutil.which("pdftotext") is None, reason="poppler-utils not installed")


@pytest.fixture(scope="module")
def page():
    return make_page(7, size=(1100, 900), n_lines=10)


def test_each_word_is_found_on_its_ink(page):
    gray = np.asarray(page.image.convert("L"))
    ious = []
    for ln in page.lines:
        found = locate_words(gray, ln.text, ln.box)
        assert found is not None and [w for w, _ in found] == ln.words
        ious += [iou(b, t) for (_, b), t in zip(found, ln.word_boxes, strict=True)]
    assert min(ious) >= 0.8 and np.mean(ious) >= 0.95


def test_words_not_matching_the_ink_are_refused(page):
    gray = np.asarray(page.image.convert("L"))
    ln = page.lines[0]
    assert locate_words(gray, ln.text, (2.0, 2.0, 60.0, 40.0)) is None  # blank paper: no ink
    assert locate_words(gray, " ".join(["x"] * 200), ln.box) is None  # more words than ink runs
    assert locate_words(gray, "", ln.box) == []


@pytest.mark.parametrize("degrees", [0, 90, 180, 270])
def test_turn_box_agrees_with_the_turned_image(page, degrees):
    shown = turned(page, degrees)
    gray = np.asarray(shown.image.convert("L"))
    for ln in shown.lines[:3]:
        x0, y0, x1, y1 = (int(v) for v in ln.word_boxes[0])
        assert (gray[y0:y1, x0:x1] < 128).any()
    back = turn_box(turn_box((10.0, 20.0, 30.0, 60.0), (100, 80), degrees),
                    (100, 80) if degrees % 180 == 0 else (80, 100), (360 - degrees) % 360)
    assert back == (10.0, 20.0, 30.0, 60.0)


def test_words_and_turn_go_through_stitch_lines_and_hocr():
    segs = [SegmentText(0, "two words", (10, 0, 20, 100), generated_tokens=9, confidence=0.9, rotation=270,
                        words=[("two", (10, 0, 20, 40)), ("words", (10, 50, 20, 100))])]
    result = page_result(PageOutcome(0, "ok", segments=segs, width=100, height=100), doc_size=(200, 200))
    [block] = result.blocks
    assert block.angle == 90 and [w.text for w in block.words] == ["two", "words"]
    assert block.words[1].box == (20, 100, 40, 200) and block.words[1].confidence == block.confidence
    [region] = page_regions(result)
    line = region.lines[0]
    # along the line: the words' extent; across it: the band set for the text layer (text_band.set_row),
    # which a reader sees as a box from 1.05 band heights over its bottom to 0.015 under it (here: over its left)
    assert line.angle == 90 and line.box[1::2] == (0, 200) and line.box[0] < 20 < line.box[2] < 40
    assert page_turn(result) == 90
    assert "textangle 90" in render_hocr([result]) and "bbox 20 100 40 200" in render_hocr([result])
    # words that do not match the block's text are not used
    segs[0].words = [("other", (10, 0, 20, 100))]
    assert page_result(PageOutcome(0, "ok", segments=segs, width=100, height=100)).blocks[0].words == []


@needs_poppler
@pytest.mark.parametrize("degrees", [0, 90, 180, 270])
def test_searchable_pdf_and_hocr_words_lie_on_their_ink(page, degrees, tmp_path):
    truth = turned(page, degrees) if degrees else page
    f = measure(f"r{degrees}", truth, tmp_path)
    assert f.pdf_cer <= 0.02 and f.hocr_cer <= 0.02, f
    assert f.pdf_hits >= 0.95 * f.words and f.hocr_hits >= 0.95 * f.words, f
    assert f.pixels_same
    assert cer(page.text, pdftotext(tmp_path / f"r{degrees}.pdf", "-raw")) <= 0.02


@needs_poppler
@pytest.mark.parametrize("rotate", [90, 270])
def test_a_pdf_page_with_rotate_gets_an_aligned_text_layer(page, rotate, tmp_path):
    f = measure_rotate_pdf(f"rot{rotate}", page, tmp_path, rotate)
    assert f.pdf_cer <= 0.02 and f.pdf_hits >= 0.95 * f.words and f.pixels_same, f


@needs_poppler
def test_an_image_with_exif_orientation_gets_an_aligned_text_layer(page, tmp_path):
    f = measure_exif("exif", page, tmp_path)
    assert f.pdf_cer <= 0.02 and f.pdf_hits >= 0.95 * f.words and f.pixels_same, f


@needs_poppler
def test_without_word_boxes_words_are_still_spread_over_their_line(page, tmp_path):
    png = tmp_path / "p.png"
    page.image.save(png)
    segs = [SegmentText(i, ln.text, ln.box, generated_tokens=len(ln.text)) for i, ln in enumerate(page.lines)]
    w, h = page.image.size
    result = page_result(PageOutcome(0, "ok", segments=segs, width=w, height=h))
    assert all(not b.words for b in result.blocks)
    write_searchable_pdf([result], png, "png", tmp_path / "p.pdf")
    assert cer(result.text, pdftotext(tmp_path / "p.pdf", "-raw")) <= 0.02
