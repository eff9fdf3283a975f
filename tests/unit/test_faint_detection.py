"""Faint print is shown to the line detector at full contrast (issue #38: faded thermal and Chinese
receipts lost whole lines the detector did not find; ``models/compact/page/levels.py``)."""

from __future__ import annotations

import numpy as np
import pytest

from models.compact.page.levels import FAINT_RANGE_BELOW, for_detection, page_range


def _page(paper: float, ink: float, noise: float = 4.0) -> np.ndarray:
    """A 200 x 300 page of ``paper`` gray with bars of ``ink`` (a few per cent of its pixels), noisy
    (Gaussian, sigma ``noise`` gray levels)."""
    rng = np.random.default_rng(0)
    a = np.full((200, 300), paper, np.float32)
    for y in range(20, 180, 30):
        for x in range(20, 280, 7):
            a[y:y + 6, x:x + 3] = ink  # strokes 3 px wide
    a += rng.normal(0, noise, a.shape)
    return np.repeat(np.clip(a, 0, 255).astype(np.uint8)[:, :, None], 3, axis=2)


def test_print_of_ordinary_contrast_reaches_the_detector_unchanged():
    """Black print, gray dot-matrix print (ink 90) and a photographed form's gray keep their pixels: the
    same array comes back."""
    for paper, ink in ((250, 0), (252, 90), (200, 60)):
        rgb = _page(paper, ink)
        assert page_range(rgb)[0] - page_range(rgb)[1] >= FAINT_RANGE_BELOW
        assert for_detection(rgb) is rgb


def test_a_sparse_page_of_black_print_is_not_faint():
    """One short black line on a white page (under 0.5 % of its pixels inked) measures its black, not the
    paper's gray: the page reaches the detector unchanged. Before, the ink was the page's 0.5th
    percentile -- paper on a sparse page -- and a rendered page of ``bench/doc_pages.py`` measured 88."""
    a = np.full((400, 600), 255, np.uint8)
    a[100:112, 50:90] = 0  # 480 of 240,000 pixels: 0.2 %
    rgb = np.repeat(a[:, :, None], 3, axis=2)
    assert page_range(rgb)[1] < 30
    assert for_detection(rgb) is rgb
    blank = np.full((400, 600, 3), 250, np.uint8)  # no print at all: nothing to stretch
    assert for_detection(blank) is blank


def test_faint_print_is_stretched_and_its_paper_stays_paper():
    """A faded receipt's levels (paper 240, ink 205): its ink comes out at least twice as far from the
    paper, and the paper's noise is not blown up into ink (blurred first, gain capped)."""
    rgb = _page(240, 205)
    out = for_detection(rgb)
    assert out.shape == rgb.shape and out.dtype == np.uint8
    ink = np.zeros(rgb.shape[:2], bool)
    for y in range(20, 180, 30):
        for x in range(20, 280, 7):
            ink[y + 1:y + 5, x + 1:x + 2] = True  # the strokes' middles
    assert float(255 - out[ink].mean()) > 2 * float(240 - rgb[ink].mean())
    paper = np.zeros(ink.shape, bool)
    paper[5:15, :] = True  # a band of bare paper above the first bar
    assert float(out[paper].min()) > 200


def test_print_fainter_than_the_dark_margin_is_still_seen_as_faint():
    """Print 15 gray levels under its paper (a receipt faded past :data:`DARK_MARGIN`, 24 levels; paper
    noise sigma 2) is measured above the paper's noise (:data:`NOISE_K` x its sigma): its ink level is
    found and the page is stretched for the detector. Before, no pixel was 24 levels dark, the page
    measured as no print and reached the detector unchanged."""
    rgb = _page(240, 225, noise=2.0)
    paper, ink = page_range(rgb)
    assert 220 <= ink <= 230 and paper - ink < FAINT_RANGE_BELOW
    out = for_detection(rgb)
    assert out is not rgb
    ink_px = np.zeros(rgb.shape[:2], bool)
    for y in range(20, 180, 30):
        for x in range(20, 280, 7):
            ink_px[y + 1:y + 5, x + 1:x + 2] = True  # the strokes' middles
    assert float(255 - out[ink_px].mean()) > 2 * float(240 - rgb[ink_px].mean())


def test_a_blank_noisy_page_is_still_no_print():
    """Bare paper with scan noise (sigma 2-8 levels, as ``training.compact.scan_degrade``'s) has no pixel
    beyond the noise margin: ink = paper, and the page reaches the detector unchanged."""
    rng = np.random.default_rng(1)
    for sigma in (2.0, 4.0, 8.0):
        a = np.clip(rng.normal(240, sigma, (400, 600)), 0, 255).astype(np.uint8)
        rgb = np.repeat(a[:, :, None], 3, axis=2)
        assert page_range(rgb)[0] == page_range(rgb)[1]
        assert for_detection(rgb) is rgb


@pytest.fixture(scope="module")
def detector():
    from models.compact.page.detect import LineDetector

    return LineDetector()


def test_the_lines_of_a_faded_receipt_are_found(detector):
    """A generated faded Chinese receipt (``training/compact/scan_docs`` seed 30015, a tune seed of
    bench/receipts.py: paper 242, ink 212, thin monospace print): at most one printed piece has no
    detected line over it. Before, four were missed (its quantity and amount lines; 27.75 % order-free
    CER on the page)."""
    from models.compact.page.unrotate import unrotate_box
    from training.compact.scan_docs import make_document

    doc = make_document(30015)
    assert doc.kind == "receipt_zh"
    _, lines, rotation = detector.detect(doc.image)
    boxes = [unrotate_box(ln.box, rotation, *doc.image.size) for ln in lines]
    missed = [text for text, (x0, y0, x1, y1) in doc.pieces
              if text.strip() and not any(b[0] <= (x0 + x1) / 2 <= b[2] and b[1] <= (y0 + y1) / 2 <= b[3]
                                          for b in boxes)]
    assert len(missed) <= 1, missed
