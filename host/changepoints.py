"""Change points in a run history: E-Divisive means (Matteson and James 2014), as MongoDB's
performance CI runs it, from its own package (`signal-processing-algorithms`,
requirements/changepoint.in; installed by `bash scripts/setup.sh`).

`find(values)` runs `energy_statistics.e_divisive` on one series (a configuration's per-run
medians in time order) with a permutation test at PVALUE over PERMUTATIONS permutations, seeded,
so the same history always gives the same change points. The detector sees the series in log
space, so a 10 % step weighs the same at 50 img/s as at 50,000.

What it finds on synthetic series (lab/changepoint_rates.py, seeded, 500 series each, length 30,
log-normal noise of the given relative sd; a step planted after point 15):

    noise sd   no change: series with a false alarm   10 % step: found within 2 points
    2 %        4.8 %                                  100 %
    5 %        5.0 %                                  94.4 %

(docs/METHODS.md "Speed checks and history" keeps the same table; `python -m lab.changepoint_rates`
prints it again.)
"""

from __future__ import annotations

import math

from bench.core.errors import KitError

PVALUE = 0.05
PERMUTATIONS = 100
SEED = 1234
MIN_POINTS = 5  # shorter series are not tested: a permutation test on 4 points says nothing


def available() -> str | None:
    """None when the detector can run here, else why not (one line)."""
    try:
        from signal_processing_algorithms.energy_statistics import energy_statistics  # noqa: F401
    except ImportError:
        return "change points need signal-processing-algorithms (bash scripts/setup.sh installs requirements/changepoint.txt)"
    return None


def find(values: list[float], pvalue: float = PVALUE, permutations: int = PERMUTATIONS) -> list[int]:
    """Indices i where a new segment starts (values[i] is the first point after a change), sorted.
    [] for fewer than MIN_POINTS values. KitError when the detector is not installed."""
    if len(values) < MIN_POINTS:
        return []
    why = available()
    if why:
        raise KitError(why)
    import numpy as np
    from signal_processing_algorithms.determinism import deterministic_numpy_random
    from signal_processing_algorithms.energy_statistics import energy_statistics

    logs = np.array([math.log(v) for v in values], dtype=np.float64)
    with deterministic_numpy_random(SEED):
        found = energy_statistics.e_divisive(logs, pvalue=pvalue, permutations=permutations)
    return sorted(int(i) for i in found)


__all__ = ["MIN_POINTS", "PERMUTATIONS", "PVALUE", "available", "find"]
