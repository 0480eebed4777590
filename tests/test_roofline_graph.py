"""roofline's step=cuda-graph: who may ask for it (one line otherwise), the in-place restore a
captured step needs (the same next steps as a fresh optimizer state: checked on the CPU, exactly),
and, on a CUDA GPU, the capture's check against the eager step, a graph that skips the update
failing it, and whole cells of both scenarios. The GPU tests skip here and run on the device
machine (their output is committed with the H100 harness results)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.core.errors import KitError
from bench.core.registry import get_study

ROOT = Path(__file__).resolve().parent.parent
torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (runs on the device machine)")


@pytest.fixture(scope="module")
def study():
    return get_study("roofline")


@pytest.mark.parametrize(
    "backend,variant,devices,params,match",
    [
        ("torch-cpu", "fp32", (), {"step": "cuda-graph"}, "runs on a CUDA backend, not torch-cpu"),
        ("torch-mps", "fp32", (), {"step": "cuda-graph"}, "runs on a CUDA backend, not torch-mps"),
        ("torch-cuda", "bf16-cl", ("0", "1"), {"step": "cuda-graph"}, "runs on one device"),
        ("torch-cuda", "bf16-cl", (), {"step": "lazy"}, "unknown step 'lazy'"),
    ],
)
def test_who_may_ask_for_a_graph(study, backend, variant, devices, params, match):
    with pytest.raises(KitError, match=match) as err:
        study.validate(study.cell(backend, variant, devices=devices, **params))
    assert "\n" not in str(err.value)


def test_a_graph_cell_validates_on_cuda_and_is_its_own_work(study):
    eager, graph = (study.cell("torch-cuda", "bf16-cl", step=s, pipeline="synthetic-gpu") for s in ("eager", "cuda-graph"))
    study.validate(graph)
    assert eager.key != graph.key


def _trainer(study, device="cpu", precision="fp32", model="resnet18"):
    from bench.studies.roofline.config import settings
    from bench.studies.roofline.trainer import Trainer

    backend = "torch-cuda" if device == "cuda" else "torch-cpu"
    cell = study.cell(backend, precision, model=model, threads=1, num_workers=0, batch_size=8)
    return Trainer(settings(cell), n_classes=10, side=32)


def _losses(tr, x, y, n):
    out = []
    for _ in range(n):
        tr.loss_sum.zero_()
        tr.step(x, y)
        out.append(float(tr.loss_sum.item()))
    return out


def test_zeroing_the_momentum_in_place_gives_the_steps_of_a_fresh_optimizer(study):
    """What `capture` rests on: SGD's first step from a zero buffer is its first step from none."""
    torch.use_deterministic_algorithms(True)
    try:
        tr = _trainer(study)
        x, y = tr.fixed_batch(8)
        snap = tr.snapshot()
        for _ in range(2):  # momentum buffers now exist and are not zero
            tr.step(x, y)
        tr.restore(snap)  # eager: the optimizer's state dropped
        assert not tr.opt.state
        fresh = _losses(tr, x, y, 3)
        assert tr.opt.state
        tr._reset(snap)  # a captured step's restore: the buffers kept, zeroed
        assert all(float(s["momentum_buffer"].abs().sum()) == 0 for s in tr.opt.state.values())
        assert _losses(tr, x, y, 3) == fresh
        # and the test can fail: weights back with the momentum left as it was is another trajectory
        with torch.no_grad():
            for k, v in tr.model.state_dict().items():
                v.copy_(snap[k])
        assert _losses(tr, x, y, 3)[1:] != fresh[1:]
    finally:
        torch.use_deterministic_algorithms(False)


def test_capture_needs_cuda(study):
    tr = _trainer(study)
    x, y = tr.fixed_batch(8)
    with pytest.raises(KitError, match="needs a CUDA device, not cpu"):
        tr.capture(x, y, 3)
    assert tr.graph is None


# ---- on a CUDA GPU ---------------------------------------------------------------------------


