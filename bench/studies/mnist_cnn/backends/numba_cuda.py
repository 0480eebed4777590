"""numba-cuda: the seed CNN with hand-written numba.cuda kernels, everything on the GPU.

The kernels live in bench.studies.mnist_cnn.kernels.numba_cuda (DeviceNet, variant "fast": 3 launches
per step). Its trainer (numba_cuda_trainer.py) keeps the normalised training set on the device, gathers each
batch there from the epoch's order (one more launch), and times phases with CUDA events
at the launch boundaries (no host sync inside the epoch; the loss sum is read once).

Before anything is timed, warmup() checks this GPU's results against torch on the CPU
for the same weights and batch (logits, loss, all 8 gradients, 1e-4 relative) and
refuses to run if they disagree; the largest error goes into every row.

Variant "seed" (seed 000's own setup: forward on the GPU, dense-layer backprop and SGD on the
CPU, the copies that implies every step) is its own trainer: backends/numba_cuda_seed.py.
"""

from __future__ import annotations


def available() -> str | None:
    import os

    try:
        from bench.studies.mnist_cnn.kernels import numba_cuda as kernels
    except Exception as err:  # noqa: BLE001
        return f"cannot import numba-cuda kernels: {type(err).__name__}: {err}"
    if kernels.simulated() and os.environ.get("KIT_ALLOW_CUDASIM") != "1":
        return "numba.cuda is the CPU simulator (NUMBA_ENABLE_CUDASIM=1), not a GPU; set KIT_ALLOW_CUDASIM=1 to run it anyway"
    return kernels.available()


def create(cell, data):
    """The seed's setup (variant seed: GPU forward, dense backprop on the CPU) or the all-GPU trainer."""
    if data.cfg.variant == "seed":
        from bench.studies.mnist_cnn.backends.numba_cuda_seed import NumbaCudaSeedTrainer

        return NumbaCudaSeedTrainer(data.cfg, data.params, data.dataset)
    from bench.studies.mnist_cnn.backends.numba_cuda_trainer import NumbaCudaTrainer

    return NumbaCudaTrainer(data.cfg, data.params, data.dataset)
