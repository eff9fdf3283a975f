"""Fit the page rule's second bar: a page is ``low_confidence`` when one of its lines alone is
expected to make at least ``worst_line_share`` of the page's characters wrong, whatever the page's mean.

Why: a page's expected CER is its lines' weighted by their characters, so one garbled line dilutes
into it. A photographed form (``bench/calibration.py`` seed 20092) is 7.4 % wrong, most of it one
e-mail address of 23 characters read as 16 at line confidence 0.57; the page's expected CER is 1.9 %,
under the 2 % bar, while that line alone is expected to make 1.2 % of the page's 182 characters
wrong, more than the worst line of any page read at <= 1 % CER but one in the fit pages.

Why a share of the page and not a count of characters: on long pages of long lines (the eval pages
of articles and reports, 2,000-8,000 characters in 90-270 lines) the worst of many lines holds 3-6
expected wrong characters while the page is 1-2.5 % wrong; a count fitted on receipts and forms
(lines of at most ~25 characters) flagged three of them, the share none.

How (:func:`fit_worst_line`): the fit documents hold about one page above 5 % CER per hundred, too
few to fit a bar on the pages it should catch. So the bar is fitted on the pages it must spare, in
the Neyman-Pearson way: the lowest bar (the most pages caught) at which the share of fit pages read
at <= 1 % CER that carry ``low_confidence`` -- by the mean rule
(:data:`inkstream.confidence.PAGE_EXPECTED_CER_ABOVE`) or this one -- stays within
:data:`GOOD_FLAG_BUDGET`. The bar lies halfway between the figures of the last good page it spares
and the first it flags.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from inkstream.confidence import PAGE_EXPECTED_CER_ABOVE, expected_error, expected_wrong_chars, line_features

#: the share of good fit pages (CER <= :data:`GOOD_AT_MOST`) both page rules together may flag: issue
#: #38 asks for <= 5 % of good pages flagged; 1 point is left for pages never fitted on (on ~100 good
#: fit pages one page is 1 point)
GOOD_FLAG_BUDGET = 0.04
#: a page at or below this CER is a good page (issue #38: the pages that must not be flagged)
GOOD_AT_MOST = 0.01


def document_worst_line(doc: dict, weights: Sequence[float],
                        towers: Mapping[str, Sequence[float]] | None = None) -> float:
    """The largest share of a fit document's characters one of its lines is expected to get wrong, in
    [0, 1] (``doc``: a record of :func:`training.compact.fit_confidence.read_documents`): the most
    :func:`inkstream.confidence.expected_wrong_chars` of one line with generated tokens, each line
    under its tower's weights when ``towers`` has them, else ``weights``, over the characters of those
    lines (each at least 1), as the gateway's ``gateway.output.signal.worst_line_share``; 0.0
    without such lines.
    """
    worst = total = 0.0
    for ln in doc["lines"]:
        if ln["tokens"] <= 0:
            continue
        w = (towers or {}).get(ln.get("tower", "")) or weights
        err = expected_error(w, line_features(ln["confidence"], ln["tokens"], ln["text"]))
        worst = max(worst, expected_wrong_chars(err, ln["text"]))
        total += max(1, sum(1 for c in ln["text"] if not c.isspace()))
    return worst / total if total else 0.0


def fit_worst_line(pages: Sequence[tuple[float, float, float]], budget: float = GOOD_FLAG_BUDGET,
                   good_at_most: float = GOOD_AT_MOST) -> float | None:
    """The bar on a page's worst line over ``pages`` = (the page's expected CER, its worst line's figure
    (:func:`document_worst_line`), its CER) triples: the lowest bar at which at most ``budget`` x the
    good pages (CER <= ``good_at_most``) are flagged by either rule (expected CER above
    :data:`inkstream.confidence.PAGE_EXPECTED_CER_ABOVE`, or a worst line at or above the bar),
    halfway between the figure of the last good page it spares and the first it flags (with no flag to
    spare, halfway between the highest and twice it; pages tied at a figure are flagged or spared
    together); rounded to 5 decimals. None when the mean rule alone flags more than the budget, or
    every good page it spares could be flagged (no bar fitted: the rule is not used). Raises
    ValueError without good pages.
    """
    good = [(e, w) for e, w, cer in pages if cer <= good_at_most]
    if not good:
        raise ValueError("no good page to fit the worst-line bar on")
    allowed = int(budget * len(good) + 1e-9) - sum(1 for e, _ in good if e > PAGE_EXPECTED_CER_ABOVE)
    spared = sorted((w for e, w in good if e <= PAGE_EXPECTED_CER_ABOVE), reverse=True)
    if allowed < 0 or allowed >= len(spared):
        return None
    k = allowed  # flag the k highest figures: the bar lies between the k-th and the next, untied
    while k > 0 and spared[k - 1] <= spared[k]:
        k -= 1
    high = spared[k - 1] if k > 0 else 2.0 * spared[0]
    return round((high + spared[k]) / 2.0, 5)
