"""Measured service time (inkstream.pace): busy seconds per unit, and windows sized in time."""

from __future__ import annotations

import pytest

from inkstream.pace import ServiceRate, window_units


class _Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_busy_seconds_per_unit_counts_concurrency_and_not_idle_time():
    clock = _Clock()
    rate = ServiceRate(clock=clock, min_units=4)
    assert rate.seconds_per_unit is None  # nothing measured, no prior
    rate.started(4)  # a batch of 4 pages ...
    clock.t += 2.0
    rate.finished(4)  # ... done in 2 s: 0.5 s a page
    assert rate.seconds_per_unit == pytest.approx(0.5)
    clock.t += 100.0  # idle: not counted
    rate.started()
    clock.t += 0.5
    rate.finished()
    assert rate.seconds_per_unit == pytest.approx(0.5)


def test_the_rate_follows_a_change_of_load_and_abandoned_work_is_charged_to_the_next():
    clock = _Clock()
    rate = ServiceRate(clock=clock, half_life_units=4, min_units=1, prior_s=9.0)
    assert rate.seconds_per_unit == 9.0  # the prior until measured
    for _ in range(40):  # 1 s a page, then 0.1 s a page
        rate.started()
        clock.t += 1.0
        rate.finished()
    for _ in range(40):
        rate.started()
        clock.t += 0.1
        rate.finished()
    assert rate.seconds_per_unit == pytest.approx(0.1, rel=0.05)
    rate.started(2)
    clock.t += 1.0
    rate.abandoned()  # cancelled: its second of work goes with the next page done
    rate.finished()
    assert rate.seconds_per_unit > 0.2


def test_with_min_inflight_only_saturated_time_counts():
    clock = _Clock()
    rate = ServiceRate(clock=clock, min_units=2, min_inflight=4)
    for _ in range(6):  # one page at a time: its latency (2 s), not the stack's throughput
        rate.started()
        clock.t += 2.0
        rate.finished()
    assert rate.seconds_per_unit is None
    rate.started(4)  # four at a time, one finishing every 0.5 s while the window is full
    for _ in range(8):
        clock.t += 0.5
        rate.finished()
        rate.started()
    assert rate.seconds_per_unit == pytest.approx(0.5)


def test_window_units_is_the_busy_time_in_units_within_bounds():
    assert window_units(1.0, 0.25, floor=3, ceiling=72) == 4
    assert window_units(1.02, 0.5, floor=1, ceiling=72) == 2  # 2.04 units: the nearest whole one
    assert window_units(1.0, 0.001, floor=3, ceiling=72) == 72
    assert window_units(1.0, 2.0, floor=3, ceiling=72) == 3
    assert window_units(1.0, None, floor=3, ceiling=72) == 3  # unknown rate: the floor
    with pytest.raises(ValueError):
        window_units(1.0, 0.5, floor=0, ceiling=3)