@cuda
@pytest.mark.parametrize("precision,model", [("bf16-cl", "resnet18"), ("fp32", "mobilenet_v2")])
def test_capture_reproduces_the_eager_step_and_replays(study, precision, model):
    from bench.studies.roofline.trainer import GRAPH_TOL

    tr = _trainer(study, "cuda", precision, model)
    x, y = tr.fixed_batch(16)
    before = tr.snapshot()
    rng = torch.cuda.get_rng_state()
    check = tr.capture(x, y, 3)
    assert tr.graph is not None and check["graph_check_steps"] == 3
    assert check["graph_check_loss_rel"] <= GRAPH_TOL and check["graph_check_moved_rel"] <= GRAPH_TOL
    losses = check["graph_check_eager_losses"]
    assert len(losses) == 3 and losses[-1] < losses[0]  # the steps trained
    for k, v in tr.model.state_dict().items():  # the weights as they were before the capture
        assert torch.equal(v, before[k]), k
    torch.cuda.set_rng_state(rng)  # MobileNetV2's dropout: the eager steps' masks
    replays = _losses(tr, x, y, 3)  # through step: the batch copied into the graph's input
    assert abs(replays[0] / losses[0] - 1) < GRAPH_TOL and replays[2] < replays[0]  # the same start, and it trains
    got = tr.train_pass([(x, y)] * 5, 5)
    assert got["steps"] == 5 and got["train_loss"] < losses[0]
    assert tr.memory()["gpu_alloc_peak_mb"] >= tr.eager_peak / 1e6 > 0  # the replays' activations counted
    tr.restore(before)
    assert all(torch.equal(v, before[k]) for k, v in tr.model.state_dict().items())
    with pytest.raises(KitError, match="captured at"):
        tr.step(*tr.fixed_batch(8))


@cuda
def test_a_graph_that_skips_the_update_fails_its_check(study, monkeypatch):
    from bench.studies.roofline import trainer as mod

    real = mod.Trainer.eager_step

    def no_update(self, x, y, cache=True):
        if cache:  # the eager steps
            return real(self, x, y, cache)
        with self.autocast(cache):  # the capture: forward and backward, no optimizer step
            loss = torch.nn.functional.cross_entropy(self.train_model(x), y)
        loss.backward()
        self.opt.zero_grad(set_to_none=True)
        self.loss_sum += loss.detach().float()

    monkeypatch.setattr(mod.Trainer, "eager_step", no_update)
    tr = _trainer(study, "cuda", "bf16-cl")
    x, y = tr.fixed_batch(16)
    with pytest.raises(KitError, match="does not reproduce the eager step") as err:
        tr.capture(x, y, 3)
    assert "\n" not in str(err.value) and tr.graph is None


@cuda
def test_graph_cells_of_both_scenarios_run_and_say_so(tmp_path):
    env = {**os.environ, "KIT_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("KIT_DATA_DIR", None)
    out = tmp_path / "r"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "matrix", "roofline", "--profile", "smoke", "--platform", "cuda",
         "--only", "pipeline=synthetic-gpu", "--only", "variant=bf16-cl", "--set", "step=cuda-graph",
         "--set", "dataset=tinyimagenet-synthetic", "--set", "roof_sizes=quick", "--out", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=500,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    from bench.core.resultset import load_cells

    cells = load_cells(sorted(p for p in (out / "roofline").iterdir() if p.is_dir()))
    assert {c.status for c in cells} == {"ok"} and len(cells) == 2
    rows = [r for c in cells for r in c.rows if r.get("phase") in ("train", "sweep")]
    assert {r["phase"] for r in rows} == {"train", "sweep"}
    for r in rows:
        assert r["step"] == "cuda-graph" and r["img_per_s"] > 0 and r["loss_finite"] is True
        assert r["graph_check_loss_rel"] <= 0.02 and r["graph_check_moved_rel"] <= 0.02
