"""Synthetic magazine-like pages with known reading order: 2-3 columns, a spanning title, a running
header and a page number, an inset "photo" the column text wraps around, an optional drop cap, and
a small skew; rendered with Debian fonts (fonts-dejavu, fonts-liberation), seeded.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python bench/layout_pages.py [--pages N] [--seed S] [--out DIR]``
writes ``layout_K.png`` + ``layout_K.gt.txt`` pairs (a folder ``inkstream eval`` reads) and, unless
``--no-eval``, reads them in-process and prints CER per page; the last line is ``layout_cer: X``.

Ground truth is in reading order: header, title, each column top to bottom (left to right), page
number. The text is English prose from the Debian licence texts (``/usr/share/common-licenses``).
"""

from __future__ import annotations

import argparse
import pathlib
import random
import re
import sys
from dataclasses import dataclass

from PIL import Image, ImageDraw, ImageFilter, ImageFont

FONT_DIRS = ("/usr/share/fonts/truetype/dejavu", "/usr/share/fonts/truetype/liberation")
BODY_FONTS = ("DejaVuSerif.ttf", "LiberationSerif-Regular.ttf", "LiberationSans-Regular.ttf", "DejaVuSans.ttf")
TITLE_FONTS = ("DejaVuSerif-Bold.ttf", "LiberationSans-Bold.ttf")
TEXT_FILES = ("/usr/share/common-licenses/GPL-3", "/usr/share/common-licenses/Apache-2.0",
              "/usr/share/common-licenses/LGPL-2.1")
PAGE = (1700, 2200)  # US letter at 200 dpi
MARGIN = 120


@dataclass
class Page:
    """A rendered page and its ground truth (lines in reading order)."""

    image: Image.Image
    lines: list[str]


def _font(names: tuple[str, ...], size: int, rng: random.Random) -> ImageFont.FreeTypeFont:
    paths = [pathlib.Path(d) / n for n in names for d in FONT_DIRS if (pathlib.Path(d) / n).is_file()]
    if not paths:
        raise FileNotFoundError(f"none of the fonts {names} under {FONT_DIRS} (apt-get install fonts-dejavu)")
    return ImageFont.truetype(str(rng.choice(paths)), size)


def _words(rng: random.Random) -> list[str]:
    texts = [pathlib.Path(p).read_text(errors="ignore") for p in TEXT_FILES if pathlib.Path(p).is_file()]
    if not texts:
        raise FileNotFoundError(f"no text under {TEXT_FILES}")
    words = re.findall(r"[A-Za-z][A-Za-z,.;:'()-]*", " ".join(texts))
    start = rng.randrange(0, max(1, len(words) - 4000))
    return words[start: start + 4000]


def _wrap(words: list[str], font: ImageFont.FreeTypeFont, width: float) -> tuple[str, list[str]]:
    """One line of at most ``width`` pixels from the front of ``words`` (consumed); "" when not even
    the first word fits.
    """
    line: list[str] = []
    while words and font.getlength(" ".join([*line, words[0]])) <= width:
        line.append(words.pop(0))
    return " ".join(line), words


