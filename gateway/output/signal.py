"""How sure the model was of a page: ``confidence`` and ``warnings`` per page and per block.

Definitions (README "Confidence and warnings"):

* A segment's confidence is the decoder's ``Usage.confidence``: the geometric mean of the model's
  probabilities of the tokens it wrote, ``exp(mean ln p)``, end-of-sequence token included. It is
  computed by the decoder service from the logits of any model family (a text line for ``compact``,
  the whole page for ``deepseek_ocr2``).
* A page's confidence is the token-weighted geometric mean over its segments,
  ``exp(sum_s n_s ln c_s / sum_s n_s)`` with ``n_s`` the segment's generated tokens: the geometric
  mean of every token probability of the page. A block has its segment's confidence. A page or
  block without generated tokens has confidence 0.0.

Warnings are stable codes (:data:`WARNING_CODES`), decided from those numbers only, so they mean the
same for every model family:

* ``no_text_found``: the page was read (status ok) and holds no text at all: no line was detected,
  or every segment came back empty.
* ``low_confidence``: page confidence below :data:`LOW_CONFIDENCE_BELOW` (a block: below
  :data:`BLOCK_LOW_CONFIDENCE_BELOW`).
* ``unread_region``: the page holds text, but at least one of its segments came back empty. A
  segment is a region the encoder found ink in (a detected text line, a table cell): an empty one is
  text lost, so it is flagged rather than dropped in silence (issue 37: whole table columns vanished
  without a warning).
* ``unsupported_script``: at least :data:`SCRIPT_MIN_LINES` lines were detected (the page's ink is
  laid out as text) and the page confidence is below :data:`SCRIPT_CONFIDENCE_BELOW`: the model cannot
  write what it sees, which is what a script outside its vocabulary looks like (measured with the
  embedded model: Devanagari 0.45, Arabic 0.35, Chinese 0.37; Latin pages it reads at <= 5 % CER
  0.98-1.0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

# the codes are part of the page-result contract (every code, in the order listed on a page)
from inkstream.page_result import LOW_CONFIDENCE, NO_TEXT_FOUND, UNREAD_REGION, UNSUPPORTED_SCRIPT, WARNING_CODES

__all__ = ["LOW_CONFIDENCE", "NO_TEXT_FOUND", "UNREAD_REGION", "UNSUPPORTED_SCRIPT", "WARNING_CODES", "SegmentScore",
           "page_confidence", "block_warnings", "page_warnings"]

#: page confidence under which a page is ``low_confidence``: the eval pages the embedded model reads
#: at <= 5 % CER score 0.98 and above; pages of junk (unseen script, inverted print) 0.2-0.75.
LOW_CONFIDENCE_BELOW = 0.9
#: block (line) confidence under which a block is ``low_confidence``: single lines vary more than
#: pages (one misread word in a short line weighs more), so the bar is lower.
BLOCK_LOW_CONFIDENCE_BELOW = 0.8
#: ``unsupported_script`` needs this many detected lines (one odd line is a logo or a stamp) ...
SCRIPT_MIN_LINES = 3
#: ... and a page confidence below this (the unseen scripts measured 0.35-0.45).
SCRIPT_CONFIDENCE_BELOW = 0.6


@dataclass(frozen=True)
class SegmentScore:
    """One decoded segment as the signal sees it: its ``text``, ``confidence`` in [0, 1] and
    ``generated_tokens`` (the weight of its confidence in the page's).
    """

    text: str
    confidence: float
    generated_tokens: int


def page_confidence(segments: Sequence[SegmentScore]) -> float:
    """Token-weighted geometric mean of the segments' confidences, in [0, 1] (0.0 without tokens).

    A segment of confidence 0 with tokens makes the page 0 (a probability of 0 is possible only in
    theory: it needs a token the model ruled out).
    """
    n = sum(max(0, s.generated_tokens) for s in segments)
    if n == 0:
        return 0.0
    total = 0.0
    for s in segments:
        if s.generated_tokens <= 0:
            continue
        if s.confidence <= 0.0:
            return 0.0
        total += s.generated_tokens * math.log(min(1.0, s.confidence))
    return min(1.0, max(0.0, math.exp(total / n)))


def block_warnings(confidence: float, text: str) -> list[str]:
    """Warnings of one block (a line or a layout region) of ``confidence`` with ``text``."""
    if not text.strip():
        return []
    return [LOW_CONFIDENCE] if confidence < BLOCK_LOW_CONFIDENCE_BELOW else []


def page_warnings(segments: Sequence[SegmentScore], text: str) -> tuple[float, list[str]]:
    """(confidence, warnings) of a page read without error, from its ``segments`` in reading order
    and its stitched ``text``. See the module docstring for the rules.
    """
    if not text.strip():
        return 0.0, [NO_TEXT_FOUND]
    conf = page_confidence(segments)
    lines = sum(1 for s in segments if s.generated_tokens > 0)
    out: list[str] = [UNREAD_REGION] if any(not s.text.strip() for s in segments) else []
    if lines >= SCRIPT_MIN_LINES and conf < SCRIPT_CONFIDENCE_BELOW:
        out.append(UNSUPPORTED_SCRIPT)
    if conf < LOW_CONFIDENCE_BELOW:
        out.append(LOW_CONFIDENCE)
    return conf, out
