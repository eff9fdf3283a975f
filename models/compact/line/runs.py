"""Runs of True in a 1-D bool array: the one helper behind every ink-profile cut of the compact model
(text rows and cells of a tall detection, :mod:`models.compact.page.rowsplit`; box edges and
underlines, :mod:`models.compact.line.rules`; word and tab gaps, :mod:`models.compact.line.split`;
a gutter's gap inside a line, :func:`models.compact.page.regions.gutter_gap`).
"""

from __future__ import annotations

import numpy as np


def true_runs(flags: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) index pairs, increasing, of each run of True in ``flags`` (1-D, any dtype read as
    bool); [] for an empty array or one without True.
    """
    padded = np.concatenate([[False], np.asarray(flags, dtype=bool), [False]]).astype(np.int8)
    d = np.diff(padded)
    return list(zip(np.flatnonzero(d == 1).tolist(), np.flatnonzero(d == -1).tolist(), strict=True))
