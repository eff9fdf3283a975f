"""Text of the synthetic training lines: local prose in several Latin-script languages plus
generated numbers, dates, money, codes and random-character strings.

Sources, all read from the local machine (nothing is downloaded):

* gettext catalogues ``/usr/share/locale/<lang>/LC_MESSAGES/*.mo`` of Debian packages: English
  messages (msgid) and their German, French, Spanish, Italian, Portuguese, Dutch, Nordic, Polish,
  Czech, ... translations (msgstr), which bring accented letters in real words;
* Debian licence texts ``/usr/share/common-licenses`` and package ``copyright`` files (English prose);
* comments and docstrings of the Python standard library (technical English, identifiers, code).

Held-out texts: a line belongs to the evaluation split when ``crc32(line) % 100 < EVAL_PERCENT``;
training never samples them. The OCR evaluation documents in ``../shared/eval`` (beside a checkout) are never read.
"""

from __future__ import annotations

import gettext
import glob
import json
import os
import pathlib
import random
import re
import string
import zlib
from dataclasses import dataclass

from models.compact.vocab import CHARSET, normalize_text

EVAL_PERCENT = 3
LATIN_LANGS = ["de", "fr", "es", "it", "pt", "pt_BR", "nl", "sv", "da", "nb", "fi", "pl", "cs", "sk",
               "tr", "ro", "ca", "hu", "sl", "hr", "et", "lt", "lv", "eu", "gl", "id", "vi"]
_VOCAB = set(CHARSET)
_WS = re.compile(r"\s+")
_FMT = re.compile(r"%[-+ #0-9.*]*[a-zA-Z]|\{[^}]*\}|_\(|\\n|&(?=\w)")


def _clean(text: str) -> str:
    text = normalize_text(_FMT.sub("", text))
    return _WS.sub(" ", text).strip()


def _mo_lines(limit_files: int) -> list[str]:
    out: list[str] = []
    files: list[str] = []
    for lang in LATIN_LANGS:
        files += sorted(glob.glob(f"/usr/share/locale/{lang}/LC_MESSAGES/*.mo"))[:limit_files]
    for path in files:
        try:
            with open(path, "rb") as fh:
                cat = gettext.GNUTranslations(fh)
        except Exception:  # noqa: BLE001 - a malformed catalogue (any parse error): skip it
            continue
        # gettext has no public way to list a catalogue's messages; _catalog is its (stable) private dict.
        for k, v in cat._catalog.items():  # type: ignore[attr-defined]
            for s in (k if isinstance(k, str) else k[0], v):
                for part in str(s).split("\n"):
                    out.append(part)
    return out


def _prose_files() -> list[str]:
    files = sorted(glob.glob("/usr/share/common-licenses/*"))
    files += sorted(glob.glob("/usr/share/doc/*/copyright"))[:400]
    stdlib = os.path.dirname(os.__file__)
    files += sorted(glob.glob(os.path.join(stdlib, "*.py")))
    return files


def _file_lines(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8", errors="ignore") as fh:
            return fh.read().splitlines()
    except OSError:
        return []


@dataclass
class Corpus:
    """Train / eval text lines. ``train`` and ``eval`` are lists of cleaned source lines."""

    train: list[str]
    eval: list[str]


def build_corpus(max_mo_files_per_lang: int = 40) -> Corpus:
    """Read the local sources above, clean them (whitespace folded, printf placeholders removed,
    characters outside the vocabulary dropped lines) and split train / eval by crc32 of the line.
    """
    raw = _mo_lines(max_mo_files_per_lang)
    for path in _prose_files():
        raw += [ln.strip().lstrip("#").strip() for ln in _file_lines(path)]
    return split_lines(raw)


def split_lines(raw: list[str]) -> Corpus:
    """Clean, de-duplicate and split lines into train / eval by crc32 (see the module docstring)."""
    seen: set[str] = set()
    train: list[str] = []
    held: list[str] = []
    for line in raw:
        line = _clean(line)
        if len(line) < 2 or line in seen or not set(line) <= _VOCAB:
            continue
        if " " not in line and len(line) > 24:  # file paths / identifiers listed in copyright files
            continue
        seen.add(line)
        (held if zlib.crc32(line.encode()) % 100 < EVAL_PERCENT else train).append(line)
    return Corpus(train=train, eval=held)


# ---------------------------------------------------------------- generated strings
_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
           "October", "November", "December", "Jan.", "Feb.", "Mar.", "Apr.", "Aug.", "Sept.", "Oct.",
           "Nov.", "Dec.", "Januar", "März", "janvier", "février", "août", "décembre", "enero", "junio"]
