"""Confidence calibration tables, written by ``python -m training.compact.fit_confidence --write``
(see :mod:`inkstream.confidence` for the model): per model id, the checkpoint revision fitted
on, the weights of :data:`inkstream.confidence.FEATURES`, the generated documents fitted on and
the page ECE there.
"""

TABLES: dict[str, dict] = {
    'inkstream-compact': {
        "revision": '583c382639a8',
        "features": ['bias', 'nll', 'sqrt_nll', 'log_tokens', 'cjk', 'digits', 'nll_x_cjk'],
        "weights": [-6.78552, -3.31017, 10.98302, 0.30919, -1.41248, 0.02855, 1.95525],
        "fitted_on": "training.compact.scan_docs seeds 0-47, and "
                     "0-47 printed cleanly",
        "page_ece": 0.0052,
    },
}
