"""The encoder's seconds per page estimated from its warm-up (encoder_service.warm_rate)."""

from __future__ import annotations

import pytest

from encoder_service.warm_rate import warmup_seconds_per_page


def test_on_a_cpu_the_stages_add_up_and_on_an_accelerator_the_slower_one_sets_the_pace():
    # 3 s to prepare a page on one of 2 threads, 4 s for a forward of 8 pages.
    assert warmup_seconds_per_page(3.0, 2, 4.0, 8, forward_on_cpu=True) == pytest.approx(1.5 + 0.5)
    assert warmup_seconds_per_page(3.0, 2, 4.0, 8, forward_on_cpu=False) == pytest.approx(1.5)
    assert warmup_seconds_per_page(0.1, 1, 4.0, 2, forward_on_cpu=False) == pytest.approx(2.0)


@pytest.mark.parametrize("args", [(1.0, 0, 1.0, 1), (1.0, 1, 1.0, 0), (-1.0, 1, 1.0, 1), (1.0, 1, -0.5, 1)])
def test_impossible_timings_are_refused(args):
    with pytest.raises(ValueError):
        warmup_seconds_per_page(*args, forward_on_cpu=True)
