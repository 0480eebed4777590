"""lab/numba_ptx.py compiles numba-cuda kernels to PTX without a GPU (NVVM only) and counts what
they spend per multiply-add: variant 7's unsigned offsets must leave out the signed-index
wraparound variant 6's tile GEMM loop carries, and variant 8's the wraparound of variant 6's
convolutions."""

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


def test_the_unsigned_convolutions_spend_far_fewer_instructions_an_fma(tmp_path):
    r = run("--kernels", "conv", "--out", str(tmp_path / "ptx.json"))
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads((tmp_path / "ptx.json").read_text())
    assert got["set"] == "conv"
    k = got["kernels"]
    # measured at cc 9.0, numba-cuda 0.30.4: per FMA 0.56x (forward) and 0.69x (backward) over the
    # whole kernel, 0.39x and 0.37x in the blocks that hold the FMAs
    for signed, unsigned in (("k4_conv_fwd", "k8_conv_fwd"), ("k6_conv_bwd", "k8_conv_bwd")):
        a, b = k[signed], k[unsigned]
        assert b["fma"] == a["fma"] > 0, (signed, unsigned)  # the same multiply-adds
        assert b["f64"] == 0, f"{unsigned}: float64 instructions (an index typed uint64 op int64?)"
        assert b["per_fma"] < 0.8 * a["per_fma"], (signed, a, unsigned, b)
        assert b["fma_blocks"]["per_fma"] < 0.5 * a["fma_blocks"]["per_fma"], (signed, a, unsigned, b)
        assert b["add64"] < 0.6 * a["add64"] and b["selects"] < 0.6 * a["selects"], (signed, a, unsigned, b)
    assert "k8_conv_bwd / k6_conv_bwd" in r.stdout


def test_a_bad_kernel_set_is_one_line_and_exit_2(tmp_path):
    r = run("--kernels", "all", "--out", str(tmp_path / "ptx.json"))
    assert r.returncode == 2 and r.stderr.strip() == "error: --kernels 'all': dense or conv"
    assert not list(tmp_path.iterdir())


def test_a_bad_compute_capability_is_one_line_and_exit_2(tmp_path):
    r = run("--cc", "nine", "--out", str(tmp_path / "ptx.json"))
    assert r.returncode == 2 and r.stderr.strip() == "error: --cc 'nine': MAJOR.MINOR, e.g. 9.0"
    assert not list(tmp_path.iterdir())
