"""Warm starts (bench/run/warm.py): a torch cell forked from a process that imported torch once
keeps everything a new interpreter gives it (argv, environment, pipes, log, exit code, the default
start method its DataLoader workers use) and trains the same numbers, and its fixed costs still say
what a new interpreter pays."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.core.cell import Cell
from bench.core.rows import read_rows
from bench.run import warm

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="warm starts are Linux only")


def _probe(tmp_path: Path, *argv: str) -> tuple[warm.WarmProc, Path]:
    log = tmp_path / "log.txt"
    with open(log, "w") as f:
        proc = warm.WarmProc(list(argv), {**os.environ, "WARM_PROBE": "seen"}, stderr=f, entry="warm_probe:main")
    return proc, log


def test_a_forked_cell_gets_its_argv_environment_pipes_log_and_exit_code(tmp_path):
    proc, log = _probe(tmp_path, "cell", "x.json", "7")
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()
    state = json.loads(proc.stdout.readline())
    assert proc.wait(timeout=60) == 7
    assert state["argv"] == ["bench", "cell", "x.json", "7"]
    assert state["got"] == "go" and state["env"] == "seen"
    # its parent is the warm process, and KIT_PARENT_PID names it (the cell's follow-the-parent check)
    assert state["parent"] == str(state["ppid"]) and state["ppid"] != os.getpid()
    # a new interpreter's start method, not the forkserver's own (a DataLoader's workers fork as usual)
    assert state["start_method"] == multiprocessing.get_context().get_start_method()
    assert state["start_method"] != "forkserver" or sys.version_info >= (3, 14)
    assert state["torch_loaded"]  # imported once, before the fork
    assert log.read_text().strip() == "probe-stderr"


def test_a_forked_cell_can_be_killed_and_polled(tmp_path):
    proc, _ = _probe(tmp_path, "--hang")
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()
    json.loads(proc.stdout.readline())
    assert proc.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=0.2)
    proc.kill()
    assert proc.wait(timeout=30) == -9 and proc.poll() == -9 and proc.returncode == -9


def test_only_cells_of_the_torch_family_start_warm():
    torch_cell = Cell(study="mnist-cnn", backend="torch-cpu", variant="default", params={})
    numba_cell = Cell(study="mnist-cnn", backend="numba-cpu", variant="default", params={})
    mlp_cell = Cell(study="mlp-scratch", backend="numpy", variant="default", params={})
    assert warm.eligible(torch_cell)
    assert not warm.eligible(numba_cell) and not warm.eligible(mlp_cell)


def _run(out: Path, warm_start: str) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if k != "KIT_DATA_DIR"}
    (out / "no-data").mkdir(parents=True)  # no MNIST here: the embedded default
    env.update(KIT_WARM_START=warm_start, KIT_DATA_DIR=str(out / "no-data"))
    got = subprocess.run(
        [sys.executable, "-m", "bench", "matrix", "mnist-cnn", "-p", "cpu", "--profile", "smoke",
         "--only", "backend=torch-cpu", "--only", "pipeline=resident", "--out", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert got.returncode == 0, got.stderr[-2000:]
    (cell_dir,) = [p for p in (out / "mnist-cnn").iterdir() if p.is_dir()]
    system = json.loads((cell_dir / "system.json").read_text())
    return [read_rows(cell_dir / "rows.jsonl"), system["fixed_costs"]]


def test_a_torch_cell_forked_warm_trains_the_same_numbers_and_keeps_its_fixed_costs(tmp_path):
    cold_rows, cold_fc = _run(tmp_path / "cold", "0")
    warm_rows, warm_fc = _run(tmp_path / "warm", "1")
    loss = lambda rows: [r["train_loss"] for r in rows if r.get("train_loss") is not None]  # noqa: E731
    assert loss(cold_rows) and loss(warm_rows) == loss(cold_rows)
    assert "start_s" not in cold_fc["notes"]
    assert warm_fc["notes"]["start_s"].startswith("forked warm from pid")
    # a new interpreter's start is still in it: the warm process's own, measured once
    assert warm_fc["start_s"] > 0.2 and cold_fc["start_s"] > 0.2
