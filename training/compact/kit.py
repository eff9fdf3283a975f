"""A portable training kit: the bilingual trainer's fonts and texts, for a machine that has neither.

The Chinese training data is rendered from Debian packages (CJK and Latin fonts, fortunes-zh,
manpages-zh, gettext catalogues; :mod:`training.compact.zh_corpus`, :mod:`training.compact.corpus`).
A lent accelerator machine has none of them installed and takes a few dozen megabytes at a time, so
``python -m training.compact.kit --out DIR`` writes what the training shards and the Latin replay
need, and nothing else:

* ``fonts/``: every Chinese *training* face and ``latin_faces`` of the Latin training faces (held-out
  faces are never written), each cut to the characters the model can write
  (:data:`models.compact.vocab_zh.ZH_CHARSET` plus the space) with fontTools' subsetter, layout tables
  kept, hinting dropped (FreeType draws the outlines unhinted; the lines are resampled and degraded
  after drawing anyway); one face of a ``.ttc`` collection becomes one file. Noto Sans CJK SC: the
  19.5 MB collection -> ~3 MB.
* ``texts.json``: the *training* split of the Chinese corpus and ``latin_lines`` lines drawn from the
  Latin one (held-out lines stay out, split by crc32 as at home).
* ``kit.json``: the manifest (file names of the Chinese and Latin faces, the source of each).

:func:`load_kit` reads it back; ``zh_features --kit`` and ``train_zh --kit`` use it instead of
the installed packages. Raises RuntimeError (:func:`build`) when a face cannot be subset.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
from dataclasses import dataclass

KIT_MANIFEST = "kit.json"
KIT_TEXTS = "texts.json"


@dataclass
class Kit:
    """A kit read back: font paths (Chinese faces, Latin faces) and training text lines."""

    zh_fonts: list[str]
    latin_fonts: list[str]
    zh_lines: list[str]
    latin_lines: list[str]


def subset_face(spec: str, chars: set[str], out_dir: pathlib.Path) -> str:
    """Write face ``spec`` (``"file"`` or ``"file.ttc#N"``) cut to ``chars`` into ``out_dir``; returns
    the new file's name (``.otf`` for CFF outlines, ``.ttf`` otherwise). Glyphs reached through layout
    features (ligatures, alternates) stay. Raises OSError for a missing file and fontTools' TTLibError
    for one that is not a font.
    """
    from fontTools import subset
    from fontTools.ttLib import TTFont

    file, _, index = spec.partition("#")
    font = TTFont(file, fontNumber=int(index or 0), lazy=False)
    opts = subset.Options()
    opts.layout_features = ["*"]
    opts.name_IDs = ["*"]
    opts.notdef_outline = True
    opts.hinting = False
    opts.glyph_names = False
    opts.ignore_missing_unicodes = True
    sub = subset.Subsetter(opts)
    sub.populate(unicodes=[ord(c) for c in chars])
    sub.subset(font)
    name = pathlib.Path(file).stem + (f"-{index}" if index else "") + (".otf" if "CFF " in font else ".ttf")
    font.save(str(out_dir / name))
    return name


def build(out: pathlib.Path, latin_faces: int = 0, latin_lines: int = 0, zh_faces: int = 0) -> dict:
    """Write the kit to ``out`` (see the module docstring; ``latin_faces`` / ``latin_lines`` /
    ``zh_faces``: at most that many, evenly spread over the sorted faces / drawn with a fixed seed; 0:
    all); returns the manifest. Raises RuntimeError when no Chinese training face is installed.
    """
    from models.compact.vocab_zh import ZH_CHARSET
    from training.compact.corpus import build_corpus
    from training.compact.render import find_fonts, find_zh_fonts
    from training.compact.zh_corpus import build_zh_corpus

    chars = set(ZH_CHARSET) | {" "}
    (out / "fonts").mkdir(parents=True, exist_ok=True)
    zh_train, _ = find_zh_fonts()
    latin_train, _ = find_fonts()
    if not zh_train:
        raise RuntimeError("no Chinese training face installed (fonts-noto-cjk, fonts-arphic-*, fonts-wqy-zenhei)")
    zh_train, latin_train = _spread(zh_train, zh_faces), _spread(latin_train, latin_faces)
    manifest: dict = {"zh_fonts": [], "latin_fonts": [], "sources": {}}
    for kind, faces in (("zh_fonts", zh_train), ("latin_fonts", latin_train)):
        for spec in faces:
            name = subset_face(spec, chars, out / "fonts")
            manifest[kind].append(name)
            manifest["sources"][name] = {"face": spec, "bytes": (out / "fonts" / name).stat().st_size}
    zh, latin = build_zh_corpus(), build_corpus().train
    if 0 < latin_lines < len(latin):
        latin = random.Random(0).sample(latin, latin_lines)
    (out / KIT_TEXTS).write_text(json.dumps({"zh": zh.train, "latin": latin}, ensure_ascii=False),
                                 encoding="utf-8")
    (out / KIT_MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    return manifest


def _spread(items: list[str], n: int) -> list[str]:
    """At most ``n`` of ``items``, evenly spread (all for n <= 0)."""
    return [items[i * len(items) // n] for i in range(n)] if 0 < n < len(items) else items


def load_kit(directory: str | os.PathLike) -> Kit:
    """Read a kit written by :func:`build`. Raises FileNotFoundError when the manifest is missing."""
    root = pathlib.Path(directory)
    manifest = json.loads((root / KIT_MANIFEST).read_text(encoding="utf-8"))
    texts = json.loads((root / KIT_TEXTS).read_text(encoding="utf-8"))
    return Kit(zh_fonts=[str(root / "fonts" / n) for n in manifest["zh_fonts"]],
               latin_fonts=[str(root / "fonts" / n) for n in manifest["latin_fonts"]],
               zh_lines=list(texts["zh"]), latin_lines=list(texts["latin"]))


def main(argv: list[str] | None = None) -> int:
    """Command line: ``--out DIR``."""
    ap = argparse.ArgumentParser(prog="python -m training.compact.kit", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--latin-faces", type=int, default=0, help="at most this many Latin faces (0: all)")
    ap.add_argument("--latin-lines", type=int, default=0, help="at most this many Latin text lines (0: all)")
    args = ap.parse_args(argv)
    manifest = build(pathlib.Path(args.out), args.latin_faces, args.latin_lines)
    total = sum(v["bytes"] for v in manifest["sources"].values())
    print(f"{len(manifest['zh_fonts'])} Chinese + {len(manifest['latin_fonts'])} Latin faces, {total / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
