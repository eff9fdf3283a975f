"""Fit the confidence calibration of a compact checkpoint on generated held-out documents.

``python -m training.compact.fit_confidence [--seeds 0 96] [--clean-seeds 0 96] [--model DIR] [--cache F]
[--recalibrate] [--write]``

1. Reads documents ``make_document(seed)`` for the seeds (:mod:`training.compact.scan_docs`: receipts and
   forms, printed and scanned; never the seeds ``bench/receipts.py`` and ``bench/calibration.py`` score,
   10,000 on), and the documents of ``--clean-seeds`` printed cleanly (``degrade=False``: pages the
   model reads well, which the calibration must not flag), in this process as the stack reads them
   (:func:`training.compact.read_scored.read_scored`), and matches each line to the printed pieces it
   covers (:func:`training.compact.read_scored.match_truth`). The targets and page figures are
   counted in :mod:`training.compact.confidence_targets`.
   The lines are cached as JSON lines (``--cache``), so a refit needs no reading.
2. Fits :func:`inkstream.confidence.expected_error` per line: a logistic model of the line's CER on
   :func:`inkstream.confidence.line_features`, by iteratively reweighted least squares with a small
   ridge (:func:`fit_logistic`), once over all lines (the pooled weights, for a segment whose tower
   is not said) and once per tower over the lines it read (:func:`fit_towers`: the PP tower's short
   receipt lines read right at raw confidences where the Latin tower's are wrong). The CER is
   counted as the benches count it (no whitespace, reading order free) and lines the detector cut
   out of one printed piece are scored together against it (:func:`line_targets`): scoring "29."
   and "82" each against "29.82" alone (the first 40 % wrong, the second 100 %) taught the
   calibration that short number lines are wrong when they were right, and flagged receipts read at
   under 1 % CER. With ``--recalibrate`` the committed table's weights are kept and only a level and
   a slope on their logit are refitted per tower (:mod:`training.compact.recalibrate`: the readings
   changed since the fit, and a full refit on pages that lack a rare failure forgets it).
3. Fits the page-level term for text no line holds (:mod:`training.compact.fit_unread`: each page's
   ``unread_ink``, measured on the page and kept in the cache, against its CER beyond the lines'
   expected CER).
4. Fits the page rule's worst-line bar (:mod:`training.compact.fit_worst_line`: a page is
   ``low_confidence`` when one line alone is expected to make that share of its characters wrong),
   with ``--recalibrate`` too: the recalibrated weights expect fewer wrong characters of the same
   line, so the old bar would no longer mean the same share (it let the garbled e-mail form of
   ``tests/unit/test_worst_line_rule.py`` pass, 0.73 % of its characters in that line).
5. Prints the page-level calibration on the fitted documents (:func:`page_ece`) and, with ``--write``,
   writes the table into ``gateway/output/calibration_tables.py`` (the checkpoint's model id and revision,
   the pooled weights, each tower's, the unread-ink term, the worst-line bar, the seeds fitted on).
"""
from __future__ import annotations

import argparse
import collections
import json
import pathlib
import runpy
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence

import numpy as np

from inkstream.confidence import FEATURES, line_features
from training.compact.confidence_targets import (  # noqa: F401 - line_groups re-exported
    line_groups,
    line_targets,
    page_ece,
    page_figures,
)
from training.compact.fit_unread import MIN_SIGNAL_PAGES, document_unread_ink, fit_unread, missed
from training.compact.fit_worst_line import document_worst_line, fit_worst_line
from training.compact.logistic import RIDGE, fit_logistic  # noqa: F401 - re-exported
from training.compact.recalibrate import recalibrate_table

TABLE = pathlib.Path(__file__).resolve().parents[2] / "gateway" / "output" / "calibration_tables.py"
#: a tower gets weights of its own when it read at least this many of the fitted lines (else the pooled
#: ones serve it): 96 fitted documents hold ~1,300 Latin-tower and ~1,900 PP-tower lines
TOWER_MIN_LINES = 300


def read_documents(seeds: Iterable[int], model: str | None, clean: bool = False) -> Iterator[dict]:
    """One record per document: ``{"seed", "clean", "kind", "lines": [{"text", "confidence", "tokens",
    "truth", "tower"}], "missed": [texts]}`` (see the module docstring); ``clean``: the documents printed
    cleanly (``make_document(seed, degrade=False)``).
    """
    from training.compact.read_scored import load_halves, match_truth, read_scored
    from training.compact.scan_docs import make_document

    enc, dec = load_halves(model)
    for seed in seeds:
        doc = make_document(seed, degrade=not clean)
        lines = read_scored(enc, dec, doc.image)
        missed = match_truth(lines, doc.pieces)
        yield {"seed": seed, "clean": clean, "kind": doc.kind, "missed": missed,
               "pieces": [[t, [round(v, 1) for v in b]] for t, b in doc.pieces],
               "lines": [{"text": ln.text, "confidence": ln.confidence, "tokens": ln.tokens, "truth": ln.truth,
                          "tower": ln.tower, "box": [round(v, 1) for v in ln.box],
                          "logprobs": [round(v, 4) for v in ln.logprobs]} for ln in lines]}


