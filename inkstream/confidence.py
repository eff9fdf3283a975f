"""Calibrated confidence of a decoded line: the expected share of its characters that are wrong.

The decoder reports, per segment, the geometric mean ``c`` of its generated tokens' probabilities
(``Usage.confidence``). That number is not a probability of being right: a line the embedded model
misreads can still score 0.95, and a correct three-hanzi line 0.7. A calibration maps what the
gateway knows of a line -- ``c``, the tokens generated and the text written -- to its expected
character error rate (CER), through a logistic model fitted per model on generated held-out pages
whose truth is known (``training/compact/fit_confidence.py`` writes the table,
``gateway/output/calibration_tables.py``).

:func:`line_features` is the one definition of the model's inputs, shared by the fit and the gateway:

1. ``1``: the intercept;
2. ``nll``: ``-ln c``, the mean negative log-likelihood per token (nats, >= 0);
3. ``nll ** 0.5``: its square root (the error rate rises fast from 0, then flattens);
4. ``ln(1 + tokens)``: a short line's mean says less than a long one's;
5. ``cjk``: the share of the text's characters that are CJK ideographs (their tokens are less sure
   when right: one token per hanzi out of ~7,700);
6. ``digits``: the share that are digits (a wrong digit is as likely as a wrong letter, but its
   token distribution is flatter);
7. ``nll * cjk``: the CJK lines' own slope.

:func:`expected_error` is ``sigmoid(w . features)``, in (0, 1).

A page is judged from its lines' expected CERs two ways (the gateway's ``low_confidence``): their
mean weighted by characters above :data:`PAGE_EXPECTED_CER_ABOVE`, or one line alone expected to make
a large share of the page's characters wrong (its :func:`expected_wrong_chars` over the page's
characters at or above the table's fitted ``worst_line_share``): a garbled e-mail line of 16
characters on a page of 180 moves the mean by about 1 % while the page is 7 % wrong.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

#: names of :func:`line_features`' values, in order (the fitted weights follow it)
FEATURES = ("bias", "nll", "sqrt_nll", "log_tokens", "cjk", "digits", "nll_x_cjk")
#: a page is ``low_confidence`` when its expected CER is above this (issue #38: 2 %); shared by the
#: gateway's page rule and the fit of the worst-line bar (``training/compact/fit_worst_line.py``)
PAGE_EXPECTED_CER_ABOVE = 0.02


def _is_cjk(ch: str) -> bool:
    o = ord(ch)
    return 0x3400 <= o <= 0x9FFF or 0xF900 <= o <= 0xFAFF or 0x20000 <= o <= 0x2FA1F


def line_features(confidence: float, tokens: int, text: str) -> tuple[float, ...]:
    """The calibration inputs of one line (see the module docstring): ``confidence`` in [0, 1] (the
    decoder's ``Usage.confidence``; 0 is taken as 1e-6), ``tokens`` generated (>= 0), ``text`` as
    written. Returns :data:`FEATURES`' values as floats.
    """
    nll = -math.log(min(1.0, max(1e-6, confidence)))
    chars = [c for c in text if not c.isspace()]
    n = max(1, len(chars))
    cjk = sum(1 for c in chars if _is_cjk(c)) / n
    digits = sum(1 for c in chars if c.isdigit()) / n
    return (1.0, nll, math.sqrt(nll), math.log1p(max(0, tokens)), cjk, digits, nll * cjk)


def expected_error(weights: Sequence[float], features: Sequence[float]) -> float:
    """``sigmoid(weights . features)``: the line's expected CER in (0, 1). Raises ValueError when the
    lengths differ (a table fitted on other features).
    """
    if len(weights) != len(features):
        raise ValueError(f"calibration has {len(weights)} weights for {len(features)} features")
    z = sum(w * f for w, f in zip(weights, features, strict=True))
    return 1.0 / (1.0 + math.exp(-max(-40.0, min(40.0, z))))


def expected_wrong_chars(expected_cer: float, text: str) -> float:
    """Expected count of wrong characters in a line of ``text`` read at ``expected_cer`` (in [0, 1]):
    ``expected_cer`` x its non-whitespace characters (the characters CER counts; 0.0 for a blank line).
    """
    return expected_cer * sum(1 for c in text if not c.isspace())
