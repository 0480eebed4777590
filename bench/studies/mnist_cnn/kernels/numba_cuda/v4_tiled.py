"""numba-cuda kernel variant 4, "tiled": variant 3 with register-blocked convolutions. Every
thread keeps a 4x4 input patch (or a rolling 3-wide window) in registers and reuses each loaded
value for several outputs, so the per-sample blocks issue fewer shared-memory loads per
multiply-add:

  conv1+pool:  one pooled output = 2x2 conv outputs from a 4x4 image patch: 16 + 9 loads per 36 FMA
  conv2+pool:  the same per input channel: 8 x (16 + 9) loads per 288 FMA (variant 2: 360)
  conv2 dW:    a thread per (co, ci, half of the rows), 9 sums, rolling windows: 4 loads per 9 FMA
  dp1:         a thread per (ci, 2x2 output block), 4x4 dconv2 patch per co: 25 loads per 36 FMA

k4_conv_fwd and k4_conv_bwd replace variant 3's conv kernels (the same per-sample loops,
net.conv_fwd_kernel and net.conv_bwd_kernel); the dense kernels are variant 3's.

Measured by `bash scripts/gpu_run.sh numba` at f5174de on one NVIDIA H100 80GB HBM3, numba
0.68.0, numba-cuda 0.30.4, NumPy 2.3.5 (results/reference/H100-80GB-HBM3-numba-graph/): 200
train_steps captured as one CUDA graph, 5 replays, us per step between events around a replay:
209.3 [209.1..209.3], 2,446,352 samples/s (eager, launched one by one: 299 us/step, host-bound).
"""

from __future__ import annotations

import numpy as np

from bench.studies.mnist_cnn.kernels.numba_cuda.net import (
    A_P2,
    AM_2,
    C1,
    C2,
    DC_C,
    DC_W,
    N_C2WB,
    N_P1,
    N_P2,
    Q1,
    SH_DC2,
    TPB,
    conv1_wgrad_clear,
    conv_bwd_kernel,
    conv_fwd_kernel,
    cuda,
    jit,
    pool_pick,
    site,
    store_p1,
)
from bench.studies.mnist_cnn.kernels.numba_cuda.v3_split import SplitNet

DC4 = SH_DC2 + 32  # dc2 plus a zero tail: a 4x4 patch at the map's last block reads one row past it
SH_ACC2H = 2 * N_C2WB


@jit(device=True)
def patch16(buf, b, row, col):
    """The 4x4 patch of buf whose element (r, c) is buf[b + r*row + c*col], row by row."""
    r1 = b + row
    r2 = b + 2 * row
    r3 = b + 3 * row
    return (
        buf[b], buf[b + col], buf[b + 2 * col], buf[b + 3 * col],
        buf[r1], buf[r1 + col], buf[r1 + 2 * col], buf[r1 + 3 * col],
        buf[r2], buf[r2 + col], buf[r2 + 2 * col], buf[r2 + 3 * col],
        buf[r3], buf[r3 + col], buf[r3 + 2 * col], buf[r3 + 3 * col],
    )  # fmt: skip


@jit(device=True)
def taps9(w, wb):
    """The 9 taps of a 3x3 kernel stored at w[wb:wb + 9]."""
    return w[wb], w[wb + 1], w[wb + 2], w[wb + 3], w[wb + 4], w[wb + 5], w[wb + 6], w[wb + 7], w[wb + 8]


