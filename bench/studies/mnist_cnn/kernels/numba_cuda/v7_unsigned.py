"""numba-cuda kernel variant 7, "unsigned": variant 6 with the dense layers' tile GEMM indexing
shared memory with unsigned integers.

numba indexes an array with a signed integer as Python does: a negative index counts from the
end, so every load carries a compare-and-select (or a shift, mask and add) that wraps it. An
unsigned index cannot be negative, and the wraparound is left out. In variants 3-6 the tile
GEMM's inner loop (v3_split.mac_chunk: 4 multiply-adds a row from 5 shared loads) computes its
offsets as signed int64, and NVVM keeps the wraparound of each: the loop compiles to 183 PTX
instructions per 4 unrolled rows (16 FMAs, 20 shared loads, 68 64-bit adds, 16 selects, ...).
Here (mac_chunk_unsigned) the offsets are uint64, stepped by TS a row: 99 instructions per 8
rows (32 FMAs, 40 shared loads), a third as many per FMA. Counted on the PTX for compute
capability 9.0 that numba-cuda 0.30.4 gives without a GPU: `python -m lab.numba_ptx` (2026-11-27).

The source page of ncu (lab/results/numba_cuda_sparse-H100/ncu-source-dense.txt) puts 92-94 %
of k3_fc1's stall samples and instructions on its tile GEMM, and 90 % of k3_dense_bwd's on its
two: about 65 of variant 6's 165 us a step. fc1 and the dense backward are variant 3's kernels
over this GEMM (v3_split.fc1_kernel, dense_bwd_kernel); the other four launches are variant 6's.

On an H100 (2026-11-27, lab/results/numba_cuda_unsigned-H100/, `python3 -m lab.check_numba_cuda
--variants sparse,unsigned`): 200 steps as one CUDA graph, 132.4 us a step [132.3-132.6],
3,866,322 samples/s, against variant 6's 165.2 [165.1-165.3] in the same process (1.248x). The
mnist-cnn cell `graph` runs it: 3,615,841 and 3,618,657 samples/s on real MNIST (10 epochs, batch
512, 3 repeats each) beside variant 6's 2,929,473 on the same machine.
"""

from __future__ import annotations

import numpy as np

from bench.studies.mnist_cnn.kernels.numba_cuda.net import TILE, TS, jit
from bench.studies.mnist_cnn.kernels.numba_cuda.v3_split import dense_bwd_kernel, fc1_kernel, tile_gemm
from bench.studies.mnist_cnn.kernels.numba_cuda.v6_sparse import SparseNet

U = np.uint64
ROW = U(TS)  # a padded shared row


@jit(device=True)
def mac_chunk_unsigned(As, Bs, t, acc0, acc1, acc2, acc3):
    """v3_split.mac_chunk with unsigned offsets: a (As, column ty) and b (Bs, column tx) start
    in row 0 and step a row at a time; no offset is ever negative, so no load wraps."""
    a = U(t // 32)
    b = U(t % 32)
    for _ in range(TILE):
        bv = Bs[b]
        acc0 += As[a] * bv
        acc1 += As[a + U(8)] * bv
        acc2 += As[a + U(16)] * bv
        acc3 += As[a + U(24)] * bv
        a += ROW
        b += ROW
    return acc0, acc1, acc2, acc3


gemm_tile_unsigned = tile_gemm(mac_chunk_unsigned)
k7_fc1 = fc1_kernel("k7_fc1", gemm_tile_unsigned)
k7_dense_bwd = dense_bwd_kernel("k7_dense_bwd", gemm_tile_unsigned)


class UnsignedNet(SparseNet):
    """Variant 7: variant 6 with k7_fc1 and k7_dense_bwd."""

    VARIANT = "unsigned"
    DENSE = (k7_fc1, k7_dense_bwd)
