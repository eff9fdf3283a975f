"""Scan degradations of whole pages: what a receipt, a fax or a filled-in form looks like once printed
and scanned or photographed. Used by the scan-document generator (:mod:`training.compact.scan_docs`),
``bench/receipts.py`` and the confidence calibration (:mod:`training.compact.fit_confidence`).

Every function takes a gray page ("L" PIL image, ink dark on light paper, drawn at
:data:`RENDER_DPI`) and a seeded :class:`random.Random`, and returns a new "L" image; none is
tuned on a page we read. The strengths are chosen to cover what such documents show:

* :func:`thermal`: thermal-paper print -- gray ink (the image's darkest ink lifted to 70-190 of 255),
  vertical streaks where a print-head dot is weak, a fade across the width, blotches where the paper
  aged (a smooth random field of 0.5-1.0 x the ink, patches ~5 mm), grayish paper;
* :func:`dot_matrix`: each glyph redrawn as dots of a printer's grid (pitch 2 px at
  :data:`RENDER_DPI`, 0.17 mm: a 24-pin head; a 9-pin head's 0.35 mm grid needs faces drawn for it,
  which Debian does not ship: TrueType faces sampled that coarsely turn 6 into 8 for every
  engine), the dots a disk of 0.35-0.5 of the pitch;
* :func:`rescan`: the page resampled from :data:`RENDER_DPI` to a scanner's ``dpi`` (100-200) with a
  little blur, gaussian noise and speckle; :func:`jpeg` re-encodes it at a given quality;
* :func:`fax`: a standard-resolution fax -- 204 x 98 dpi, black and white (threshold 110-170),
  shown with square pixels again (each row twice);
* :func:`photo_warp`: a phone photo: the page in a perspective (corners moved by up to 3 % of the
  side) on a darker background, uneven light and a slight defocus blur.
"""

from __future__ import annotations

import io
import random
from collections.abc import Callable

import numpy as np
from PIL import Image, ImageFilter

#: Resolution the generator draws pages at, in dots per inch; :func:`rescan` brings them down.
RENDER_DPI = 300


def _array(img: Image.Image) -> np.ndarray:
    return np.asarray(img.convert("L"), dtype=np.float32)


def _image(a: np.ndarray) -> Image.Image:
    return Image.fromarray(np.clip(a, 0, 255).astype(np.uint8), "L")


