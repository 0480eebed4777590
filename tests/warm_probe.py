"""An entry point for tests/test_warm_start.py: what a cell forked warm (bench/run/warm.py) sees."""

from __future__ import annotations

import json
import multiprocessing
import os
import sys


def main() -> None:
    line = sys.stdin.readline().strip()  # the scheduler's side of the pipe speaks first, as the gate does
    print("probe-stderr", file=sys.stderr)
    state = {
        "argv": sys.argv,
        "got": line,
        "env": os.environ.get("WARM_PROBE"),
        "parent": os.environ.get("KIT_PARENT_PID"),
        "ppid": os.getppid(),
        "start_method": multiprocessing.get_start_method(),
        "torch_loaded": "torch" in sys.modules,
    }
    print(json.dumps(state), flush=True)
    if "--hang" in sys.argv:
        sys.stdin.readline()
    raise SystemExit(int(sys.argv[-1]) if sys.argv[-1].isdigit() else 0)
