"""Scoring a page's text against its ground truth: CER and WER after NFC normalisation and whitespace
folding, with the UNLV-ISRI ``~`` mask (see :mod:`evaluation.run` for the rules and their source).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

import jiwer
from rapidfuzz.distance import Levenshtein

_WS = re.compile(r"\s+")


#: Marks a character the transcriber could not encode (UNLV-ISRI ground truth): not scored in the CER.
MASK_CHAR = "~"


def fold(text: str) -> str:
    """NFC-normalise and fold whitespace runs to one space (strip ends)."""
    return _WS.sub(" ", unicodedata.normalize("NFC", text)).strip()


@dataclass
class Score:
    """Edit counts of one document: character edits / reference chars, word edits / reference words."""

    char_edits: int
    ref_chars: int
    word_edits: int
    ref_words: int

    @property
    def cer(self) -> float:
        """Character error rate: character edits / reference characters (at least 1)."""
        return self.char_edits / max(1, self.ref_chars)

    @property
    def wer(self) -> float:
        """Word error rate: word edits / reference words (at least 1)."""
        return self.word_edits / max(1, self.ref_words)

    def __add__(self, other: Score) -> Score:
        return Score(self.char_edits + other.char_edits, self.ref_chars + other.ref_chars,
                     self.word_edits + other.word_edits, self.ref_words + other.ref_words)


def score(hyp: str, ref: str) -> Score:
    """Score ``hyp`` against ``ref`` after :func:`fold` (see the module docstring)."""
    h, r = fold(hyp), fold(ref)
    rw = r.split()
    if rw:
        out = jiwer.process_words(r, h if h else "")
        word_edits = out.substitutions + out.deletions + out.insertions
    else:
        word_edits = len(h.split())
    if MASK_CHAR in r:
        return Score(_masked_distance(h, r), len(r) - r.count(MASK_CHAR), word_edits, len(rw))
    return Score(Levenshtein.distance(h, r), len(r), word_edits, len(rw))


def _masked_distance(h: str, r: str) -> int:
    """Levenshtein edits of ``h`` against ``r`` where no edit touching a masked reference character
    (``MASK_CHAR``: read as anything, or nothing, or with a stray character beside it) counts.
    """
    edits = 0
    for op in Levenshtein.editops(h, r):  # turns the hypothesis into the reference
        j = op.dest_pos
        if op.tag in ("insert", "replace") and r[j] == MASK_CHAR:
            continue
        if op.tag == "delete" and ((j > 0 and r[j - 1] == MASK_CHAR) or (j < len(r) and r[j] == MASK_CHAR)):
            continue
        edits += 1
    return edits
