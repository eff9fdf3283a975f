"""The decode engine's measured pace: seconds per engine iteration and sequences finishing per one.

Both are exponentially weighted over iterations (weight 0.2 for the newest), measured on the model
thread (:meth:`StepPace.observe`) and read by the event loop (plain floats, written whole). They give
the retry hint of a full decoder and the work window it reports in ``Info`` (sized in time: what
finishes during one step is what must wait to keep the batch full).
"""

from __future__ import annotations

import math

_WEIGHT = 0.2  # of the newest iteration


class StepPace:
    """Smoothed ``step_s`` (seconds per engine iteration, 0.0 before the first) and ``finishing``
    (sequences finishing per iteration).
    """

    def __init__(self) -> None:
        self.step_s = 0.0
        self.finishing = 0.0

    def observe(self, step_s: float, finished: int) -> None:
        """One iteration took ``step_s`` seconds and finished ``finished`` sequences."""
        self.step_s = step_s if not self.step_s else (1 - _WEIGHT) * self.step_s + _WEIGHT * step_s
        self.finishing = (1 - _WEIGHT) * self.finishing + _WEIGHT * finished

    def work_window(self, max_running: int, max_waiting: int) -> int:
        """Sequences to keep open (``InfoResponse.work_window_segments``): the running batch plus
        those that finish during one iteration (at least 1), at most ``max_running + max_waiting``.
        """
        return max_running + min(max_waiting, max(1, math.ceil(self.finishing)))

    def retry_after_s(self, steps_left: int) -> float:
        """Seconds until a sequence with ``steps_left`` iterations to go finishes, within [0.5, 30]."""
        return float(min(30.0, max(0.5, steps_left * max(self.step_s, 0.01))))