def thermal(img: Image.Image, rng: random.Random) -> Image.Image:
    """Faded thermal print: ink lifted from black to 70-190, paper 225-250, a left-to-right fade of
    up to 35 % of the ink, 2-8 weak print-head columns (vertical streaks with 40-80 % of the ink),
    blotches (the ink times a bilinear random field in [0.5, 1] on a 60-px grid).
    """
    a = _array(img)
    ink = 1.0 - a / 255.0  # 1 where black ink
    fade = np.linspace(1.0, rng.uniform(0.65, 1.0), a.shape[1], dtype=np.float32)
    if rng.random() < 0.5:
        fade = fade[::-1]
    gen = np.random.default_rng(rng.getrandbits(32))
    for _ in range(rng.randint(2, 8)):
        x = rng.randrange(a.shape[1])
        fade[x: x + rng.randint(1, 4)] *= rng.uniform(0.4, 0.8)
    paper, dark = rng.uniform(225, 250), rng.uniform(70, 190)
    field = gen.uniform(0.5, 1.0, (a.shape[0] // 60 + 2, a.shape[1] // 60 + 2)).astype(np.float32)
    blotch = np.asarray(Image.fromarray(field, "F").resize((a.shape[1], a.shape[0]), Image.Resampling.BILINEAR))
    out = paper - ink * fade[None, :] * blotch * (paper - dark)
    return _image(out + gen.normal(0, rng.uniform(2, 8), a.shape))


def dot_matrix(img: Image.Image, rng: random.Random) -> Image.Image:
    """Glyphs redrawn as printer dots: the ink sampled on a square grid of pitch 2 px (a cell
    holding a pixel below 128 of 255 is inked, so thin strokes keep their dots), each inked cell a
    disk of radius 0.35-0.5 pitch, drawn as the cell's pixels whose centres it covers -- at least
    the ``pitch`` x ``pitch`` cell's centre pixels, so a dot is never empty (at pitch 2 the pixel
    centres lie 0.354 pitch from the cell's centre: a radius drawn below that left every cell blank,
    a blank page, ``make_document(31010)``); ribbon ink 20-90 of 255.
    """
    pitch = 2
    a = _array(img)
    h, w = a.shape
    gh, gw = -(-h // pitch), -(-w // pitch)
    padded = np.full((gh * pitch, gw * pitch), 255.0, dtype=np.float32)
    padded[:h, :w] = a
    cells = padded.reshape(gh, pitch, gw, pitch).min(axis=(1, 3)) < 128  # a cell with ink prints a dot
    yy, xx = np.mgrid[:pitch, :pitch] - (pitch - 1) / 2
    reach = (yy ** 2 + xx ** 2).min()  # the nearest pixel centres' squared distance from the cell's centre
    disk = (yy ** 2 + xx ** 2) <= max((rng.uniform(0.35, 0.5) * pitch) ** 2, reach)
    dots = np.kron(cells, disk)[:h, :w]
    ink = rng.uniform(20, 90)
    out = np.where(dots, ink, 255.0).astype(np.float32)
    return _image(out).filter(ImageFilter.GaussianBlur(rng.uniform(0.3, 0.8)))


def fax(img: Image.Image, rng: random.Random) -> Image.Image:
    """A standard fax of the page drawn at :data:`RENDER_DPI`: resampled to 204 x 98 dpi, thresholded
    at 110-170 (black and white), each row then doubled (about 204 x 196 dpi, square pixels); a few
    rows of transmission noise (1-6 rows with 2-10 % of their pixels flipped).
    """
    w, h = round(img.width * 204 / RENDER_DPI), round(img.height * 98 / RENDER_DPI)
    a = _array(img.resize((w, h), Image.Resampling.BOX))
    bw = np.where(a < rng.uniform(110, 170), 0.0, 255.0).astype(np.float32)
    gen = np.random.default_rng(rng.getrandbits(32))
    for _ in range(rng.randint(1, 6)):
        y = rng.randrange(h)
        flip = gen.random(w) < rng.uniform(0.02, 0.1)
        bw[y, flip] = 255.0 - bw[y, flip]
    return _image(np.repeat(bw, 2, axis=0))


def rescan(img: Image.Image, rng: random.Random, dpi: int) -> Image.Image:
    """The page as a scanner at ``dpi`` gives it: resampled from :data:`RENDER_DPI` (box filter),
    blur 0-0.6 px, gaussian noise sigma 1-8, speckle on up to 0.05 % of the pixels.
    """
    f = dpi / RENDER_DPI
    small = img.resize((max(8, round(img.width * f)), max(8, round(img.height * f))), Image.Resampling.BOX)
    if rng.random() < 0.5:
        small = small.filter(ImageFilter.GaussianBlur(rng.uniform(0.2, 0.6)))
    a = _array(small)
    gen = np.random.default_rng(rng.getrandbits(32))
    a = a + gen.normal(0, rng.uniform(1, 8), a.shape)
    speck = gen.random(a.shape) < rng.uniform(0, 0.0005)
    a[speck] = gen.choice([0.0, 255.0], size=int(speck.sum()))
    return _image(a)


def jpeg(img: Image.Image, quality: int) -> Image.Image:
    """``img`` re-encoded as a JPEG of ``quality`` (1-95) and decoded again."""
    buf = io.BytesIO()
    img.convert("L").save(buf, "JPEG", quality=quality)
    return Image.open(io.BytesIO(buf.getvalue())).convert("L")


Box = tuple[float, float, float, float]


def photo_warp(img: Image.Image, rng: random.Random) -> tuple[Image.Image, Callable[[Box], Box]]:
    """A phone photo of the page: a background margin of 4 % (gray 60-140), each corner moved by up
    to 3 % of the page side (perspective), light falling off by up to 30 % across the page, blur
    0.5-1.2 px. Returns the photo and the map of a box (x0, y0, x1, y1) of ``img`` to the bounds of
    its four corners in the photo.
    """
    w, h = img.size
    mx, my = int(0.04 * w), int(0.04 * h)
    bg = rng.randint(60, 140)
    canvas = Image.new("L", (w + 2 * mx, h + 2 * my), bg)
    canvas.paste(img.convert("L"), (mx, my))
    cw, ch = canvas.size

    def jit(x: float, y: float) -> tuple[float, float]:
        return x + rng.uniform(-0.03, 0.03) * w, y + rng.uniform(-0.03, 0.03) * h

    dst = [(0.0, 0.0), (float(cw), 0.0), (float(cw), float(ch)), (0.0, float(ch))]
    src = [jit(x, y) for x, y in dst]
    coeffs, forward = _perspective(dst, src), _perspective(src, dst)

    def move(box: Box) -> Box:
        a, b, c, d, e, f, g, h = forward
        pts = [(x + mx, y + my) for x, y in ((box[0], box[1]), (box[2], box[1]), (box[2], box[3]), (box[0], box[3]))]
        xs = [(a * x + b * y + c) / (g * x + h * y + 1) for x, y in pts]
        ys = [(d * x + e * y + f) / (g * x + h * y + 1) for x, y in pts]
        return min(xs), min(ys), max(xs), max(ys)

    warped = canvas.transform(canvas.size, Image.Transform.PERSPECTIVE, coeffs, Image.Resampling.BILINEAR,
                              fillcolor=bg)
    a = _array(warped)
    yy, xx = np.mgrid[:ch, :cw].astype(np.float32)
    cx, cy = rng.uniform(0, cw), rng.uniform(0, ch)
    r = np.hypot(xx - cx, yy - cy) / np.hypot(cw, ch)
    a = a * (1.0 - rng.uniform(0.0, 0.3) * r)
    return _image(a).filter(ImageFilter.GaussianBlur(rng.uniform(0.5, 1.2))), move


def _perspective(dst: list[tuple[float, float]], src: list[tuple[float, float]]) -> tuple[float, ...]:
    """PIL's 8 perspective coefficients mapping output corners ``dst`` to input corners ``src``."""
    rows = []
    for (x, y), (u, v) in zip(dst, src, strict=True):
        rows.append([x, y, 1, 0, 0, 0, -u * x, -u * y])
        rows.append([0, 0, 0, x, y, 1, -v * x, -v * y])
    b = np.array([c for uv in src for c in uv], dtype=np.float64)
    return tuple(float(c) for c in np.linalg.solve(np.array(rows, dtype=np.float64), b))