_CURRENCY = ["$", "€", "£", "¥", "USD ", "EUR ", "CHF ", "¢"]
_PUNCT_WRAP = ["()", "[]", "{}", "\"\"", "''", "“”", "‘’", "«»", "„“", "<>"]


def texts_corpus(path: str) -> Corpus:
    """A :class:`Corpus` from a text file (one line per text), split like :func:`build_corpus`, or
    from a ``.json`` file ``{"train": [...], "eval": [...]}`` written from :func:`build_corpus` on
    another machine (the exact split, for training where the local sources differ).
    """
    if path.endswith(".json"):
        d = json.loads(pathlib.Path(path).read_text(encoding="utf-8"))
        return Corpus(train=list(d["train"]), eval=list(d["eval"]))
    lines = [ln.strip() for ln in pathlib.Path(path).read_text(encoding="utf-8").splitlines() if ln.strip()]
    corpus = split_lines(lines)
    if not corpus.eval:  # tiny files: evaluate on the training texts rather than on nothing
        corpus.eval = list(corpus.train)
    return corpus


def _number(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.3:
        return str(rng.randint(0, 10 ** rng.randint(1, 7)))
    if kind < 0.55:
        v = f"{rng.uniform(0, 10 ** rng.randint(1, 7)):,.2f}"
        return v if rng.random() < 0.7 else v.replace(",", " ").replace(".", ",")
    if kind < 0.7:
        return f"{rng.uniform(0, 100):.{rng.randint(0, 2)}f}%"
    if kind < 0.85:
        return f"{rng.choice(_CURRENCY)}{rng.uniform(0, 10 ** rng.randint(1, 6)):,.2f}"
    return f"{rng.randint(1, 999)}{rng.choice(['', '.', ')', 'th', 'st', 'nd', '°', '°C', ' kg', ' mm', ' ms', 'x'])}"


def _date(rng: random.Random) -> str:
    d, m, y = rng.randint(1, 31), rng.randint(1, 12), rng.randint(1900, 2039)
    return rng.choice([f"{d:02d}/{m:02d}/{y}", f"{y}-{m:02d}-{d:02d}", f"{d}.{m}.{y}",
                       f"{rng.choice(_MONTHS)} {d}, {y}", f"{d} {rng.choice(_MONTHS)} {y}",
                       f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}", f"{m}/{d}/{y % 100:02d}"])


def _code(rng: random.Random) -> str:
    alpha = string.ascii_uppercase + string.digits
    kind = rng.random()
    if kind < 0.3:
        return "-".join("".join(rng.choice(alpha) for _ in range(rng.randint(2, 5)))
                        for _ in range(rng.randint(1, 4)))
    if kind < 0.5:
        user = "".join(rng.choice(string.ascii_lowercase + "._") for _ in range(rng.randint(3, 10)))
        user = user.strip("._") or "info"
        domain = rng.choice(["example", "mail", "uni-bonn", "gov"])
        return f"{user}@{domain}.{rng.choice(['com', 'org', 'de', 'fr', 'gov'])}"
    if kind < 0.65:
        site = rng.choice(["example", "census", "data"])
        return f"https://www.{site}.{rng.choice(['com', 'gov', 'eu'])}/{rng.randint(1, 9999)}"
    if kind < 0.8:
        return f"({rng.randint(200, 999)}) {rng.randint(200, 999)}-{rng.randint(0, 9999):04d}"
    return f"§ {rng.randint(1, 999)}.{rng.randint(1, 99)}" if rng.random() < 0.5 else f"No. {rng.randint(1, 99999)}"


def _random_chars(rng: random.Random, n: int) -> str:
    """Uniform over the whole vocabulary (so rare glyphs are seen), grouped into word-like runs."""
    out: list[str] = []
    while len(out) < n:
        out += [rng.choice(CHARSET[1:]) for _ in range(rng.randint(1, 8))] + [" "]
    return "".join(out[:n]).strip() or "x"


class LineTexts:
    """Samples one line of text of a target length from a corpus split plus generated strings.

    ``sample(rng, max_chars)`` returns a string of 1..``max_chars`` characters, no leading/trailing
    spaces, all in the vocabulary; ``last_kind`` then names what it drew (one of :data:`KINDS`), for
    per-kind error reports. Recording it draws nothing from ``rng``.

    ``shares``: probability of each kind, in :data:`KINDS` order (default :data:`SHARES`, which the
    held-out set always uses); training may over-sample a hard kind (``train.py --kind-shares``).
    Raises ValueError for an empty ``lines`` or shares that are not 4 non-negative numbers summing to 1.
    """

    KINDS = ("prose", "mixed", "random", "upper")
    SHARES = (0.62, 0.26, 0.07, 0.05)

    def __init__(self, lines: list[str], shares: tuple[float, ...] = SHARES):
        if not lines:
            raise ValueError("empty corpus split")
        if len(shares) != len(self.KINDS) or min(shares) < 0 or abs(sum(shares) - 1.0) > 1e-6:
            raise ValueError(f"kind shares must be {len(self.KINDS)} non-negative numbers summing to 1, got {shares}")
        self.lines = lines
        self.last_kind = ""
        self._bounds = [sum(shares[: i + 1]) for i in range(len(shares) - 1)]

    def _words(self, rng: random.Random, n_chars: int) -> str:
        words: list[str] = []
        total = 0
        while total < n_chars:
            src = rng.choice(self.lines).split(" ")
            start = rng.randrange(len(src))
            for w in src[start:]:
                words.append(w)
                total += len(w) + 1
                if total >= n_chars:
                    break
        return " ".join(words)

    def sample(self, rng: random.Random, max_chars: int = 110) -> str:
        """One line: corpus prose windows, prose mixed with numbers / dates / codes, random runs over
        the whole vocabulary or upper-cased prose (by default 62 / 26 / 7 / 5 %, see ``shares``).
        """
        target = int(min(max_chars, max(1, rng.choice([rng.randint(1, 12), rng.randint(10, 60),
                                                         rng.randint(30, max_chars), rng.randint(40, 90)]))))
        draw = rng.random()
        kind = self.last_kind = self.KINDS[sum(draw >= b for b in self._bounds)]
        if kind == "prose":
            text = self._words(rng, target)
        elif kind == "mixed":
            parts: list[str] = []
            while sum(len(p) + 1 for p in parts) < target:
                r = rng.random()
                gen = _number if r < 0.35 else _date if r < 0.55 else _code if r < 0.75 else None
                parts.append(gen(rng) if gen else self._words(rng, rng.randint(3, 25)))
            text = " ".join(parts)
        elif kind == "random":
            text = _random_chars(rng, target)
        else:
            text = self._words(rng, target).upper()
        if rng.random() < 0.08:
            pair = rng.choice(_PUNCT_WRAP)
            text = pair[0] + text + pair[1]
        text = text.strip()
        if len(text) > max_chars:
            cut = text.rfind(" ", 0, max_chars)
            text = text[: cut if cut > max_chars // 2 else max_chars].strip()
        return text or "a"
