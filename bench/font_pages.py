"""Rendered book pages in one type face, read by each tower: the held-out-face bench (issue #38, item 2).

A page is US letter at 200 dpi (1,700 x 2,200 px, what the gateway feeds the model): a running head,
sometimes a chapter heading in capitals, then justified-left English prose paragraphs with a first-line
indent, body 8-13 pt, seeded. The text is the Debian licence texts (``/usr/share/common-licenses``),
cut into sentences; the face is every installed style of one family (``--font``: a file-name prefix,
default ``URWGothic``, the Century-Gothic-like face of fonts-urw-base35 that the Latin tower is not
trained on; ``texgyreadventor`` is the same design in fonts-texgyre), the body in its book/regular
styles, headings in its demi/bold ones.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python bench/font_pages.py [--font URWGothic] [--pages N] [--seed S]
[--towers routed,latin,pp] [--model DIR] [--out DIR]`` writes ``font_K.png`` + ``font_K.gt.txt`` pairs
(a folder ``inkstream eval`` reads) and, unless ``--no-eval``, reads them in-process once per tower
mode and prints the CER per page and mode, the most frequent character confusions, and a last line
``font_pages_cer: MODE=X ...``. Modes: ``routed`` (as served: the checkpoint's own routing), ``latin``
(every line on the Latin tower), ``pp`` (every line on the PP-OCRv6 tower; bilingual checkpoints only).
"""

from __future__ import annotations

import argparse
import collections
import glob
import os
import pathlib
import random
import re
import sys

from PIL import Image, ImageDraw, ImageFont

FONT_DIRS = ("/usr/share/fonts", "/usr/share/texmf/fonts/opentype/public")
TEXT_FILES = ("GPL-3", "Apache-2.0", "LGPL-2.1", "Artistic", "MPL-2.0", "GFDL-1.3", "GPL-2")
PAGE = (1700, 2200)  # US letter at 200 dpi
MARGIN = 150
HEADINGS = ("SUPREME COURT OF THE UNITED STATES", "CHAPTER ONE", "THE QUIET HOUR", "PART II: UNDER THE BRIDGE",
            "INTRODUCTION", "A NOTE ON SOURCES", "HUMBLE BEGINNINGS", "IN THE BUREAU OF PUBLIC RECORDS")
TOWER_MODES = ("routed", "latin", "pp")


def face_files(prefix: str) -> list[str]:
    """Installed font files (.ttf/.otf) whose name starts with ``prefix``, sorted. Raises
    FileNotFoundError when there is none (``apt-get install fonts-urw-base35``).
    """
    paths = {p for d in FONT_DIRS for ext in ("ttf", "otf")
             for p in glob.glob(os.path.join(d, "**", f"{prefix}*.{ext}"), recursive=True)}
    if not paths:
        raise FileNotFoundError(f"no font file named {prefix}* under {FONT_DIRS}")
    return sorted(paths)


def _styles(paths: list[str]) -> tuple[list[str], list[str]]:
    """(body styles: regular / book, upright first; heading styles: demi / bold), falling back to all."""
    heavy = [p for p in paths if re.search(r"(?i)demi|bold|black|heavy", os.path.basename(p))]
    slanted = re.compile(r"(?i)oblique|italic")
    body = [p for p in paths if p not in heavy and not slanted.search(os.path.basename(p))]
    return body or paths, [p for p in heavy if not slanted.search(os.path.basename(p))] or heavy or paths


def sentences() -> list[str]:
    """English sentences of the licence texts, whitespace folded, 20-300 characters. Raises
    FileNotFoundError when no text is installed.
    """
    out: list[str] = []
    for name in TEXT_FILES:
        p = pathlib.Path("/usr/share/common-licenses") / name
        if p.is_file():
            text = re.sub(r"\s+", " ", p.read_text(errors="ignore"))
            out += [s.strip() for s in re.split(r"(?<=[.;:?!])\s+", text)
                    if 20 <= len(s.strip()) <= 300 and not re.search(r"[<>{}|_=\\#*@]|\.\.|--", s)]
    if not out:
        raise FileNotFoundError("no licence text under /usr/share/common-licenses")
    return out


def _wrap(words: list[str], font: ImageFont.FreeTypeFont, width: float) -> tuple[str, list[str]]:
    """Longest front run of ``words`` that fits ``width`` pixels (at least one word), and the rest."""
    n = 1
    while n < len(words) and font.getlength(" ".join(words[: n + 1])) <= width:
        n += 1
    return " ".join(words[:n]), words[n:]


