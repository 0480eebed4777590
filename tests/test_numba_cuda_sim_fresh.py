"""tests/test_numba_cuda_sim.py in a fresh interpreter, where it would otherwise not run.

numba picks the CUDA simulator once, when numba.cuda is first imported. In the full suite
(`pytest --all`, what .ci/run runs) another test module imports numba.cuda in GPU mode first, so
on a machine without a GPU the simulator file skips itself. This test runs that file alone in
a subprocess so that its checks of every kernel variant against torch run in CI anyway. Where
the file could run in this process (a GPU host, or the file run on its own), this one skips."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SIM_FILE = ROOT / "tests" / "test_numba_cuda_sim.py"


@pytest.mark.slow
def test_simulator_checks_run_in_a_fresh_process():
    pytest.importorskip("numba")
    if "numba.cuda" not in sys.modules or os.environ.get("KIT_SIM_FRESH") == "1":
        pytest.skip("numba.cuda was not imported before: tests/test_numba_cuda_sim.py runs in this process")
    from bench.studies.mnist_cnn.kernels import numba_cuda as K

    if K.available() is None:
        pytest.skip("numba.cuda runs here (a GPU or the simulator): tests/test_numba_cuda_sim.py runs in this process")
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "KIT_SIM_FRESH": "1"}
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "--all", "-p", "no:cacheprovider", str(SIM_FILE)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=2700,  # the file took 690 s on a 2-core VM beside other tests (8 variants at 2 rows, 25-145 s each)
    )
    tail = (r.stdout + r.stderr)[-3000:]
    assert r.returncode == 0, tail
    assert " passed" in r.stdout and " skipped" not in r.stdout.splitlines()[-1], tail
