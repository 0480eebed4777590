"""Tolerances, defined once: per dtype, a relative bound on the norm-wise error
||a - b|| / ||b|| plus an absolute floor for near-zero references."""

import numpy as np

RTOL = {np.float32: 1e-4, np.float64: 1e-10}
ATOL = {np.float32: 1e-6, np.float64: 1e-12}
CURVE_ATOL = 1e-3  # loss curves after 20 steps, absolute, per step


def rel_err(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def assert_close(name: str, got, want, dtype=np.float32) -> float:
    """Norm-wise relative check; returns the error so callers can report the largest."""
    err = rel_err(got, want)
    absdiff = float(np.max(np.abs(np.asarray(got, np.float64) - np.asarray(want, np.float64)))) if np.size(want) else 0.0
    assert err <= RTOL[dtype] or absdiff <= ATOL[dtype], (
        f"{name}: relative error {err:.3e} > {RTOL[dtype]:.0e} (max abs diff {absdiff:.3e})"
    )
    return err
