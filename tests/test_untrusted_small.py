"""The smaller untrusted-input cases, each in a form other than the one first reported: a
crashed cell's reason is one line whatever its log or its scheduler said; GPU ids are compared
as numbers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.core.cell import Cell, check_devices
from bench.core.errors import KitError
from bench.core.rows import read_rows

ROOT = Path(__file__).resolve().parent.parent
RICH_LOG = (
    "epoch 1 done\n"
    "\x1b[31m╭──────────────── Traceback (most recent call last) ────────────────╮\x1b[0m\n"
    "│ /x/trainer.py:88 in step                                           │\n"
    "│ ❱ 88 │   loss.backward()                                             │\n"
    "╰────────────────────────────────────────────────────────────────────╯\n"
    "\x1b[1mRuntimeError:\x1b[0m CUDA error: an illegal memory access was encountered\n"
    "━━━━━━━━━━━━━━━━━━━━━━━━━━━\n"
)


def toy_cell() -> Cell:
    sys.path.insert(0, str(ROOT / "tests"))
    import toy_study  # noqa: F401  (registers the toy study)

    from bench.core.registry import get_study

    return get_study("toy").cell("py", name="toy-py")


def test_a_killed_cells_reason_from_its_log_is_one_line(tmp_path):
    """The issue's form: a crashed cell's reason kept the log's last lines and a box frame.
    Here: a log of a rich traceback cut by a kill (-9), settled by the scheduler."""
    from bench.core.request import Paths
    from bench.run.schedule import settle

    cell = toy_cell()
    d = cell.dir(tmp_path)
    d.mkdir(parents=True)
    (d / "log.txt").write_text("x" * (1 << 20) + "\n" + RICH_LOG)  # a long log: only its tail is read
    status, reason = settle(d, cell, -9, Paths(tmp_path))
    (row,) = read_rows(d / "rows.jsonl")
    assert status == "error" and row["reason"] == reason
    assert reason == "exit code -9: RuntimeError: CUDA error: an illegal memory access was encountered", reason


def test_a_slurm_reason_of_several_lines_is_one_line(tmp_path):
    """Form 2: the scheduler's own words (a node's message over several lines, a frame)."""
    from bench.core.request import Paths
    from bench.run.cell import settle_failure

    cell = toy_cell()
    d = cell.dir(tmp_path)
    d.mkdir(parents=True)
    settle_failure(d, cell, "slurm task 5_0 ended NODE_FAIL:\n" + RICH_LOG + "\n╰──╯\n", Paths(tmp_path))
    reason = read_rows(d / "rows.jsonl")[-1]["reason"]
    assert "\n" not in reason and "╭" not in reason and "\x1b" not in reason
    assert reason.endswith("an illegal memory access was encountered")


@pytest.mark.parametrize("given", ["1,01", "2,002", "0,1,00"])
def test_gpu_ids_are_compared_as_numbers(given):
    """The issue's form: devices=0,00 named GPU 0 twice. Here: 1 and 01, 2 and 002."""
    with pytest.raises(KitError, match="name a GPU twice"):
        check_devices(given)


def test_a_gpu_id_is_written_without_leading_zeros_so_one_gpu_is_one_spec():
    assert check_devices("007,1") == ("7", "1")
    a = Cell("mnist-cnn", "torch-cuda", devices=("07",))
    b = Cell("mnist-cnn", "torch-cuda", devices=("7",))
    assert a.id == b.id


def test_set_devices_with_a_gpu_named_twice_is_one_line_before_any_work(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "KIT_DATA_DIR"}
    r = subprocess.run(
        [sys.executable, "-m", "bench", "matrix", "mnist-cnn", "-p", "cuda", "--profile", "smoke", "--set", "devices=3,03"]
        + ["--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "name a GPU twice (3,03)" in lines[0], r.stderr
    assert not (tmp_path / "out" / "mnist-cnn").exists()
