"""The command lines follow click's conventions: every command's --help names what an option
takes as TEXT / PATH / INTEGER / FLOAT / [a | b] (never a Python type), has an example, and
wraps a choice list between choices; `--version`; shell completion; exit 1 when the work
fails, 2 for a usage error."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

import bench
import orchestrate
from bench.cli import app as bench_app

ROOT = Path(__file__).resolve().parent.parent
# what typer prints when nobody tells it otherwise: <list[str]>, <bool>, <path>, {dirs}...
PYTHON_TYPE = re.compile(r"<(?:list\[[^\]]*\]|bool|str|int|float|path|Path|datetime|tuple\[[^\]]*\])>|\{[a-z_]+\}")


def command_paths(app: typer.Typer) -> list[list[str]]:
    """Every command of APP as its argv (groups too: `data` and `data fetch`)."""
    root = typer.main.get_command(app)
    out: list[list[str]] = [[]]

    def walk(cmd, path):
        for name, sub in getattr(cmd, "commands", {}).items():
            out.append([*path, name])
            walk(sub, [*path, name])

    walk(root, [])
    return out


ORCH = command_paths(orchestrate.app)
BENCH = command_paths(bench_app)


def test_every_command_is_listed():
    names = {" ".join(p) for p in ORCH}
    for cmd in ("run", "all", "reference", "report", "compare", "verify", "export", "doctor", "base", "build", "data fetch"):
        assert cmd in names, names
    top = CliRunner().invoke(orchestrate.app, ["--help"], env={"COLUMNS": "100"}).stdout
    for cmd in (p[0] for p in ORCH if len(p) == 1):
        assert re.search(rf"│ {re.escape(cmd)} ", top), (cmd, top)


@pytest.mark.parametrize("app,path", [(orchestrate.app, p) for p in ORCH] + [(bench_app, p) for p in BENCH])
@pytest.mark.parametrize("columns", ["80", "120"])
def test_help_names_no_python_type_and_has_an_example(app, path, columns):
    r = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": columns})
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert not PYTHON_TYPE.search(out), (path, PYTHON_TYPE.search(out), out)
    assert "Usage:" in out
    if app is orchestrate.app:
        assert "Example: python orchestrate.py" in out, (path, out)


def type_cell(out: str, option: str) -> str:
    """The text of OPTION's type column in rich's help table, its wrapped lines joined by spaces."""
    lines = out.splitlines()
    i = next(k for k, line in enumerate(lines) if re.match(rf"│ {re.escape(option)} ", line))
    col = lines[i].index("[", lines[i].index(option))
    parts = []
    for line in lines[i:]:
        seg = re.split(r"\s{2,}|│", line[col:])[0].strip()
        if not seg or (parts and re.match(r"│ +-", line)):
            break
        parts.append(seg)
    return " ".join(parts)


@pytest.mark.parametrize("columns", [60, 80, 100, 120])
def test_choices_wrap_between_choices_never_inside_one(columns):
    out = CliRunner().invoke(orchestrate.app, ["run", "--help"], env={"COLUMNS": str(columns)}).stdout
    for option, choices in [
        ("--schedule", ["sequential", "interleaved", "per-device"]),
        ("--profile", ["auto", "smoke", "default", "full", "answer"]),
        ("--runtime", ["auto", "native", "docker"]),
    ]:
        text = type_cell(out, option)
        assert text.startswith("[") and text.endswith("]"), (option, text, out)
        assert [c.strip() for c in text[1:-1].split("|")] == choices, (option, text, out)


def test_version_names_the_kit_and_its_commit():
    r = subprocess.run([sys.executable, "orchestrate.py", "--version"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert re.fullmatch(
        rf"cnn-bench {re.escape(bench.__version__)} \((git [0-9a-f]{{12}}( with uncommitted changes)?|no git checkout|git not runnable)\)\n",
        r.stdout,
    ), r.stdout


def test_shell_completion_is_offered():
    out = CliRunner().invoke(orchestrate.app, ["--help"], env={"COLUMNS": "120"}).stdout
    assert "--install-completion" in out and "--show-completion" in out
    r = subprocess.run([sys.executable, "orchestrate.py", "--show-completion", "bash"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0 and "complete" in r.stdout, r.stdout + r.stderr


def orch(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "orchestrate.py"), *args], capture_output=True, text=True, cwd=cwd)


def one_error_line(r: subprocess.CompletedProcess) -> str:
    err = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(err) == 1 and err[0].startswith("error: ") and "Traceback" not in r.stderr, r.stderr
    return err[0]


def test_a_runtime_failure_exits_1(tmp_path):
    """The command line is fine, the work fails: nothing answers at the mirror (a closed port)."""
    r = orch("data", "fetch", "mnist", "--data-dir", str(tmp_path), "--mirror", "http://127.0.0.1:9/", "--allow-http")
    assert r.returncode == 1, r.stderr
    assert "no mirror reachable" in one_error_line(r)
    (tmp_path / "empty").mkdir()
    r = orch("report", str(tmp_path / "empty"), "--out", str(tmp_path / "r"))  # a dir that holds no results
    assert r.returncode == 1 and "no results under" in one_error_line(r)


@pytest.mark.parametrize(
    "args,message",
    [
        (["run", "--no-such-option"], "No such option"),  # click's own usage error
        (["run", "cpu", "--schedule", "sideways"], "sideways"),
        (["data", "fetch", "imagenet"], "unknown dataset 'imagenet' to fetch"),
        (["data", "fetch", "mnist", "--mirror", "http://127.0.0.1:9/"], "plain http"),
        (["run", "gpu", "--runtime", "native"], "unknown platform 'gpu'"),
        (["run", "cpu", "--runtime", "native", "--repeats", "0"], "--repeats must be"),
        (["run", "cpu", "--runtime", "native", "--study", "imagenet"], "unknown study 'imagenet'"),
        (["report", "/nonexistent/results"], "does not exist"),
        (["compare", "/nonexistent/a", "/nonexistent/b"], "does not exist"),
        (["compare", ".", ".", "--fail-on-regression", "5"], "ambiguous"),
    ],
)
def test_a_usage_error_exits_2(tmp_path, args, message):
    r = orch(*args, cwd=tmp_path)
    assert r.returncode == 2, (args, r.stdout, r.stderr)
    assert message in r.stderr, (args, r.stderr)
    if args[1:2] != ["--no-such-option"] and "sideways" not in args:  # the kit's own: one line
        one_error_line(r)
