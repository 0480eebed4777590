"""numba-cuda kernel variant 5, "splitk": variant 4 with fc1 split FC1_KSPLIT = 4 ways over its
400 inputs (256 blocks instead of 64, a chain of 4 chunks instead of 13), summed atomically
into hpre; k3_head adds the bias, applies the ReLU and zeroes hpre for the next step (both
kernels take the split as an argument: v3_split.k3_fc1, v3_split.k3_head). The mnist-cnn cell
variant `graph` runs this variant, each epoch (118 gathers + steps) replayed as one CUDA graph.

Measured by `bash scripts/gpu_run.sh numba` at f5174de on one NVIDIA H100 80GB HBM3, numba
0.68.0, numba-cuda 0.30.4, NumPy 2.3.5 (results/reference/H100-80GB-HBM3-numba-graph/): 200
train_steps captured as one CUDA graph, 5 replays, us per step between events around a replay:
198.3 [198.1..198.3], 2,582,505 samples/s (eager, launched one by one: 437 us/step, host-bound).

Where the 198 us go (ncu, steady state: launches 61-72 of a check, at ncu's locked clocks, so
1.24x the graph's time in all): k4_conv_fwd 41 us, k3_fc1 27.5, k3_head 11.6, k3_dense_bwd 52,
k4_conv_bwd 110, SGD 4. The conv kernels look issue-bound (SM throughput 62-66 %, 38-44 %
occupancy at 64 registers and 4 blocks an SM); k3_dense_bwd runs at 64 % SM throughput on GEMMs
whose multiply-adds need a few us (which instructions fill it, the operand loads' index
arithmetic or the atomics, was not measured). Floors: 0.689 GFLOP a step
(torch.utils.flop_counter over the same net at batch 512, matmul/conv only) is 10 us at the
H100's 67 TFLOP/s fp32 datasheet rate; 6-7 graph nodes a step at a few us each make a launch
floor of roughly 15-20 us (an estimate, not measured). 198 us is 19x the FLOP floor; the next
cuts to try are conv_bwd's instruction count and dense_bwd's, with a source-level ncu profile
(SourceCounters) first.
"""

from __future__ import annotations

from bench.studies.mnist_cnn.kernels.numba_cuda.v4_tiled import TiledNet

FC1_KSPLIT = 4  # fc1's 13 input chunks shared by 4 blocks per tile (4 x the blocks, a third the chain)


class SplitKNet(TiledNet):
    """Variant 5: variant 4 with fc1 split FC1_KSPLIT ways."""

    VARIANT = "splitk"
    KSPLIT = FC1_KSPLIT
