"""numba-cuda variant "seed" (seed 000's own Numba CUDA setup): the one kernel it adds.

The seed ran the forward on the GPU and the dense layers' backprop on the CPU, copying the
dense layers' inputs back every step (its src/model_cuda_numba.py: dlogits, the hidden
activations and the flattened pool2 output) and the updated dense weights to the GPU. Here
the forward is kernel variant 2's k_forward (v2_fast.py; no labels: conv, pool, fc1, fc2 ->
act rows and logits); k_dense_inputs packs each sample's pool2 output and fc1 activations out
of the act rows into two contiguous arrays, so each comes back in one copy straight into the
CPU Workspace of numba_cpu_cnn (p2 (n,400), h1 (n,128); logits (n,10) are already contiguous).

Run: through the numba-cuda backend (bench/studies/mnist_cnn/backends/numba_cuda_seed.py);
tested under NUMBA_ENABLE_CUDASIM=1 by tests/test_seed_variants.py against numba-cpu's seed
variant.
"""
from __future__ import annotations

from bench.studies.mnist_cnn.kernels.numba_cuda.net import A_P2, D1, N_P2, cuda, jit

ROW = N_P2 + D1  # 528 floats of a sample's act row: p2 (400) then h (128), contiguous there
TPB = 256


@jit
def k_dense_inputs(act, m, f_out, h_out):
    """f_out[n] = act[n, p2], h_out[n] = act[n, h] for n < m; one thread per float, grid-stride."""
    for i in range(cuda.grid(1), m * ROW, cuda.gridsize(1)):
        n = i // ROW
        j = i - n * ROW
        if j < N_P2:
            f_out[n, j] = act[n, A_P2 + j]
        else:
            h_out[n, j - N_P2] = act[n, A_P2 + j]


def blocks(n: int, max_blocks: int | None) -> int:
    nb = max(1, (n * ROW + TPB - 1) // TPB)
    return max(1, min(nb, max_blocks)) if max_blocks else nb
