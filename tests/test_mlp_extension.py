"""A new mlp-scratch backend is one module plus one registry entry: tests/ext_mlp_backend.py
(`numpy-view`) is added to MlpScratch.backends at run time, no kit file edited, and then
joins the cpu cell, passes the check against the NumPy reference and times its plain runs,
both in this process and through `python -m bench matrix` (KIT_STUDY_MODULES)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import ext_mlp_backend as ext
import numpy as np
import pytest

from bench.core.rows import read_rows
from bench.studies.mlp_scratch import MlpScratch, runner
from bench.studies.mlp_scratch.backends import make

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent


@pytest.fixture
def registered(monkeypatch):
    """The one registry entry, for this test only."""
    monkeypatch.setattr(MlpScratch, "backends", {**MlpScratch.backends, ext.NAME: ext.SPEC})


def test_the_entry_puts_it_in_the_platform_cells(registered):
    study = MlpScratch()
    assert study.why_unavailable(ext.NAME) is None
    assert [c.backend for c in study.matrix("cpu", "smoke")] == ["numpy+numpy-view"]
    assert study.platform_backend("cuda") == "numpy+cupy+cupy-tuned+numpy-view"  # registry order
    assert study.reference() == "numpy"
    backend = make(ext.NAME)
    assert isinstance(backend, ext.ViewNet) and backend.name == ext.NAME


def test_it_trains_on_a_view_and_matches_numpy(registered):
    rng = np.random.default_rng(0)
    X, y = rng.random((300, 784)).astype(np.float32), rng.integers(0, 10, 300)
    backend = make(ext.NAME)
    assert isinstance(backend, ext.ViewNet)
    XT, _ = backend.prepare(X, y, "float32")
    assert XT.shape == (784, 300) and XT.flags.f_contiguous and np.shares_memory(XT, X)
    for dtype in ("float32", "float64"):
        c = runner.check_against_numpy(backend, make("numpy"), X, y, steps=3, cfg=runner.RunConfig(dtype=dtype))
        assert c["ok"] and c["variant"] == ext.NAME, c


def test_its_smoke_cell_runs_through_bench_matrix(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "KIT_DATA_DIR"}
    env.update(KIT_STUDY_MODULES=ext.__name__, PYTHONPATH=f"{TESTS}{os.pathsep}{ROOT}")
    listed = subprocess.run([sys.executable, "-m", "bench", "list"], capture_output=True, text=True, cwd=ROOT, env=env)
    entry = [line for line in listed.stdout.splitlines() if line.split()[:1] == [ext.NAME]]
    assert len(entry) == 1 and entry[0].endswith(" available"), listed.stdout + listed.stderr
    argv = ["matrix", "mlp-scratch", "-p", "cpu", "--profile", "smoke", "--set", "dataset=digits", "--out", str(tmp_path)]
    r = subprocess.run([sys.executable, "-m", "bench", *argv], capture_output=True, text=True, cwd=ROOT, env=env)
    assert r.returncode == 0, r.stderr + r.stdout
    [rows_file] = (tmp_path / "mlp-scratch").glob("*/rows.jsonl")
    rows = read_rows(rows_file)
    assert {r["backend"] for r in rows} == {"numpy", ext.NAME} and all(r["status"] == "ok" for r in rows)
    mine = [r for r in rows if r["backend"] == ext.NAME]
    assert [r["plain_run"] for r in mine if r["phase"] == "plain"] == [0, 1]
    assert all(r["total_s"] > 0 and r["per_iter_median_ms"] > 0 for r in mine if r["phase"] == "plain")
    [check] = [r for r in rows if r["phase"] == "check"]
    assert check["backend"] == ext.NAME and check["err_over_tol"] <= 1.0
    assert {r["phase"] for r in mine} == {"check", "plain", "op", "memory", "convergence"}
    assert all(r["agrees_with_numpy"] for r in mine if r["phase"] == "convergence")
