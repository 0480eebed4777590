"""One run request (bench/core/request.py) and what both command lines share through it: a bad
value is one UsageError line before any work, the results dir has one default rule
($KIT_RESULTS_DIR, else results/<host>), a child process has one environment, and
orchestrate.py is only the entry point of the host CLI in host/cli.py."""

from __future__ import annotations

import ast
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bench.core.child import child_env
from bench.core.errors import KitError, UsageError
from bench.core.request import MAX_REPEATS, Paths, RunRequest, Until, default_out

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent


@pytest.mark.parametrize(
    "changes, says",
    [
        ({"platforms": ("tpu",)}, "unknown platform 'tpu': choose cpu, cuda, mps"),
        ({"profile": "quick"}, "unknown profile 'quick'"),
        ({"schedule": "parallel"}, "unknown schedule 'parallel'"),
        ({"repeats": 0}, f"--repeats must be a whole number from 1 to {MAX_REPEATS}, got 0"),
        ({"repeats": MAX_REPEATS + 1}, f"got {MAX_REPEATS + 1}"),
        ({"repeats": True}, "got True"),
        ({"repeats": "3"}, "got '3'"),
        ({"timeout_s": 0}, "--timeout-s must be a number of seconds above 0, got 0"),
        ({"timeout_s": math.nan}, "--timeout-s must be a number of seconds above 0"),
        ({"label": ""}, "--label '': give 1-60 printable characters"),
        ({"label": "a\nb"}, "give 1-60 printable characters"),
        ({"budget": "15m"}, "--budget only applies with --until-decided"),
        ({"until_decided": True, "budget": "0"}, "--budget must be a time above zero"),
        ({"until_decided": True, "max_repeats": MAX_REPEATS + 1}, f"--max-repeats must be at most {MAX_REPEATS}"),
        ({"until_decided": True, "target_width": 0.0}, "--target-width must be above 0"),
        ({"sets": "epochs=1"}, "--sets must be a list of strings"),
    ],
)
def test_a_bad_value_is_one_usage_error_line(changes, says):
    with pytest.raises(UsageError) as err:
        RunRequest(**changes)
    text = str(err.value)
    assert says in text and "\n" not in text, text
    with pytest.raises(UsageError):  # a copy is checked as a new request is
        RunRequest().replace(**changes)


def test_a_request_is_frozen_normalised_and_says_where_results_go(tmp_path, monkeypatch):
    req = RunRequest(studies=["mnist-cnn"], platforms=["cpu"], sets=["epochs=1"], label="  mine  ", out=str(tmp_path))
    assert req.studies == ("mnist-cnn",) and req.sets == ("epochs=1",) and req.label == "mine"
    assert req.paths == Paths(tmp_path, None) and req.cell_timeout_s == 3600.0
    with pytest.raises(AttributeError):
        req.profile = "full"  # type: ignore[misc]
    monkeypatch.setenv("KIT_RESULTS_DIR", str(tmp_path / "env"))
    assert RunRequest().paths.out == tmp_path / "env"
    assert RunRequest(until_decided=True, budget="15m", target_width=0.05).until() == Until(20, 900.0, 0.05)
    assert RunRequest().until() is None


def test_matrix_argv_is_what_bench_matrix_parses_back():
    """The host's argv for `python -m bench matrix`, parsed by that command's own parser, gives
    every value back (the one command line the two sides share)."""
    import typer

    from bench.cli import app

    req = RunRequest(
        studies=("mlp-scratch", "mnist-cnn"),
        platforms=("cpu", "cuda"),
        profile="smoke",
        sets=("epochs=1", "mnist-cnn.batch=64"),
        only=("backend=numpy",),
        schedule="interleaved",
        rerun=True,
        timeout_s=90.0,
        repeats=2,
        label="night run",
        until_decided=True,
        max_repeats=6,
        budget="15m",
        target_width=0.1,
        devices=("0", "1"),
        out=Path("/results"),
        data_dir="/data",
    )
    cmd = typer.main.get_command(app).commands["matrix"]  # type: ignore[attr-defined]
    p = cmd.make_context("matrix", req.matrix_argv()[1:]).params
    back = RunRequest(
        studies=tuple(p["study"]),
        platforms=tuple(p["platform"]),
        profile=p["profile"].value,
        sets=tuple(p["set_"]),
        only=tuple(p["only"]),
        schedule=p["schedule"].value,
        rerun=p["rerun"],
        timeout_s=p["timeout_s"],
        repeats=p["repeats"],
        label=p["label"],
        until_decided=p["until_decided"],
        max_repeats=p["max_repeats"],
        budget=p["budget"],
        target_width=p["target_width"],
        devices=tuple(p["devices"].split(",")),
        out=p["out"],
        data_dir=p["data_dir"],
    )
    assert back == req


@pytest.mark.parametrize("argv", [["--timeout-s", "0"], ["--repeats", "0"], ["--label", " "], ["--budget", "1h"]])
def test_bench_matrix_and_orchestrate_run_give_the_same_one_line_for_a_bad_value(tmp_path, argv):
    from bench.cli import app as bench_app
    from host.cli import app as host_app

    b = CliRunner().invoke(bench_app, ["matrix", "--out", str(tmp_path / "b"), *argv])
    h = CliRunner().invoke(host_app, ["run", "cpu", "--runtime", "native", "--out", str(tmp_path / "h"), *argv])
    for r in (b, h):
        lines = [x for x in r.stderr.splitlines() if x.strip()]
        assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert b.stderr == h.stderr
    assert not (tmp_path / "b").exists() and not (tmp_path / "h").exists()  # nothing written


