"""The fault matrix (docs/FAULTS.md): what the kit promises when a result could be reused,
overwritten or lost by accident, and under kill, Ctrl-C, a full disk, concurrent runs,
corrupt or planted files. Each promise is a test here."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import toy_study  # noqa: F401 - registers the toy study in this process too (the report reads it)

from bench.core.errors import KitError
from bench.core.rows import read_rows

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent
TOY = {"KIT_STUDY_MODULES": "toy_study", "PYTHONPATH": f"{TESTS}{os.pathsep}{ROOT}"}


def env(extra: dict | None = None) -> dict:
    e = {k: v for k, v in os.environ.items() if k != "KIT_DATA_DIR"}
    return {**e, **TOY, **(extra or {})}


def bench(*args, extra_env=None, cwd=ROOT, timeout=300):
    if args and args[0] == "matrix" and "--repeats" not in args:  # these tests look at one run of each cell
        args = (*args, "--repeats", "1")
    return subprocess.run(
        [sys.executable, "-m", "bench", *args], capture_output=True, text=True, cwd=cwd, env=env(extra_env), timeout=timeout
    )


def orch(*args, cwd=ROOT, extra_env=None):
    return subprocess.run(
        [sys.executable, str(ROOT / "orchestrate.py"), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env(extra_env),
        timeout=600,
    )


PROGRESS = ("ready ", "step ", "ok ", "skipped ", "reused ", "error  ", "interrupted ")  # the scheduler's own lines


def one_line(r, code=2) -> str:
    """The one message line of a failed command (progress lines of cells that ran are not messages)."""
    lines = [x for x in r.stderr.splitlines() if x.strip() and not x.startswith(PROGRESS)]
    assert r.returncode == code and len(lines) == 1, (r.returncode, r.stderr[-1500:], r.stdout[-500:])
    return lines[0]


def toy_cells(out: Path) -> list[Path]:
    return sorted(p for p in (out / "toy").iterdir() if p.is_dir())


# ---- 1. identity: other work is another cell --------------------------------------------------


@pytest.mark.slow
def test_other_config_or_data_is_another_cell_never_reused_or_overwritten(tmp_path, real_mnist_dir):
    common = ["matrix", "mnist-cnn", "--only", "backend=numba-cpu", "--set", "epochs=1", "--out", str(tmp_path)]
    r = bench(*common, "--set", "dataset=digits")
    assert r.returncode == 0 and "ok 1, reused 0" in r.stdout, r.stderr
    r = bench(*common, "--data-dir", str(real_mnist_dir), "--set", "limit_train=2048")
    assert r.returncode == 0 and "ok 1, reused 0" in r.stdout, r.stderr  # real MNIST: another cell
    r = bench(*common, "--set", "dataset=digits", "--set", "lr=0.02")
    assert r.returncode == 0 and "ok 1, reused 0" in r.stdout, r.stderr  # another lr: another cell
    r = bench(*common, "--set", "dataset=digits")
    assert r.returncode == 0 and "ok 0, reused 1" in r.stdout, r.stderr  # exactly the same work: reused
    dirs = sorted((tmp_path / "mnist-cnn").iterdir())
    assert len(dirs) == 3
    datasets = sorted(read_rows(d / "rows.jsonl")[0]["dataset"] for d in dirs)
    assert datasets == ["digits-embedded", "digits-embedded", "mnist"]


def test_a_cell_dir_holding_another_spec_is_one_line(tmp_path):
    assert bench("matrix", "toy", "--out", str(tmp_path)).returncode == 0
    [cell] = toy_cells(tmp_path)
    spec = json.loads((cell / "cell.json").read_text())
    spec["params"]["steps"] = 9
    (cell / "cell.json").write_text(json.dumps(spec))
    line = one_line(bench("matrix", "toy", "--out", str(tmp_path)))
    assert "holds another cell's spec" in line


# ---- 2. data: a named dir must hold the data ----------------------------------------------------


@pytest.mark.slow
def test_a_named_data_dir_without_the_dataset_falls_back_and_says_so(tmp_path):
    """One data rule for every dataset, natively and in an image: a named dir must exist; 'auto'
    takes the real data from it when it is there, else the embedded default, and says so; a
    dataset asked for by name must be there (checked on the host, before any image starts)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    out = tmp_path / "out"
    assert "does not exist" in one_line(bench("matrix", "mnist-cnn", "--data-dir", str(tmp_path / "typo"), "--out", str(out)))
    asked = bench("matrix", "mnist-cnn", "--set", "dataset=mnist", "--data-dir", str(empty), "--out", str(out))
    assert asked.returncode == 2 and "mnist" in one_line(asked) and not out.exists()
    r = bench(
        "matrix", "mnist-cnn", "--only", "backend=numba-cpu", "--set", "epochs=1", "--data-dir", str(empty), "--out", str(out)
    )
    assert r.returncode == 0 and "data: digits" in r.stdout and "using the embedded digits" in r.stderr, r.stderr
    # nothing named: the embedded default, and the run says so
    r = bench("matrix", "mnist-cnn", "--only", "backend=numba-cpu", "--set", "epochs=1", "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0 and "data: digits" in r.stdout, r.stdout


def test_orchestrate_refuses_a_dataset_asked_for_by_name_that_the_data_dir_lacks(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    for runtime in ("native", "docker"):
        r = orch("run", "cpu", "--runtime", runtime, "--study", "mnist-cnn", "--set", "dataset=mnist",
                 "--data-dir", str(empty), "--out", str(tmp_path / "out"))  # fmt: skip
        assert r.returncode != 0 and "asks for dataset mnist" in r.stderr and "holds no mnist/" in r.stderr, r.stderr
        assert not (tmp_path / "out").exists()


# ---- 4. options are checked on the host, once, before any work -----------------------------------


@pytest.mark.parametrize("runtime", ["native", "docker"])
def test_orchestrate_checks_every_option_before_any_work(tmp_path, runtime):
    for args, msg in (
        (["--set", "epochs=0"], "epochs must be > 0"),
        (["--set", "epochs=x"], "expected int"),
        (["--study", "nope"], "unknown study 'nope'"),
        (["--set", "colour=red"], "no parameter 'colour'"),
    ):
        r = orch("run", "cpu", "--runtime", runtime, "--out", str(tmp_path / "out"), *args, cwd=tmp_path)
        assert msg in one_line(r), r.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "results").exists()


# ---- 5. corrupt rows -----------------------------------------------------------------------------

CORRUPTIONS = {
    "truncated line": lambda text: text[: len(text) - 40],  # the last line cut short, as a full disk leaves it
    "wrong type": lambda text: text.replace('"status": "ok"', '"status": 7', 1),
    "renamed field": lambda text: text.replace('"epoch_s"', '"epoch_seconds"'),
    "non-object line": lambda text: text + "[1, 2, 3]\n",
}


@pytest.fixture(scope="module")
def good_results(tmp_path_factory):
    out = tmp_path_factory.mktemp("good")
    r = bench(
        "matrix",
        "mnist-cnn",
        "--only",
        "backend=numba-cpu|torch-cpu",
        "--only",
        "pipeline=resident",
        "--set",
        "epochs=2",
        "--set",
        "dataset=digits",
        "--out",
        str(out),
    )
    assert r.returncode == 0, r.stderr
    return out


# with --all only: a matrix run for the fixture, then two matrix reruns per kind
@pytest.mark.slow
@pytest.mark.parametrize("kind", [pytest.param(k, marks=[pytest.mark.slow] if i else []) for i, k in enumerate(CORRUPTIONS)])
def test_a_corrupt_rows_file_is_named_and_the_rest_is_reported(tmp_path, good_results, kind):
    from host.report import build_report

    bad = tmp_path / "bad"
    shutil.copytree(good_results, bad)
    victim = sorted((bad / "mnist-cnn").iterdir())[0]
    text = (victim / "rows.jsonl").read_text()
    (victim / "rows.jsonl").write_text(CORRUPTIONS[kind](text))
    # the corrupt dir alone: beside its own good original it would be skipped as a copy of the
    # same runs (one input, one count), which test_resultset holds
    info = build_report([bad], tmp_path / "report")
    md = (tmp_path / "report" / "REPORT.md").read_text()
    assert info["problems"] and str(victim / "rows.jsonl") in info["problems"][0]
    assert "| corrupt |" in md and "Lines that could not be read" in md
    table = json.loads((tmp_path / "report" / "table1.json").read_text())["rows"]
    assert len(table) == 1, "the dir's good cell, without the corrupt one"
    # the matrix neither crashes nor reuses it: the corrupt cell runs again
    for extra in ([], ["--rerun"]):
        r = bench(
            "matrix",
            "mnist-cnn",
            "--only",
            "backend=numba-cpu|torch-cpu",
            "--only",
            "pipeline=resident",
            "--set",
            "epochs=2",
            "--set",
            "dataset=digits",
            "--out",
            str(bad),
            *extra,
        )
        assert r.returncode == 0, r.stderr[-1000:]
    assert read_rows(victim / "rows.jsonl")[0]["status"] == "ok"


@pytest.mark.slow
def test_report_on_only_a_corrupt_dir_still_writes_and_names_it(tmp_path, good_results):
    bad = tmp_path / "bad"
    shutil.copytree(good_results, bad)
    for d in (bad / "mnist-cnn").iterdir():
        (d / "rows.jsonl").write_text("{not json\n")
    r = orch("report", str(bad), "--out", str(tmp_path / "rep"))
    assert r.returncode == 0 and (tmp_path / "rep" / "REPORT.md").is_file(), r.stderr
    assert "not JSON" in (tmp_path / "rep" / "REPORT.md").read_text()


# ---- 3, 6, 7. kill, Ctrl-C, orphans, one writer ----------------------------------------------------


def test_kill_9_of_a_standalone_cell_is_reported_as_interrupted(tmp_path):
    from host.report import build_report

    spec = (
        '{"study": "toy", "backend": "py", "params": {"steps": 50, "sleep_s": 0.2, "crash_at": -1, "raise_at": -1, "row_kb": 0}}'
    )
    p = subprocess.Popen(
        [sys.executable, "-m", "bench", "cell", spec, "--out", str(tmp_path)],
        env=env(),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 60
    while time.time() < deadline and not list(tmp_path.glob("toy/*/rows.partial.jsonl")):
        time.sleep(0.2)
    time.sleep(0.5)
    p.kill()
    p.wait()
    info = build_report([tmp_path], tmp_path / "report")
    md = (tmp_path / "report" / "REPORT.md").read_text()
    assert "| interrupted |" in md and info["studies"]["toy"]["not_run"]


def _wait_for_steps(out: Path, n: int, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        parts = list(out.glob("toy/*/rows.partial.jsonl"))
        if len(parts) >= n and all(p.read_text().count("\n") >= 1 for p in parts):
            return
        time.sleep(0.2)
    raise AssertionError(f"no {n} running cells under {out}")


def test_ctrl_c_stops_every_cell_in_one_line_and_a_rerun_resumes(tmp_path):
    args = [
        "matrix",
        "toy",
        "-p",
        "cpu",
        "-p",
        "cuda",
        "--schedule",
        "interleaved",
        "--set",
        "steps=40",
        "--set",
        "sleep_s=0.2",
        "--out",
        str(tmp_path),
    ]
    p = subprocess.Popen(
        [sys.executable, "-m", "bench", *args],
        env=env(),
        cwd=ROOT,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        # a terminal's Ctrl-C reaches a foreground job; a shell's background job (`.ci/run &`)
        # starts with SIGINT ignored, which Python and its children would inherit
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    _wait_for_steps(tmp_path, 2)
    os.killpg(p.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
    out, err = p.communicate(timeout=60)
    lines = [x for x in err.splitlines() if x.strip() and not x.startswith(PROGRESS)]
    assert p.returncode == 130 and lines[-1].startswith("interrupted: 0 cells finished, 2 stopped"), err[-1500:]
    for cell in toy_cells(tmp_path):
        rows = read_rows(cell / "rows.jsonl")
        assert rows[-1]["status"] == "interrupted" and {r["status"] for r in rows[:-1]} <= {"incomplete"}
    time.sleep(0.5)
    assert subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True).returncode == 1, "no cell outlives Ctrl-C"
    r = bench("matrix", "toy", "-p", "cpu", "-p", "cuda", "--set", "steps=3", "--out", str(tmp_path))
    assert r.returncode == 0 and "ok 2" in r.stdout  # steps=3 is another spec: both run afresh
    r = bench(*args[:-2], "--set", "sleep_s=0", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr[-800:]


def test_killing_the_matrix_kills_its_cells_and_a_second_run_on_one_dir_refuses(tmp_path):
    args = ["matrix", "toy", "--set", "steps=100", "--set", "sleep_s=0.2", "--out", str(tmp_path)]
    p = subprocess.Popen(
        [sys.executable, "-m", "bench", *args], env=env(), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _wait_for_steps(tmp_path, 1)
    second = bench(*args)
    assert "is in use by another run (pid" in one_line(second)
    p.kill()  # kill -9 of the scheduler
    p.wait()
    deadline = time.time() + 10
    while time.time() < deadline and subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True).returncode == 0:
        time.sleep(0.2)
    assert subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True).returncode == 1, "an orphan cell trains on"
    r = bench("matrix", "toy", "--set", "steps=2", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr  # the lock died with its holder


# ---- 8. a full disk ------------------------------------------------------------------------------


def test_a_full_disk_is_one_line_and_keeps_finished_cells(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True).returncode != 0
    ):
        pytest.skip("needs root and mount(8) for a small tmpfs")
    try:
        r = bench(
            "matrix", "toy", "-p", "cpu", "-p", "cuda", "--set", "steps=3", "--set", "row_kb=100", "--out", str(mnt / "res")
        )
        line = one_line(r)
        assert line.startswith("error: disk full writing results under"), line
        states = {}
        for cell in toy_cells(mnt / "res"):
            states[cell.name] = "done" if (cell / "rows.jsonl").is_file() else "partial"
        assert "partial" in states.values() or any(
            read_rows(c / "rows.jsonl")[-1]["status"] != "ok" for c in toy_cells(mnt / "res") if (c / "rows.jsonl").is_file()
        )
        for cell in toy_cells(mnt / "res"):  # whatever finished is whole
            if (cell / "rows.jsonl").is_file() and (cell / "system.json").is_file():
                assert [x["status"] for x in read_rows(cell / "rows.jsonl")] in (["ok"] * 3, ["incomplete"] * 3 + ["error"])
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


# ---- 9. planted symlinks, where results go ----------------------------------------------------


def test_a_planted_log_symlink_is_refused_and_the_target_untouched(tmp_path):
    assert bench("matrix", "toy", "--out", str(tmp_path / "res")).returncode == 0
    [cell] = toy_cells(tmp_path / "res")
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me")
    (cell / "log.txt").unlink()
    (cell / "log.txt").symlink_to(victim)
    r = bench("matrix", "toy", "--rerun", "--out", str(tmp_path / "res"))
    assert "is a symlink" in one_line(r)
    assert victim.read_text() == "keep me"


def test_a_planted_rows_symlink_is_not_read_into_the_report(tmp_path):
    from host.report import build_report

    assert bench("matrix", "toy", "--out", str(tmp_path / "res")).returncode == 0
    [cell] = toy_cells(tmp_path / "res")
    secret = tmp_path / "secret.jsonl"
    secret.write_text(json.dumps({"study": "toy", "status": "ok", "backend": "SECRET-TEXT", "step": 0, "square": 0}) + "\n")
    (cell / "rows.jsonl").unlink()
    (cell / "rows.jsonl").symlink_to(secret)
    build_report([tmp_path / "res"], tmp_path / "report")
    assert "SECRET-TEXT" not in (tmp_path / "report" / "REPORT.md").read_text()


def test_all_with_out_writes_nothing_outside_it(tmp_path):
    out = tmp_path / "mine"
    r = orch("all", "--runtime", "native", "--study", "toy", "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-1000:]
    assert (out / "report" / "REPORT.md").is_file() and not (tmp_path / "results").exists()


def test_root_hands_the_container_only_the_kits_own_results(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the chown happens only when the host user is root")
    from host import engine

    out = tmp_path / "out"
    (out / "mnist-cnn" / "c1").mkdir(parents=True)
    (out / "mnist-cnn" / "c1" / "rows.jsonl").write_text("")
    (out / "my-notes.txt").write_text("mine")
    assert engine.container_user(out) == f"{engine.RUN_UID}:{engine.RUN_GID}"
    assert (out / "mnist-cnn" / "c1" / "rows.jsonl").stat().st_uid == engine.RUN_UID and out.stat().st_uid == engine.RUN_UID
    assert (out / "my-notes.txt").stat().st_uid == 0, "files that are not the kit's keep their owner"


# ---- 10. fetch -----------------------------------------------------------------------------------


def test_fetch_refuses_http_unless_allowed_and_refetches_corrupt_files(tmp_path, monkeypatch):
    from bench.data import fetch

    with pytest.raises(KitError, match="plain http: use https, or pass --allow-http"):
        fetch.fetch_mnist(tmp_path, mirrors=("http://127.0.0.1:9/",))
    with pytest.raises(KitError, match="only https:// URLs"):
        fetch.fetch_mnist(tmp_path, mirrors=("ftp://example.org/",))
    # a corrupt file in place is not valid: fetch tries again (here: no mirror answers -> one line, no traceback)
    (tmp_path / "mnist").mkdir()
    (tmp_path / "mnist" / "train-images-idx3-ubyte.gz").write_bytes(b"not gzip at all")
    with pytest.raises(KitError, match="could not fetch train-images-idx3-ubyte.gz"):
        fetch.fetch_mnist(tmp_path, mirrors=("https://127.0.0.1:9/",), timeout_s=2)

    def no_write(*a, **k):
        raise PermissionError(13, "Read-only file system")

    from bench.data import archive  # the one download path (pooch) makes its temp dir there

    monkeypatch.setattr(archive.tempfile, "mkdtemp", no_write)
    with pytest.raises(KitError, match="cannot write into"):
        fetch.fetch_mnist(tmp_path, mirrors=("https://127.0.0.1:9/",), timeout_s=2)


# ---- 11. small things ---------------------------------------------------------------------------


@pytest.mark.slow
def test_empty_test_set_nan_lr_divergence_negative_seed_and_a_limit_above_the_set(tmp_path):
    import gzip
    import struct

    d = tmp_path / "data" / "mnist"
    d.mkdir(parents=True)
    for stem, magic, shape in (
        ("train-images-idx3-ubyte", 2051, (0, 28, 28)),
        ("train-labels-idx1-ubyte", 2049, (0,)),
        ("t10k-images-idx3-ubyte", 2051, (0, 28, 28)),
        ("t10k-labels-idx1-ubyte", 2049, (0,)),
    ):
        head = struct.pack(">II", magic, shape[0]) + (struct.pack(">II", 28, 28) if magic == 2051 else b"")
        (d / (stem + ".gz")).write_bytes(gzip.compress(head))
    assert "0 images" in one_line(
        bench("matrix", "mnist-cnn", "--data-dir", str(tmp_path / "data"), "--out", str(tmp_path / "o"))
    )
    digits = ["matrix", "mnist-cnn", "--only", "backend=numba-cpu", "--set", "dataset=digits", "--set", "epochs=1"]
    assert "lr must be finite and > 0" in one_line(bench(*digits, "--set", "lr=nan", "--out", str(tmp_path / "o")))
    assert "seed must be an integer >= 0" in one_line(bench(*digits, "--set", "seed=-1", "--out", str(tmp_path / "o")))
    r = bench(*digits, "--set", "lr=1e6", "--out", str(tmp_path / "o"))  # diverges: a flagged end, not a number
    assert r.returncode == 1
    [cell] = list((tmp_path / "o" / "mnist-cnn").iterdir())
    last = read_rows(cell / "rows.jsonl")[-1]
    assert last["status"] == "error" and "non-finite training loss" in last["reason"]
    r = bench(*digits, "--set", "limit_train=99999", "--out", str(tmp_path / "p"))
    assert r.returncode == 0
    [cell] = list((tmp_path / "p" / "mnist-cnn").iterdir())
    assert json.loads((cell / "cell.json").read_text())["params"]["limit_train"] == 0, "the id records the samples used"