def render_page(seed: int, paths: list[str], pool: list[str]) -> tuple[Image.Image, list[str]]:
    """Page ``seed`` set in the face ``paths`` (its style files) from the sentences ``pool``:
    (RGB image of :data:`PAGE` pixels, ground-truth lines in reading order).
    """
    rng = random.Random(seed)
    body_paths, head_paths = _styles(paths)
    size = rng.choice(range(22, 38, 2))  # 8-13 pt at 200 dpi
    body = ImageFont.truetype(rng.choice(body_paths), size)
    head = ImageFont.truetype(rng.choice(head_paths), int(size * rng.uniform(1.3, 1.8)))
    small = ImageFont.truetype(body_paths[0], int(size * 0.8))
    img = Image.new("L", PAGE, 255)
    draw = ImageDraw.Draw(img)
    truth: list[str] = []
    running = f"{rng.choice(HEADINGS).title()}    {rng.randint(3, 480)}"
    draw.text((MARGIN, 80), running, font=small, fill=0)
    truth.append(running)
    y = 80 + size * 2.5
    if rng.random() < 0.5:
        heading = rng.choice(HEADINGS)
        draw.text((MARGIN, y), heading, font=head, fill=0)
        truth.append(heading)
        y += head.size * 2.2
    width, pitch, start = PAGE[0] - 2 * MARGIN, size * rng.uniform(1.35, 1.7), rng.randrange(len(pool))
    while y + pitch < PAGE[1] - MARGIN:
        words = " ".join(pool[(start + k) % len(pool)] for k in range(rng.randint(2, 5))).split()
        start += 5
        indent = size * 2
        while words and y + pitch < PAGE[1] - MARGIN:
            line, words = _wrap(words, body, width - indent)
            draw.text((MARGIN + indent, y), line, font=body, fill=0)
            truth.append(line)
            y, indent = y + pitch, 0
        y += pitch * rng.choice([0.0, 0.4])
    return img.convert("RGB"), truth


def force_towers(engine: object, mode: str) -> None:
    """Make ``engine`` (an :class:`evaluation.engines.InProcessEngine`) route every line of a page to
    one tower: ``latin`` or ``pp``; ``routed`` leaves the checkpoint's routing. Raises ValueError for
    another mode, or ``pp`` on a checkpoint without a PP tower.
    """
    if mode not in TOWER_MODES:
        raise ValueError(f"tower mode {mode!r}: one of {TOWER_MODES}")
    enc = engine.enc  # type: ignore[attr-defined]
    if mode == "routed":
        return
    if mode == "pp" and getattr(enc, "_pp", None) is None:
        raise ValueError("--towers pp needs a bilingual checkpoint (a PP tower)")
    route = type(enc).route.__get__(enc)
    enc.numbers_to_pp = mode == "pp"  # latin: number pieces stay on the Latin tower too

    def forced(crops: list, page: object = None) -> tuple[list[bool], list, list]:
        _, tokens, reads = route(crops, page)
        return [mode == "pp"] * len(crops), tokens, reads

    enc.route = forced


def confusions(hyp: str, ref: str) -> collections.Counter[str]:
    """Character substitutions ``"ref->hyp"`` of the folded texts (Levenshtein alignment)."""
    from rapidfuzz.distance import Levenshtein

    from evaluation.score import fold

    h, r = fold(hyp), fold(ref)
    return collections.Counter(f"{r[op.src_pos]}->{h[op.dest_pos]}"
                               for op in Levenshtein.editops(r, h) if op.tag == "replace")


def main(argv: list[str] | None = None) -> int:
    """Write the pages; unless --no-eval, read them per tower mode and print the CER."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--font", default="URWGothic", help="font file-name prefix (a family)")
    ap.add_argument("--pages", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="runs/font_pages")
    ap.add_argument("--model", default=None)
    ap.add_argument("--towers", default="routed,latin,pp", help="comma-separated tower modes")
    ap.add_argument("--no-eval", action="store_true")
    args = ap.parse_args(argv)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    paths, pool = face_files(args.font), sentences()
    for k in range(args.pages):
        img, truth = render_page(args.seed + k, paths, pool)
        img.save(out / f"font_{k}.png")
        (out / f"font_{k}.gt.txt").write_text("\n".join(truth) + "\n", encoding="utf-8")
    if args.no_eval:
        return 0
    from evaluation.engines import InProcessEngine
    from evaluation.score import Score, score

    summary = []
    for mode in args.towers.split(","):
        engine, total, conf = InProcessEngine(args.model, threads=1), Score(0, 0, 0, 0), collections.Counter[str]()
        force_towers(engine, mode)
        for k in range(args.pages):
            text, _ = engine.ocr(out / f"font_{k}.png")
            ref = (out / f"font_{k}.gt.txt").read_text(encoding="utf-8")
            s, c = score(text, ref), confusions(text, ref)
            total, conf = total + s, conf + c
            print(f"{mode} font_{k}: CER {100 * s.cer:.2f}% ({s.char_edits}/{s.ref_chars})", flush=True)
        top = ", ".join(f"{k} x{n}" for k, n in conf.most_common(8))
        print(f"{mode}: CER {100 * total.cer:.2f}% ({total.char_edits}/{total.ref_chars}); top confusions: {top}")
        summary.append(f"{mode}={total.cer:.4f}")
    print("font_pages_cer: " + " ".join(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
