"""What the warm start process imports once (bench/run/warm.py): the torch family's libraries and the
kit's cell entry point, timed. Imported only inside that process (multiprocessing's forkserver
preloads it by name); the scheduler never imports it.

Nothing here touches a device or starts a thread: CUDA is initialised in each forked cell, never
in the process it forks from (a CUDA context does not survive a fork).
"""

from __future__ import annotations

import importlib
import os
import time

MODULES = ("torch", "torchvision")  # bench.measure.fixedcost.FAMILY_MODULES["torch"]

T0 = time.time()
try:
    import psutil

    CREATED: float | None = psutil.Process().create_time()
except Exception:  # noqa: BLE001 - no /proc: the cold start is not known
    CREATED = None

LOADED: list[str] = []
FAILED: dict[str, str] = {}
for _name in MODULES:
    try:
        importlib.import_module(_name)
        LOADED.append(_name)
    except Exception as _err:  # noqa: BLE001 - a cell that needs it fails on its own open, with its own reason
        FAILED[_name] = f"{type(_err).__name__}: {_err}"
import bench.cli  # noqa: E402,F401 - the entry point a cell runs
import bench.run.cell  # noqa: E402,F401

READY = time.time()
PID = os.getpid()
# process creation to here: the interpreter, these imports and the kit's own (what a cold cell pays
# before its entry point, for the fixed costs); None where the creation time was not readable
COLD_START_S: float | None = (READY - CREATED) if CREATED is not None else None
IMPORTS_S = READY - T0
