"""On-the-fly synthetic text-line images that look like detector crops of scanned / rasterised pages.

A line is drawn with a random font (serif, sans, mono, bold, italic; Debian font packages, see
:func:`find_fonts`) at a random pixel size, in a box whose top/bottom margins vary like PP-OCR
detection boxes (tight to loose, sometimes clipping ascenders), then degraded the way real pages are:
gaussian blur, resampling, speckle / gaussian noise, JPEG artefacts, slight rotation, uneven
contrast (illumination gradient, faded ink), underline and table rules, fragments of neighbouring
lines. The result is a PIL gray image that :func:`models.compact.line.image.normalise_line` turns
into the encoder input exactly as at inference time.

Held-out fonts: families listed in :data:`EVAL_FONT_FAMILIES` are never used for training.
"""

from __future__ import annotations

import glob
import io
import os
import random
import subprocess
from functools import cache, lru_cache

import numpy as np
from fontTools.ttLib import TTFont
from PIL import Image, ImageDraw, ImageFilter, ImageFont

FONT_DIRS = ["/usr/share/fonts", "/usr/share/texmf/fonts/opentype/public"]
# Not text fonts (symbols, dingbats, calligraphic script, math).
_EXCLUDE = ("D050000L", "StandardSymbols", "Z003", "Math", "math", "chorus", "ExtraLight", "Hairline", "Thin")
_LATIN_FAMILIES = ("DejaVu", "Liberation", "Free", "Nimbus", "C059", "P052", "URW", "Carlito", "Caladea",
                   "texgyre", "NotoSans-", "NotoSerif-", "NotoSansMono-", "NotoSerifDisplay-", "NotoSansDisplay-",
                   # geometric / humanist sans, typewriter and monospace faces of other Debian packages
                   # (fonts-league-spartan fonts-comfortaa fonts-quicksand fonts-cantarell fonts-lato
                   # fonts-open-sans fonts-jura fonts-hack fonts-inconsolata fonts-courier-prime)
                   "LeagueSpartan-", "Comfortaa-", "Quicksand-", "Cantarell-", "Lato-", "OpenSans-", "Jura-",
                   "Hack-", "Inconsolata", "Courier Prime")
# Held out for the synthetic evaluation (a sans, a serif, a mono, a geometric sans). TeX Gyre Adventor is
# URW Gothic's design (the same family), so it is held out with it (trained on before step 82,856).
EVAL_FONT_FAMILIES = ("Carlito", "texgyrebonum", "LiberationMono", "URWGothic", "texgyreadventor")


def find_fonts() -> tuple[list[str], list[str]]:
    """(train_fonts, eval_fonts): paths of installed Latin text fonts (.ttf/.otf), split by family."""
    paths: list[str] = []
    for d in FONT_DIRS:
        paths += glob.glob(os.path.join(d, "**", "*.ttf"), recursive=True)
        paths += glob.glob(os.path.join(d, "**", "*.otf"), recursive=True)
    paths = sorted(p for p in set(paths) if os.path.basename(p).startswith(_LATIN_FAMILIES)
                   and not any(x in p for x in _EXCLUDE))
    train = [p for p in paths if not os.path.basename(p).startswith(EVAL_FONT_FAMILIES)]
    held = [p for p in paths if os.path.basename(p).startswith(EVAL_FONT_FAMILIES)]
    return train, held


def _face(spec: str) -> tuple[str, int]:
    """``"path"`` or ``"path#N"`` (face N of a .ttc collection) -> (path, face index)."""
    path, _, index = spec.partition("#")
    return path, int(index or 0)


@cache
def font_charset(path: str) -> frozenset[str]:
    """Characters with a glyph in the font's best Unicode cmap (fontTools); ``path`` may name a
    face of a collection as ``"file.ttc#N"``.
    """
    file, index = _face(path)
    with TTFont(file, lazy=True, fontNumber=index) as f:
        cmap = f.getBestCmap() or {}
    return frozenset(chr(c) for c in cmap)


@lru_cache(maxsize=2048)
def _font(path: str, size: int) -> ImageFont.FreeTypeFont:
    file, index = _face(path)
    return ImageFont.truetype(file, size, index=index)


