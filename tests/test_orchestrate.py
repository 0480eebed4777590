"""orchestrate.py's own bad-input paths: one line, exit 2, nothing written."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def orch(*args, cwd):
    return subprocess.run([sys.executable, str(ROOT / "orchestrate.py"), *args], capture_output=True, text=True, cwd=cwd)


@pytest.mark.parametrize(
    "args,message",
    [
        (["run", "gpu"], "unknown platform 'gpu'"),
        (["run", "cpu", "--runtime", "native", "--data-dir", "/nonexistent/kit"], "does not exist"),
        (["all", "--runtime", "native", "--data-dir", "/nonexistent/kit"], "does not exist"),
        (["report", "/nonexistent/results"], "does not exist"),
        (["data", "fetch", "mnist", "--data-dir", "/dev/null/x"], "error"),
        # unwritable where even root's os.access says yes (issue 57 item 5: a 60-line traceback)
        (["all", "--runtime", "native", "--out", "/proc/cnn-bench-unwritable"], "cannot write results to"),
        (["run", "cpu", "--runtime", "native", "--out", "/proc/cnn-bench-unwritable"], "cannot write results to"),
    ],
)
def test_bad_input_one_line(tmp_path, args, message):
    r = orch(*args, cwd=tmp_path)
    assert r.returncode != 0
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert lines and message in lines[-1] and len(lines) <= 1 + (args[0] == "run"), r.stderr
    assert not list(tmp_path.rglob("rows.jsonl"))
