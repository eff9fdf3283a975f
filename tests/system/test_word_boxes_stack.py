"""Word boxes through a real stack (LocalStack: encoder, decoder and gateway processes, the embedded
compact model) on the shared eval pages and generated turned pages (issue 42, item 1): the
searchable PDF read by ``pdftotext`` in its default mode and ``-raw`` against our own text, its
``-bbox-layout`` words against the words' boxes of the JSON result, and the hOCR rendered by
OCRmyPDF's renderer; figures as ``python -m bench.word_boxes --stack`` prints them.
"""

from __future__ import annotations

import shutil

import pytest

from bench.word_boxes import served_figures, stack_documents
from launcher.local_stack import LocalStack

pytestmark = [pytest.mark.slow, pytest.mark.system, pytest.mark.timeout(900),
              pytest.mark.skipif(shutil.which("pdftotext") is None, reason="poppler-utils not installed")]

@pytest.fixture(scope="module")
def figures(compact_checkpoint, shared_dir, tmp_path_factory):
    work = tmp_path_factory.mktemp("word_boxes")
    with LocalStack(compact_checkpoint, encoders=1, decoders=1, startup_timeout_s=300) as st:
        return {src.name: served_figures(st.gateway_url, src, work) for src in stack_documents(shared_dir, work)}


def test_the_text_layer_reads_as_our_text(figures):
    # the scotus page too: its line numbers and spaced capitals read as rows of our text, not as
    # columns (gateway/output/text_band.py; the PDF's own text layer reads 21 % CER from our text)
    for name, f in figures.items():
        assert f["pdf_raw_cer"] <= 0.02, (name, f)
        assert f["pdf_cer"] <= 0.02 and f["hocr_cer"] <= 0.02, (name, f)


def test_turned_pages_are_shown_upright(figures):
    assert figures["tess_phototest-rotated-R.png"]["turn"] == 270
    assert figures["rendered_r90.png"]["turn"] == 90 and figures["rendered_r270.png"]["turn"] == 270
    assert figures["rendered_rotate.pdf"]["turn"] == 0  # pdfium showed it upright: /Rotate kept as it was


def test_words_lie_where_the_result_says(figures):
    for name, f in figures.items():
        assert f["located"] >= 0.85, (name, f)  # the scotus page: 90.7 % (a few lines misread)
        assert f["pdf_boxes"] >= 0.95 and f["hocr_boxes"] >= 0.95, (name, f)


def test_pixels_are_unchanged(figures):
    for name, f in figures.items():
        assert f["pixels_same"], name
