"""Many devices in the core (bench/run/ranks.py): a cell that names devices runs one rank per
device under torchrun, here as gloo ranks on the CPU; every torch study's smoke cell runs so; a
dead rank ends the cell in one line and keeps what finished; the DDP options reach the model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.core.resultset import collect

ROOT = Path(__file__).resolve().parent.parent
# (study, the --only that keeps one quick smoke cell of it)
STUDIES = [
    ("mnist-cnn", ["backend=torch-cpu", "pipeline=resident"]),
    ("cifar-opt", ["variant=default", "model=mobilenet_v2"]),
    ("roofline", ["scenario=A", "pipeline=synthetic-gpu"]),
    ("profile", ["variant=finetune"]),
]


def _matrix(tmp_path: Path, study: str, only: list[str], *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    args = [sys.executable, "-m", "bench", "matrix", study, "--profile", "smoke", "--set", "devices=cpu,cpu", "--repeats", "1"]
    for o in only:
        args += ["--only", o]
    e = {**os.environ, "KIT_CACHE_DIR": str(tmp_path / "cache"), **(env or {})}
    e.pop("KIT_DATA_DIR", None)
    return subprocess.run(
        [*args, *extra, "--out", str(tmp_path / "r")], cwd=ROOT, env=e, capture_output=True, text=True, timeout=600
    )


@pytest.mark.slow
@pytest.mark.parametrize("study,only", STUDIES, ids=[s for s, _ in STUDIES])
def test_every_torch_study_runs_its_smoke_cell_on_two_gloo_ranks(tmp_path, study, only):
    r = _matrix(tmp_path, study, only, "--set", "num_workers=0" if study != "mnist-cnn" else "threads=1")
    assert r.returncode == 0, r.stderr[-3000:]
    cells, _, problems = collect([tmp_path / "r"])
    assert cells and not problems
    for c in cells:
        assert c.status == "ok", c.reason
        assert {r.get("world_size") for r in c.ok_rows if "world_size" in r} == {2}, c.rows[0]
        assert c.system["world_size"] == 2 and c.system["backend_dist"] == "gloo" and c.system["launcher"] == "torchrun"
        assert [x["rank"] for x in c.system["ranks"]] == [0, 1]
        assert c.system["interconnect"]["allreduce_busbw_gb_per_s"] > 0  # what explains scaling, measured
        assert c.spec["devices"] == ["cpu", "cpu"]


@pytest.mark.slow
def test_a_dead_rank_ends_the_cell_in_one_line_and_keeps_what_finished(tmp_path):
    t0 = time.monotonic()
    r = _matrix(tmp_path, "mnist-cnn", STUDIES[0][1], env={"KIT_FAULT_RANK_EXIT": "1:1"})
    assert time.monotonic() - t0 < 300, "the surviving rank hung"
    assert r.returncode == 1
    (cell,) = collect([tmp_path / "r"])[0]
    err = [x for x in cell.rows if x["status"] == "error"]
    assert len(err) == 1 and "the ranks ended" in err[0]["reason"] and "\n" not in err[0]["reason"]
    assert [x["epoch"] for x in cell.rows if x["status"] == "incomplete"] == [1]  # epoch 1 finished, kept


def test_only_cells_that_run_on_several_devices_take_them():
    """`--set devices=cpu,cpu` reaches the cells that can run on several devices: not numba,
    nor cifar-opt's int8, nor roofline's sweep (which ends at an out-of-memory error)."""
    from bench.core.request import RunRequest
    from bench.run.matrix import resolve

    req = RunRequest(
        studies=("mnist-cnn", "cifar-opt", "roofline"), platforms=("cpu",), profile="smoke", sets=("devices=cpu,cpu",)
    )
    cells = resolve(req, resolve_data=False)
    took = {(c.study, c.backend, c.variant, c.params.get("scenario")): c.devices for c in cells}
    assert took[("mnist-cnn", "torch-cpu", "default", None)] == ("cpu", "cpu")
    assert took[("mnist-cnn", "numba-cpu", "default", None)] == ()
    assert took[("cifar-opt", "torch-cpu", "int8", None)] == ()
    assert took[("roofline", "torch-cpu", "fp32", "B")] == ()
    assert took[("roofline", "torch-cpu", "fp32", "A")] == ("cpu", "cpu")


def test_the_ddp_options_are_the_cells_own():
    from bench.core.dist import DDP_DEFAULTS, Dist

    os.environ.update(RANK="1", WORLD_SIZE="2", LOCAL_RANK="1")
    try:
        d = Dist.from_env({"ddp_bucket_mb": 50.0, "ddp_static_graph": True})
    finally:
        for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
            os.environ.pop(k)
    assert d.rank == 1 and d.world == 2 and d.comm == "gloo" and not d.is_main
    assert d.options == {**DDP_DEFAULTS, "ddp_bucket_mb": 50.0, "ddp_static_graph": True}
    assert list(d.shard(9)) == [1, 3, 5, 7]  # every world-th item; the odd one out dropped, as DistributedSampler does


def test_the_launch_takes_its_rendezvous_from_the_environment(monkeypatch, tmp_path):
    from bench.core.request import Paths
    from bench.run.ranks import torchrun_argv

    argv = torchrun_argv(2, tmp_path / "c.json", Paths(tmp_path))
    assert "--standalone" in argv and "--nproc_per_node=2" in argv
    monkeypatch.setenv("KIT_RDZV_ENDPOINT", "node0:29500")
    monkeypatch.setenv("KIT_NNODES", "4")
    argv = torchrun_argv(8, tmp_path / "c.json", Paths(tmp_path, "/data"))
    assert "--standalone" not in argv and "--nnodes=4" in argv and "--rdzv-endpoint=node0:29500" in argv
    assert "--rdzv-backend=c10d" in argv and argv[-2:] == ["--data-dir", "/data"]
    assert json.dumps(argv)  # plain strings
