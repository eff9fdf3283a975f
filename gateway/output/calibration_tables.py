"""Confidence calibration tables, written by ``python -m training.compact.fit_confidence --write``
(see :mod:`inkstream.confidence` for the model): per model id, the checkpoint revision fitted
on, the weights of :data:`inkstream.confidence.FEATURES`, the generated documents fitted on and
the page ECE there.
"""

TABLES: dict[str, dict] = {}