@jit(device=True)
def conv2x2(buf, b, row, col, w, wb):
    """The 2x2 outputs (0,0), (0,1), (1,0), (1,1) of a 3x3 kernel (taps at w[wb:]) over the 4x4
    patch patch16(buf, b, row, col), each summed over its 9 taps in tap order."""
    x00, x01, x02, x03, x10, x11, x12, x13, x20, x21, x22, x23, x30, x31, x32, x33 = patch16(buf, b, row, col)
    w0, w1, w2, w3, w4, w5, w6, w7, w8 = taps9(w, wb)
    return (
        w0 * x00 + w1 * x01 + w2 * x02 + w3 * x10 + w4 * x11 + w5 * x12 + w6 * x20 + w7 * x21 + w8 * x22,
        w0 * x01 + w1 * x02 + w2 * x03 + w3 * x11 + w4 * x12 + w5 * x13 + w6 * x21 + w7 * x22 + w8 * x23,
        w0 * x10 + w1 * x11 + w2 * x12 + w3 * x20 + w4 * x21 + w5 * x22 + w6 * x30 + w7 * x31 + w8 * x32,
        w0 * x11 + w1 * x12 + w2 * x13 + w3 * x21 + w4 * x22 + w5 * x23 + w6 * x31 + w7 * x32 + w8 * x33,
    )


@jit(device=True)
def conv_fwd_sample4(n, t, xs, w1s, w2s, p1s, p2s, act, am):
    """v2_fast.conv_fwd_sample with 4x4 register patches (see above); writes p1s and the act/am
    rows (p2 stays in registers: p2s is not used)."""
    for i in range(t, N_P1, TPB):
        c, py, px = site(i, 169, 13)
        b = 2 * py * 28 + 2 * px
        x00, x01, x02, x03, x10, x11, x12, x13, x20, x21, x22, x23, x30, x31, x32, x33 = patch16(xs, b, 28, 1)
        w0, w1, w2, w3, w4, w5, w6, w7, w8 = taps9(w1s, c * 9)
        bias = w1s[72 + c]
        s0 = (bias + w0 * x00 + w1 * x01 + w2 * x02 + w3 * x10 + w4 * x11 + w5 * x12
              + w6 * x20 + w7 * x21 + w8 * x22)
        s1 = (bias + w0 * x01 + w1 * x02 + w2 * x03 + w3 * x11 + w4 * x12 + w5 * x13
              + w6 * x21 + w7 * x22 + w8 * x23)
        s2 = (bias + w0 * x10 + w1 * x11 + w2 * x12 + w3 * x20 + w4 * x21 + w5 * x22
              + w6 * x30 + w7 * x31 + w8 * x32)
        s3 = (bias + w0 * x11 + w1 * x12 + w2 * x13 + w3 * x21 + w4 * x22 + w5 * x23
              + w6 * x31 + w7 * x32 + w8 * x33)
        best, arg = pool_pick(s0, s1, s2, s3)  # ReLU then pool, first maximum wins (as variant 2)
        store_p1(n, i, best, arg, p1s, act, am)
    cuda.syncthreads()

    for i in range(t, N_P2, TPB):
        co, py, px = site(i, 25, 5)
        s0 = s1 = s2 = s3 = w2s[1152 + co]
        for ci in range(C1):
            b = ci * 169 + 2 * py * 13 + 2 * px
            u0, u1, u2, u3 = conv2x2(p1s, b, 13, 1, w2s, co * 72 + ci * 9)
            s0 += u0
            s1 += u1
            s2 += u2
            s3 += u3
        best, arg = pool_pick(s0, s1, s2, s3)
        act[n, A_P2 + i] = best
        am[n, AM_2 + i] = arg
    cuda.syncthreads()


