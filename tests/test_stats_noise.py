"""Intervals and flags: the numbers behind "no clear winner" and the ⚑ in every table."""

from __future__ import annotations

import time

import pytest

from bench.core import noise, stats


def test_a_median_gets_a_bootstrap_interval_only_from_two_repeats_up():
    s = stats.summarize([100.0, 110.0, 95.0])
    assert s.median == 100.0 and s.n == 3 and s.min == 95.0 and s.max == 110.0
    assert s.lo is not None and s.hi is not None and 95.0 <= s.lo <= 100.0 <= s.hi <= 110.0
    assert stats.summarize([100.0, 110.0, 95.0]) == s, "a fixed random state: the same rows give the same interval"
    one = stats.summarize([5.0])
    assert one.lo is None and one.interval() == "n=1, no interval"


def test_ratio_verdicts():
    clear = stats.ratio({0: 200.0, 1: 210.0, 2: 190.0}, {0: 100.0, 1: 104.0, 2: 98.0})
    assert clear.median == pytest.approx(2.0, rel=0.01) and clear.lo > 1.0
    assert stats.verdict(clear, "A", "B") == "A faster"
    assert stats.verdict(stats.ratio({0: 1.0, 1: 2.0, 2: 3.0}, {0: 4.0, 1: 5.0, 2: 6.0}), "A", "B") == "B faster"
    # the H100 situation of issue 9: which one wins flips from repeat to repeat
    flip = stats.ratio({0: 1.50e6, 1: 1.02e6, 2: 1.40e6}, {0: 1.08e6, 1: 1.16e6, 2: 1.10e6})
    said = stats.verdict(flip, "numba-cuda", "torch-cuda tuned")
    assert flip.lo < 1.0 < flip.hi and said.startswith("no clear winner") and "too few for a 95% CI" in said
    single = stats.ratio({0: 2.0}, {0: 1.0})
    assert single.lo is None and "no verdict" in stats.verdict(single, "A", "B")


def test_below_six_repeats_the_interval_is_the_range_and_says_so():
    """[min, max] of n repeats holds the median with probability 1 - 2^(1-n): below 95 % until n = 6,
    so fewer repeats give the range, called the range, never a '95% CI'."""
    assert [round(stats.range_coverage(n), 4) for n in (2, 3, 5, 6)] == [0.5, 0.75, 0.9375, 0.9688]
    assert stats.MIN_CI_REPEATS == 6 and stats.range_coverage(5) < 0.95 <= stats.range_coverage(6)
    three = stats.summarize([10.0, 30.0, 20.0])
    assert (three.kind, three.lo, three.hi) == ("range", 10.0, 30.0) and three.coverage == 0.75
    assert three.interval("{:.0f}") == "10–30 (range of 3)" and three.tag == "range of 3: 75%"
    assert three.bracket("{:.0f}") == " [10–30, range of 3]"
    six = stats.summarize([10.0, 30.0, 20.0, 12.0, 25.0, 18.0])
    assert six.kind == "ci" and six.coverage == 0.95 and "range" not in six.interval() and six.tag == "95% CI"
    # paired: the range of the per-repeat ratios; unpaired: min(A)/max(B) to max(A)/min(B)
    paired = stats.ratio({0: 2.0, 1: 3.0, 2: 4.0}, {0: 1.0, 1: 2.0, 2: 1.0})
    assert paired.kind == "range" and (paired.lo, paired.hi) == (1.5, 4.0)
    apart = stats.ratio({0: 2.0, 1: 3.0, 2: 4.0}, {0: 1.0, 1: 2.0, 2: 1.0}, paired=False)
    assert (apart.lo, apart.hi) == (1.0, 4.0) and "n=3, too few" in stats.verdict(apart, "A", "B")
    assert stats.summarize([5.0]).kind == "none" and stats.summarize([5.0]).bracket() == ""


