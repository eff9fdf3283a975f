"""Hairline double quotes (models/compact/line/quotes.py): the held-out geometric face's ``"`` is found
at body sizes, the quotes of trained faces and other small marks (apostrophes, i dots, commas) are not,
and the bilingual encoder half routes a line holding one to the PP tower (the Latin tower reads it
as ``'``: bench/font_pages.py)."""

from __future__ import annotations

import glob

import pytest
from PIL import Image, ImageDraw, ImageFont

from models.compact import default_checkpoint_dir
from models.compact.line.quotes import hairline_quotes

QUOTED = 'A copy that is not "Transparent" is called "Opaque".'
PLAIN = "the work's title, in its licensee's own copy: i, j, l and I; it's 'quoted'."


def _font(name: str) -> str:
    paths = sorted(glob.glob(f"/usr/share/fonts/**/{name}", recursive=True))
    if not paths:
        pytest.skip(f"{name} not installed (make system-packages)")
    return paths[0]


def _line(path: str, text: str, size: int) -> Image.Image:
    """One line of ``text`` at ``size`` px with a quarter of its height of paper around (a detector crop)."""
    font = ImageFont.truetype(path, size)
    x0, y0, x1, y1 = (int(v) for v in font.getbbox(text))
    pad = size // 4
    img = Image.new("RGB", (x1 - x0 + 2 * pad, y1 - y0 + 2 * pad), "white")
    ImageDraw.Draw(img).text((pad - x0, pad - y0), text, font=font, fill="black")
    return img


@pytest.mark.parametrize("size", [22, 28, 36, 48])
def test_geometric_face_double_quotes_are_hairlines(size):
    book = _font("URWGothic-Book.*")
    assert hairline_quotes(_line(book, QUOTED, size)) == 4
    assert hairline_quotes(_line(book, PLAIN, size)) == 0  # apostrophes, single quotes, i dots


@pytest.mark.parametrize("name", ["DejaVuSans.ttf", "LiberationSerif-Regular.ttf", "LiberationSans-Regular.ttf",
                                  "NimbusSans-Regular.*", "LiberationMono-Regular.ttf", "P052-Roman.*"])
@pytest.mark.parametrize("size", [22, 30, 36])
def test_trained_faces_double_quotes_are_not(name, size):
    assert hairline_quotes(_line(_font(name), QUOTED, size)) == 0


def test_blank_and_tiny_crops_hold_none():
    assert hairline_quotes(Image.new("RGB", (200, 30), "white")) == 0
    assert hairline_quotes(Image.new("L", (3, 3), 0)) == 0


def test_bilingual_encoder_routes_a_hairline_quote_line_to_pp():
    from models.compact.encoder_half import CompactEncoderHalf

    enc = CompactEncoderHalf.load(default_checkpoint_dir())
    if enc._pp is None:
        pytest.skip("the default checkpoint has no PP tower")
    book, sans = _font("URWGothic-Book.*"), _font("DejaVuSans.ttf")
    prose = ["The Document may include Warranty Disclaimers next to the notice.",
             "You may copy and distribute the Document in any medium, either commercially",
             "or noncommercially, provided that this License, the copyright notices, and",
             "the license notice saying this License applies to the Document are reproduced",
             "in all copies, and that you add no other conditions whatsoever to those of",
             "this License. You may not use technical measures to obstruct or control the"]
    crops = [_line(book, QUOTED, 28), _line(sans, QUOTED, 28), *(_line(sans, t, 28) for t in prose)]
    routes, *_ = enc.route(crops)
    assert routes == [True] + [False] * (len(crops) - 1)  # the Latin tower reads the rest


def test_specks_above_the_text_are_no_quote():
    """A fax's dotted rule above a line leaves short thin specks over its cap line (a generated faxed
    form, bench/receipts.py seed 10,001, was moved to the PP tower for them): no quote strokes."""
    img = _line(_font("DejaVuSans.ttf"), "Name: Pierre Garcia", 28)
    pad = 14
    canvas = Image.new("RGB", (img.width, img.height + pad), "white")
    canvas.paste(img, (0, pad))
    draw = ImageDraw.Draw(canvas)
    for x in (30, 33, 90, 93, 150, 153):  # pairs of 1-px specks, 3 px tall, 2 px apart
        draw.rectangle((x, 6, x, 8), fill="black")
    assert hairline_quotes(canvas) == 0