def _rule(draw: ImageDraw.ImageDraw, rng: random.Random, w: int, h: int, ink: int, y_base: int) -> None:
    kind = rng.random()
    width = rng.randint(1, max(1, h // 14))
    if kind < 0.4:  # underline just below the baseline
        y = min(h - 1, y_base + rng.randint(1, max(2, h // 8)))
        draw.line([(rng.randint(0, w // 4), y), (w - rng.randint(0, w // 4), y)], fill=ink, width=width)
    elif kind < 0.7:  # table rules at top and/or bottom edge
        for y in ([0] if rng.random() < 0.5 else []) + [h - 1 - rng.randint(0, 2)]:
            draw.line([(0, y), (w, y)], fill=ink, width=width)
    else:  # vertical table rules at the ends
        for x in (rng.randint(0, 3), w - 1 - rng.randint(0, 3)):
            draw.line([(x, 0), (x, h)], fill=ink, width=width)


def render_line(text: str, fonts: list[str], rng: random.Random, positions: list[float] | None = None) -> Image.Image:
    """Render ``text`` as a degraded gray line crop (PIL "L" image, height ~ 14..70 pixels).

    If ``positions`` is a list, it receives the x centre (pixels of the returned image) of every
    character of ``text`` (advance widths from ``FreeTypeFont.getlength``; kerning and the small
    skew are ignored), used to supervise the decoder's attention during training.

    The font is re-drawn until one covers every character of ``text`` (falls back to the first font
    covering it; raises ValueError if none does).
    """
    usable = [f for f in rng.sample(fonts, min(len(fonts), 12)) if set(text) <= font_charset(f)]
    if not usable:
        usable = [f for f in fonts if set(text) <= font_charset(f)]
    if not usable:
        raise ValueError(f"no font covers {text!r}")
    font = _font(usable[0], rng.choice(range(16, 48, 2)))
    ascent, descent = font.getmetrics()
    left, _top, right, _bottom = font.getbbox(text)
    tw = max(1, int(right - min(0, left)))  # FreeType bboxes are whole pixels (typed as float)
    line_h = ascent + descent
    # Detector boxes: margins from slightly clipped (-6%) to loose (+40%) of the line height.
    mt = int(line_h * rng.uniform(-0.06, 0.35))
    mb = int(line_h * rng.uniform(-0.06, 0.35))
    ml = int(line_h * rng.choice([rng.uniform(0, 0.1), rng.uniform(0.0, 0.6)]))
    mr = int(line_h * rng.choice([rng.uniform(0, 0.1), rng.uniform(0.0, 0.6)]))
    w, h = tw + ml + mr, max(8, line_h + mt + mb)
    paper = rng.randint(170, 255) if rng.random() < 0.3 else rng.randint(225, 255)
    ink = rng.randint(0, min(110, paper - 60)) if rng.random() < 0.3 else rng.randint(0, 50)
    img = Image.new("L", (w, h), paper)
    draw = ImageDraw.Draw(img)
    if rng.random() < 0.4:  # the lines above / below, one line pitch away, peeking into the crop
        for sign in (-1, 1):
            if rng.random() < 0.75:
                other = "".join(rng.choice("abcdefghijklmnopqrstuvwxyzgjpqyABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ")
                                for _ in range(max(3, len(text) + rng.randint(-5, 5))))
                pitch = int(line_h * rng.uniform(0.95, 1.4))
                draw.text((ml + rng.randint(-line_h, line_h), mt + sign * pitch), other, font=font, fill=ink)
    x0 = ml - min(0, left)
    draw.text((x0, mt), text, font=font, fill=ink)
    if positions is not None:
        ends = [font.getlength(text[: k + 1]) for k in range(len(text))]
        positions[:] = [x0 + (a + b) / 2 for a, b in zip([0.0, *ends[:-1]], ends, strict=True)]
    if rng.random() < 0.12:
        _rule(draw, rng, w, h, ink, mt + ascent)
    if rng.random() < 0.25:  # skew, small enough that the line ends stay inside the crop
        max_deg = min(1.2, float(np.degrees(np.arctan(0.12 * h / max(1.0, w / 2)))))
        img = img.rotate(rng.uniform(-max_deg, max_deg), resample=Image.Resampling.BILINEAR, expand=False,
                         fillcolor=paper)
    if rng.random() < 0.5:
        img = img.filter(ImageFilter.GaussianBlur(rng.uniform(0.2, 1.3)))
    if rng.random() < 0.3:  # lose resolution: downscale, then back up (scan / rasterisation)
        f = rng.uniform(0.45, 0.85)
        small = img.resize((max(1, int(w * f)), max(1, int(h * f))), Image.Resampling.BILINEAR)
        img = small.resize((w, h), Image.Resampling.BILINEAR) if rng.random() < 0.5 else small
    a: np.ndarray = np.asarray(img, dtype=np.float32)  # float64 once the noise below is added
    if rng.random() < 0.3:  # illumination gradient / faded regions
        g = np.linspace(rng.uniform(0.6, 1.0), rng.uniform(0.6, 1.0), a.shape[1], dtype=np.float32)
        a = 255.0 - (255.0 - a) * g[None, :]
        a = a * rng.uniform(0.85, 1.0) + rng.uniform(0, 20)
    if rng.random() < 0.5:
        a = a + np.random.default_rng(rng.getrandbits(32)).normal(0, rng.uniform(2, 18), a.shape)
    if rng.random() < 0.08:  # speckle
        m = np.random.default_rng(rng.getrandbits(32)).random(a.shape) < rng.uniform(0.001, 0.01)
        a[m] = rng.choice([0.0, 255.0])
    img = Image.fromarray(np.clip(a, 0, 255).astype(np.uint8), "L")
    if rng.random() < 0.3:
        buf = io.BytesIO()
        img.save(buf, "JPEG", quality=rng.randint(25, 90))
        img = Image.open(io.BytesIO(buf.getvalue())).convert("L")
    if positions is not None:
        positions[:] = [p * img.width / w for p in positions]
    return img


# Families held out of training for the synthetic evaluation: a Hei (sans), a Kai and a mono face.
ZH_EVAL_FAMILIES = ("WenQuanYi Micro Hei", "AR PL KaitiM GB", "Noto Sans Mono CJK SC")


ZH_SKIP = ("Sharp", "HK", "TW", "JP", "KR", "TC", "Mono,")  # bitmap / non-simplified faces


def find_zh_fonts() -> tuple[list[str], list[str]]:
    """(train, eval) simplified-Chinese font faces as ``"file#index"``, from ``fc-list :lang=zh-cn``
    (fonts-noto-cjk, fonts-wqy-*, fonts-arphic-*). Empty lists when fontconfig finds none.
    """
    try:
        out = subprocess.run(["fc-list", ":lang=zh-cn", "file", "index", "family"], capture_output=True,
                             text=True, check=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return [], []
    train: list[str] = []
    held: list[str] = []
    for row in sorted(set(out.splitlines())):
        file, _, rest = row.partition(": ")
        family, _, index = rest.rpartition(":index=")
        first = family.split(",")[0]
        if not file or any(s in family for s in ZH_SKIP) or "Mono CJK SC" in family and first not in ZH_EVAL_FAMILIES:
            continue
        (held if first in ZH_EVAL_FAMILIES else train).append(f"{file}#{index}")
    return train, held
