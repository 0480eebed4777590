"""The timer itself: a null workload, a known sleep, sign and units (seconds)."""

import time

import pytest

from bench.measure.memory import RSSSampler
from bench.measure.timer import PhaseTimer, checked_duration, stopwatch


def test_null_workload_is_tiny_and_non_negative():
    samples = []
    for _ in range(200):
        with stopwatch() as sw:
            pass
        samples.append(sw.seconds)
    assert min(samples) >= 0
    with stopwatch() as sleep:
        time.sleep(0.002)
    assert sorted(samples)[100] < sleep.seconds, "an empty region costs less than a 2 ms sleep"


def test_known_sleep_measures_in_seconds():
    t0 = time.perf_counter()
    with stopwatch() as sw:
        time.sleep(0.05)
    outer = time.perf_counter() - t0  # an outer clock around it: an ordering, not a wall-clock bound
    assert 0.045 <= sw.seconds <= outer, f"sleep(0.05) measured {sw.seconds} s (outer {outer} s): wrong units or clock?"


def test_reversed_clock_pair_is_refused():
    with pytest.raises(AssertionError, match="negative duration"):
        checked_duration(2.0, 1.0)


def test_phase_timer_accumulates_and_calls_sync_around_each_phase():
    calls = []
    t = PhaseTimer(sync=lambda: calls.append(1))
    for _ in range(3):
        with t.phase("forward"):
            time.sleep(0.01)
    with t.phase("step"):
        pass
    assert len(calls) == 8  # before and after each of 4 phases
    assert t.counts == {"forward": 3, "step": 1}
    assert 0.03 <= t.totals["forward"] < 0.5
    assert set(t.as_fields()) == {"forward_s", "step_s"}


@pytest.mark.quiet
def test_rss_sampler_sees_a_transient_peak():
    import numpy as np

    with RSSSampler(interval_s=0.005) as s:
        time.sleep(0.03)
        big = np.ones(200_000_000 // 8)  # 200 MB, touched
        time.sleep(0.05)
        del big
        time.sleep(0.03)
    assert s.n_samples >= 5
    assert s.peak_mb - s.mean_mb > 30, f"peak {s.peak_mb:.0f} MB should stand above mean {s.mean_mb:.0f} MB"
