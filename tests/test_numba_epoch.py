"""lab/numba_epoch.py measures the numba-cuda graph cell's epoch on a GPU. Here (no GPU) it must
refuse in one line with exit code 2, under the CUDA simulator (which cannot capture graphs)
and on bad arguments, and leave no output file behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "lab.numba_epoch", "--out", str(tmp_path / "epoch.json"), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_refuses_the_simulator_in_one_line(tmp_path):
    r = run(tmp_path, "--rounds", "1")
    assert r.returncode == 2, r.stderr[-2000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: no CUDA graph here"), r.stderr[-2000:]
    assert not list(tmp_path.iterdir())


def test_bad_rounds(tmp_path):
    r = run(tmp_path, "--rounds", "0")
    assert r.returncode == 2 and r.stderr.strip() == "error: --rounds and --batch must be at least 1"
    assert not list(tmp_path.iterdir())
