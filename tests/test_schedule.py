"""The study-agnostic core end to end: a toy study from tests/ (no kit file edited) appears
in `bench list`, runs through `matrix` under every schedule, and gets its own report
section; the schedules' order, skips, and dead cells."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.core.registry import get_study
from bench.core.rows import read_rows

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent


def bench(*args, env=None):
    if args and args[0] == "matrix" and "--repeats" not in args:  # one run of each cell unless a test asks for more
        args = (*args, "--repeats", "1")
    e = {k: v for k, v in os.environ.items() if k != "KIT_DATA_DIR"}
    e.update({"KIT_STUDY_MODULES": "toy_study", "PYTHONPATH": str(TESTS)}, **(env or {}))
    return subprocess.run([sys.executable, "-m", "bench", *args], capture_output=True, text=True, cwd=ROOT, env=e)


def toy_rows(out: Path) -> dict[str, list[dict]]:
    return {p.parent.name.split("-" + p.parent.name.split("-")[-1])[0]: read_rows(p) for p in (out / "toy").glob("*/rows.jsonl")}


def test_toy_study_is_listed():
    r = bench("list")
    assert r.returncode == 0 and "toy: toy (a test study)" in r.stdout and "fake-gpu" in r.stdout, r.stdout


@pytest.mark.parametrize("schedule", ["sequential", "interleaved", "per-device"])
def test_toy_study_runs_under_every_schedule(tmp_path, schedule):
    r = bench(
        "matrix",
        "toy",
        "-p",
        "cpu",
        "-p",
        "cuda",
        "--schedule",
        schedule,
        "--devices",
        "0,1",
        "--repeats",
        "1",
        "--out",
        str(tmp_path),
    )
    assert r.returncode == 0, r.stderr + r.stdout
    rows = toy_rows(tmp_path)
    assert set(rows) == {"toy-py", "toy-fake-gpu"}
    for rs in rows.values():
        assert [x["square"] for x in rs] == [0, 1, 4] and all(x["status"] == "ok" and x["study"] == "toy" for x in rs)
    steps = re.findall(r"^step +(\d)/3 (\S+) default", r.stderr + r.stdout, re.M)
    if schedule == "interleaved":  # step i of both cells before step i+1 of either
        assert [s for s, _ in steps] == ["1", "1", "2", "2", "3", "3"], steps
    if schedule == "per-device":  # the GPU cell got a device slot, the host cell none
        assert rows["toy-fake-gpu"][0]["slot"] in ("0", "1") and rows["toy-py"][0]["slot"] is None
    # every step line carries the run's progress and an ETA (what a container's log shows)
    done = [int(d) for d, total in re.findall(r"\[(\d+)/(\d+) steps, eta [^\]]+\]", r.stderr)]
    assert sorted(done) == list(range(1, 7)), r.stderr
    if schedule == "interleaved":  # both cells' steps are known once both are warm
        assert re.findall(r"\[\d+/(\d+) steps", r.stderr) == ["6"] * 6, r.stderr


def test_eta_reads_like_a_person_would_write_it():
    from bench.run.schedule import fmt_seconds

    assert [fmt_seconds(s) for s in (0, 59.4, 61, 3599, 3723)] == ["0 s", "59 s", "1 min 01 s", "59 min 59 s", "1 h 02 min"]


def test_toy_study_gets_its_own_report_section(tmp_path):
    import toy_study  # noqa: F401 - registers the toy here too

    from host.report import build_report

    assert bench("matrix", "toy", "-p", "cpu", "--out", str(tmp_path / "res")).returncode == 0
    info = build_report([tmp_path / "res"], tmp_path / "report")
    md = (tmp_path / "report" / "REPORT.md").read_text()
    assert "## toy (a test study)" in md and "toy squares:" in md and "| py | 2 | 4 |" in md
    assert "Table I" not in md, "a study's cells never land in another study's table"
    assert info["studies"]["toy"]["ok"] == 1


def test_a_killed_cell_becomes_an_error_row_and_the_others_go_on(tmp_path):
    r = bench(
        "matrix",
        "toy",
        "-p",
        "cpu",
        "-p",
        "cuda",
        "--schedule",
        "interleaved",
        "--only",
        "backend=py",
        "--set",
        "crash_at=1",
        "--out",
        str(tmp_path / "a"),
    )
    assert r.returncode == 1
    [rows] = toy_rows(tmp_path / "a").values()
    assert [x["status"] for x in rows] == ["incomplete", "error"] and "exit code -9" in rows[-1]["reason"]
    assert "1 cells: ok 0, reused 0, skipped 0, error 1" in r.stdout
    r = bench("matrix", "toy", "-p", "cpu", "-p", "cuda", "--set", "raise_at=2", "--out", str(tmp_path / "b"))
    assert r.returncode == 1 and "2 cells: ok 0, reused 0, skipped 0, error 2" in r.stdout
    for rows in toy_rows(tmp_path / "b").values():
        assert [x["status"] for x in rows] == ["incomplete", "incomplete", "error"]
        assert rows[-1]["reason"] == "RuntimeError: toy failure in step 2"


@pytest.mark.slow
def test_mnist_epochs_interleave_round_robin_and_ratios_come_out(tmp_path):
    r = bench(
        "matrix", "mnist-cnn", "--set", "epochs=2", "--set", "dataset=digits", "--schedule", "interleaved", "--out", str(tmp_path)
    )
    assert r.returncode == 0, r.stderr
    epochs = re.findall(r"^step +\d/2 (\S+ \S+ \S+) +epoch (\d)", r.stdout + r.stderr, re.M)
    assert [e for _, e in epochs] == ["1", "1", "1", "2", "2", "2"]
    assert epochs[3][0] == epochs[1][0], "epoch 2 starts with the second cell (rotation)"
    assert "numba-cpu resident default / torch-cpu resident default" in r.stdout
    summary = (tmp_path / "summaries" / "mnist-cnn.json").read_text()
    assert "median_samples_per_s" in summary and "ratios" in summary


@pytest.mark.slow
def test_gpu_cells_are_skipped_with_a_reason_on_a_cpu_host(tmp_path):
    from bench.core.machine import nvidia_smi_gpus

    if nvidia_smi_gpus():
        pytest.skip("this host has a GPU")
    r = bench("matrix", "mnist-cnn", "-p", "cuda", "--set", "epochs=1", "--set", "dataset=digits", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    cells = list((tmp_path / "mnist-cnn").glob("*/rows.jsonl"))
    # --profile auto with a GPU platform is the answer: its cuda cells, each skipped here
    assert len(cells) == len(get_study("mnist-cnn").matrix("cuda", "answer")) == 5
    for p in cells:
        [row] = read_rows(p)
        assert row["status"] == "skipped" and ("no NVIDIA GPU" in row["reason"] or "numba.cuda" in row["reason"])


@pytest.mark.parametrize("schedule", ["sequential", "interleaved"])
def test_repeats_are_fresh_processes_in_rounds_across_cells(tmp_path, schedule):
    """--repeats 3: every cell's repeat 0, then every cell's repeat 1, ... (A B A B A B), each its own dir and process."""
    r = bench("matrix", "toy", "-p", "cpu", "-p", "cuda", "--schedule", schedule, "--repeats", "3", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    started = re.findall(r"^ready +(\S+) default r(\d)", r.stderr, re.M)
    assert [int(k) for _, k in started] == [0, 0, 1, 1, 2, 2], started
    assert started[0][0] != started[1][0], "two different cells in each round"
    rows = [read_rows(p) for p in (tmp_path / "toy").glob("*/rows.jsonl")]
    assert len(rows) == 6 and len({rs[0]["run_id"] for rs in rows}) == 6
    assert sorted(rs[0]["repeat"] for rs in rows) == [0, 0, 1, 1, 2, 2]
    assert all(isinstance(x["flags"], str) for rs in rows for x in rs)


def test_repeats_default_by_profile_and_bad_values_are_one_line(tmp_path):
    import toy_study  # noqa: F401 - registers the toy here too

    from bench.core.request import RunRequest
    from bench.run.matrix import resolve

    assert {c.repeat for c in resolve(RunRequest(studies=("toy",), platforms=("cpu",), profile="default"))} == {0, 1, 2}
    assert {c.repeat for c in resolve(RunRequest(studies=("toy",), platforms=("cpu",), profile="smoke"))} == {0}
    for bad in ("0", "-1", "x"):
        r = bench("matrix", "toy", "--repeats", bad, "--out", str(tmp_path / "o"))
        assert r.returncode == 2 and not (tmp_path / "o" / "toy").exists(), r.stderr


def test_a_set_that_makes_two_cells_the_same_work_runs_it_once():
    from bench.core.request import RunRequest
    from bench.run.matrix import resolve

    req = RunRequest(studies=("mlp-scratch",), platforms=("cpu",), profile="default", repeats=1)
    both = resolve(req, resolve_data=False)
    one = resolve(req.replace(sets=("dtype=float64",)), resolve_data=False)
    assert len({c.key for c in both}) == len(both) == 2
    assert len(one) == 1 and one[0].params["dtype"] == "float64" and one[0].id.startswith("numpy_float64")


def test_a_result_from_another_environment_is_never_reused(tmp_path):
    """A finished cell is reused only for the same work in the same environment: a run in an
    image (or under other library versions) after a native run runs its cells again, beside
    the native ones; the native run, repeated, reuses its own."""
    native = bench("matrix", "toy", "-p", "cpu", "--out", str(tmp_path))
    assert native.returncode == 0, native.stderr
    image = {"KIT_RUNTIME": "container", "KIT_IMAGE_CONTENT_REF": "cnn-bench/cpu:0123456789ab-ba9876543210"}
    boxed = bench("matrix", "toy", "-p", "cpu", "--out", str(tmp_path), env=image)
    assert boxed.returncode == 0 and not re.search(r"^reused", boxed.stderr, re.M), boxed.stderr
    assert "ok      py default" in boxed.stderr, boxed.stderr
    dirs = sorted((tmp_path / "toy").iterdir())
    envs = sorted(json.loads((d / "cell.json").read_text())["env"] for d in dirs)
    assert len(dirs) == 2 and envs[0].startswith("container-") and envs[1].startswith("native-"), envs
    again = bench("matrix", "toy", "-p", "cpu", "--out", str(tmp_path))
    assert again.returncode == 0 and "reused  py default" in again.stderr, again.stderr
    # a cell's reproduce command refuses another environment (one line, nothing written)
    spec = next(d for d in dirs if "native-" in (d / "cell.json").read_text()) / "cell.json"
    moved = bench("cell", str(spec), "--out", str(tmp_path / "elsewhere"), env=image)
    assert moved.returncode == 2 and "resolved for environment native-" in moved.stderr, moved.stderr
    assert len(moved.stderr.strip().splitlines()) == 1 and not (tmp_path / "elsewhere" / "toy").exists()


def test_no_cell_closes_while_another_is_still_timing_a_step(tmp_path):
    """The interleaved schedule settles its cells one at a time after the last round: no step of
    any cell is timed while another cell of the run closes and writes its files (before this,
    a cell's close overlapped the next cell's last step: its last epoch ran 1.4-2.6x slower)."""
    r = bench("matrix", "toy", "-p", "cpu", "-p", "cuda", "--schedule", "interleaved", "--set", "sleep_s=0.3",
              "--out", str(tmp_path))  # fmt: skip
    assert r.returncode == 0, r.stderr
    rows = toy_rows(tmp_path)
    last_step_end = max(x["t_end"] for rs in rows.values() for x in rs if "t_end" in x)
    closed = [json.loads(f.read_text())["closed_at"] for f in (tmp_path / "toy").glob("*/system.json")]
    assert len(closed) == 2 and min(closed) > last_step_end, (closed, last_step_end)


def test_the_per_device_schedule_reserves_every_gpu_a_cell_names(tmp_path, monkeypatch):
    """A cell naming GPUs 0 and 1 gets both and starts only when both are free; one-GPU cells
    never run beside it; each cell sees its slots as CUDA_VISIBLE_DEVICES."""
    import toy_study  # noqa: F401 - registers the toy here too

    from bench.core.registry import get_study
    from bench.core.request import Paths
    from bench.run.schedule import Scheduler

    monkeypatch.setenv("KIT_STUDY_MODULES", "toy_study")
    monkeypatch.setenv("PYTHONPATH", str(TESTS))
    toy = get_study("toy")
    both = toy.cell("fake-gpu", name="both", devices=("0", "1"), sleep_s=0.3)
    ones = [toy.cell("fake-gpu", name=f"one{i}", seed=i, sleep_s=0.3) for i in range(3)]
    got = Scheduler(Paths(tmp_path), devices=["0", "1"], echo=lambda s: None).run([ones[0], both, ones[1], ones[2]], "per-device")
    assert [o.status for o in got] == ["ok"] * 4
    spans = {}
    for name in ("both", "one0", "one1", "one2"):
        (f,) = (tmp_path / "toy").glob(f"{name}-*/rows.jsonl")
        rows = read_rows(f)
        spans[name] = (min(r["t_start"] for r in rows), max(r["t_end"] for r in rows), rows[0]["slot"])
    assert spans["both"][2] == "0,1" and {spans[n][2] for n in ("one0", "one1", "one2")} <= {"0", "1"}
    for n in ("one0", "one1", "one2"):  # never beside the cell that holds both GPUs
        assert spans[n][1] <= spans["both"][0] or spans[n][0] >= spans["both"][1], (n, spans)