def render_page(seed: int, skew_deg: float | None = None) -> Page:
    """Page number ``seed``: 2 or 3 columns, title, header, page number, photo, maybe a drop cap,
    skewed by ``skew_deg`` (default: seeded in [-4, 4] degrees).
    """
    rng = random.Random(seed)
    W, H = PAGE
    img = Image.new("L", PAGE, 255)
    draw = ImageDraw.Draw(img)
    words = _words(rng)
    gt: list[str] = []
    small = _font(BODY_FONTS, 24, rng)
    header = f"{rng.choice(['The Review', 'Monthly Notes', 'Field Report'])} {rng.randint(1990, 2025)}"
    draw.text((MARGIN, 60), header, font=small, fill=0)
    gt.append(header)
    title_font = _font(TITLE_FONTS, rng.choice([64, 76, 90]), rng)
    title, words = _wrap(words, title_font, W - 2 * MARGIN - 200)
    draw.text((MARGIN, 140), title, font=title_font, fill=0)
    gt.append(title)
    n_cols = rng.choice([2, 3])
    gutter = 60
    col_w = (W - 2 * MARGIN - (n_cols - 1) * gutter) / n_cols
    body = _font(BODY_FONTS, rng.choice([30, 32, 34]), rng)
    step = int(body.size * 1.35)
    top, bottom = 140 + title_font.size + 80, H - 200
    photo_col = rng.randrange(n_cols)
    py0 = rng.randint(top + 200, bottom - 700)
    photo = (0, py0, 0, py0 + rng.randint(350, 550))
    for c in range(n_cols):
        x = MARGIN + c * (col_w + gutter)
        y = top
        drop = c == 0 and rng.random() < 0.5
        if c == photo_col:  # the photo takes the column's left 70 %, text runs beside it
            px1 = x + 0.5 * col_w
            photo = (int(x), photo[1], int(px1), photo[3])
            size = (photo[2] - photo[0], photo[3] - photo[1])
            noise = Image.effect_noise(size, 90).filter(ImageFilter.GaussianBlur(3))
            img.paste(noise.point(lambda v: int(v * 0.7)), photo[:2])
        while y + step < bottom and words:
            lx, lw = x, col_w
            if c == photo_col and photo[1] - step < y < photo[3] + 20:
                lx, lw = photo[2] + 24, x + col_w - photo[2] - 24
            if drop and y == top:  # a drop cap three lines tall
                cap_font = _font(TITLE_FONTS, int(step * 2.6), rng)
                first = words.pop(0)
                draw.text((x, y - int(step * 0.15)), first[0], font=cap_font, fill=0)
                words.insert(0, first[1:])
                cap_w = cap_font.getlength(first[0]) + 14
                for k in range(3):
                    line, words = _wrap(words, body, col_w - cap_w)
                    draw.text((x + cap_w, y), line, font=body, fill=0)
                    gt.append((first[0] if k == 0 else "") + line)
                    y += step
                drop = False
                continue
            line, words = _wrap(words, body, lw)
            if line:
                draw.text((lx, y), line, font=body, fill=0)
                gt.append(line)
            y += step
    number = str(rng.randint(2, 300))
    draw.text((W - MARGIN - small.getlength(number), H - 110), number, font=small, fill=0)
    gt.append(number)
    angle = rng.uniform(-4.0, 4.0) if skew_deg is None else skew_deg
    img = img.rotate(angle, resample=Image.Resampling.BICUBIC, expand=True, fillcolor=255)
    return Page(img.convert("RGB"), gt)


def main(argv: list[str] | None = None) -> int:
    """Write the pages (and read them in-process unless --no-eval); last line ``layout_cer: X``."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pages", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--skew", type=float, default=None, help="skew of every page in degrees (default: seeded)")
    p.add_argument("--out", default="/tmp/inkstream_layout_pages")
    p.add_argument("--no-eval", action="store_true")
    args = p.parse_args(argv)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for k in range(args.pages):
        page = render_page(args.seed + k, args.skew)
        page.image.save(out / f"layout_{k}.png", dpi=(200, 200))
        (out / f"layout_{k}.gt.txt").write_text("\n".join(page.lines) + "\n")
    if args.no_eval:
        return 0
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
    from evaluation.engines import InProcessEngine
    from evaluation.run import score  # after the sys.path insert
    from evaluation.score import Score

    eng = InProcessEngine(None, threads=1)
    total = Score(0, 0, 0, 0)
    for k in range(args.pages):
        text, _ = eng.ocr(out / f"layout_{k}.png")
        s = score(text, (out / f"layout_{k}.gt.txt").read_text())
        total = total + s
        print(f"layout_{k}: CER {100 * s.cer:.2f} %", flush=True)
    print(f"layout_cer: {total.cer:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
