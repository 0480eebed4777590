"""numba-cuda kernel variant 6, "sparse": variant 5 with a conv backward that visits only the
conv2 outputs that carry a gradient, and no shared-memory atomics. Max pooling passes each pooled
gradient to one position of its 2x2 window (the argmax), so 3 of every 4 conv2 output gradients
are zero (and the 11th row and column, read by no window, are zero too): variants 2-5 run the
dense transposed convolution over a zero-haloed 16x15x15 dc2, 1936 positions of which at most
400 hold a value. Here, per sample, only the 400 pooled gradients (g2s) and each one's argmax
(row ay, column ax of the 11x11 map) are loaded:

  conv2 dW:  thread (co, ci, half of co's 25 pooled sites): per site with g != 0, 9 FMA with the
             3x3 p1 patch at its argmax (was: 100 positions x 9 FMA, 3 of 4 of them zero)
  dp1:       thread (Y, X) of the 13x13 map, all 8 input channels in registers: of each conv2
             channel's 4 pooled sites whose argmax can reach (Y, X), those that do add
             g * w2[co, :, Y - y, X - x] (was: per 2x2 block, 16 channels x a 4x4 dc2 patch x 9
             taps); stored masked by pool1's ReLU (p1 > 0)
  conv1 dW:  thread (channel, one of 32 parts of its 169 pooled positions): the 9 taps and the
             bias from one load of the gradient and of the argmax patch's offset (variants 2-5:
             a thread per (weight, third), a gradient and an offset load per multiply-add)

The weight-gradient sums stay in shared memory over a block's samples (one row per conv1 part,
one half per conv2 site half), added up and atomically into G at the block's end. Keeping them
in registers across samples instead was measured slower (168.2 against 165.4 us a graph step,
H100): at the 64-register cap the 20 live sums spill.

A first version scattered dp1 with shared-memory float atomics (9 a task, 3,200 tasks a sample):
ncu's source page (lab/ncu_source.py) put a third of the kernel's instructions on those 9 lines
(a float add to shared memory is a compare-and-swap loop on this GPU) and a quarter on conv1's
weight gradient; both are gone here. The other five launches are variant 5's.

Measured on one NVIDIA H100 80GB HBM3, numba 0.68.0, numba-cuda 0.30.4, NumPy 2.3.5
(lab/results/numba_cuda_sparse-H100/, `python3 -m lab.check_numba_cuda --variants splitk,sparse`):
200 train_steps as one CUDA graph, 5 replays, us per step: 165.4 [164.8..165.4], 3,096,107
samples/s, against variant 5's 192.0 [191.9..192.2] in the same process. The mnist-cnn cell
`graph` on real MNIST (10 epochs, batch 512, 3 repeats): 2,918,713 samples/s [2,902,507-2,933,259]
(variant 5: 2,465,622); 2,980,650 [2,959,360-2,987,394] once the epoch's order went in by
torch's copy (2026-11-27, another H100; lab/results/numba_cuda_sparse-H100/). Where the step
goes now (ncu, locked clocks, 1.24x the graph's time in all): k4_conv_fwd 41.3 us, k3_fc1
27.7, k3_head 12.5, k3_dense_bwd 52.3, k6_conv_bwd 76.1 (was 110), SGD 4.2. Of k6_conv_bwd's instructions, the dp1 gather's loop is 48 %, and 15 % of its stall
samples wait at the barrier after it (87 threads have no position to gather).
"""

from __future__ import annotations

import numpy as np

from bench.studies.mnist_cnn.kernels.numba_cuda.net import (
    AM_2,
    C1,
    C2,
    N_C2WB,
    N_P1,
    N_P2,
    O_C1W,
    O_C2W,
    TPB,
    conv_bwd_load,
    cuda,
    jit,
    named_kernel,
    site,
)
from bench.studies.mnist_cnn.kernels.numba_cuda.v4_tiled import SH_ACC2H, k4_conv_fwd
from bench.studies.mnist_cnn.kernels.numba_cuda.v5_splitk import SplitKNet