def fit_lines(docs: Sequence[dict], tower: str | None = None) -> list[float]:
    """Weights of :data:`inkstream.confidence.FEATURES` fitted (:func:`fit_logistic`) on the lines of
    ``docs`` (records of :func:`read_documents`) against their targets (:func:`line_targets`): every
    line, or with ``tower`` only the lines that tower read. Raises ValueError when there is no such line.
    """
    x, yw = [], []
    for d in docs:
        for ln, t in zip(d["lines"], line_targets(d), strict=True):
            if tower is None or ln.get("tower", "") == tower:
                x.append(line_features(ln["confidence"], ln["tokens"], ln["text"]))
                yw.append(t)
    if not x:
        raise ValueError(f"no fitted line read by tower {tower!r}")
    y = np.array(yw)
    return [float(v) for v in fit_logistic(np.array(x), y[:, 0], y[:, 1])]


def fit_towers(docs: Sequence[dict], min_lines: int = TOWER_MIN_LINES) -> dict[str, list[float]]:
    """Per tower that read at least ``min_lines`` lines of ``docs``: its own weights (:func:`fit_lines`)."""
    counts = collections.Counter(ln.get("tower", "") for d in docs for ln in d["lines"])
    return {t: fit_lines(docs, t) for t, n in sorted(counts.items()) if t and n >= min_lines}


def _rounded(weights: Sequence[float]) -> list[float]:
    return [round(float(v), 5) for v in weights]


def _current_table(model: str | None) -> dict:
    """The committed table (:data:`TABLE`, the file this script writes: read as a file, training does
    not import the gateway) for the checkpoint ``model`` (default: the embedded one); {} when it has none.
    """
    from models.compact import checkpoint as ckpt
    from models.compact import default_checkpoint_dir

    model_id, _ = ckpt.checkpoint_identity(model or default_checkpoint_dir())
    tables = runpy.run_path(str(TABLE)).get("TABLES", {}) if TABLE.is_file() else {}
    return dict(tables.get(model_id, {}))


def _current_unread_term(model: str | None) -> dict[str, float] | None:
    """The unread-ink term of the committed table for the checkpoint ``model`` (:func:`_current_table`);
    None when it has none.
    """
    term = _current_table(model).get("unread_ink")
    return dict(term) if term else None


def _wrapped(text: str, width: int = 80) -> str:
    """``text`` as a Python string literal, cut at spaces into adjacent literals of about ``width``
    characters, one per line (indented for the table's ``fitted_on`` entry).
    """
    parts, cur = [], ""
    for word in text.split(" "):
        if cur and len(cur) + len(word) + 1 > width:
            parts.append(cur + " ")
            cur = word
        else:
            cur = f"{cur} {word}" if cur else word
    parts.append(cur)
    return "\n                     ".join(repr(p) for p in parts)


