"""Measured service time per unit of work: busy seconds per page (or segment) completed.

A replica, or the gateway's whole stack, is *busy* while at least one unit is in flight. Dividing
the busy time by the units completed in it gives the seconds one unit costs at the concurrency the
work actually ran at (a batch of 8 pages finished in 4 s is 0.5 s a page), which is what sizes a
work window in time (:func:`window_units`) and what tells whether a document can be read within its
deadline. Both sums decay by half every ``half_life_units`` completed units, so the figure follows a
change of load or of machine within a few dozen pages. Not thread-safe: one owner (an event loop).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable


class ServiceRate:
    """Busy seconds per completed unit (module docstring).

    ``half_life_units``: units after which an old measurement weighs half (> 0); ``min_units``:
    units completed before :attr:`seconds_per_unit` answers (until then it is ``prior_s``, which
    may be None: unknown); ``min_inflight``: units in flight for the time to count (>= 1; module
    docstring); ``clock``: monotonic seconds (tests pass a fake one).
    """

    def __init__(self, *, half_life_units: float = 32.0, min_units: float = 4.0, prior_s: float | None = None,
                 min_inflight: int = 1, clock: Callable[[], float] = time.monotonic):
        if half_life_units <= 0 or min_inflight < 1:
            raise ValueError(f"need half_life_units > 0 and min_inflight >= 1, got {half_life_units}, {min_inflight}")
        self.half_life_units = half_life_units
        self.min_inflight = min_inflight
        self.min_units = min_units
        self.prior_s = prior_s
        self._clock = clock
        self.inflight = 0
        self._mark = 0.0  # clock at the last accrual while busy
        self._pending_s = 0.0  # busy seconds not yet attributed to completed units
        self._busy_s = 0.0  # decayed busy seconds
        self._units = 0.0  # decayed completed units
        self._completed = 0.0  # completed units, not decayed (for min_units)

    def _accrue(self) -> None:
        now = self._clock()
        if self.inflight >= self.min_inflight:
            self._pending_s += max(0.0, now - self._mark)
        self._mark = now

    def started(self, n: int = 1) -> None:
        """``n`` units entered service (the clock counts from now when the owner was idle)."""
        self._accrue()
        self.inflight += n

    def finished(self, n: int = 1, units: float | None = None) -> None:
        """``n`` units in service are done; ``units`` (default ``n``) is the work they count for (not
        counted when they finish with fewer than ``min_inflight`` units in flight).
        """
        self._accrue()
        saturated = self.inflight >= self.min_inflight
        self.inflight = max(0, self.inflight - n)
        done = float(n if units is None else units)
        if done <= 0 or not saturated:
            return
        keep = 0.5 ** (done / self.half_life_units)
        self._busy_s = self._busy_s * keep + self._pending_s
        self._units = self._units * keep + done
        self._completed += done
        self._pending_s = 0.0

    def abandoned(self, n: int = 1) -> None:
        """``n`` units left service without being done (cancelled); their busy time stays pending
        and is attributed to the next units that finish.
        """
        self._accrue()
        self.inflight = max(0, self.inflight - n)

    @property
    def measured(self) -> bool:
        """Whether :attr:`seconds_per_unit` is measured (``min_units`` units completed), not ``prior_s``."""
        return self._completed >= self.min_units and self._units > 0

    @property
    def seconds_per_unit(self) -> float | None:
        """Measured busy seconds per unit; ``prior_s`` until ``min_units`` units completed."""
        if not self.measured:
            return self.prior_s
        return self._busy_s / self._units


def window_units(busy_s: float, seconds_per_unit: float | None, floor: int, ceiling: int) -> int:
    """Units that keep a server busy for ``busy_s`` seconds at ``seconds_per_unit``, to the nearest
    whole unit (a unit more for a few percent of busy time would only wait inside the server),
    within [``floor``, ``ceiling``] (``floor`` when the rate is unknown). Raises ValueError when
    ``floor`` < 1 or ``ceiling`` < ``floor``.
    """
    if floor < 1 or ceiling < floor:
        raise ValueError(f"need 1 <= floor <= ceiling, got {floor}, {ceiling}")
    if not seconds_per_unit or seconds_per_unit <= 0:
        return floor
    return max(floor, min(ceiling, math.floor(busy_s / seconds_per_unit + 0.5)))
