"""Hand-written Numba CUDA kernels: the seed CNN (bench/studies/mnist_cnn/net.py) trained
entirely on the GPU, one file per variant as llm.c keeps dev/cuda/:

  reference.py    the NumPy float64 step every variant is checked against before it is timed
  net.py          the device net the variants share: sizes, parameter and activation layout,
                  common device functions, the per-sample conv kernels, SGD
  device_net.py   DeviceNet, the host side they share (buffers, phases, graph capture, copies)
  v1_naive.py     1 "naive": one thread per output element, 30 launches a step (the baseline)
  v2_fast.py      2 "fast": 3 fused launches a step
  v3_split.py     3 "split": the dense layers as batched 32x32-tile GEMMs, 6 launches a step
  v4_tiled.py     4 "tiled": 3 with register-blocked convolutions
  v5_splitk.py    5 "splitk": 4 with fc1 split 4 ways over its inputs
  v6_sparse.py    6 "sparse": 5 with a conv backward over the pooled gradients only (no dense dc2)
  v7_unsigned.py  7 "unsigned": 6 with the dense tile GEMM's shared loads indexed unsigned (no wraparound)
  v8_uconv.py     8 "uconv": 7 with both convolution kernels indexed unsigned
  seed.py         the one kernel the mnist-cnn cell variant `seed` adds (seed 000's own setup)
  gather.py       the batch gather on the device; graph.py: launches recorded as a CUDA graph

DeviceNet(params, batch, variant) builds a variant's net by its name (VARIANTS). Each variant
file's header has its design and its measured figures.

Partial batches (m < n rows): pass device arrays with m rows; kernels take m and skip the rest,
the loss mean divides by m, as torch does for a short last batch.

Run the GPU check (every variant against the reference, then timed):

    python -m lab.check_numba_cuda --out results/numba_cuda_check.json

Tests (CPU, CUDA simulator): pytest tests/test_numba_cuda_sim.py (sets NUMBA_ENABLE_CUDASIM=1).
NumPy >= 2.5 breaks numba-cuda 0.30.4's import (np.row_stack is gone): pin NumPy < 2.5.
"""

from __future__ import annotations

import numpy as np

from bench.studies.mnist_cnn.kernels.numba_cuda import (
    v1_naive,
    v2_fast,
    v3_split,
    v4_tiled,
    v5_splitk,
    v6_sparse,
    v7_unsigned,
    v8_uconv,
)
from bench.studies.mnist_cnn.kernels.numba_cuda.device_net import DeviceNet as BaseNet
from bench.studies.mnist_cnn.kernels.numba_cuda.device_net import available, device_bytes, simulated
from bench.studies.mnist_cnn.kernels.numba_cuda.net import N_PARAMS, O_F1W
from bench.studies.mnist_cnn.kernels.numba_cuda.reference import reference_sgd, reference_step, rel_err

NETS: dict[str, type[BaseNet]] = {  # variants 1 to 8, in order
    "naive": v1_naive.NaiveNet,
    "fast": v2_fast.FastNet,
    "split": v3_split.SplitNet,
    "tiled": v4_tiled.TiledNet,
    "splitk": v5_splitk.SplitKNet,
    "sparse": v6_sparse.SparseNet,
    "unsigned": v7_unsigned.UnsignedNet,
    "uconv": v8_uconv.UnsignedConvNet,
}
VARIANTS = tuple(NETS)
LAUNCHES_PER_STEP = {
    "naive": v1_naive.LAUNCHES_PER_STEP,
    "fast": v2_fast.LAUNCHES_PER_STEP,
    "split": v3_split.LAUNCHES_PER_STEP,
    "tiled": v3_split.LAUNCHES_PER_STEP,
    "splitk": v3_split.LAUNCHES_PER_STEP,
    "sparse": v3_split.LAUNCHES_PER_STEP,
    "unsigned": v3_split.LAUNCHES_PER_STEP,
    "uconv": v3_split.LAUNCHES_PER_STEP,
}


def DeviceNet(  # noqa: N802  (builds the variant's class; the name callers have always used)
    params: dict[str, np.ndarray], batch: int, variant: str = "fast", *, samples_per_block: int = 1, max_blocks: int | None = None
) -> BaseNet:
    """The seed CNN on one GPU, kernels of `variant` (one of VARIANTS): see device_net.DeviceNet."""
    if variant not in NETS:
        raise ValueError(f"variant must be one of {VARIANTS}, not {variant!r}")
    return NETS[variant](params, batch, samples_per_block=samples_per_block, max_blocks=max_blocks)


__all__ = [
    "LAUNCHES_PER_STEP",
    "N_PARAMS",
    "NETS",
    "O_F1W",
    "VARIANTS",
    "BaseNet",
    "DeviceNet",
    "available",
    "device_bytes",
    "reference_sgd",
    "reference_step",
    "rel_err",
    "simulated",
]
