"""Confidence calibration tables, written by ``python -m training.compact.fit_confidence --write``
(see :mod:`inkstream.confidence` for the model): per model id, the checkpoint revision fitted
on, the weights of :data:`inkstream.confidence.FEATURES` fitted on every line (``weights``: for a
segment whose tower is not said) and on each tower's lines (``towers``),
the page term of unread ink (``unread_ink``), the page rule's bar on its worst line
(``worst_line_share``: the share of the page's characters one line alone is expected to get
wrong), the generated documents fitted on and the page ECE there.
"""

TABLES: dict[str, dict] = {
    'inkstream-compact': {
        "revision": '583c382639a8',
        "features": ['bias', 'nll', 'sqrt_nll', 'log_tokens', 'cjk', 'digits', 'nll_x_cjk'],
        "weights": [-4.72544, -2.18873, 9.28652, -0.43121, -2.26854, -0.37828, 1.12805],
        "towers": {
            'latin': [-7.62511, -1.91611, 11.33498, 0.69852, 0.0, -0.34345, 0.0],
            'pp': [-1.56666, -1.21912, 7.8005, -1.88076, -2.97786, -0.12655, 1.54964],
        },
        "unread_ink": {'slope': 1.65, 'floor': 0.0},
        "worst_line_share": 0.0098,
        "fitted_on": "training.compact.scan_docs seeds 0-95, and "
                     "0-95 printed cleanly",
        "page_ece": 0.0016,
    },
}
