"""Confidence calibration tables, written by ``python -m training.compact.fit_confidence --write``
(see :mod:`inkstream.confidence` for the model): per model id, the checkpoint revision fitted
on, the weights of :data:`inkstream.confidence.FEATURES` fitted on every line (``weights``: for a
segment whose tower is not said) and on each tower's lines (``towers``),
and the page term of unread ink (``unread_ink``), the generated documents fitted on and the page
ECE there.
"""

TABLES: dict[str, dict] = {
    'inkstream-compact': {
        "revision": '583c382639a8',
        "features": ['bias', 'nll', 'sqrt_nll', 'log_tokens', 'cjk', 'digits', 'nll_x_cjk'],
        "weights": [-5.00681, -2.7461, 10.26322, -0.38804, -2.43095, 0.08102, 1.01138],
        "towers": {
            'latin': [-7.32095, -1.85447, 11.14712, 0.59453, 0.0, -0.29913, 0.0],
            'pp': [-2.91264, -3.36654, 10.29251, -1.47212, -2.98226, 0.59569, 1.66648],
        },
        "unread_ink": {'slope': 1.65, 'floor': 0.0},
        "fitted_on": "training.compact.scan_docs seeds 0-95, and "
                     "0-95 printed cleanly",
        "page_ece": 0.0014,
    },
}
