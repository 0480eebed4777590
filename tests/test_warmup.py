"""A warm-up is real training steps whose effect is undone, and nothing
inside a timed epoch records per-phase times (they come from a separate profiling pass)."""

from __future__ import annotations

import numpy as np
import pytest

from bench.core.cell import Cell
from bench.measure.timer import NullTimer, PhaseTimer


def _data(n=1024):
    from bench.data.embedded import load_digits_28

    return load_digits_28()


def _trainer(backend: str, pipeline: str = "resident"):
    from bench.studies.mnist_cnn.config import settings
    from bench.studies.mnist_cnn.net import init_params

    cell = Cell("mnist-cnn", backend, "default", {"pipeline": pipeline, "batch_size": 128, "epochs": 1})
    cfg = settings(cell)
    data = _data()
    if backend == "torch-cpu":
        from bench.studies.mnist_cnn.backends.torch_common import TorchTrainer

        return TorchTrainer(cfg, init_params(0), data), init_params(0)
    from bench.studies.mnist_cnn.backends.numba_cpu import NumbaCpuTrainer

    return NumbaCpuTrainer(cfg, init_params(0), data), init_params(0)


@pytest.mark.parametrize("pipeline", ["resident", "seed"])
def test_torch_warmup_takes_optimizer_steps_and_leaves_the_initial_state(pipeline, monkeypatch):
    t, p0 = _trainer("torch-cpu", pipeline)
    steps = []
    real_step = t.opt.step
    monkeypatch.setattr(t.opt, "step", lambda *a, **k: (steps.append(1), real_step(*a, **k))[1])
    t.warmup()
    assert len(steps) == 2, "forward, backward AND the optimizer step, twice"
    for k, v in t.params().items():
        np.testing.assert_array_equal(v, p0[k], err_msg=k)
    assert not t.opt.state, "no momentum buffer survives the warm-up"


def test_numba_cpu_warmup_and_profiling_pass_leave_weights_and_velocity_untouched():
    t, p0 = _trainer("numba-cpu")
    t.warmup()
    for k, v in t.params().items():
        np.testing.assert_array_equal(v, p0[k], err_msg=k)
    assert all(not v.any() for v in t.vel.values())
    assert t.compile_kind() in ("cache", "cold", "mixed", "cold (no cache record)")


def test_timed_epochs_run_without_phase_timers_and_rows_say_where_phases_come_from():
    from bench.studies.mnist_cnn.protocol import PROFILE_BATCHES, profile_phases

    t, _ = _trainer("numba-cpu")
    t.warmup()
    seen = []

    class Spy(NullTimer):
        def phase(self, name):
            seen.append(name)
            return super().phase(name)

    t.train_epoch(np.arange(256, dtype=np.int64), Spy())
    assert seen and not Spy.enabled, "the timed loop gets a timer that records nothing"
    prof = profile_phases(t, t.cfg, 1497)
    assert prof["batches"] == min(PROFILE_BATCHES, -(-1497 // 128))  # padded to whole batches
    assert set(prof["phases"]) == {"data_s", "forward_s", "backward_s", "step_s"} and all(v >= 0 for v in prof["phases"].values())
    assert PhaseTimer.enabled and not NullTimer.enabled
