"""Text of the synthetic Chinese and mixed Chinese/English training lines, from Debian packages only.

Sources read from the local machine (nothing is downloaded):

* ``fortunes-zh`` (``/usr/share/games/fortunes/{chinese,tang300,song100}.u8``): prose, Tang and Song
  poetry (ANSI colour codes stripped);
* ``manpages-zh`` (``/usr/share/man/zh_CN/man*/*.gz``): technical Chinese mixed with English option
  names, paths and code (groff requests and font escapes stripped);
* gettext catalogues ``/usr/share/locale/zh_CN/LC_MESSAGES/*.mo`` (msgstr): UI Chinese with English terms.

Generated kinds (:class:`ZhLineTexts`): dates (``2024年3月5日``), amounts (``¥1,234.56``,
``人民币壹万元整`` in the capital numerals of Chinese cheques), IDs, phone numbers and codes, financial
table rows (an item name and numbers), Chinese prose mixed with English words from the Latin corpus,
and uniform random runs over the GB 2312 hanzi (so that rare characters are seen at all).

Held-out texts: a line belongs to the evaluation split when ``crc32(line) % 100 < EVAL_PERCENT`` (as in
:mod:`training.compact.corpus`); the shared evaluation documents are never read.
"""

from __future__ import annotations

import gettext
import glob
import gzip
import random
import re
import zlib
from dataclasses import dataclass

from models.compact.vocab import normalize_text
from models.compact.vocab_zh import HANZI, ZH_CHARSET, is_hanzi

EVAL_PERCENT = 3
_VOCAB = set(ZH_CHARSET)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_GROFF = re.compile(r"\\f[BIRPV]|\\f\(..|\\f\[[^\]]*\]|\\[,/&^|:%]|\\\(..|\\-|\\e|\\s[-+]?\d+")
_WS = re.compile(r"\s+")
_FMT = re.compile(r"%[-+ #0-9.*]*[a-zA-Z]|\{[^}]*\}|_\(|\\n|&(?=\w)")
CAPITAL_DIGITS = "零壹贰叁肆伍陆柒捌玖"
CAPITAL_UNITS = ["", "拾", "佰", "仟"]


def _keep(line: str) -> str | None:
    line = _WS.sub(" ", normalize_text(line)).strip()
    if len(line) < 2 or not any(is_hanzi(c) for c in line):
        return None
    return "".join(c for c in line if c in _VOCAB).strip() or None


def _fortune_lines() -> list[str]:
    out: list[str] = []
    for path in sorted(glob.glob("/usr/share/games/fortunes/*.u8")):
        with open(path, encoding="utf-8", errors="replace") as fh:
            out += [_ANSI.sub("", ln) for ln in fh if ln.strip() != "%"]
    return out


def _man_lines(limit: int = 2000) -> list[str]:
    out: list[str] = []
    for path in sorted(glob.glob("/usr/share/man/zh_CN/man*/*.gz"))[:limit]:
        try:
            with gzip.open(path, "rt", encoding="utf-8", errors="replace") as fh:
                for ln in fh:
                    if ln.startswith(('.\\"', "'\\\"")):
                        continue
                    ln = re.sub(r"^\.[A-Za-z]+\s*", "", ln)  # a request line keeps its argument text
                    out.append(_GROFF.sub("", ln).replace("\\", ""))
        except (OSError, EOFError):
            continue
    return out


def _mo_lines() -> list[str]:
    out: list[str] = []
    for path in sorted(glob.glob("/usr/share/locale/zh_CN/LC_MESSAGES/*.mo")):
        try:
            with open(path, "rb") as fh:
                cat = gettext.GNUTranslations(fh)
        except Exception:  # noqa: BLE001 - a malformed catalogue (any parse error): skip it
            continue
        for v in cat._catalog.values():  # type: ignore[attr-defined]
            out += [_FMT.sub("", part) for part in str(v).split("\n")]
    return out


@dataclass
class ZhCorpus:
    """Chinese lines split into ``train`` and ``eval`` (held out by crc32)."""

    train: list[str]
    eval: list[str]


def build_zh_corpus() -> ZhCorpus:
    """Read the Debian sources above; lines with at least one hanzi, in-vocabulary characters only.
    Raises RuntimeError when none of the packages is installed (``make system-packages``).
    """
    lines = list(dict.fromkeys(x for x in map(_keep, _fortune_lines() + _man_lines() + _mo_lines()) if x))
    if not lines:
        raise RuntimeError("no Chinese text found: install fortunes-zh, manpages-zh (Debian)")
    held = [ln for ln in lines if zlib.crc32(ln.encode()) % 100 < EVAL_PERCENT]
    train = [ln for ln in lines if zlib.crc32(ln.encode()) % 100 >= EVAL_PERCENT]
    return ZhCorpus(train=train, eval=held)


def capital_amount(yuan: int) -> str:
    """An amount in the capital numerals of Chinese cheques and contracts: 10000 -> ``壹万元整``
    (0 <= yuan < 10**12; zeros inside a group read ``零`` once).
    """
    if yuan == 0:
        return "零元整"
    groups, out = [], ""
    while yuan:
        groups.append(yuan % 10000)
        yuan //= 10000
    for gi in range(len(groups) - 1, -1, -1):
        g, part, zero = groups[gi], "", bool(out)  # a group's leading zeros read 零 after a higher group
        for k in range(3, -1, -1):
            d = g // 10 ** k % 10
            if d == 0:
                zero = zero or bool(part)
                continue
            part += ("零" if zero else "") + CAPITAL_DIGITS[d] + CAPITAL_UNITS[k]
            zero = False
        if part:
            out += part + ["", "万", "亿"][gi]
        elif out and not out.endswith("零"):
            out += "零"
    return out.rstrip("零") + "元整"


