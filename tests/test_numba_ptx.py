"""lab/numba_ptx.py compiles the dense numba-cuda kernels to PTX without a GPU (NVVM only) and
counts what the tile GEMM's inner loop spends per multiply-add: variant 7's unsigned offsets
must leave out the signed-index wraparound variant 6's loop carries."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}  # the real compiler, not the simulator
    return subprocess.run(
        [sys.executable, "-m", "lab.numba_ptx", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )


def test_the_unsigned_loop_spends_a_third_of_the_instructions_an_fma(tmp_path):
    r = run("--out", str(tmp_path / "ptx.json"))
    assert r.returncode == 0, r.stderr[-3000:]
    k = json.loads((tmp_path / "ptx.json").read_text())["kernels"]
    signed, unsigned = k["k3_fc1"]["gemm_inner_loop"], k["k7_fc1"]["gemm_inner_loop"]
    assert signed["fma"] > 0 and unsigned["fma"] > 0
    assert signed["shared_loads"] == signed["fma"] * 5 // 4  # 5 loads a row of 4 multiply-adds, either way
    assert unsigned["shared_loads"] == unsigned["fma"] * 5 // 4
    assert unsigned["per_fma"] < signed["per_fma"] / 2, (signed, unsigned)
    assert k["k7_dense_bwd"]["instructions"] < k["k3_dense_bwd"]["instructions"]
    assert "k7_fc1" in r.stdout and "an FMA" in r.stdout


def test_a_bad_compute_capability_is_one_line_and_exit_2(tmp_path):
    r = run("--cc", "nine", "--out", str(tmp_path / "ptx.json"))
    assert r.returncode == 2 and r.stderr.strip() == "error: --cc 'nine': MAJOR.MINOR, e.g. 9.0"
    assert not list(tmp_path.iterdir())
