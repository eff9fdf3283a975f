"""Recalibrate a fitted confidence table on newer readings: per tower, a level and a slope on its logit.

``python -m training.compact.fit_confidence --recalibrate --seeds 96 192 --clean-seeds 96 192 --write``

Why: a full refit of the line model (:func:`training.compact.fit_confidence.fit_lines`, 7 weights per
tower) learns its shape from the failures its fit pages happen to hold. The table fitted on seeds 0-95
learned that a PP-tower line of one or two characters read at 0.7-0.9 is often wrong (clean receipts
whose decimal points the detector cut off and the tower wrote as a lone ``。``: 6 % CER pages, 4 of the
13 above 5 % on ``bench/calibration.py`` seeds 20,000 and 21,000); the 192 pages read since (seeds
96-191, scanned and clean) hold none of them, and a refit there drops that term and leaves those
pages unflagged (1 of 3 above 5 % flagged on seed 20,000). But the readings changed since that fit
(detector and reading-order work, another CPU's floats): on seeds 96-191 the old table expects 2-7
times the errors the PP tower now makes on its short item and price lines read at 0.8-1.0, which
lifts good receipts over the 2 % page bar (6 of 79 good pages of seed 20,000 flagged).

How (:func:`fit_recalibration`): the table's shape is kept and only its scale is refitted, the
recalibration of Cox (1958): each tower's expected CER becomes ``sigmoid(a + b * logit(e))``, ``e``
the table's, with ``(a, b)`` fitted (:func:`training.compact.logistic.fit_logistic`, the same
binomial likelihood, targets and weights as the line fit) on that tower's lines of the new pages;
two numbers per tower are set by thousands of lines, so they hinge on no few pages. The features
hold an intercept, so the recalibrated model is again a weight vector: ``b * w`` with ``a`` added to
the intercept (:func:`recalibrated_weights`), and the gateway reads it unchanged.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence

import numpy as np

from inkstream.confidence import line_features
from training.compact.confidence_targets import line_targets
from training.compact.logistic import fit_logistic


def recalibrated_weights(weights: Sequence[float], level: float, slope: float) -> list[float]:
    """The weights of ``sigmoid(level + slope * (weights . features))``: ``slope * weights`` with
    ``level`` added to the first (the intercept, :data:`inkstream.confidence.FEATURES`' ``bias``).
    """
    out = [slope * float(w) for w in weights]
    out[0] += level
    return out


def _logits(docs: Sequence[dict], weights: Sequence[float], towers: Mapping[str, Sequence[float]],
            tower: str | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the table's logit of each line of ``docs``, under its tower's weights or ``weights``; its CER
    target; its weight) for every line, or with ``tower`` only that tower's lines.
    """
    z, y, w = [], [], []
    for d in docs:
        for ln, (t, wt) in zip(d["lines"], line_targets(d), strict=True):
            if tower is not None and ln.get("tower", "") != tower:
                continue
            wv = towers.get(ln.get("tower", "")) or weights
            z.append(float(np.dot(wv, line_features(ln["confidence"], ln["tokens"], ln["text"]))))
            y.append(t)
            w.append(wt)
    return np.array(z), np.array(y), np.array(w)


def fit_level_slope(docs: Sequence[dict], weights: Sequence[float], towers: Mapping[str, Sequence[float]],
                    tower: str | None = None) -> tuple[float, float]:
    """``(a, b)`` of ``sigmoid(a + b * z)`` fitted on the lines of ``docs`` (records of
    :func:`training.compact.fit_confidence.read_documents`; every line, or with ``tower`` that tower's),
    ``z`` a line's logit under the table (``towers``' weights for its tower, else ``weights``), against
    the line targets (:func:`training.compact.confidence_targets.line_targets`). Raises ValueError
    when there is no such line.
    """
    z, y, w = _logits(docs, weights, towers, tower)
    if not len(z):
        raise ValueError(f"no line read by tower {tower!r} to recalibrate on")
    a, b = fit_logistic(np.column_stack([np.ones(len(z)), z]), y, w)
    return float(a), float(b)


def fit_recalibration(docs: Sequence[dict], weights: Sequence[float], towers: Mapping[str, Sequence[float]],
                      min_lines: int) -> tuple[list[float], dict[str, list[float]], dict[str, tuple[float, float]]]:
    """Recalibrate a table (pooled ``weights``, per-tower ``towers``) on ``docs``: (the pooled weights
    recalibrated on every line, each tower's recalibrated on its own lines when it read at least
    ``min_lines`` of them, else by the pooled ``(a, b)``; the ``(a, b)`` used, keyed by tower, "" for
    the pooled). See the module docstring.
    """
    counts = collections.Counter(ln.get("tower", "") for d in docs for ln in d["lines"])
    pooled = fit_level_slope(docs, weights, {})
    params = {"": pooled}
    out: dict[str, list[float]] = {}
    for t, w in sorted(towers.items()):
        ab = fit_level_slope(docs, weights, towers, t) if counts[t] >= min_lines else pooled
        params[t] = ab
        out[t] = recalibrated_weights(w, *ab)
    return recalibrated_weights(weights, *pooled), out, params


def recalibrate_table(docs: Sequence[dict], table: Mapping, min_lines: int, seeds: range,
                      clean_seeds: range) -> tuple[list[float], dict[str, list[float]], str]:
    """:func:`fit_recalibration` of the committed ``table`` (an entry of
    ``gateway.output.calibration_tables.TABLES``) on ``docs``, read from generated ``seeds`` and
    ``clean_seeds`` printed cleanly: (pooled weights, per-tower weights, the table's new ``fitted_on``
    text: what the weights were fitted on, then the ``(a, b)`` per tower and the seeds). Raises
    SystemExit when ``table`` has no weights.
    """
    if not table.get("weights"):
        raise SystemExit("--recalibrate needs a committed table for this checkpoint")
    weights, towers, params = fit_recalibration(docs, table["weights"], table.get("towers") or {}, min_lines)
    said = ", ".join(f"{t or 'pooled'} {a:.3f} {b:.3f}" for t, (a, b) in params.items())
    print(f"recalibrated (a, b) per tower: {said}")
    fitted_on = (f"{table.get('fitted_on', 'an earlier fit')}; recalibrated per tower (level, slope on the "
                 f"logit: {said}) on seeds {seeds.start}-{seeds.stop - 1} and "
                 f"{clean_seeds.start}-{clean_seeds.stop - 1} printed cleanly")
    return weights, towers, fitted_on
