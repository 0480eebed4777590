"""numba-cuda kernel variant 8, "uconv": variant 7 with both convolution kernels indexing with
unsigned integers.

k8_conv_fwd is variant 4's k4_conv_fwd (net.conv_fwd_kernel over v4_tiled.conv_fwd_sample4) and
k8_conv_bwd is variant 6's k6_conv_bwd, line for line the same loops, sums in the same order and
the same launch shapes and shared arrays, but every index and offset is np.uint64 (thread, sample,
loop counters, the site() divisions), so numba adds no negative-index wraparound to a load and
divides without Python's floor-division fix-up (see v7_unsigned for why signed indices cost).
Three changes beside the types: the patch offsets of conv1's argmaxes (o1s) and the argmax rows
and columns of the pooled conv2 gradients (ay, ax) are stored unsigned (uint16, uint32: the same
sizes), the forward has no unused one-float p2s array, and the dp1 gather tests a pooled row
py = Y//2 - 1 + dpy in range as py + 1 in 1..5 (no value is ever negative, so none wraps, also
in the simulator, which computes with NumPy's uint64).

PTX for compute capability 9.0 that numba-cuda 0.30.4 gives without a GPU (2026-11-27,
`python -m lab.numba_ptx --kernels conv`, lab/results/numba_cuda_unsigned-H100/ptx-conv-cc90.txt),
static counts; "FMA blocks": only the basic blocks that hold the multiply-adds:

  kernel       instructions  FMAs  64-bit adds  selects  per FMA  FMA blocks per FMA
  k4_conv_fwd         1,164    68          352      125     17.1                 7.4
  k8_conv_fwd           655    68          135       63      9.6                 2.9
  k6_conv_bwd         3,361    86        1,008      355     39.1                 9.4
  k8_conv_bwd         2,322    86          508      184     27.0                 3.5

No float64 instruction in either. Most selects left are numba's range loops (a trip count and
its countdown, signed inside numba). 2,023 of k8_conv_bwd's 2,322 instructions lie outside its
FMA blocks: the block's setup and closing atomics, the once-a-sample loads (the image through x's
run-time strides, p1, the argmax offsets), the dp1 gather's site tests and the loop control.
PTX is not SASS and static counts are not executed ones: a GPU run says what this is worth.

On an H100 (2026-11-27, lab/results/numba_cuda_uconv-H100/, `python3 -m lab.check_numba_cuda
--variants unsigned,uconv`): 200 steps as one CUDA graph, 95.8 us a step [95.7-96.2], 5,343,718
samples/s, against variant 7's 132.0 [131.8-132.3] in the same process (1.38x). The mnist-cnn cell
`graph` runs it: 4,878,825 and 4,923,216 samples/s on real MNIST (10 epochs, batch 512, 3 repeats
each) beside variant 7's 3,662,053 on the same machine; 4,958,457 since the graph copies each
epoch's order itself (lab/results/numba_cuda_stage-H100/).
"""

from __future__ import annotations

import numpy as np

from bench.studies.mnist_cnn.kernels.numba_cuda.net import (
    A_P1,
    A_P2,
    AM_1,
    AM_2,
    C1,
    C2,
    N_C2WB,
    N_P1,
    N_P2,
    O_C1W,
    O_C2W,
    TPB,
    cuda,
    jit,
    named_kernel,
    pool_pick,
    site,
)
from bench.studies.mnist_cnn.kernels.numba_cuda.v4_tiled import SH_ACC2H
from bench.studies.mnist_cnn.kernels.numba_cuda.v6_sparse import SH_ACC1, SITES_H0, W1_PARTS, store_masked
from bench.studies.mnist_cnn.kernels.numba_cuda.v7_unsigned import UnsignedNet

U = np.uint64  # every constant mixed with an unsigned index is cast: numba types uint64 op int64 as float64


@jit(device=True)
def patch16u(buf, b, row):
    """v4_tiled.patch16 with unit column step, unsigned: buf[b + r*row + c], row by row."""
    r1 = b + row
    r2 = r1 + row
    r3 = r2 + row
    c1, c2, c3 = U(1), U(2), U(3)
    return (
        buf[b], buf[b + c1], buf[b + c2], buf[b + c3],
        buf[r1], buf[r1 + c1], buf[r1 + c2], buf[r1 + c3],
        buf[r2], buf[r2 + c1], buf[r2 + c2], buf[r2 + c3],
        buf[r3], buf[r3 + c1], buf[r3 + c2], buf[r3 + c3],
    )  # fmt: skip