def _toy_env(tmp_path: Path, results: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("KIT_DATA_DIR", "KIT_RESULTS_DIR")}
    env.update({"KIT_STUDY_MODULES": "toy_study", "PYTHONPATH": str(TESTS), "KIT_RESULTS_DIR": str(results)})
    return env


def test_both_command_lines_write_to_kit_results_dir_when_no_out_is_named(tmp_path):
    """One default_out: `python -m bench matrix` and `orchestrate.py run` (whose native matrix it
    starts) put their results under $KIT_RESULTS_DIR, never under results/<host>/ of the cwd."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    for name, argv in (
        ("bench", [sys.executable, "-m", "bench", "matrix", "toy", "-p", "cpu", "--repeats", "1", "--only", "backend=py"]),
        (
            "host",
            [sys.executable, str(ROOT / "orchestrate.py"), "run", "cpu", "--study", "toy", "--runtime", "native"]
            + ["--repeats", "1", "--only", "backend=py"],
        ),
    ):
        results = tmp_path / name
        env = _toy_env(tmp_path, results)
        env["PYTHONPATH"] += os.pathsep + str(ROOT)  # `python -m bench` from another cwd
        r = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env=env)
        assert r.returncode == 0, (name, r.stdout[-2000:], r.stderr[-2000:])
        rows = list((results / "toy").glob("*/rows.jsonl"))
        assert rows and all(json.loads(line)["status"] == "ok" for p in rows for line in p.read_text().splitlines())
    assert json.loads((tmp_path / "host" / "platforms.json").read_text())["cpu"]["status"] == "ran"
    assert not (cwd / "results").exists()


def test_default_out_is_kit_results_dir_else_results_host(monkeypatch, tmp_path):
    import bench.cli
    import host.cli

    monkeypatch.setenv("KIT_HOST_NAME", "box.example.org")
    monkeypatch.delenv("KIT_RESULTS_DIR", raising=False)
    assert default_out() == Path("results") / "box"
    monkeypatch.setenv("KIT_RESULTS_DIR", str(tmp_path))
    assert default_out() == tmp_path
    assert bench.cli.default_out is host.cli.default_out is default_out  # one rule, not two alike


def test_the_child_environment_imports_this_kit_from_anywhere_without_the_cuda_simulator(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")
    monkeypatch.delenv("KIT_ALLOW_CUDASIM", raising=False)
    env = child_env({"KIT_PARENT_PID": "7"})
    assert env["PYTHONPATH"].split(os.pathsep) == [str(ROOT), "/elsewhere"]
    assert env["PYTHONUNBUFFERED"] == "1" and env["KIT_PARENT_PID"] == "7" and "NUMBA_ENABLE_CUDASIM" not in env
    r = subprocess.run(
        [sys.executable, "-c", "import bench; print(bench.__file__)"], capture_output=True, text=True, cwd=tmp_path, env=env
    )
    assert Path(r.stdout.strip()).resolve() == (ROOT / "bench" / "__init__.py").resolve(), r.stderr
    monkeypatch.setenv("KIT_ALLOW_CUDASIM", "1")
    assert child_env()["NUMBA_ENABLE_CUDASIM"] == "1"


def test_one_builder_of_a_child_environment():
    """The scheduler's cell processes, the host's native matrix and the noise probe all start
    their children with bench.core.child.child_env: no other module writes one."""
    builders = [
        p.relative_to(ROOT)
        for d in ("bench", "host")
        for p in (ROOT / d).rglob("*.py")
        if '"PYTHONUNBUFFERED"' in p.read_text() and p != ROOT / "bench" / "core" / "child.py"
    ]
    assert builders == []
    import bench.run.schedule
    import host.plan

    assert host.plan.child_env is bench.run.schedule.child_env is child_env


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    return names | {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}


def test_orchestrate_py_is_an_entry_point_holding_no_command():
    tree = ast.parse((ROOT / "orchestrate.py").read_text())
    defined = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda))]
    assert defined == [] and _imports(ROOT / "orchestrate.py") == {"host.cli"}
    import host.cli
    import orchestrate

    assert orchestrate.app is host.cli.app
    assert not any("orchestrate" in m for p in (ROOT / "host").rglob("*.py") for m in _imports(p))  # no arrow up


def test_every_command_line_fails_through_one_fail():
    import bench.cli
    import host.cli
    import host.docker_cli
    from bench.core.cli_style import fail

    assert bench.cli.fail is host.cli.fail is host.docker_cli.fail is fail
    for path in [ROOT / "bench" / "cli.py", *(ROOT / "host").glob("*.py")]:
        defs = {n.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.FunctionDef)}
        assert not {"fail", "_fail", "default_out"} & defs, path


def test_a_kit_error_from_a_command_is_its_one_line_and_status(tmp_path):
    """`fail`: a usage error exits 2, a failed run 1, each one `error:` line."""
    from bench.core.cli_style import fail

    runner = CliRunner()
    import typer

    app = typer.Typer()

    @app.command()
    def go(kind: str) -> None:
        fail(UsageError("bad\x1b[2J value") if kind == "usage" else KitError("it broke") if kind == "run" else "plain")

    for kind, code in (("usage", 2), ("run", 1), ("plain", 1)):
        r = runner.invoke(app, [kind])
        assert r.exit_code == code and r.stderr.startswith("error: ") and "\x1b" not in r.stderr, r.stderr
