"""The environment of a child `python -m bench ...` process, the one builder every caller uses
(a cell process of the scheduler, the host's native matrix, the noise probe)."""

from __future__ import annotations

import os

from bench.core.provenance import KIT_ROOT


def child_env(extra: dict | None = None) -> dict:
    """This process's environment for a child: unbuffered, able to import this very kit from any
    working directory (its root first on PYTHONPATH), without the CUDA simulator unless
    KIT_ALLOW_CUDASIM=1 allows it; EXTRA last."""
    path = os.environ.get("PYTHONPATH", "")
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(KIT_ROOT) + (os.pathsep + path if path else "")}
    if env.get("KIT_ALLOW_CUDASIM") != "1":
        env.pop("NUMBA_ENABLE_CUDASIM", None)
    return {**env, **(extra or {})}