SITES_H0 = 13  # conv2 dW: the first half of a channel's 25 pooled sites (the second has 12)
W1_PARTS = 32  # conv1 dW: threads per channel (8 channels x 32 = the block's 256 threads)
SH_ACC1 = W1_PARTS * 80  # conv1 weight (72) + bias (8) sums, one row per part


@jit(device=True)
def store_masked(g1s, p1s, i, v):
    """g1s[i] = v where pool1 passed a positive value at i, else 0 (ReLU1's mask)."""
    if p1s[i] > np.float32(0.0):
        g1s[i] = v
    else:
        g1s[i] = np.float32(0.0)


def _k6_conv_bwd(x, m, S, act, am, dp2):
    xs = cuda.shared.array(784, np.float32)
    w2s = cuda.shared.array(1152, np.float32)
    p1s = cuda.shared.array(N_P1, np.float32)
    g1s = cuda.shared.array(N_P1, np.float32)
    o1s = cuda.shared.array(N_P1, np.int16)  # xs offset of each pool1 argmax's 3x3 patch
    g2s = cuda.shared.array(N_P2, np.float32)  # the pooled conv2 gradients (already ReLU-masked)
    ay = cuda.shared.array(N_P2, np.int32)  # row and column of each one's argmax in the 11x11 map
    ax = cuda.shared.array(N_P2, np.int32)
    acc2 = cuda.shared.array(SH_ACC2H, np.float32)  # conv2 weight/bias sums, one per half
    acc1 = cuda.shared.array(SH_ACC1, np.float32)  # conv1 weight/bias sums, one row per part
    zero = np.float32(0.0)
    t = cuda.threadIdx.x
    for i in range(t, SH_ACC2H, TPB):
        acc2[i] = zero
    for i in range(t, SH_ACC1, TPB):
        acc1[i] = zero
    for i in range(t, 1152, TPB):
        w2s[i] = S[0, O_C2W + i]
    co_t = t // 16  # conv2 dW: thread (co, ci, h)
    ci_t = (t // 2) % C1
    h_t = t % 2
    c_t = t // W1_PARTS  # conv1 dW: thread (channel, part)
    part_t = t - c_t * W1_PARTS
    n = cuda.blockIdx.x
    while n < m:
        cuda.syncthreads()  # the previous sample's readers are done
        conv_bwd_load(n, t, x, act, am, xs, p1s, o1s)  # the image, p1 and each pool1 argmax's patch offset
        for k in range(t, N_P2, TPB):
            g2s[k] = dp2[n, k]
            a = int(am[n, AM_2 + k])
            co, py, px = site(k, 25, 5)
            ay[k] = 2 * py + a // 2
            ax[k] = 2 * px + a % 2
        cuda.syncthreads()

        # conv2 dW: thread (co, ci, h) over the pooled sites of its half, each a 3x3 p1 patch
        a00 = a01 = a02 = a10 = a11 = a12 = a20 = a21 = a22 = zero
        for q in range(h_t * SITES_H0, SITES_H0 + h_t * (25 - SITES_H0)):
            k = co_t * 25 + q
            g = g2s[k]
            if g != zero:
                b = ci_t * 169 + ay[k] * 13 + ax[k]
                a00 += g * p1s[b]
                a01 += g * p1s[b + 1]
                a02 += g * p1s[b + 2]
                a10 += g * p1s[b + 13]
                a11 += g * p1s[b + 14]
                a12 += g * p1s[b + 15]
                a20 += g * p1s[b + 26]
                a21 += g * p1s[b + 27]
                a22 += g * p1s[b + 28]
        wb = h_t * N_C2WB + co_t * 72 + ci_t * 9
        acc2[wb] += a00
        acc2[wb + 1] += a01
        acc2[wb + 2] += a02
        acc2[wb + 3] += a10
        acc2[wb + 4] += a11
        acc2[wb + 5] += a12
        acc2[wb + 6] += a20
        acc2[wb + 7] += a21
        acc2[wb + 8] += a22
        if t < C2:  # conv2 bias: the sum of the 25 pooled gradients of channel t
            s = zero
            for q in range(25):
                s += g2s[t * 25 + q]
            acc2[1152 + t] += s

        # dp1: thread (Y, X) of the 13x13 map gathers, for all 8 input channels at once, the
        # pooled sites of every conv2 channel whose argmax (y, x) has (Y, X) in its 3x3 patch:
        # y in Y-2..Y means pooled row Y//2 - 1 or Y//2 (likewise columns), 4 sites a channel
        if t < 169:
            yy = t // 13
            xx = t - yy * 13
            s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = zero
            for co in range(C2):
                for dpy in range(2):
                    py = yy // 2 - 1 + dpy
                    if py >= 0 and py < 5:
                        for dpx in range(2):
                            px = xx // 2 - 1 + dpx
                            if px >= 0 and px < 5:
                                k = co * 25 + py * 5 + px
                                g = g2s[k]
                                ky = yy - ay[k]
                                kx = xx - ax[k]
                                if g != zero and ky >= 0 and ky <= 2 and kx >= 0 and kx <= 2:
                                    wb = co * 72 + ky * 3 + kx
                                    s0 += g * w2s[wb]
                                    s1 += g * w2s[wb + 9]
                                    s2 += g * w2s[wb + 18]
                                    s3 += g * w2s[wb + 27]
                                    s4 += g * w2s[wb + 36]
                                    s5 += g * w2s[wb + 45]
                                    s6 += g * w2s[wb + 54]
                                    s7 += g * w2s[wb + 63]
            # pool1's ReLU mask: a position whose pooled value is 0 passes no gradient
            store_masked(g1s, p1s, t, s0)
            store_masked(g1s, p1s, t + 169, s1)
            store_masked(g1s, p1s, t + 338, s2)
            store_masked(g1s, p1s, t + 507, s3)
            store_masked(g1s, p1s, t + 676, s4)
            store_masked(g1s, p1s, t + 845, s5)
            store_masked(g1s, p1s, t + 1014, s6)
            store_masked(g1s, p1s, t + 1183, s7)
        cuda.syncthreads()

        # conv1 dW: thread (channel c, part) over the channel's pooled positions part, part +
        # W1_PARTS, ...: all 9 taps and the bias from one load of the gradient and the patch offset
        if c_t < C1:
            b0 = b1 = b2 = b3 = b4 = b5 = b6 = b7 = b8 = bb = zero
            for q in range(part_t, 169, W1_PARTS):
                i = c_t * 169 + q
                g = g1s[i]
                if g != zero:
                    o = o1s[i]
                    bb += g
                    b0 += g * xs[o]
                    b1 += g * xs[o + 1]
                    b2 += g * xs[o + 2]
                    b3 += g * xs[o + 28]
                    b4 += g * xs[o + 29]
                    b5 += g * xs[o + 30]
                    b6 += g * xs[o + 56]
                    b7 += g * xs[o + 57]
                    b8 += g * xs[o + 58]
            r = part_t * 80 + c_t * 9
            acc1[r] += b0
            acc1[r + 1] += b1
            acc1[r + 2] += b2
            acc1[r + 3] += b3
            acc1[r + 4] += b4
            acc1[r + 5] += b5
            acc1[r + 6] += b6
            acc1[r + 7] += b7
            acc1[r + 8] += b8
            acc1[part_t * 80 + 72 + c_t] += bb
        n += cuda.gridDim.x
    cuda.syncthreads()
    G = S[1]
    for i in range(t, N_C2WB, TPB):  # conv2 weight + bias are contiguous in G
        cuda.atomic.add(G, O_C2W + i, acc2[i] + acc2[N_C2WB + i])
    if t < 80:  # conv1 weight + bias likewise
        s = zero
        for p in range(W1_PARTS):
            s += acc1[p * 80 + t]
        cuda.atomic.add(G, O_C1W + t, s)


k6_conv_bwd = named_kernel(_k6_conv_bwd, "k6_conv_bwd")


class SparseNet(SplitKNet):
    """Variant 6: variant 5 with k6_conv_bwd."""

    VARIANT = "sparse"
    CONV = (k4_conv_fwd, k6_conv_bwd)
