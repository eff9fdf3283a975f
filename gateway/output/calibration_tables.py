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
        "weights": [-4.73211, -2.09466, 8.88737, -0.41268, -2.17104, -0.36202, 1.07957],
        "towers": {
            'latin': [-7.0041, -1.71308, 10.13394, 0.62451, 0.0, -0.30706, 0.0],
            'pp': [-2.15083, -1.11174, 7.11341, -1.7151, -2.71556, -0.1154, 1.41314],
        },
        "unread_ink": {'slope': 1.65, 'floor': 0.0},
        "worst_line_share": 0.00511,
        "fitted_on": 'training.compact.scan_docs seeds 0-95, and 0-95 printed cleanly; recalibrated '
                     'per tower (level, slope on the logit: pooled -0.210 0.957, latin -0.187 0.894, '
                     'pp -0.722 0.912) on seeds 96-191 and 96-191 printed cleanly',
        "page_ece": 0.0016,
    },
}