def amount_text(rng: random.Random) -> str:
    """A generated amount: ``¥1,234.56``, ``人民币…元整``, a signed number or a percentage."""
    v = rng.choice([rng.randint(1, 999), rng.randint(1000, 10**6), rng.randint(10**6, 10**10)])
    r = rng.random()
    if r < 0.3:
        return f"¥{v:,}.{rng.randint(0, 99):02d}"
    if r < 0.5:
        return "人民币" + capital_amount(rng.choice([v // 1000 * 1000, v]))
    if r < 0.75:
        return f"{rng.choice(['', '-'])}{v:,}.{rng.randint(0, 99):02d}"
    return f"{rng.choice(['', '-'])}{rng.uniform(0, 200):.2f}%"


def date_text(rng: random.Random) -> str:
    """A generated date as Chinese documents write it (``2024年3月5日``, ``2024-03-05``, quarters)."""
    y, m, d = rng.randint(1990, 2030), rng.randint(1, 12), rng.randint(1, 28)
    return rng.choice([f"{y}年{m}月{d}日", f"{y}年{m:02d}月{d:02d}日", f"{y}-{m:02d}-{d:02d}", f"{y}年{m}月",
                       f"{y}年第{rng.choice('一二三四')}季度"])


def code_text(rng: random.Random) -> str:
    """A generated ID, phone number, credit code or invoice / contract number."""
    r = rng.random()
    digits = "".join(rng.choice("0123456789") for _ in range(18))
    if r < 0.25:
        return digits[:17] + rng.choice("0123456789X")  # resident ID layout
    if r < 0.45:
        return "1" + "".join(rng.choice("3456789")) + "".join(rng.choice("0123456789") for _ in range(9))
    if r < 0.65:
        return "91" + "".join(rng.choice("0123456789ABCDEFGHJKLMNPQRTUWXY") for _ in range(16))
    return rng.choice(["合同编号：", "发票号码：", "订单号", "No."]) + "".join(
        rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789-") for _ in range(rng.randint(6, 14)))


class ZhLineTexts:
    """Samples one Chinese or mixed line of 1..``max_chars`` characters (all in :data:`ZH_CHARSET`).

    ``latin``: Latin-corpus lines (English words for mixed lines and pure-Latin lines, which the
    bilingual tower must also read). ``last_kind`` names the kind drawn, one of :data:`KINDS`.
    """

    KINDS = ("prose", "mixed_en", "business", "table", "random", "latin")
    SHARES = (0.38, 0.17, 0.15, 0.1, 0.1, 0.1)

    def __init__(self, lines: list[str], latin: list[str], shares: tuple[float, ...] | None = None) -> None:
        if not lines or not latin:
            raise ValueError("empty corpus split")
        shares = shares or self.SHARES
        if len(shares) != len(self.KINDS) or abs(sum(shares) - 1.0) > 1e-6:
            raise ValueError(f"kind shares must be {len(self.KINDS)} numbers summing to 1 ({self.KINDS})")
        self.lines, self.latin, self.last_kind = lines, latin, ""
        self._bounds = [sum(shares[: i + 1]) for i in range(len(shares) - 1)]

    def _prose(self, rng: random.Random, n: int) -> str:
        out = ""
        while len(out) < n:
            src = rng.choice(self.lines)
            start = rng.randrange(len(src))
            out += src[start:] if not out else " " * (rng.random() < 0.2) + src
        return out[:n].strip()

    def _english(self, rng: random.Random, words: int) -> str:
        src = rng.choice(self.latin).split(" ")
        s = rng.randrange(len(src))
        return " ".join(src[s: s + words])

    def sample(self, rng: random.Random, max_chars: int = 60) -> str:
        """One line of the kind drawn by :data:`SHARES` (see the module docstring)."""
        target = int(min(max_chars, rng.choice([rng.randint(1, 8), rng.randint(6, 24), rng.randint(16, max_chars)])))
        kind = self.last_kind = self.KINDS[sum(rng.random() >= b for b in self._bounds)]
        if kind == "prose":
            text = self._prose(rng, target)
        elif kind == "mixed_en":
            parts: list[str] = []
            while sum(len(p) for p in parts) < target:
                parts.append(self._prose(rng, rng.randint(2, 12)) if rng.random() < 0.55
                             else self._english(rng, rng.randint(1, 4)))
            text = "".join(p if is_hanzi(p[:1] or "a") or not parts else f" {p} " for p in parts)
        elif kind == "business":
            gens = (amount_text, date_text, code_text)
            parts = [rng.choice(gens)(rng) if rng.random() < 0.5 else self._prose(rng, rng.randint(2, 10))
                     for _ in range(rng.randint(1, 4))]
            text = rng.choice(["", " ", "：", "，"]).join(parts)
        elif kind == "table":
            text = self._prose(rng, rng.randint(2, 14)) + rng.choice(["（元）", "", "（%）", "（元/股）"])
            text += "".join(" " * rng.randint(1, 3) + amount_text(rng) for _ in range(rng.randint(0, 3)))
        elif kind == "random":
            text = "".join(rng.choice(HANZI) if rng.random() < 0.9 else rng.choice("，。、；：？！（）《》“”")
                           for _ in range(target))
        else:
            text = self._english(rng, rng.randint(1, 12))
        text = _WS.sub(" ", "".join(c for c in text if c in _VOCAB)).strip()
        return text[:max_chars].strip() or rng.choice(HANZI)
