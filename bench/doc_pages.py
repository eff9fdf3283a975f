"""Reading order on documents: seeded forms, invoices and report pages (English and Chinese) with
known reading order (:mod:`bench.doc_render`), read in-process; CER and order-free CER per kind.

Each page is written to ``--out`` (``doc_K.png`` + ``doc_K.gt.txt``, a folder ``inkstream eval`` reads;
the text read is kept beside it as ``doc_K.ours.txt``). Kinds go round ``form, invoice, report`` and
scripts ``en, zh`` (page K: kind K mod 3, script (K // 3) mod 2), so six pages hold every pair; each
page's layout choices (panels, tab stops, ruled table or not, fonts, sizes, skew up to 1 degree) come
from its seed ``--seed + K``. CER is :func:`evaluation.score.score`'s; order-free CER the multiset of
non-space characters alone (:func:`bench.receipts.order_free_edits`): CER far above the order-free
error means lines read out of order.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python bench/doc_pages.py [--pages 6] [--seed 0]``. The last line is
``doc_pages: cer X order_free Y`` (fractions, over all pages).
"""

from __future__ import annotations

import argparse
import pathlib
import random
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import doc_kinds  # noqa: E402 - after the sys.path insert above
from bench.doc_render import KINDS, PAGE, Doc, Sheet, pick_fonts  # noqa: E402

LICENCES = ("/usr/share/common-licenses/GPL-3", "/usr/share/common-licenses/Apache-2.0")


def english_source() -> list[str]:
    """Sentences of the Debian licence texts (English prose for the reports)."""
    text = " ".join(pathlib.Path(p).read_text(errors="ignore") for p in LICENCES if pathlib.Path(p).is_file())
    sents = [s.strip() for s in re.split(r"(?<=[.;])\s+", " ".join(text.split())) if 40 <= len(s.strip()) <= 200]
    if not sents:
        raise FileNotFoundError(f"no licence text under {LICENCES}")
    return [s for s in sents if re.fullmatch(r"[A-Za-z0-9 ,.;:'()\-]+", s)]


def _hanzi_share(line: str) -> float:
    """Share of the non-space characters of ``line`` that are CJK ideographs or CJK punctuation (the
    held-out corpus also holds shell listings and box drawings: not report prose).
    """
    chars = [c for c in line if not c.isspace()]
    return sum(1 for c in chars if "\u4e00" <= c <= "\u9fff" or "\u3000" <= c <= "\u303f"
               or "\uff00" <= c <= "\uffef") / max(1, len(chars))


def render(index: int, seed: int, zh_source: list[str], en_source: list[str], zh_fonts: list[str]) -> Doc:
    """Page ``index`` of a run from ``seed`` (see the module docstring for kind and script)."""
    kind, script = KINDS[index % len(KINDS)], ("en", "zh")[(index // len(KINDS)) % 2]
    rng = random.Random(f"{seed + index}-{kind}-{script}")
    sheet = Sheet(rng, pick_fonts(rng, script, zh_fonts, rng.choice([26, 28, 30, 34])))
    if kind == "form":
        doc_kinds.form(sheet, script)
    elif kind == "invoice":
        doc_kinds.invoice(sheet, script)
    else:
        doc_kinds.report(sheet, script, zh_source if script == "zh" else en_source)
    if sheet.y > PAGE[1] - 150:
        raise RuntimeError(f"page {index} ({kind}, {script}) ran off the paper at y={sheet.y:.0f}")
    skew = rng.uniform(-1.0, 1.0) if rng.random() < 0.5 else 0.0
    return Doc(sheet.page_image(skew), sheet.truth + sheet.footer, kind, script)


def main(argv: list[str] | None = None) -> int:
    """Write the pages; unless --no-eval, read them in-process and print CER per page and kind."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=6)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default="", help="comma-separated page indices to read (default: all)")
    ap.add_argument("--out", default="/tmp/inkstream_doc_pages")
    ap.add_argument("--model", default=None, help="checkpoint directory (default: the embedded one)")
    ap.add_argument("--no-eval", action="store_true")
    args = ap.parse_args(argv)
    from training.compact.render import find_zh_fonts
    from training.compact.zh_corpus import build_zh_corpus

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    zh = [ln for ln in build_zh_corpus().eval if len(ln) >= 8 and _hanzi_share(ln) >= 0.7]
    en, (_, zh_fonts) = english_source(), find_zh_fonts()
    wanted = {int(k) for k in args.only.split(",") if k} or set(range(args.pages))
    docs = {}
    for k in sorted(wanted):
        d = render(k, args.seed, zh, en, zh_fonts)
        d.image.save(out / f"doc_{k}.png", dpi=(200, 200))
        (out / f"doc_{k}.gt.txt").write_text("\n".join(d.lines) + "\n", encoding="utf-8")
        docs[k] = d
    if args.no_eval:
        return 0
    from bench.receipts import order_free_edits
    from evaluation.engines import InProcessEngine
    from evaluation.score import score

    engine = InProcessEngine(args.model, threads=1)
    per_kind: dict[str, list[int]] = {}  # kind-script -> [cer edits, chars, order-free edits, chars]
    for k, d in docs.items():
        text, _ = engine.ocr(out / f"doc_{k}.png")
        (out / f"doc_{k}.ours.txt").write_text(text, encoding="utf-8")
        ref = "\n".join(d.lines)
        s, (of, n) = score(text, ref), order_free_edits(text, ref)
        tot = per_kind.setdefault(f"{d.kind}-{d.script}", [0, 0, 0, 0])
        for j, v in enumerate((s.char_edits, s.ref_chars, of, n)):
            tot[j] += v
        print(f"doc_{k} {d.kind}-{d.script}: CER {100 * s.cer:.2f} % order-free {100 * of / max(1, n):.2f} %",
              flush=True)
    all_ = [sum(t[j] for t in per_kind.values()) for j in range(4)]
    for name, t in sorted(per_kind.items()):
        print(f"{name}: CER {100 * t[0] / max(1, t[1]):.2f} % order-free {100 * t[2] / max(1, t[3]):.2f} %")
    print(f"doc_pages: cer {all_[0] / max(1, all_[1]):.4f} order_free {all_[2] / max(1, all_[3]):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
