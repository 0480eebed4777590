"""A job dir is data: it sits on a shared filesystem other users can write, so nothing in it
chooses what a task runs (the Python, the kit, the image come from the machine that submits),
its manifest is held to its schema, and every path under it stays inside it (a planted link is
one line, never followed). Each in two forms, through `orchestrate.py slurm` and `k8s`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.core.rows import read_rows

ROOT = Path(__file__).resolve().parent.parent
CLEAN_ENV = {k: v for k, v in os.environ.items() if k != "KIT_DATA_DIR" and not k.startswith(("KIT_SLURM_", "SLURM_"))}


def orch(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "orchestrate.py"), *args],
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        env={**CLEAN_ENV, **(env or {})},
        timeout=600,
    )


def one_line_error(r: subprocess.CompletedProcess, *words: str) -> str:
    assert r.returncode != 0, r.stdout[-1000:]
    err = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(err) == 1 and err[0].startswith("error: "), r.stderr[-2000:]
    for w in words:
        assert w in err[0], (w, err[0])
    return err[0]


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> Path:
    top = tmp_path_factory.mktemp("plan")
    r = orch("plan", str(top / "job"), "cpu", "--study", "mnist-cnn", "--profile", "smoke", cwd=top)
    assert r.returncode == 0, r.stderr[-2000:]
    return top / "job"


def planted_program(tmp_path: Path) -> tuple[Path, Path]:
    """An executable that leaves a mark when anything runs it, and the mark's path."""
    mark = tmp_path / "ran.txt"
    prog = tmp_path / "evil" / "python"
    prog.parent.mkdir(parents=True)
    prog.write_text(f"#!/bin/sh\necho ran > {mark}\n")
    prog.chmod(0o755)
    (prog.parent / "bench").mkdir()
    (prog.parent / "bench" / "__init__.py").write_text(f"open({str(mark)!r}, 'w').write('imported')\n")
    return prog, mark


def edit_manifest(job: Path, change) -> None:
    m = json.loads((job / "manifest.json").read_text())
    change(m)
    (job / "manifest.json").write_text(json.dumps(m))