@jit(device=True)
def taps9u(w, wb):
    """The 9 taps of a 3x3 kernel stored at w[wb:wb + 9], unsigned offsets."""
    return (
        w[wb], w[wb + U(1)], w[wb + U(2)], w[wb + U(3)], w[wb + U(4)],
        w[wb + U(5)], w[wb + U(6)], w[wb + U(7)], w[wb + U(8)],
    )  # fmt: skip


@jit(device=True)
def conv2x2u(buf, b, row, w, wb):
    """v4_tiled.conv2x2 (unit column step) with unsigned offsets: the 2x2 outputs of a 3x3 kernel
    over the 4x4 patch at b, each summed over its 9 taps in tap order."""
    x00, x01, x02, x03, x10, x11, x12, x13, x20, x21, x22, x23, x30, x31, x32, x33 = patch16u(buf, b, row)
    w0, w1, w2, w3, w4, w5, w6, w7, w8 = taps9u(w, wb)
    return (
        w0 * x00 + w1 * x01 + w2 * x02 + w3 * x10 + w4 * x11 + w5 * x12 + w6 * x20 + w7 * x21 + w8 * x22,
        w0 * x01 + w1 * x02 + w2 * x03 + w3 * x11 + w4 * x12 + w5 * x13 + w6 * x21 + w7 * x22 + w8 * x23,
        w0 * x10 + w1 * x11 + w2 * x12 + w3 * x20 + w4 * x21 + w5 * x22 + w6 * x30 + w7 * x31 + w8 * x32,
        w0 * x11 + w1 * x12 + w2 * x13 + w3 * x21 + w4 * x22 + w5 * x23 + w6 * x31 + w7 * x32 + w8 * x33,
    )


