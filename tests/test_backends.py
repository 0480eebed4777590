"""Backend conformance, generated from every study's registry: each BackendSpec is sound, its
module imports cheaply and has available() / create() (and validate() when it has rules of its
own); where it can run here, a smoke cell opens through create(), every trainer create() made
satisfies the study's trainer Protocol, and the cell's steps end ok. And the promise of
docs/ARCHITECTURE.md: a backend added from tests/ (one file, one registry entry) runs."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.core.machine import FAMILIES
from bench.core.registry import studies
from bench.core.study import PLATFORMS, RunContext

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
BACKENDS = [(s.name, b) for s in studies().values() if type(s).__module__.startswith("bench.studies.") for b in s.backends]


@pytest.mark.parametrize("study_name,backend", BACKENDS, ids=[f"{s}:{b}" for s, b in BACKENDS])
def test_every_registered_backend_keeps_the_contract(study_name, backend):
    study = studies()[study_name]
    spec = study.backends[backend]
    assert spec.platform in PLATFORMS and spec.family in FAMILIES and spec.about
    mod = study.load_backend(backend)  # cheap: frameworks are imported inside the functions
    assert list(inspect.signature(mod.create).parameters) == ["cell", "data"]
    if hasattr(mod, "validate"):
        assert len(inspect.signature(mod.validate).parameters) == 1
    why = study.why_unavailable(backend)
    assert why is None or (isinstance(why, str) and why and "\n" not in why)
    proto = study.trainer_protocol
    assert proto is not None and getattr(proto, "_is_runtime_protocol", False), f"{study_name}: no runtime Protocol"


def test_no_kit_module_dispatches_on_a_backend_name():
    """What differs between backends lives in their specs and modules: no `backend.startswith(...)`
    or `backend == "..."` in a study's protocol, config or package (reports may group by name)."""
    offenders = []
    for f in sorted((ROOT / "bench").rglob("*.py")):
        if f.name in ("report.py", "plots.py", "seed_table.py", "seed.py"):
            continue
        text = f.read_text()
        for needle in ('backend.startswith("', 'backend == "', 'backend != "', "PIPELINES[cell.backend]"):
            if needle in text:
                offenders.append(f"{f.relative_to(ROOT)}: {needle}")
    assert not offenders, offenders


def _smoke_cell(study, backend):
    spec = study.backends[backend]
    cells = [c for c in study.matrix(spec.platform, "smoke") if c.backend == backend or backend in c.backend.split("+")]
    return cells[0] if cells else study.cell(backend)


RUNNABLE = [(s, b) for s, b in BACKENDS if studies()[s].why_unavailable(b) is None]


@pytest.mark.slow
@pytest.mark.parametrize("study_name,backend", RUNNABLE, ids=[f"{s}:{b}" for s, b in RUNNABLE])
def test_a_smoke_cell_runs_through_create_and_its_trainer_keeps_the_protocol(study_name, backend, tmp_path, monkeypatch):
    monkeypatch.setenv("KIT_CACHE_DIR", str(tmp_path / "cache"))
    study = studies()[study_name]
    cell = _smoke_cell(study, backend)
    study.validate(cell)
    cell = study.resolve(cell, None)
    made = []
    load = study.load_backend

    class Spy:
        def __init__(self, mod):
            self.mod = mod

        def __getattr__(self, name):
            return getattr(self.mod, name)

        def create(self, cell, data):
            made.append(self.mod.create(cell, data))
            return made[-1]

    monkeypatch.setattr(study, "load_backend", lambda b: Spy(load(b)))
    out = tmp_path / "out"
    run = study.open(cell, RunContext(out=out, cell_dir=cell.dir(out), data_dir=None, run_id="t"))
    rows = [r for i in range(run.steps) for r in run.step(i)] + run.close()
    assert made, f"{study_name} {backend}: open() never called the backend's create()"
    for t in made:
        assert isinstance(t, study.trainer_protocol), f"{type(t).__name__} lacks a member of {study.trainer_protocol}"
    assert rows and all(r.get("status", "ok") in ("ok", "skipped") for r in rows), rows[:3]


@pytest.mark.slow
def test_a_backend_added_from_tests_runs_its_smoke_cell(tmp_path):
    """tests/ext_mnist_backend.py: one file whose import adds one registry entry; nothing else."""
    env = {**os.environ, "KIT_STUDY_MODULES": "ext_mnist_backend", "PYTHONPATH": f"{TESTS}{os.pathsep}{ROOT}"}
    env["KIT_CACHE_DIR"] = str(tmp_path / "cache")
    listed = subprocess.run([sys.executable, "-m", "bench", "list"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert listed.returncode == 0 and "torch-cpu-cl" in listed.stdout, listed.stderr[-2000:]
    out = tmp_path / "r"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "matrix", "mnist-cnn", "--profile", "smoke", "--only", "backend=torch-cpu-cl|torch-cpu",
         "--only", "pipeline=resident", "--set", "dataset=digits", "--out", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = {}
    for f in out.glob("mnist-cnn/*/rows.jsonl"):
        rows = [json.loads(line) for line in f.read_text().splitlines()]
        assert [r["epoch"] for r in rows] == [1, 2] and {r["status"] for r in rows} == {"ok"}, rows
        got[rows[0]["backend"]] = [r["train_loss"] for r in rows]
        system = json.loads((f.parent / "system.json").read_text())
        assert system["threads"]["torch_threads"] >= 1  # the core pinned the torch family's threads
    assert set(got) == {"torch-cpu-cl", "torch-cpu"}
    # same weights, same batches, another memory layout: the same training within fp32 tolerance
    assert got["torch-cpu-cl"] == pytest.approx(got["torch-cpu"], rel=1e-4), got


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["graphs", "compile+graphs"])
def test_the_tuned_cuda_trainer_restores_its_snapshot_in_place(variant):
    """mnist-cnn's Trainer Protocol asks every trainer for snapshot()/restore(); the tuned one
    copies back in place (a captured graph keeps its addresses) and trains on from there."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    import numpy as np

    from bench.data.mnist import Dataset
    from bench.studies.mnist_cnn.backends.torch_cuda_tuned import CudaTunedTrainer
    from bench.studies.mnist_cnn.config import settings
    from bench.studies.mnist_cnn.net import init_params

    study = studies()["mnist-cnn"]
    cfg = settings(study.cell("torch-cuda", variant, batch_size=128))
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 256, (1024, 28, 28), dtype=np.uint8), rng.integers(0, 10, 1024)
    data = Dataset("random", False, x[:768], y[:768], x[768:], y[768:], "-", "test")
    trainer = CudaTunedTrainer(cfg, init_params(0, "kit"), data)
    trainer.warmup()
    order = np.arange(4 * 128, dtype=np.int64)
    trainer.train_epoch(order, None)
    snap, before = trainer.snapshot(), trainer.params()
    trainer.train_epoch(order, None)
    moved = trainer.params()
    assert any(not np.array_equal(before[k], moved[k]) for k in before)
    trainer.restore(snap)
    assert all(np.array_equal(before[k], v) for k, v in trainer.params().items())
    again = trainer.train_epoch(order, None)  # the graph replays from the restored state
    assert all(np.allclose(moved[k], v, rtol=1e-5, atol=1e-6) for k, v in trainer.params().items()), again
