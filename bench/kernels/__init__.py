"""Hand-written CPU/GPU kernels for the benchmark nets (Numba)."""
