"""How sure the model was of a page: ``confidence`` and ``warnings`` per page and per block.

Definitions (README "Confidence and warnings"):

* A segment's *raw* confidence is the decoder's ``Usage.confidence``: the geometric mean of the
  model's probabilities of the tokens it wrote, ``exp(mean ln p)``, end-of-sequence token included,
  computed by the decoder service from the logits of any model family.
* For a model with a calibration table (:data:`gateway.output.calibration_tables.TABLES`, keyed by
  the encoders' model id; the embedded ``inkstream-compact``), confidences are *calibrated*: a
  block's confidence is 1 - its expected character error rate (:mod:`inkstream.confidence`: a
  logistic model of the raw confidence, the tokens and the text, fitted on generated held-out pages),
  with the weights of the tower that read the segment (``SegmentText.tower``, the table's ``towers``:
  the compact family's Latin and PP towers mean different error rates by the same raw confidence;
  the table's pooled ``weights`` when the tower is not said or has none), and a page's is 1 - the
  expected CER of its text, the mean of its segments' weighted by their characters
  (:func:`calibrated_page`), with the characters no segment holds counted in: the encoder's
  ``unread_ink`` (text-like ink outside every segment per ink inside) under the table's
  ``unread_ink`` term gives the share ``s`` of the page's characters missed (:func:`missed_share`),
  and the page's expected CER is ``(1 - s) * lines' + s``. ``confidence`` 0.97 then means "about 3 %
  of these characters are wrong". ``low_confidence`` marks a page whose expected CER is above
  :data:`PAGE_EXPECTED_CER_ABOVE` (2 %) or one of whose lines alone is expected to make at least the
  table's ``worst_line_share`` of the page's characters wrong (:func:`worst_line_share`: one garbled
  line dilutes into the page's mean; the bar is fitted by :mod:`training.compact.fit_worst_line`; no
  rule when the table has none), a block above :data:`BLOCK_EXPECTED_CER_ABOVE`, and a block
  holding digits whose expected wrong digits (expected CER x digits) reach
  :data:`BLOCK_EXPECTED_WRONG_DIGITS` (a doubtful number: a table cell's own line block carries it).
* Without a table (other families): a page's confidence is the token-weighted geometric mean over
  its segments, ``exp(sum_s n_s ln c_s / sum_s n_s)`` with ``n_s`` the segment's generated tokens,
  a block has its segment's raw confidence, and the bars below apply. A page or block without
  generated tokens has confidence 0.0.

Warnings are stable codes (:data:`WARNING_CODES`), decided from those numbers only, so they mean the
same for every model family:

* ``no_text_found``: the page was read (status ok) and holds no text at all: no line was detected,
  or every segment came back empty. Such a page with ink on it -- a segment came back empty (a region
  the encoder found ink in: ``unread_region``) or text-like ink lies outside every segment
  (``unread_ink`` above 0) -- is one the model could not read, not an empty one: it is
  ``low_confidence`` too (:func:`empty_page_warnings`). A blank page (no segment, no such ink) is
  ``no_text_found`` alone.
* ``low_confidence``: calibrated, see above; else page confidence below :data:`LOW_CONFIDENCE_BELOW`
  (a block: below :data:`BLOCK_LOW_CONFIDENCE_BELOW`).
* ``unread_region``: the page holds text, but at least one of its segments came back empty. A
  segment is a region the encoder found ink in (a detected text line, a table cell): an empty one is
  text lost, so it is flagged rather than dropped in silence (issue 37: whole table columns vanished
  without a warning).
* ``unread_ink``: calibrated, the share of the page's characters expected missed (:func:`missed_share`:
  text the line detector did not find) is above :data:`UNREAD_INK_ABOVE`; nothing is dropped, the
  page's confidence counts them (so such a page is usually ``low_confidence`` too).
* ``unsupported_script``: at least :data:`SCRIPT_MIN_LINES` lines were detected (the page's ink is
  laid out as text) and the page's raw confidence is below :data:`SCRIPT_CONFIDENCE_BELOW`: the model cannot
  write what it sees, which is what a script outside its vocabulary looks like (measured with the
  embedded model: Devanagari 0.45, Arabic 0.35, Chinese 0.37; Latin pages it reads at <= 5 % CER
  0.98-1.0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from gateway.output.calibration_tables import TABLES
from inkstream.confidence import PAGE_EXPECTED_CER_ABOVE, expected_error, expected_wrong_chars, line_features

# the codes are part of the page-result contract (every code, in the order listed on a page)
from inkstream.page_result import (
    LOW_CONFIDENCE,
    NO_TEXT_FOUND,
    UNREAD_INK,
    UNREAD_REGION,
    UNSUPPORTED_SCRIPT,
    WARNING_CODES,
)

__all__ = ["LOW_CONFIDENCE", "NO_TEXT_FOUND", "UNREAD_INK", "UNREAD_REGION", "UNSUPPORTED_SCRIPT", "WARNING_CODES",
           "SegmentScore", "page_confidence", "block_signal", "cell_signal", "page_warnings", "empty_page_warnings",
           "missed_share",
           "worst_line_share", "PAGE_EXPECTED_CER_ABOVE"]

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
#: calibrated: a block (line) is ``low_confidence`` above this expected CER (one character in 20)
BLOCK_EXPECTED_CER_ABOVE = 0.05
#: calibrated: a block holding digits is ``low_confidence`` when its expected CER times its digits
#: reaches this (a one-in-ten chance that one of its digits is wrong)
BLOCK_EXPECTED_WRONG_DIGITS = 0.1
#: calibrated: a page is ``unread_ink`` when the expected share of its characters that no segment
#: holds (:func:`missed_share`) is above this (one character in 100)
UNREAD_INK_ABOVE = 0.01


@dataclass(frozen=True)
class SegmentScore:
    """One decoded segment as the signal sees it: its ``text``, ``confidence`` in [0, 1],
    ``generated_tokens`` (the weight of its confidence in the page's) and the ``tower`` that read it
    (``SegmentText.tower``: picks the calibration weights; "" when not said).
    """

    text: str
    confidence: float
    generated_tokens: int
    tower: str = ""


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


def calibration(model_id: str) -> dict | None:
    """The calibration table of ``model_id`` (:data:`gateway.output.calibration_tables.TABLES`), or None."""
    return TABLES.get(model_id) if model_id else None


def tower_weights(table: dict, tower: str) -> list[float]:
    """The weights of ``table`` for a segment read by ``tower``: the tower's own (``table["towers"]``)
    when it has them, else the pooled ``table["weights"]`` (a tower not said, or one not fitted).
    """
    return (table.get("towers") or {}).get(tower) or table["weights"]


def segment_expected_error(segment: SegmentScore, table: dict) -> float:
    """Expected CER of one segment under ``table`` with its tower's weights (:func:`tower_weights`,
    :func:`inkstream.confidence.expected_error`).
    """
    feats = line_features(segment.confidence, segment.generated_tokens, segment.text)
    return expected_error(tower_weights(table, segment.tower), feats)


def calibrated_page(segments: Sequence[SegmentScore], table: dict) -> float:
    """1 - the page's expected CER: its segments' expected CERs weighted by their non-space characters
    (a segment with tokens but no text weighs 1); 0.0 without generated tokens.
    """
    num = den = 0.0
    for s in segments:
        if s.generated_tokens <= 0:
            continue
        w = max(1, sum(1 for c in s.text if not c.isspace()))
        num += w * segment_expected_error(s, table)
        den += w
    return 1.0 - num / den if den else 0.0


def missed_share(unread_ink: float, table: dict) -> float:
    """Expected share of a page's characters that no segment holds, in [0, 1), from its ``unread_ink``
    (unread / read text-like ink, the encoder's ``EncodeResponse.unread_ink``:
    :func:`models.compact.page.unread_ink.unread_ink`) under ``table["unread_ink"]`` = ``{"slope",
    "floor"}`` (fitted by :mod:`training.compact.fit_confidence`): ``m = slope * max(0, unread_ink -
    floor)`` characters missed per character read, ``m / (1 + m)`` of the page's. 0.0 when the
    table has no such entry.
    """
    fit = table.get("unread_ink")
    if not fit:
        return 0.0
    m = float(fit["slope"]) * max(0.0, unread_ink - float(fit["floor"]))
    return m / (1.0 + m)


def worst_line_share(segments: Sequence[SegmentScore], table: dict) -> float:
    """The largest share of the page's characters one segment of ``segments`` is expected to get wrong
    under ``table``, in [0, 1]: the most :func:`inkstream.confidence.expected_wrong_chars` of one
    segment (its expected CER, :func:`segment_expected_error`, x its non-whitespace characters) over
    the page's characters (as :func:`calibrated_page` weighs them: each segment with generated tokens,
    at least 1); 0.0 without generated tokens.
    """
    read = [s for s in segments if s.generated_tokens > 0]
    total = sum(max(1, sum(1 for c in s.text if not c.isspace())) for s in read)
    worst = max((expected_wrong_chars(segment_expected_error(s, table), s.text) for s in read), default=0.0)
    return worst / total if total else 0.0


def block_signal(segment: SegmentScore, text: str, model_id: str = "") -> tuple[float, list[str]]:
    """(confidence, warnings) of one block (a line or a layout region) with ``text`` read as
    ``segment``; calibrated when ``model_id`` has a table (see the module docstring).
    """
    table = calibration(model_id)
    if table is None:
        return segment.confidence, block_warnings(segment.confidence, text)
    err = segment_expected_error(segment, table) if segment.generated_tokens > 0 else 1.0
    if not text.strip():
        return 1.0 - err, []
    return 1.0 - err, [LOW_CONFIDENCE] if _doubtful(err, text) else []


def _doubtful(err: float, text: str) -> bool:
    """Calibrated: is a block or cell of expected CER ``err`` holding ``text`` ``low_confidence``?"""
    digits = sum(1 for c in text if c.isdigit())
    return err > BLOCK_EXPECTED_CER_ABOVE or (digits > 0 and err * digits >= BLOCK_EXPECTED_WRONG_DIGITS)


def cell_signal(segments: Sequence[SegmentScore], text: str, model_id: str = "") -> tuple[float, list[str]]:
    """(confidence, warnings) of one table cell read from ``segments`` (its pieces, in reading order)
    with ``text``. Calibrated when ``model_id`` has a table: 1 - the cell's expected CER (its segments'
    expected CERs weighted by their characters, :func:`calibrated_page`), ``low_confidence`` under
    the block's rules (expected CER above :data:`BLOCK_EXPECTED_CER_ABOVE`, or expected wrong digits
    reaching :data:`BLOCK_EXPECTED_WRONG_DIGITS`: a number with a doubtful digit marks its cell);
    else the token-weighted geometric mean (:func:`page_confidence`) and the raw block bar. An empty
    cell has no warning (the page's ``unread_region`` says so); a cell without generated tokens has
    confidence 0.0.
    """
    table = calibration(model_id)
    if table is None:
        conf = page_confidence(segments)
        return conf, block_warnings(conf, text)
    if not any(s.generated_tokens > 0 for s in segments):
        return 0.0, []
    conf = calibrated_page(segments, table)
    return conf, [LOW_CONFIDENCE] if text.strip() and _doubtful(1.0 - conf, text) else []


def block_warnings(confidence: float, text: str) -> list[str]:
    """Warnings of one block (a line or a layout region) of raw ``confidence`` with ``text``."""
    if not text.strip():
        return []
    return [LOW_CONFIDENCE] if confidence < BLOCK_LOW_CONFIDENCE_BELOW else []


def empty_page_warnings(segments: Sequence[SegmentScore], unread_ink: float = 0.0) -> list[str]:
    """Warnings of a page read without error that holds no text (every segment of ``segments`` came
    back empty, or there are none): ``no_text_found``, with ``unread_region`` when it has a segment (ink
    the encoder found and the model did not read), ``unread_ink`` when ``unread_ink`` (the encoder's
    measure, :func:`page_warnings`) is above 0, and then ``low_confidence``: a page the model could
    not read never looks like a confident empty page. ``[no_text_found]`` alone for a blank page.
    """
    out = [NO_TEXT_FOUND]
    if segments:
        out.append(UNREAD_REGION)
    if unread_ink > 0.0:
        out.append(UNREAD_INK)
    return out + [LOW_CONFIDENCE] if len(out) > 1 else out


def page_warnings(segments: Sequence[SegmentScore], text: str, model_id: str = "",
                  unread_ink: float = 0.0) -> tuple[float, list[str]]:
    """(confidence, warnings) of a page read without error, from its ``segments`` in reading order,
    its stitched ``text`` and its ``unread_ink`` (text-like ink outside every segment per ink inside,
    the encoder's ``EncodeResponse.unread_ink``; 0.0 when not measured); calibrated when
    ``model_id`` has a table: the page's expected CER counts the characters its segments missed
    (:func:`missed_share` ``s``: ``1 - ((1 - s) * lines' expected CER + s)``), and ``unread_ink``
    marks a page where ``s`` is above :data:`UNREAD_INK_ABOVE`; ``low_confidence`` a page whose
    expected CER is above :data:`PAGE_EXPECTED_CER_ABOVE` or, when the table has a
    ``worst_line_share`` bar, one of whose lines alone is expected to make at least that share of the
    page's characters wrong (:func:`worst_line_share`). A page without text: confidence 0.0 and
    :func:`empty_page_warnings`. See the module docstring.
    """
    if not text.strip():
        return 0.0, empty_page_warnings(segments, unread_ink)
    raw = page_confidence(segments)
    table = calibration(model_id)
    conf = calibrated_page(segments, table) if table is not None else raw
    missed = missed_share(unread_ink, table) if table is not None else 0.0
    conf = (1.0 - missed) * conf
    lines = sum(1 for s in segments if s.generated_tokens > 0)
    out: list[str] = [UNREAD_REGION] if any(not s.text.strip() for s in segments) else []
    if missed > UNREAD_INK_ABOVE:
        out.append(UNREAD_INK)
    if lines >= SCRIPT_MIN_LINES and raw < SCRIPT_CONFIDENCE_BELOW:
        out.append(UNSUPPORTED_SCRIPT)
    if table is None:
        low = conf < LOW_CONFIDENCE_BELOW
    else:
        bar = table.get("worst_line_share")
        low = 1.0 - conf > PAGE_EXPECTED_CER_ABOVE or (bar is not None and worst_line_share(segments, table) >= bar)
    if low:
        out.append(LOW_CONFIDENCE)
    return conf, out
