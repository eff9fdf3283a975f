"""What the confidence calibration is fitted and scored against: each line's CER target and a
page's figures, counted as the benches count them (no whitespace, reading order free).

Moved out of :mod:`training.compact.fit_confidence` (which fits the weights on these targets):
:func:`line_groups` / :func:`line_targets` score the lines the detector cut out of one printed piece
together against it; :func:`page_figures` gives a fitted document's calibrated confidence and CER,
:func:`page_ece` the expected calibration error over pages.
"""

from __future__ import annotations

import collections
import unicodedata
from collections.abc import Mapping, Sequence

import numpy as np

from inkstream.confidence import expected_error, line_features


def _chars(text: str) -> str:
    """``text`` NFC-normalised without whitespace: the characters CER counts here (as ``bench/receipts.py``)."""
    return "".join(c for c in unicodedata.normalize("NFC", text) if not c.isspace())


def _order_free(hyp: str, ref: str) -> int:
    """Edits between the multisets of characters of ``hyp`` and ``ref`` (reading order not counted)."""
    h, r = collections.Counter(hyp), collections.Counter(ref)
    return max(len(hyp), len(ref)) - sum((h & r).values())


def _inside(a: Sequence[float], b: Sequence[float]) -> float:
    """Share of box ``a``'s area inside box ``b`` (boxes x0, y0, x1, y1)."""
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    return max(0.0, w) * max(0.0, h) / max(1e-6, (a[2] - a[0]) * (a[3] - a[1]))


def line_groups(doc: dict) -> tuple[list[int], list[str]]:
    """(the group of each line of ``doc``: the index of the line that owns its printed text; the
    printed text each line is scored against, its ``truth`` or the piece it was cut out of). A line
    the detector cut off a printed piece (a number split at its decimal point: "29." and "82") owns
    no piece itself; when at least half of it lies inside a piece that another line owns, it joins
    that line's group, so the two are scored together against the piece; lines cut out of a piece
    no line covers half of ("LOW" "FAT" "JAM") form a group scored against it. Any other line is its
    own group. Documents cached without boxes: every line its own group.
    """
    lines, pieces = doc["lines"], doc.get("pieces") or []
    groups, truths = list(range(len(lines))), [ln["truth"] for ln in lines]
    if not pieces or any("box" not in ln for ln in lines):
        return groups, truths
    owner: dict[int, int] = {}
    for k, (_, box) in enumerate(pieces):
        cover = [_inside(box, ln["box"]) for ln in lines]
        best = max(range(len(lines)), key=cover.__getitem__) if lines else -1
        if best >= 0 and cover[best] >= 0.5:
            owner[k] = best
    for i, ln in enumerate(lines):
        if ln["truth"]:
            continue
        inside = [(_inside(ln["box"], box), k) for k, (_, box) in enumerate(pieces)]
        share, k = max(inside, default=(0.0, -1))
        if share < 0.5:
            continue
        if k not in owner:  # a piece no line covers half of: its first cut-out line owns it
            owner[k], truths[i] = i, pieces[k][0]
        groups[i] = owner[k]
    return groups, truths


def line_targets(doc: dict) -> list[tuple[float, float]]:
    """Per line of ``doc``: (its CER target, its weight). A group of lines (:func:`line_groups`) is
    scored as one: the order-free edits between its lines' characters and its printed text's (no
    whitespace), over the printed characters, capped at 1; each line of the group gets that CER,
    weighted by its share of the group's written characters times the printed characters. A line
    over no printed text counts CER 1, weighted by its own characters.
    """
    lines = doc["lines"]
    groups, truths = line_groups(doc)
    out: list[tuple[float, float]] = [(1.0, 1.0)] * len(lines)
    for g in sorted(set(groups)):
        members = [i for i in range(len(lines)) if groups[i] == g]
        truth = _chars(truths[g])
        if not truth:
            for i in members:
                out[i] = (1.0, float(max(1, len(_chars(lines[i]["text"])))))
            continue
        hyp = "".join(_chars(lines[i]["text"]) for i in members)
        cer = min(1.0, _order_free(hyp, truth) / len(truth))
        sizes = [max(1, len(_chars(lines[i]["text"]))) for i in members]
        for i, n in zip(members, sizes, strict=True):
            out[i] = (cer, len(truth) * n / sum(sizes))
    return out


def page_figures(doc: dict, weights: Sequence[float],
                 towers: Mapping[str, Sequence[float]] | None = None) -> tuple[float, float]:
    """(the page's calibrated confidence: 1 - the expected CER of its lines weighted by their written
    characters, each line under its tower's weights when ``towers`` has them, else ``weights``; its
    order-free CER: the edits between the multisets of the lines' characters and of the printed
    characters, missed pieces included, over the printed characters; no whitespace, as
    ``bench/receipts.py`` and ``bench/calibration.py`` count).
    """
    exp_num = exp_den = 0.0
    for ln in doc["lines"]:
        n = max(1, len(_chars(ln["text"])))
        w = (towers or {}).get(ln.get("tower", "")) or weights
        exp_num += n * expected_error(w, line_features(ln["confidence"], ln["tokens"], ln["text"]))
        exp_den += n
    hyp = "".join(_chars(ln["text"]) for ln in doc["lines"])
    ref = "".join(_chars(ln["truth"]) for ln in doc["lines"]) + "".join(_chars(t) for t in doc["missed"])
    conf = 1.0 - exp_num / exp_den if exp_den else 0.0
    return conf, _order_free(hyp, ref) / max(1, len(ref))


def page_ece(pairs: Sequence[tuple[float, float]], bins: int = 10) -> float:
    """Expected calibration error between confidences and 1 - CER over (confidence, CER) pairs: the
    pages binned by confidence into ``bins`` equal-width bins on [0, 1], the page-weighted mean of
    |mean confidence - mean (1 - CER)| per bin.
    """
    conf = np.array([p[0] for p in pairs])
    acc = 1.0 - np.array([p[1] for p in pairs])
    idx = np.minimum(bins - 1, (conf * bins).astype(int))
    return float(sum(np.sum(idx == b) / len(conf) * abs(conf[idx == b].mean() - acc[idx == b].mean())
                     for b in range(bins) if np.any(idx == b)))
