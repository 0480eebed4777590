"""The run's one ETA (bench/run/eta.py): a step total fixed before the first cell starts, and an
estimate of the time left that follows the run's own pace once a tenth of the work is done,
whether the machine is the reference one, twice as slow (loaded) or twice as fast."""

from __future__ import annotations

import pytest

from bench.core.study import Estimate
from bench.run.eta import Eta

# three cells of unlike cost: (open_s, steps, step_s) on the reference machine
PLANS = [("a", Estimate(10, 4.0, 3.0)), ("b", Estimate(5, 2.0, 20.0)), ("c", Estimate(3, 30.0, 1.0))]


def _replay(speed: float, error: float = 1.0):
    """Run the plan on a fake clock SPEED times slower than the estimates, where each cell's
    real costs are ERROR times its estimate; yield (share of the work done, predicted left,
    real left) after every step."""
    clock = [0.0]
    eta = Eta([(k, Estimate(p.steps, p.open_s * error, p.step_s * error)) for k, p in PLANS], clock=lambda: clock[0])
    real = [(k, p.open_s * speed, p.step_s * speed) for k, p in PLANS]
    total = sum(o + p.steps * s for (k, o, s), (_, p) in zip(real, PLANS))
    assert eta.snapshot()[1] == sum(p.steps for _, p in PLANS)  # the total is known before anything starts
    done = 0.0
    for (k, open_s, step_s), (_, p) in zip(real, PLANS):
        clock[0] += open_s
        done += open_s
        eta.opened(k, p.steps)
        for _ in range(p.steps):
            clock[0] += step_s
            done += step_s
            eta.stepped(k)
            steps_done, steps, left = eta.snapshot()
            assert steps == sum(q.steps for _, q in PLANS)  # never moves
            yield done / total, left, total - done
        eta.ended(k)


@pytest.mark.parametrize("speed", [0.5, 1.0, 2.0])
def test_the_eta_is_within_30_percent_once_a_tenth_is_done(speed):
    for share, predicted, real in _replay(speed):
        if share >= 0.1 and real > 0:
            assert abs(predicted - real) <= 0.3 * real + 1.0, (speed, share, predicted, real)


def test_on_the_reference_machine_the_first_eta_is_the_estimate():
    eta = Eta(PLANS, clock=lambda: 0.0)
    assert eta.snapshot() == (0, 18, pytest.approx(sum(p.open_s + p.steps * p.step_s for _, p in PLANS)))


def test_a_cell_that_ends_early_drops_its_remaining_steps():
    clock = [0.0]
    eta = Eta(PLANS, clock=lambda: clock[0])
    eta.opened("a", 10)
    eta.stepped("a")
    eta.ended("a")  # an error after one step
    done, total, _ = eta.snapshot()
    assert (done, total) == (1, 1 + 5 + 3)


def test_a_first_open_that_paid_a_one_time_cost_is_not_charged_to_its_repeats():
    """numba's first open compiles (11 s here), its repeats' opens hit the cache (1.4 s): after
    the first repeat, the ETA of the other two stays within 30 % of what they take."""
    clock = [0.0]
    keys = ["a0", "a1", "a2"]
    eta = Eta([(k, Estimate(4, 3.0, 1.0), "s", "g") for k in keys], clock=lambda: clock[0])
    real_open = {"a0": 30.0, "a1": 1.5, "a2": 1.5}

    def run(k):
        clock[0] += real_open[k]
        eta.opened(k, 4)
        for _ in range(4):
            clock[0] += 1.0
            eta.stepped(k)
        eta.ended(k)

    run("a0")
    real_left = sum(real_open[k] + 4 * 1.0 for k in ("a1", "a2"))
    left = eta.snapshot()[2]
    assert abs(left - real_left) <= 0.3 * real_left + 1.0, (left, real_left)


def test_a_slow_cpu_cell_does_not_pace_the_same_study_s_gpu_cells():
    """The H200 main job's ETA: a CPU int8 cell ran 10x its estimate; the same study's GPU cells,
    not yet started, keep their own estimate (their platform's pace), not 10x it."""
    from bench.core.cell import Cell
    from bench.core.registry import get_study

    study = get_study("cifar-opt")
    cpu = next(c for c in study.matrix("cpu", "answer") if c.variant == "int8")
    gpu = next(c for c in study.matrix("cuda", "answer") if c.variant == "tuned")
    assert isinstance(cpu, Cell) and isinstance(gpu, Cell)
    clock = [0.0]
    eta = Eta.for_cells([cpu, gpu], clock=lambda: clock[0])
    gpu_alone = eta.cost_of(gpu.key)
    plan = eta._cells[cpu.key].plan
    clock[0] += plan.open_s
    eta.opened(cpu.key, plan.steps)
    for _ in range(plan.steps):
        clock[0] += 10 * plan.step_s
        eta.stepped(cpu.key)
    eta.ended(cpu.key)
    assert eta.cost_of(gpu.key) == pytest.approx(gpu_alone, rel=0.05)


def _cpu_cell(study: str = "cifar-opt", variant: str = "int8"):
    from bench.core.registry import get_study

    s = get_study(study)
    return next(c for c in s.matrix("cpu", "answer") if c.variant == variant)


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=200, deadline=None)
@given(
    open_s=st.floats(0.0, 500.0),
    steps=st.integers(0, 50),
    step_s=st.floats(0.0, 50.0),
    share=st.floats(0.0, 1.5),
    speed=st.floats(1.0, 3.7),
)
def test_a_cpu_cells_serial_seconds_are_not_divided_by_the_cores(open_s, steps, step_s, share, speed):
    """On a host SPEED times the reference's cores, a CPU cell's estimate is its serial part (a compile,
    at most the whole) plus the rest over SPEED: more cores never shorten a compile in the ETA."""
    from bench.core.registry import get_study
    from bench.run import eta

    cell = _cpu_cell()
    total = open_s + steps * step_s
    serial = share * total
    from unittest import mock

    with mock.patch.object(type(get_study("cifar-opt")), "estimate", lambda self, c: Estimate(steps, open_s, step_s, serial)):
        got = eta.estimate_s(cell, speed)
    kept = min(serial, total)
    assert got == pytest.approx(kept + (total - kept) / speed, rel=1e-9, abs=1e-9)


def test_cifar_opts_cpu_int8_estimate_keeps_its_compile_whole_on_many_cores():
    from bench.run import eta

    cell = _cpu_cell()
    one, many = eta.estimate_s(cell, 1.0), eta.estimate_s(cell, 3.7)
    serial = eta.estimate_here(cell, 3.7).serial_s
    assert serial > 10 and many >= serial and many > one / 3.7  # the compile is not divided by 3.7