def test_geometric_mean_of_ratios_and_its_bootstrap_interval():
    g = stats.geomean([0.5, 2.0, 1.0])
    assert g.median == pytest.approx(1.0) and g.n == 3 and (g.lo, g.hi, g.kind) == (0.5, 2.0, "range")  # too few
    g = stats.geomean([0.5, 2.0, 1.0, 0.8, 1.2, 1.5])
    assert g.kind == "ci" and 0.5 <= g.lo < 1.0 < g.hi <= 2.0  # the configurations are resampled: the interval spans them
    assert stats.geomean([0.8, 0.8]).lo == stats.geomean([0.8, 0.8]).hi == pytest.approx(0.8)
    one = stats.geomean([1.25])
    assert one.median == pytest.approx(1.25) and one.lo is None and one.hi is None
    assert stats.geomean([0.8, 0.9, 1.1]) == stats.geomean([0.8, 0.9, 1.1])  # a fixed random state: same interval
    with pytest.raises(ValueError):
        stats.geomean([1.0, 0.0])


def test_step_flags_catch_noise_and_outliers_and_leave_steady_runs_alone():
    assert noise.step_flags([1.0, 1.01, 0.99, 1.0]) == []
    assert noise.step_flags([2.1, 1.0, 1.0, 1.0, 1.0], unit="epoch") == ["noisy(cv=40%)", "outlier(epoch 1=2.1x)"]
    assert noise.step_flags([1.0, 1.3, 0.8, 1.2]) == ["noisy(cv=21%)"]
    assert noise.step_flags([1.0, 5.0]) == [], "too few steps for a verdict"


def test_cell_flags_name_the_part_and_the_telemetry():
    t = {"cpu_thermal_throttle_events": 3, "gpu_throttle": ["hw-thermal"], "gpu_other_processes": 2}
    flags = noise.cell_flags({"numpy": [1.0, 1.0, 1.0], "cupy": [1.0, 3.0, 1.0, 1.0]}, t, "run")
    assert flags.split(";") == [
        "cupy:noisy(cv=67%)",
        "cupy:outlier(run 2=3.0x)",
        "cpu-throttled(3 events)",
        "gpu-throttled(hw-thermal)",
        "gpu-shared(2)",
    ]
    assert noise.cell_flags({"x": [1.0, 1.0, 1.0]}, {"gpu_power_capped": True, "gpu_other_processes": None}) == ""
    assert noise.mark("torch-cpu", "noisy(cv=20%)") == "torch-cpu ⚑" and noise.mark("torch-cpu", "") == "torch-cpu"


def test_the_sampler_runs_and_says_what_it_could_not_read():
    from bench.measure.telemetry import Telemetry

    t = Telemetry(gpu=True, interval_s=0.05).start()
    time.sleep(0.3)
    t.stop()
    s = t.summary()
    assert s["samples"] >= 3
    assert "cpu_mhz_median" in s or "note_cpu_freq" in s
    assert "cpu_thermal_throttle_events" in s or "note_cpu_throttle" in s
    assert "gpu_sm_mhz_median" in s or "note_gpu" in s, "no GPU here: NVML's absence is recorded, not guessed"


def test_a_sibling_cell_that_ended_before_the_summary_is_still_ours(monkeypatch):
    """The false gpu-shared flags of the first H100 reference: an interleaved sibling that had
    finished by the time the summary ran was counted as another process."""
    from bench.measure import telemetry as T

    t = T.Telemetry(gpu=False)
    t._nvml = type("FakeNvml", (), {"max_sm_mhz": lambda self: 1980, "version": "x"})()
    alive = {100, 101, 102}
    monkeypatch.setattr(T, "_ours", lambda pids, pid=None: set(alive))
    for pids in ([100, 101, 102], [100, 102]):
        t.samples.append({"sm_mhz": 1980, "reasons": 0, "pids": pids, "ours": sorted(T._ours(pids) & set(pids))})
    alive.discard(101)  # sibling 101 ended; the summary runs later
    t.samples.append({"sm_mhz": 1980, "reasons": 0, "pids": [100, 102, 555], "ours": sorted(T._ours([]) & {100, 102, 555})})
    t._throttle1 = None
    s = t.summary()
    assert s["gpu_other_processes"] == 1, "555 is another process; 101 was ours while it ran"
