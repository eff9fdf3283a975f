"""Synthetic Chinese and mixed Chinese/English document pages with ground truth, seeded.

Each page (US letter at 200 dpi) has a title, paragraphs of held-out Chinese text (the evaluation
split of :mod:`training.compact.zh_corpus`, never trained on) wrapped at the column width with no
spaces between hanzi, a block of report-style rows (an item name, then amounts, dates and
percentages), a financial-statement block (item names with number cells right-aligned in columns
far apart: separate lines for the detector, as in a report's table) and a few mixed lines with
English words; fonts are the held-out faces of :func:`training.compact.render.find_zh_fonts`
(never trained on), body size 10-14 pt.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python bench/zh_pages.py [--pages N] [--seed S] [--out DIR]`` writes
``zh_K.png`` + ``zh_K.gt.txt`` (a folder ``inkstream eval`` reads) and, unless ``--no-eval``, reads
them in-process and prints CER per page; the last line is ``zh_pages_cer: X``.
"""

from __future__ import annotations

import argparse
import pathlib
import random
import sys

from PIL import Image, ImageDraw, ImageFont

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from training.compact.corpus import build_corpus  # noqa: E402 - after the sys.path insert above
from training.compact.render import find_zh_fonts  # noqa: E402
from training.compact.zh_corpus import amount_text, build_zh_corpus, date_text  # noqa: E402

PAGE = (1700, 2200)
MARGIN = 140


def _font(spec: str, size: int) -> ImageFont.FreeTypeFont:
    path, _, index = spec.partition("#")
    return ImageFont.truetype(path, size, index=int(index or 0))


def _wrap(text: str, font: ImageFont.FreeTypeFont, width: float) -> list[str]:
    """Break ``text`` into lines no wider than ``width`` pixels, between any two characters."""
    lines, cur = [], ""
    for ch in text:
        if font.getlength(cur + ch) > width and cur:
            lines.append(cur.strip())
            cur = ch
        else:
            cur += ch
    if cur.strip():
        lines.append(cur.strip())
    return [ln for ln in lines if ln]


class _Sheet:
    """A page being typeset top to bottom: the image, the pen's height and the ground-truth lines."""

    def __init__(self, rng: random.Random) -> None:
        self.rng, self.y, self.truth = rng, MARGIN, []
        self.img = Image.new("L", PAGE, 255)
        self.draw = ImageDraw.Draw(self.img)

    def put(self, line: str, font: ImageFont.FreeTypeFont, pitch: float) -> bool:
        """Draw ``line`` at the left margin and move down ``pitch`` pixels; False when the page is full."""
        if self.y + pitch > PAGE[1] - MARGIN:
            return False
        self.draw.text((MARGIN, self.y), line, font=font, fill=self.rng.randint(0, 40))
        self.truth.append(line)
        self.y += int(pitch)
        return True

    def statement(self, zh_eval: list[str], font: ImageFont.FreeTypeFont, size: int) -> None:
        """A financial-statement block: rows of an item name and three number cells right-aligned in
        columns far apart (each cell its own text line for the detector, as in a report's table). The
        ground truth of a row is its cells joined by spaces.
        """
        step = int(size * 8.5)
        cols = [PAGE[0] - MARGIN - 2 * step, PAGE[0] - MARGIN - step, PAGE[0] - MARGIN]
        for _ in range(self.rng.randint(4, 7)):
            item = "".join(c for c in self.rng.choice(zh_eval) if not c.isspace())[: self.rng.randint(4, 12)]
            item += self.rng.choice(["（元）", "（元/股）", "", "（%）"])
            cells = [_number(self.rng) for _ in cols]
            top = self.y
            if not self.put(item, font, size * 1.7):
                return
            for right, cell in zip(cols, cells, strict=True):
                self.draw.text((right - font.getlength(cell), top), cell, font=font, fill=0)
            self.truth[-1] += " " + " ".join(cells)


def _number(rng: random.Random) -> str:
    """A statement cell: a signed amount with thousands separators, a per-share figure or a percentage."""
    r = rng.random()
    if r < 0.6:
        return f"{rng.choice(['', '-'])}{rng.randint(0, 10 ** rng.randint(3, 9)):,}.{rng.randint(0, 99):02d}"
    if r < 0.75:
        return f"{rng.choice(['', '-'])}0.{rng.randint(0, 9999):04d}"
    return f"{rng.choice(['', '-'])}{rng.uniform(0, 150):.2f}%"


def render_page(seed: int, zh_eval: list[str], latin_eval: list[str],
                fonts: list[str]) -> tuple[Image.Image, list[str]]:
    """One page and its ground-truth lines in reading order."""
    rng = random.Random(seed)
    sheet = _Sheet(rng)
    size = rng.choice([28, 32, 36, 40])  # 10-14 pt at 200 dpi
    body, title = _font(rng.choice(fonts), size), _font(rng.choice(fonts), int(size * 1.5))
    heading = "".join(c for c in rng.choice(zh_eval) if not c.isspace())[:16] or "报告"
    sheet.put(heading, title, size * 2.4)
    width = PAGE[0] - 2 * MARGIN
    while sheet.y < PAGE[1] * 0.45:
        para = "".join(rng.choice(zh_eval) for _ in range(rng.randint(2, 5)))
        for line in _wrap(para, body, width):
            if not sheet.put(line, body, size * 1.6):
                break
        sheet.y += size
    for _ in range(rng.randint(2, 4)):
        item = "".join(c for c in rng.choice(zh_eval) if not c.isspace())[:10] + rng.choice(["（元）", "", "（%）"])
        row = f"{item}    {amount_text(rng)}    {amount_text(rng)}    {date_text(rng)}"
        if body.getlength(row) <= width:  # a row running off the paper would be truth nobody can read
            sheet.put(row, body, size * 1.6)
    sheet.y += size
    sheet.statement(zh_eval, body, size)
    sheet.y += size
    for _ in range(rng.randint(2, 4)):
        en = " ".join(rng.choice(latin_eval).split()[:4])
        zh = "".join(c for c in rng.choice(zh_eval) if not c.isspace())[:12]
        sheet.put(f"{zh} {en} {zh[:4]}", body, size * 1.6)
    return sheet.img.convert("RGB"), sheet.truth


def main(argv: list[str] | None = None) -> int:
    """Write the pages; unless --no-eval, read them in-process and print their CER."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="runs/zh_pages")
    ap.add_argument("--model", default=None)
    ap.add_argument("--no-eval", action="store_true")
    args = ap.parse_args(argv)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    zh, latin = build_zh_corpus(), build_corpus()
    _, fonts = find_zh_fonts()
    if not fonts:
        print("no held-out CJK fonts installed (make system-packages)", file=sys.stderr)
        return 2
    zh_eval = [ln for ln in zh.eval if len(ln) >= 8]
    for k in range(args.pages):
        img, truth = render_page(args.seed + k, zh_eval, latin.eval, fonts)
        img.save(out / f"zh_{k}.png")
        (out / f"zh_{k}.gt.txt").write_text("\n".join(truth) + "\n", encoding="utf-8")
    if args.no_eval:
        return 0
    from evaluation.engines import InProcessEngine
    from evaluation.score import Score, score

    engine, total = InProcessEngine(args.model, threads=1), Score(0, 0, 0, 0)
    for k in range(args.pages):
        text, _ = engine.ocr(out / f"zh_{k}.png")
        s = score(text, (out / f"zh_{k}.gt.txt").read_text(encoding="utf-8"))
        total = total + s
        print(f"zh_{k}: CER {100 * s.cer:.2f}%")
    print(f"zh_pages_cer: {total.cer:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
