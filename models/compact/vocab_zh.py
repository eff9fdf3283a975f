"""The Chinese + Latin character set of the bilingual compact checkpoint.

:data:`ZH_CHARSET` = the Latin :data:`models.compact.vocab.CHARSET` (first, so its ids are unchanged
and a Latin checkpoint's embeddings carry over), then every character of GB 2312 (6,763 hanzi and the
682 symbols of rows 1-9: full-width punctuation, digits and letters, kana, Greek, Cyrillic, pinyin,
box drawing; decoded with Python's ``gb2312`` codec), then :data:`GBK_EXTRA`: characters outside
GB 2312 that business text needs (GBK/GB 18030 hanzi common in names of people, places and firms, and
signs such as ``·`` ``《》`` variants). Simplified Chinese only: traditional characters outside GB 2312
are not in the vocabulary (they become ``<unk>``).
"""

from __future__ import annotations

from functools import cache

from models.compact.vocab import CHARSET

# Hanzi outside GB 2312 that are common in Chinese business and personal names (GBK / GB 18030),
# plus signs used in mixed Chinese/English business text.
GBK_EXTRA = ("镕喆堃昇玥珺琍琤瑄瑢璟瓘瞭砼祎祐禤秾竑筠翀翃翚翯耘玙珏琰瑀瑭煊熠燊犇赟邨郗钜铖锃镠"
             "頔飏骞髙鹍鹏麟婧嫚婕嫣媖晔晗暄曦昀昕旻旸晞晟炜烨焜焱煜熙瑛瑜璐璇骅骐骢鑫淼焘頫"
             "〇﹏︰﹑﹔﹖﹗﹙﹚﹛﹜﹝﹞＂＇｟｠￤・‧")

CJK_RANGES = ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x2FA1F))


def is_hanzi(ch: str) -> bool:
    """True for a CJK unified / compatibility ideograph (any of :data:`CJK_RANGES`)."""
    c = ord(ch)
    return any(lo <= c <= hi for lo, hi in CJK_RANGES)


@cache
def gb2312_chars() -> tuple[str, ...]:
    """All 7,445 characters of GB 2312, in code order (rows 0xA1-0xF7, cells 0xA1-0xFE)."""
    out = []
    for hi in range(0xA1, 0xF8):
        for lo in range(0xA1, 0xFF):
            try:
                out.append(bytes([hi, lo]).decode("gb2312"))
            except UnicodeDecodeError:
                continue
    return tuple(out)


def _charset() -> list[str]:
    return list(dict.fromkeys([*CHARSET, *gb2312_chars(), *GBK_EXTRA]))


ZH_CHARSET: list[str] = _charset()
HANZI: list[str] = [c for c in ZH_CHARSET if is_hanzi(c)]