def write_table(model_id: str, revision: str, weights: Sequence[float], seeds: range, clean_seeds: range,
                ece: float, towers: Mapping[str, Sequence[float]] | None = None, path: pathlib.Path = TABLE,
                unread: Mapping[str, float] | None = None, worst_line: float | None = None,
                fitted_on: str | None = None) -> None:
    """Rewrite ``path`` (:data:`TABLE`) with one entry for ``model_id``: the pooled ``weights`` and, per
    tower, its own (``towers``; :func:`gateway.output.signal.tower_weights` picks them), the
    unread-ink term (``unread``: ``{"slope", "floor"}``, :func:`gateway.output.signal.missed_share`)
    and the worst-line bar (``worst_line``: a share of the page's characters,
    :func:`gateway.output.signal.worst_line_share`; omitted when None); ``fitted_on`` says what the
    weights were fitted on (default: ``seeds`` and ``clean_seeds``).
    """
    if fitted_on is None:
        fitted_on = (f"training.compact.scan_docs seeds {seeds.start}-{seeds.stop - 1}, and "
                     f"{clean_seeds.start}-{clean_seeds.stop - 1} printed cleanly")
    tower_lines = "".join(f"            {t!r}: {_rounded(w)!r},\n" for t, w in sorted((towers or {}).items()))
    body = (f'"""Confidence calibration tables, written by ``python -m training.compact.fit_confidence --write``\n'
            f'(see :mod:`inkstream.confidence` for the model): per model id, the checkpoint revision fitted\n'
            f'on, the weights of :data:`inkstream.confidence.FEATURES` fitted on every line (``weights``: for a\n'
            f'segment whose tower is not said) and on each tower\'s lines (``towers``),\n'
            f'the page term of unread ink (``unread_ink``), the page rule\'s bar on its worst line\n'
            f'(``worst_line_share``: the share of the page\'s characters one line alone is expected to get\n'
            f'wrong), the generated documents fitted on and the page ECE there.\n"""\n\n'
            f"TABLES: dict[str, dict] = {{\n    {model_id!r}: {{\n        \"revision\": {revision!r},\n"
            f"        \"features\": {list(FEATURES)!r},\n"
            f"        \"weights\": {_rounded(weights)!r},\n"
            f"        \"towers\": {{\n{tower_lines}        }},\n"
            + (f"        \"unread_ink\": {dict(unread)!r},\n" if unread else "")
            + (f"        \"worst_line_share\": {worst_line!r},\n" if worst_line is not None else "") +
            f"        \"fitted_on\": {_wrapped(fitted_on)},\n"
            f"        \"page_ece\": {round(ece, 4)!r},\n    }},\n}}\n")
    path.write_text(body, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    """Read (or load the cached) documents, fit, print the calibration, optionally write the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs=2, default=(0, 96), metavar=("FIRST", "STOP"))
    ap.add_argument("--clean-seeds", type=int, nargs=2, default=(0, 96), metavar=("FIRST", "STOP"),
                    help="documents also read printed cleanly (make_document(seed, degrade=False))")
    ap.add_argument("--model", default=None)
    ap.add_argument("--cache", default="runs/confidence_lines.jsonl")
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--recalibrate", action="store_true",
                    help="keep the committed table's weights, refit per tower a level and slope on their logit "
                         "(training/compact/recalibrate.py)")
    args = ap.parse_args(argv)
    seeds, clean_seeds = range(*args.seeds), range(*args.clean_seeds)
    cache = pathlib.Path(args.cache)
    docs = [json.loads(s) for s in cache.read_text().splitlines()] if cache.is_file() else []
    have = {(d["seed"], d.get("clean", False)) for d in docs}
    cache.parent.mkdir(parents=True, exist_ok=True)
    for clean, wanted in ((False, seeds), (True, clean_seeds)):
        missing = [s for s in wanted if (s, clean) not in have]
        if not missing:
            continue
        with cache.open("a", encoding="utf-8") as fh:
            for doc in read_documents(missing, args.model, clean):
                fh.write(json.dumps(doc, ensure_ascii=False) + "\n")
                fh.flush()
                docs.append(doc)
                print(f"read seed {doc['seed']} ({doc['kind']}): {len(doc['lines'])} lines", file=sys.stderr,
                      flush=True)
    docs = [d for d in docs if d["seed"] in (clean_seeds if d.get("clean") else seeds)]
    lines = [ln for d in docs for ln in d["lines"]]
    fitted_on = None
    if args.recalibrate:  # the committed table's shape kept, its scale refitted per tower
        weights, towers, fitted_on = recalibrate_table(docs, _current_table(args.model), TOWER_MIN_LINES, seeds,
                                                       clean_seeds)
    else:
        weights = fit_lines(docs)
        towers = fit_towers(docs)
    pairs = [page_figures(d, weights, towers) for d in docs]
    before = len([d for d in docs if "unread_ink" in d])
    inks = [document_unread_ink(d) for d in docs]
    if before < len(docs):  # measured now: kept, so a refit draws no page
        cache.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8")
    unread = fit_unread([(1.0 - c, u, e) for (c, e), u in zip(pairs, inks, strict=True)])
    if unread is None:  # no fit page shows missed text: the term fitted where some did stays
        unread = _current_unread_term(args.model)
        print(f"fewer than {MIN_SIGNAL_PAGES} fit pages have unread ink: unread-ink term kept {unread}")
    print(f"page ECE, lines alone: {page_ece(pairs):.4f}; unread-ink term {unread}")
    if unread is not None:
        pairs = [(c * (1.0 - missed(u, unread["slope"], unread["floor"])), e)
                 for (c, e), u in zip(pairs, inks, strict=True)]
    ece = page_ece(pairs)
    worst = fit_worst_line([(1.0 - c, document_worst_line(d, weights, towers), e)
                            for (c, e), d in zip(pairs, docs, strict=True)])
    print(f"worst-line bar: {worst} of the page's characters expected wrong in one line")
    print(f"{len(docs)} documents, {len(lines)} lines")
    for name, w in [("pooled", weights), *towers.items()]:
        print(f"weights {name}: {dict(zip(FEATURES, np.round(w, 3).tolist(), strict=True))}")
    print(f"page ECE on the fitted documents: {ece:.4f} (pooled weights alone "
          f"{page_ece([page_figures(d, weights) for d in docs]):.4f})")
    if args.write:
        from models.compact import checkpoint as ckpt
        from models.compact import default_checkpoint_dir

        model_id, revision = ckpt.checkpoint_identity(args.model or default_checkpoint_dir())
        write_table(model_id, revision, weights, seeds, clean_seeds, ece, towers, unread=unread,
                    worst_line=worst, fitted_on=fitted_on)
        print(f"wrote {TABLE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