@jit(device=True)
def load_image_u(n, t, x, xs):
    """Sample n's 28x28 image into xs (784,) shared (net.load_image, unsigned). No sync."""
    for i in range(t, U(784), U(TPB)):
        xs[i] = x[n, U(0), i // U(28), i % U(28)]


@jit(device=True)
def conv_fwd_sample8(n, t, xs, w1s, w2s, p1s, act, am):
    """v4_tiled.conv_fwd_sample4 with unsigned indices: p1s and the act/am rows of sample n."""
    for i in range(t, U(N_P1), U(TPB)):
        c, py, px = site(i, U(169), U(13))
        b = U(56) * py + U(2) * px
        x00, x01, x02, x03, x10, x11, x12, x13, x20, x21, x22, x23, x30, x31, x32, x33 = patch16u(xs, b, U(28))
        w0, w1, w2, w3, w4, w5, w6, w7, w8 = taps9u(w1s, c * U(9))
        bias = w1s[U(72) + c]
        s0 = bias + w0 * x00 + w1 * x01 + w2 * x02 + w3 * x10 + w4 * x11 + w5 * x12 + w6 * x20 + w7 * x21 + w8 * x22
        s1 = bias + w0 * x01 + w1 * x02 + w2 * x03 + w3 * x11 + w4 * x12 + w5 * x13 + w6 * x21 + w7 * x22 + w8 * x23
        s2 = bias + w0 * x10 + w1 * x11 + w2 * x12 + w3 * x20 + w4 * x21 + w5 * x22 + w6 * x30 + w7 * x31 + w8 * x32
        s3 = bias + w0 * x11 + w1 * x12 + w2 * x13 + w3 * x21 + w4 * x22 + w5 * x23 + w6 * x31 + w7 * x32 + w8 * x33
        best, arg = pool_pick(s0, s1, s2, s3)  # ReLU then pool, first maximum wins
        p1s[i] = best
        act[n, U(A_P1) + i] = best
        am[n, U(AM_1) + i] = arg
    cuda.syncthreads()

    for i in range(t, U(N_P2), U(TPB)):
        co, py, px = site(i, U(25), U(5))
        s0 = s1 = s2 = s3 = w2s[U(1152) + co]
        for ci in range(U(C1)):
            b = ci * U(169) + U(26) * py + U(2) * px
            u0, u1, u2, u3 = conv2x2u(p1s, b, U(13), w2s, co * U(72) + ci * U(9))
            s0 += u0
            s1 += u1
            s2 += u2
            s3 += u3
        best, arg = pool_pick(s0, s1, s2, s3)
        act[n, U(A_P2) + i] = best
        am[n, U(AM_2) + i] = arg
    cuda.syncthreads()


def _k8_conv_fwd(x, m, S, act, am):
    """net.conv_fwd_kernel over conv_fwd_sample8: a block per sample (grid-stride)."""
    xs = cuda.shared.array(784, np.float32)
    w1s = cuda.shared.array(80, np.float32)
    w2s = cuda.shared.array(N_C2WB, np.float32)
    p1s = cuda.shared.array(N_P1, np.float32)
    t = U(cuda.threadIdx.x)
    for i in range(t, U(80), U(TPB)):
        w1s[i] = S[U(0), U(O_C1W) + i]
    for i in range(t, U(N_C2WB), U(TPB)):
        w2s[i] = S[U(0), U(O_C2W) + i]
    rows = U(m)
    n = U(cuda.blockIdx.x)
    while n < rows:
        cuda.syncthreads()  # weights loaded / the previous sample's readers are done
        load_image_u(n, t, x, xs)
        cuda.syncthreads()
        conv_fwd_sample8(n, t, xs, w1s, w2s, p1s, act, am)
        n += U(cuda.gridDim.x)


def _k8_conv_bwd(x, m, S, act, am, dp2):
    """v6_sparse's k6_conv_bwd (its docstring has the design) with unsigned indices."""
    xs = cuda.shared.array(784, np.float32)
    w2s = cuda.shared.array(1152, np.float32)
    p1s = cuda.shared.array(N_P1, np.float32)
    g1s = cuda.shared.array(N_P1, np.float32)
    o1s = cuda.shared.array(N_P1, np.uint16)  # xs offset of each pool1 argmax's 3x3 patch
    g2s = cuda.shared.array(N_P2, np.float32)  # the pooled conv2 gradients (already ReLU-masked)
    ay = cuda.shared.array(N_P2, np.uint32)  # row and column of each one's argmax in the 11x11 map
    ax = cuda.shared.array(N_P2, np.uint32)
    acc2 = cuda.shared.array(SH_ACC2H, np.float32)  # conv2 weight/bias sums, one per half
    acc1 = cuda.shared.array(SH_ACC1, np.float32)  # conv1 weight/bias sums, one row per part
    zero = np.float32(0.0)
    t = U(cuda.threadIdx.x)
    for i in range(t, U(SH_ACC2H), U(TPB)):
        acc2[i] = zero
    for i in range(t, U(SH_ACC1), U(TPB)):
        acc1[i] = zero
    for i in range(t, U(1152), U(TPB)):
        w2s[i] = S[U(0), U(O_C2W) + i]
    co_t = t // U(16)  # conv2 dW: thread (co, ci, h)
    ci_t = (t // U(2)) % U(C1)
    h_t = t % U(2)
    c_t = t // U(W1_PARTS)  # conv1 dW: thread (channel, part)
    part_t = t - c_t * U(W1_PARTS)
    rows = U(m)
    n = U(cuda.blockIdx.x)
    while n < rows:
        cuda.syncthreads()  # the previous sample's readers are done
        load_image_u(n, t, x, xs)
        for i in range(t, U(N_P1), U(TPB)):  # p1 and each pool1 argmax's patch offset
            p1s[i] = act[n, U(A_P1) + i]
            a = U(am[n, U(AM_1) + i])
            c, py, px = site(i, U(169), U(13))
            o1s[i] = (U(2) * py + a // U(2)) * U(28) + U(2) * px + a % U(2)
        for k in range(t, U(N_P2), U(TPB)):
            g2s[k] = dp2[n, k]
            a = U(am[n, U(AM_2) + k])
            co, py, px = site(k, U(25), U(5))
            ay[k] = U(2) * py + a // U(2)
            ax[k] = U(2) * px + a % U(2)
        cuda.syncthreads()

        # conv2 dW: thread (co, ci, h) over the pooled sites of its half, each a 3x3 p1 patch
        a00 = a01 = a02 = a10 = a11 = a12 = a20 = a21 = a22 = zero
        for q in range(h_t * U(SITES_H0), U(SITES_H0) + h_t * U(25 - SITES_H0)):
            k = co_t * U(25) + q
            g = g2s[k]
            if g != zero:
                b = ci_t * U(169) + U(ay[k]) * U(13) + U(ax[k])
                a00 += g * p1s[b]
                a01 += g * p1s[b + U(1)]
                a02 += g * p1s[b + U(2)]
                a10 += g * p1s[b + U(13)]
                a11 += g * p1s[b + U(14)]
                a12 += g * p1s[b + U(15)]
                a20 += g * p1s[b + U(26)]
                a21 += g * p1s[b + U(27)]
                a22 += g * p1s[b + U(28)]
        wb = h_t * U(N_C2WB) + co_t * U(72) + ci_t * U(9)
        acc2[wb] += a00
        acc2[wb + U(1)] += a01
        acc2[wb + U(2)] += a02
        acc2[wb + U(3)] += a10
        acc2[wb + U(4)] += a11
        acc2[wb + U(5)] += a12
        acc2[wb + U(6)] += a20
        acc2[wb + U(7)] += a21
        acc2[wb + U(8)] += a22
        if t < U(C2):  # conv2 bias: the sum of the 25 pooled gradients of channel t
            s = zero
            for q in range(U(25)):
                s += g2s[t * U(25) + q]
            acc2[U(1152) + t] += s

        # dp1: thread (Y, X) of the 13x13 map gathers, for all 8 input channels, the pooled sites
        # (py, px) of every conv2 channel whose argmax (y, x) has (Y, X) in its 3x3 patch: py is
        # Y//2 - 1 or Y//2 (likewise px), kept here as py1 = py + 1 so that none is negative
        if t < U(169):
            yy = t // U(13)
            xx = t - yy * U(13)
            s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = zero
            for co in range(U(C2)):
                for dpy in range(U(2)):
                    py1 = yy // U(2) + dpy
                    if py1 >= U(1) and py1 <= U(5):
                        for dpx in range(U(2)):
                            px1 = xx // U(2) + dpx
                            if px1 >= U(1) and px1 <= U(5):
                                k = co * U(25) + py1 * U(5) + px1 - U(6)
                                g = g2s[k]
                                y = U(ay[k])
                                x_ = U(ax[k])
                                if g != zero and y <= yy and yy <= y + U(2) and x_ <= xx and xx <= x_ + U(2):
                                    wb = co * U(72) + (yy - y) * U(3) + (xx - x_)
                                    s0 += g * w2s[wb]
                                    s1 += g * w2s[wb + U(9)]
                                    s2 += g * w2s[wb + U(18)]
                                    s3 += g * w2s[wb + U(27)]
                                    s4 += g * w2s[wb + U(36)]
                                    s5 += g * w2s[wb + U(45)]
                                    s6 += g * w2s[wb + U(54)]
                                    s7 += g * w2s[wb + U(63)]
            # pool1's ReLU mask: a position whose pooled value is 0 passes no gradient
            store_masked(g1s, p1s, t, s0)
            store_masked(g1s, p1s, t + U(169), s1)
            store_masked(g1s, p1s, t + U(338), s2)
            store_masked(g1s, p1s, t + U(507), s3)
            store_masked(g1s, p1s, t + U(676), s4)
            store_masked(g1s, p1s, t + U(845), s5)
            store_masked(g1s, p1s, t + U(1014), s6)
            store_masked(g1s, p1s, t + U(1183), s7)
        cuda.syncthreads()

        # conv1 dW: thread (channel c, part) over the channel's pooled positions part, part +
        # W1_PARTS, ...: all 9 taps and the bias from one load of the gradient and the patch offset
        if c_t < U(C1):
            b0 = b1 = b2 = b3 = b4 = b5 = b6 = b7 = b8 = bb = zero
            for q in range(part_t, U(169), U(W1_PARTS)):
                i = c_t * U(169) + q
                g = g1s[i]
                if g != zero:
                    o = U(o1s[i])
                    bb += g
                    b0 += g * xs[o]
                    b1 += g * xs[o + U(1)]
                    b2 += g * xs[o + U(2)]
                    b3 += g * xs[o + U(28)]
                    b4 += g * xs[o + U(29)]
                    b5 += g * xs[o + U(30)]
                    b6 += g * xs[o + U(56)]
                    b7 += g * xs[o + U(57)]
                    b8 += g * xs[o + U(58)]
            r = part_t * U(80) + c_t * U(9)
            acc1[r] += b0
            acc1[r + U(1)] += b1
            acc1[r + U(2)] += b2
            acc1[r + U(3)] += b3
            acc1[r + U(4)] += b4
            acc1[r + U(5)] += b5
            acc1[r + U(6)] += b6
            acc1[r + U(7)] += b7
            acc1[r + U(8)] += b8
            acc1[part_t * U(80) + U(72) + c_t] += bb
        n += U(cuda.gridDim.x)
    cuda.syncthreads()
    G = S[U(1)]
    for i in range(t, U(N_C2WB), U(TPB)):  # conv2 weight + bias are contiguous in G
        cuda.atomic.add(G, U(O_C2W) + i, acc2[i] + acc2[U(N_C2WB) + i])
    if t < U(80):  # conv1 weight + bias likewise
        s = zero
        for p in range(U(W1_PARTS)):
            s += acc1[p * U(80) + t]
        cuda.atomic.add(G, U(O_C1W) + t, s)


k8_conv_fwd = named_kernel(_k8_conv_fwd, "k8_conv_fwd")
k8_conv_bwd = named_kernel(_k8_conv_bwd, "k8_conv_bwd")


class UnsignedConvNet(UnsignedNet):
    """Variant 8: variant 7 with k8_conv_fwd and k8_conv_bwd."""

    VARIANT = "uconv"
    CONV = (k8_conv_fwd, k8_conv_bwd)
