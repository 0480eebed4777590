"""Every README command runs: the quick-start pair by shape (and the main job for real),
the reproduction commands against real MNIST where it is available."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.core.rows import read_rows

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"```bash\n(.*?)```", README, re.S)


def test_quick_start_has_exactly_two_commands_and_ci_runs_the_test_one():
    main_cmd, test_cmd = BLOCKS[0].strip(), BLOCKS[1].strip()
    assert main_cmd == "bash scripts/setup.sh && .venv/bin/python orchestrate.py all"
    assert test_cmd == "bash scripts/setup.sh && .venv/bin/python -m pytest -q"
    # CI runs the same command with the slow, Docker and GPU tests turned on (tests/conftest.py)
    assert test_cmd + " --all" in (ROOT / ".ci" / "run").read_text().replace(" --durations=15", "")


@pytest.mark.slow
def test_main_command_on_the_embedded_default(tmp_path):
    """`orchestrate.py all` as the README runs it, in a clean copy of the repo with no data."""
    work = tmp_path / "clone"
    top = {".venv", "results", "data", ".git", ".whl"}
    shutil.copytree(
        ROOT, work, ignore=lambda d, names: [n for n in names if n == "__pycache__" or (Path(d) == ROOT and n in top)]
    )
    env = {k: v for k, v in __import__("os").environ.items() if k != "KIT_DATA_DIR"}
    cmd = BLOCKS[0].strip().split("&& ", 1)[1].replace(".venv/bin/python", sys.executable)
    r = subprocess.run(cmd, shell=True, cwd=work, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "the studies use their embedded defaults" in r.stdout and "runtime: " in r.stdout  # containers or native
    report = work / "results" / "report"
    for name in ("REPORT.md", "table1.csv", "epoch_time.png", "throughput.png", "test_accuracy.png", "avg_throughput.png"):
        assert (report / name).is_file(), name
    md = (report / "REPORT.md").read_text()
    assert "numba-cpu resident" in md and "torch-cpu seed" in md and "torch-cpu resident" in md
    assert "platform cuda" in md and "platform mps" in md  # skipped platforms, with reasons
    assert "## mlp-scratch (seed 001)" in md and (report / "mlp_convergence.png").is_file()
    assert "## cifar-opt (seed 002)" in md and "NOT CIFAR-10" in md and (report / "cifar-opt_fig4_latency.png").is_file()
    rows = [r for p in (work / "results").rglob("rows.jsonl") for r in read_rows(p) if r["study"] == "mnist-cnn"]
    # 3 configurations x 3 repeats (the default) x 10 epochs
    assert len(rows) == 90 and all(r["status"] == "ok" and r["dataset"] == "digits-embedded" for r in rows)
    assert sorted({r["repeat"] for r in rows}) == [0, 1, 2]


@pytest.mark.slow
def test_acceptance_numba_cpu_three_epochs_reaches_97_percent_on_real_mnist(real_mnist_dir, tmp_path):
    """The issue's acceptance command: numba-cpu, full backprop, 3 epochs, real MNIST."""
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "matrix",
            "mnist-cnn",
            "--only",
            "backend=numba-cpu",
            "--set",
            "epochs=3",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**__import__("os").environ, "KIT_DATA_DIR": str(real_mnist_dir)},
        timeout=900,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    rows = read_rows(next((tmp_path / "mnist-cnn").iterdir()) / "rows.jsonl")
    assert all(row["dataset"] == "mnist" and row["dataset_real_mnist"] for row in rows)
    assert rows[-1]["test_acc"] >= 0.97, [row["test_acc"] for row in rows]


def test_every_readme_command_exists_with_its_options():
    """Each `.venv/bin/python ...` line of the README parses: the command exists and takes
    the options shown (typer rejects unknown options before doing any work with --help)."""
    import shlex

    lines = [line.split("#")[0].strip() for block in BLOCKS for line in block.splitlines()]
    cmds = [shlex.split(line) for line in lines if line.startswith(".venv/bin/python") and "&&" not in line]
    assert len(cmds) >= 7
    for argv in cmds:
        argv = [sys.executable] + argv[1:]
        if argv[1] == "-m":  # python -m bench CMD ...: check the command and its options
            probe = argv[:4] + ["--help"]
        else:  # orchestrate.py CMD [SUB]: --help on the (sub)command
            probe = argv[:3] + ([argv[3]] if argv[2] == "data" else []) + ["--help"]
        r = subprocess.run(probe, capture_output=True, text=True, cwd=ROOT)
        assert r.returncode == 0, (argv, r.stderr[-500:])
        for opt in [a.split("=")[0] for a in argv if a.startswith("--")]:
            assert opt in r.stdout, f"{' '.join(argv[1:4])}: README uses {opt}, which the command does not take"
