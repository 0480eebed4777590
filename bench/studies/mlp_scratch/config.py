"""mlp-scratch's config: defaults as data, units in the comments; the per-platform matrix."""

from __future__ import annotations

from dataclasses import dataclass

VARIANTS = ("numpy", "cupy", "cupy-tuned")
# One cell per platform: its variants run side by side in one process, so Table 3's
# speedups are ratios of medians from one session. The cell's backend names them, '+'-joined.
PLATFORM_BACKEND = {"cpu": "numpy", "cuda": "numpy+cupy+cupy-tuned"}
PROFILE_PARAMS = {
    "smoke": {"iterations": 100, "plain_runs": 2, "breakdown_iterations": 20},  # wiring check
    "default": {},  # the seed's 500 iterations
    "full": {},
}


@dataclass(frozen=True)
class MlpConfig:
    iterations: int = 500  # full-batch gradient-descent steps
    lr: float = 0.1  # learning rate
    dtype: str = "float32"  # float32 | float64
    plain_runs: int = 3  # timed plain runs per variant, interleaved in the cell's process
    breakdown_iterations: int = 100  # iterations of the synced op-breakdown run
    check_steps: int = 5  # steps compared with NumPy before timing
    dataset: str = "auto"  # one of bench.data.DIGIT_DATASETS (the matrix resolves auto)
    dataset_sha256: str = ""  # checksum of the data the cell must see (filled by the matrix)
