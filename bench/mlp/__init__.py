"""`mlp-scratch` study core (seed 001): a 784-10-10 MLP written from scratch.

    net.py         the network against an `xp` array module (NumPy or CuPy, one code path)
    tuned_cupy.py  the tuned CuPy variant (CUDA graph, cuBLAS with a bias column, one fused kernel)
    runner.py      plain run, op-breakdown run, memory breakdown, convergence (plain dicts out)
    check_gpu.py   `python -m bench.mlp.check_gpu --data DIR --out DIR` on a GPU host

Nothing here imports CuPy at import time; a CPU-only host never needs it.
"""
from bench.mlp.net import BackendUnavailable, MLPError, MLPInputError

__all__ = ["BackendUnavailable", "MLPError", "MLPInputError"]
