"""One input, one count; and a report that cannot be written leaves nothing half-made.

A result dir reached twice (named twice, named with its parent, or copied: two copies of one
run, the same run ids) is read once, with one line saying what was skipped: `report D D/`,
`report D D/mnist-cnn`, `report D copy-of-D` all equal `report D` (the issue: n=6 from 3
repeats, and a 95 % interval where only a range exists). `report` stages its files inside --out and
renames them into place, replacing only the files its manifest names (host/outdir.py): a full or
read-only disk is one line and --out stays as it was."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CPU = ROOT / "results" / "reference" / "cpu-2core-epyc"
SEED = ("torch-cpu_seed_default-adcc67f3f870", "torch-cpu_seed_default-89a4ae6b4f42", "torch-cpu_seed_default-65ae36759ec9")


def orch(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "KIT_DATA_DIR"}
    return subprocess.run(
        [sys.executable, str(ROOT / "orchestrate.py"), *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=600
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """One run: the three repeats of one mnist-cnn configuration."""
    d = tmp_path_factory.mktemp("one") / "run"
    for name in SEED:
        shutil.copytree(CPU / "mnist-cnn" / name, d / "mnist-cnn" / name)
    return d


def summary_rows(report: Path) -> list[dict]:
    with open(report / "table1_summary.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def tidy_rows(report: Path) -> int:
    with open(report / "tidy.csv", newline="") as fh:
        return sum(1 for _ in csv.DictReader(fh))


@pytest.fixture(scope="module")
def once(run, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("once") / "report"
    r = orch("report", str(run), "--out", str(out))
    assert r.returncode == 0 and "skipped" not in r.stderr, r.stderr
    return out


def assert_same_report(once: Path, out: Path) -> None:
    assert summary_rows(out) == summary_rows(once)
    assert tidy_rows(out) == tidy_rows(once) == 30  # 3 repeats x 10 epochs
    a, b = (json.loads((p / "report.json").read_text())["studies"] for p in (once, out))
    assert a == b


def test_the_repeats_of_one_run_are_three(once):
    (row,) = summary_rows(once)
    assert row["repeats"] == "3", row


@pytest.mark.parametrize(
    "names, says",
    [
        (lambda d: [d, Path(f"{d}/")], "named twice"),
        (lambda d: [d, d / "mnist-cnn"], "inside"),
        (lambda d: [d / "mnist-cnn", d], "the same runs were already read"),
    ],
    ids=["D D/", "D D/mnist-cnn", "D/mnist-cnn D"],
)
def test_a_dir_reached_twice_is_read_once_with_a_line(run, once, tmp_path, names, says):
    out = tmp_path / "report"
    r = orch("report", *map(str, names(run)), "--out", str(out))
    assert r.returncode == 0, r.stderr
    skipped = [ln for ln in r.stderr.splitlines() if ln.startswith("skipped:")]
    assert len(skipped) == 1 and says in skipped[0], r.stderr
    assert_same_report(once, out)
    assert "skipped:" in (out / "REPORT.md").read_text()


def test_two_copies_of_one_run_are_read_once(run, once, tmp_path):
    """Form 2: the run copied under another name (a second download of the same results): the
    same cell ids and run ids, read once."""
    copy = shutil.copytree(run, tmp_path / "copy-of-run")
    out = tmp_path / "report"
    r = orch("report", str(run), str(copy), "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert f"skipped: 3 cell(s) under {copy}: the same runs were already read from {run}" in r.stderr
    assert_same_report(once, out)
    inside = tmp_path / "both"  # and both copies under one dir: verify counts each cell once too
    shutil.copytree(run, inside / "a")
    shutil.copytree(run, inside / "b")
    r = orch("verify", str(inside), "--allow-unbaselined")
    assert "3 cells:" in r.stdout and "skipped: 3 cell(s)" in r.stderr, r.stdout + r.stderr
    r = orch("compare", str(inside), str(run), "--json")
    assert r.returncode == 0 and "A: skipped: 3 cell(s)" in r.stderr, r.stderr
    (m,) = json.loads(r.stdout)["matched"]
    assert len(m["a"]["per_repeat"]) == len(m["b"]["per_repeat"]) == 3 and m["ratio_interval"] == "range", m


def test_a_rerun_of_the_same_cell_is_another_run_and_counts(run, tmp_path):
    """What is not a copy stays: the same cell run again (another run id) is a repeat of its own run."""
    other = shutil.copytree(run, tmp_path / "rerun")
    for rows in other.glob("mnist-cnn/*/rows.jsonl"):
        lines = [json.loads(x) for x in rows.read_text().splitlines()]
        rows.write_text("".join(json.dumps({**x, "run_id": x["run_id"] + "-again"}) + "\n" for x in lines))
    out = tmp_path / "report"
    r = orch("report", str(run), str(other), "--out", str(out))
    assert r.returncode == 0 and "skipped" not in r.stderr, r.stderr
    assert tidy_rows(out) == 60


# ---------------------------------------------------------------------------- writes that fail cleanly
PROGRESS = re.compile(r"report: .* \(\d+ s\)")  # host/progress.py's plain line per stage, off a terminal


def problems(stderr: str) -> list[str]:
    """STDERR's lines less report's progress: what the command said went wrong."""
    return [ln for ln in stderr.splitlines() if ln.strip() and not PROGRESS.fullmatch(ln)]


@pytest.fixture
def small_disk(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)]).returncode != 0:
        pytest.skip("needs root and mount(8) for a small tmpfs")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_a_full_or_read_only_disk_under_report_out_is_one_line_and_leaves_out_as_it_was(run, small_disk):
    """The issue: a 237-line traceback and stray plots without REPORT.md. Full: the figures fill
    256 kB. Read-only: the same disk remounted read-only, with an earlier report of the kit's on it
    (its manifest names it), kept."""
    import hashlib

    out = small_disk / "report"
    r = orch("report", str(run), "--out", str(out))
    err = problems(r.stderr)
    assert r.returncode == 1 and len(err) == 1 and "No space left on device" in err[0] and "nothing written" in err[0], r.stderr
    assert list(small_disk.iterdir()) == [], "nothing left on the disk"
    out.mkdir()
    (out / "REPORT.md").write_text("an earlier report\n")
    digest = hashlib.sha256(b"an earlier report\n").hexdigest()
    manifest = {"kit": "cnn-bench", "command": "report", "format": 1, "files": {"REPORT.md": [digest]}, "dirs": []}
    (out / ".cnn-bench-report.json").write_text(json.dumps(manifest))
    assert subprocess.run(["mount", "-o", "remount,ro", str(small_disk)]).returncode == 0
    r = orch("report", str(run), "--out", str(out))
    err = problems(r.stderr)
    assert r.returncode == 1 and len(err) == 1 and "Read-only file system" in err[0], r.stderr
    assert [p.name for p in small_disk.iterdir()] == ["report"] and (out / "REPORT.md").read_text() == "an earlier report\n"


def test_report_replaces_only_its_own_earlier_report(run, tmp_path):
    out = tmp_path / "report"
    assert orch("report", str(run), "--out", str(out)).returncode == 0
    (out / "notes.md").write_text("mine\n")
    assert orch("report", str(run), "--out", str(out)).returncode == 0
    assert (out / "notes.md").read_text() == "mine\n" and (out / "REPORT.md").is_file()
    assert not list(out.glob(".cnn-bench-report.stage-*")), "no stage left in --out"
    beside = sorted(p.name for p in tmp_path.iterdir())
    assert beside == [".report.figures", "report"], "no temp or old dir left beside it (the figure cache aside)"


def test_report_writes_beside_other_files_and_refuses_a_link(run, tmp_path):
    results = tmp_path / "results"
    (results / "mine").mkdir(parents=True)
    (results / "mine" / "rows.jsonl").write_text("keep\n")
    r = orch("report", str(run), "--out", str(results))
    assert r.returncode == 0 and (results / "REPORT.md").is_file(), r.stderr
    assert (results / "mine" / "rows.jsonl").read_text() == "keep\n"
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    r = orch("report", str(run), "--out", str(link))
    err = problems(r.stderr)
    assert r.returncode == 2 and len(err) == 1 and "is a symlink" in err[0], r.stderr
    assert not (tmp_path / "elsewhere").exists()