@jit(device=True)
def conv_bwd_sample4(n, t, am, xs, w2s, p1s, g1s, dc2, o1s, g2s, acc2h, acc1):
    """v2_fast.conv_bwd_sample, register-blocked (see above). acc2h: (2 * N_C2WB,) one conv2
    weight/bias sum per half of the rows; the caller adds the halves."""
    zero = np.float32(0.0)
    # conv2 dW: thread (co, ci, h) sums rows 5h..5h+4 of the 10x10 outputs pool2 reads
    co = t // 16
    ci = (t // 2) % C1
    h = t % 2
    a00 = a01 = a02 = a10 = a11 = a12 = a20 = a21 = a22 = zero
    for j in range(5):
        yy = 5 * h + j
        dr = co * DC_C + (yy + 2) * DC_W + 2
        r0 = ci * 169 + yy * 13
        r1 = r0 + 13
        r2 = r0 + 26
        x00, x01 = p1s[r0], p1s[r0 + 1]
        x10, x11 = p1s[r1], p1s[r1 + 1]
        x20, x21 = p1s[r2], p1s[r2 + 1]
        for xx in range(10):
            d = dc2[dr + xx]
            x02 = p1s[r0 + xx + 2]
            x12 = p1s[r1 + xx + 2]
            x22 = p1s[r2 + xx + 2]
            a00 += d * x00
            a01 += d * x01
            a02 += d * x02
            a10 += d * x10
            a11 += d * x11
            a12 += d * x12
            a20 += d * x20
            a21 += d * x21
            a22 += d * x22
            x00, x01 = x01, x02
            x10, x11 = x11, x12
            x20, x21 = x21, x22
    wb = h * N_C2WB + co * 72 + ci * 9
    acc2h[wb] += a00
    acc2h[wb + 1] += a01
    acc2h[wb + 2] += a02
    acc2h[wb + 3] += a10
    acc2h[wb + 4] += a11
    acc2h[wb + 5] += a12
    acc2h[wb + 6] += a20
    acc2h[wb + 7] += a21
    acc2h[wb + 8] += a22
    if t < C2:  # conv2 bias: the sum of the 25 pooled gradients of channel t
        s = zero
        for q in range(25):
            s += g2s[t * 25 + q]
        acc2h[1152 + t] += s

    # dp1: thread (ci, 2x2 block at (2by, 2bx)) of the 13x13 map (7x7 blocks, the last ones
    # half outside); out(dy,dx) = sum_co sum_ky,kx dc2[co, y0+dy+2-ky, x0+dx+2-kx] w2[co,ci,ky,kx]
    for task in range(t, C1 * 49, TPB):
        ci = task // 49
        bb = task - ci * 49
        by = bb // 7
        bx = bb - by * 7
        y0 = 2 * by
        x0 = 2 * bx
        s0 = s1 = s2 = s3 = zero
        for co in range(C2):
            b = co * DC_C + y0 * DC_W + x0
            # out(dy,dx) reads patch row dy+2-ky, column dx+2-kx: a convolution over the 4x4
            # patch turned by 180 degrees (rows and columns counted back from its far corner)
            u0, u1, u2, u3 = conv2x2(dc2, b + 3 * DC_W + 3, -DC_W, -1, w2s, co * 72 + ci * 9)
            s0 += u3
            s1 += u2
            s2 += u1
            s3 += u0
        pb = ci * 169 + y0 * 13 + x0
        if p1s[pb] <= zero:  # pool1/ReLU1 mask
            s0 = zero
        g1s[pb] = s0
        if x0 + 1 < Q1:
            if p1s[pb + 1] <= zero:
                s1 = zero
            g1s[pb + 1] = s1
        if y0 + 1 < Q1:
            if p1s[pb + 13] <= zero:
                s2 = zero
            g1s[pb + 13] = s2
            if x0 + 1 < Q1:
                if p1s[pb + 14] <= zero:
                    s3 = zero
                g1s[pb + 14] = s3
    cuda.syncthreads()
    conv1_wgrad_clear(n, t, am, xs, g1s, dc2, o1s, acc1)

k4_conv_fwd = conv_fwd_kernel("k4_conv_fwd", conv_fwd_sample4, 1)
k4_conv_bwd = conv_bwd_kernel("k4_conv_bwd", conv_bwd_sample4, DC4, SH_ACC2H, True)


class TiledNet(SplitNet):
    """Variant 4: variant 3 with k4_conv_fwd and k4_conv_bwd."""

    VARIANT = "tiled"
    CONV = (k4_conv_fwd, k4_conv_bwd)