def test_the_manifests_python_and_kit_root_are_never_what_a_task_runs(smoke, tmp_path):
    """Form 1: the manifest names a planted program as the Python and its dir as the kit root
    (an entry of PYTHONPATH): the script runs this Python and this kit, and running one task
    of it trains the cell without ever starting the planted program."""
    job = shutil.copytree(smoke, tmp_path / "job")
    prog, mark = planted_program(tmp_path)

    def plant(m: dict) -> None:
        m["environment"]["python"] = str(prog)
        m["kit_root"] = str(prog.parent)

    edit_manifest(job, plant)
    r = orch("slurm", str(job))
    assert r.returncode == 0, r.stderr[-2000:]
    text = (job / "slurm" / "cpu.sbatch").read_text()
    assert str(prog.parent) not in text and f"cell=({sys.executable})" in text
    assert f"export PYTHONPATH={ROOT}" in text
    env = {**CLEAN_ENV, "SLURM_ARRAY_TASK_ID": "2", "PATH": f"{prog.parent}:{os.environ['PATH']}"}
    run = subprocess.run(["bash", str(job / "slurm" / "cpu.sbatch")], capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert not mark.exists(), "the planted program ran"
    (rows,) = [read_rows(p) for p in (job / "task-0002").glob("*/*/rows.jsonl")]
    assert rows and all(r["status"] == "ok" for r in rows)


def test_a_plan_for_another_environment_or_a_bad_path_is_one_line_and_nothing_written(smoke, tmp_path):
    """Form 2: a manifest whose environment is not this Python's (the cells would refuse to run
    in it), whose data dir is not an absolute path of printable characters, or whose task list
    is not the plan's shape: one line each, no script written."""
    cases = {
        "data": (lambda m: m["data"].update(dir="/data\nrm -rf ~"), "'data.dir'"),
        "relative": (lambda m: m["data"].update(dir="data"), "'data.dir'"),
        "tasks": (lambda m: m["cells"][0].update(task="0 ; id"), "'cells.0.task'"),
        "runtime": (lambda m: m["environment"].update(runtime="bare-metal"), "'environment.runtime'"),
    }
    for name, (change, word) in cases.items():
        job = shutil.copytree(smoke, tmp_path / name)
        edit_manifest(job, change)
        one_line_error(orch("slurm", str(job)), word)
        assert not (job / "slurm").exists(), name
    job = replanned_for(shutil.copytree(smoke, tmp_path / "other-venv"), "native-torch9.9-deadbeef")
    one_line_error(orch("slurm", str(job)), "planned for environment native-torch9.9-deadbeef", sys.executable)
    assert not (job / "slurm").exists()


def replanned_for(job: Path, label: str) -> Path:
    """JOB as `plan` would have written it in a venv whose environment is LABEL: every spec's
    env and id, and the manifest's."""
    from bench.core.cell import Cell

    m = json.loads((job / "manifest.json").read_text())
    for entry in m["cells"]:
        path = job / "specs" / f"{entry['task']}.json"
        cell = Cell.from_json(path.read_text()).replace(env=label)
        path.write_text(cell.to_json(indent=2) + "\n")
        entry["id"] = cell.id
    m["environment"]["label"] = label
    (job / "manifest.json").write_text(json.dumps(m))
    return job


@pytest.mark.parametrize("where", ["slurm", "slurm/logs"])
def test_a_planted_link_where_slurm_writes_is_one_line_and_its_target_untouched(smoke, tmp_path, where):
    job = shutil.copytree(smoke, tmp_path / "job")
    target = tmp_path / "elsewhere"
    target.mkdir()
    (job / where).parent.mkdir(parents=True, exist_ok=True)
    (job / where).symlink_to(target, target_is_directory=True)
    one_line_error(orch("slurm", str(job)), "symlink")
    assert list(target.iterdir()) == []


def test_a_planted_link_where_k8s_writes_is_refused_and_its_target_untouched(smoke, tmp_path):
    from bench.core.errors import KitError
    from host.cluster import k8s
    from host.cluster.jobdir import load

    job = shutil.copytree(smoke, tmp_path / "job")
    target = tmp_path / "elsewhere"
    target.mkdir()
    (job / "k8s").symlink_to(target, target_is_directory=True)
    with pytest.raises(KitError, match="symlink"):
        k8s.write(load(job), [{"kind": "ConfigMap"}])
    assert list(target.iterdir()) == []


def test_a_planted_task_dir_link_is_refused_before_anything_is_submitted_or_cleared(smoke, tmp_path):
    """A task's results dir linked to another user's results: `slurm --submit` would clear the
    stale rows there before submitting; it stops in one line first, sbatch never called. The
    script refuses the link too, should one appear after submission."""
    job = shutil.copytree(smoke, tmp_path / "job")
    victim = tmp_path / "victim"
    cell = json.loads((job / "manifest.json").read_text())["cells"][0]
    (victim / "mnist-cnn" / cell["id"]).mkdir(parents=True)
    (victim / "mnist-cnn" / cell["id"] / "rows.jsonl").write_text("keep me\n")
    (job / "task-0000").symlink_to(victim, target_is_directory=True)
    bin_dir, called = tmp_path / "bin", tmp_path / "sbatch-called"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(f"#!/bin/sh\ntouch {called}\necho 1\n")
    (bin_dir / "sbatch").chmod(0o755)
    (bin_dir / "squeue").write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "squeue").chmod(0o755)
    r = orch("slurm", str(job), "--submit", env={"PATH": f"{bin_dir}:{os.environ['PATH']}"})
    one_line_error(r, "task-0000", "symlink")
    assert not called.exists() and (victim / "mnist-cnn" / cell["id"] / "rows.jsonl").read_text() == "keep me\n"
    (job / "task-0000").unlink()
    assert orch("slurm", str(job)).returncode == 0
    (job / "task-0000").symlink_to(victim, target_is_directory=True)
    env = {**CLEAN_ENV, "SLURM_ARRAY_TASK_ID": "0"}
    run = subprocess.run(["bash", str(job / "slurm" / "cpu.sbatch")], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 1 and "is a symlink" in run.stderr
    assert (victim / "mnist-cnn" / cell["id"] / "rows.jsonl").read_text() == "keep me\n"


def test_a_submissions_file_of_the_wrong_shape_or_size_is_read_within_its_caps(smoke, tmp_path):
    from host.cluster.jobdir import load
    from host.cluster.slurm import submissions

    job = shutil.copytree(smoke, tmp_path / "job")
    (job / "slurm").mkdir()
    good = {"submit": "t", "job_id": "12", "shape": "cpu", "tasks": [0, 2], "script": "x"}
    lines = [good, {**good, "job_id": "12; rm -rf ~"}, {**good, "tasks": [0, 99]}, {**good, "shape": "cpu\nx"}, [1], "x"]
    (job / "slurm" / "submissions.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines) + "{not json\n")
    assert submissions(load(job)) == [good]
    with open(job / "slurm" / "submissions.jsonl", "ab") as fh:
        fh.truncate(64 << 20)
    from bench.core.errors import KitError

    with pytest.raises(KitError, match="over the 16 MiB"):
        submissions(load(job))
