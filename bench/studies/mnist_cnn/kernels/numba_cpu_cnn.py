"""Hand-written Numba CPU kernels: full forward + backward of the seed CNN (bench/studies/mnist_cnn/net.py).

Shapes (n = batch); parameters keep torch's names and layouts (conv weight (oc, ic, ky, kx)):

    x (n,1,28,28) -> conv1 8@3x3 +b, ReLU, maxpool 2 -> p1 (n,8,13*13)  CHW, arg-max a1 uint8
      -> conv2 16@3x3 +b, ReLU, maxpool 2 -> p2 (n,400) = (16,5,5) CHW, torch's flatten order
      -> fc1 128 +b, ReLU -> h1 (n,128) -> fc2 10 +b -> logits (n,10)

Method:
- One parallel kernel for the forward, one for the backward (+ loss); `prange` runs over
  chunks of the batch, one chunk per Numba thread, each chunk with its own scratch and its
  own partial-gradient slot, summed after the loop in a fixed order: no races, no locks,
  no allocation per call, and no BLAS (on this shared 2-core box under other jobs' load,
  NumPy's 2-thread OpenBLAS took 4-6x longer for fc1's matmul than with 1 thread; doing the
  dense layers in the same chunks also keeps the thread count what numba.set_num_threads says).
- "Wide rows": a conv's output is computed on its input's row pitch (28, then 13), so all
  9 taps of an (out, in) channel pair are contiguous shifted slices of one flat plane and
  the whole output plane is one loop, which LLVM's loop vectorizer turns into SIMD with
  the 9 weights in registers. (Numba leaves the SLP vectorizer off, so a channel-innermost
  HWC loop of 8/16 stays scalar: that version measured 7x slower for the convs.) The junk
  outputs (conv1 cols 26-27 of each row; conv2 row/col 10+) are computed, never read.
- conv -> ReLU -> pool is fused: the pool keeps the first max of its 2x2 window (torch's
  tie rule); bias and ReLU are applied to the pooled value (max, +b and ReLU commute).
  Only the 10x10 of conv2's 11x11 output that floor-mode pooling reads is used.
- Backward exploits the pools: only a window's arg-max, and only where the pooled value is
  > 0, carries gradient, so each conv's weight/bias/input gradients are scatters from those
  positions (at most a quarter of the dense work). For conv2 the sample's input is first
  laid out im2col-style (one contiguous 72-vector per output pixel) so each scatter is a
  72-long SIMD loop; conv1's 9-tap scatter stays scalar with its sums in registers.
  conv1 gets no input gradient.
- Dense layers are row-vector x matrix loops with 4 rows of the matrix per pass (blocks
  whose 4 multipliers are all 0, e.g. from ReLU, are skipped); weight gradients are sums of
  outer products over the chunk's samples, 4 samples per pass.
- float32 throughout (the loss is summed in float64); fastmath off: no FMA contraction, no
  reassociation, so no reduction is vectorized (none is written as one).

Public API: Workspace(n), forward, loss_backward, zeros_like_params, sgd_momentum_step,
predict, warmup (see each docstring); for variant "seed" (seed 000's Numba nets, dense layers
trained only) loss_backward_dense and sgd_momentum_step(..., names=DENSE). loss_backward reads the x passed to the last forward
(kept by reference in the Workspace): do not change x in between. Params, grads and
velocity must be C-contiguous float32 (zeros_like_params makes such grads and velocity).

Micro-benchmark (numba vs torch, same thread count, interleaved, random MNIST-shaped data):

    .venv/bin/python -m lab.bench_numba_cpu --threads 2 --batches 20 --batch 512

Measured (this repo's 2-core dev VM: Intel Xeon, Sapphire/Emerald Rapids, AVX-512, KVM,
shared with other jobs, so only quiet moments, load < 0.6; numba 0.68.1, torch 2.14.1 CPU,
random data; one step = forward + loss_backward + SGD-momentum step, median of the rounds):

    threads  batch  steps x rounds   torch-cpu     numba-cpu     numba/torch
    2        512    20 x 5           19,041 /s     48,591 /s     2.55x
    1        512    20 x 3            9,253 /s     22,737 /s     2.46x
    2        512    117 x 3 (epoch)  15,931 /s     35,356 /s     2.22x

Under load from other jobs (load 7-12) both fall and their ratio swings (1.35k vs 8.4k /s,
6.2x): compare only quiet, interleaved runs. JIT compile of all kernels: ~20 s once, then
~1 s from the on-disk cache (warmup()).
"""
from __future__ import annotations

import time

import numba
import numpy as np
from numba import njit, prange

from bench.studies.mnist_cnn.net import DENSE_NAMES as DENSE  # what variant "seed" trains
from bench.studies.mnist_cnn.net import IMAGE_SHAPE, N_CLASSES, PARAM_SHAPES, init_params

# fixed sizes of the seed CNN (module globals are compile-time constants in njit code)
W0 = 28  # input height = width
C1 = 8  # conv1 out channels
P1 = 13  # pool1 out height = width
C2 = 16  # conv2 out channels
P2 = 5  # pool2 out height = width (conv2's 11x11 -> 5x5, floor mode: rows/cols 0..9 used)
F1 = C2 * P2 * P2  # 400 flattened features
D1 = 128  # fc1 width
K = N_CLASSES  # 10
# wide rows: conv output pixel (i, j) sits at i*pitch + j of a flat plane
L1 = 25 * W0 + 26  # 726 conv1 outputs on a 28 pitch (last valid pixel (25, 25))
L2 = 128  # conv2 outputs on a 13 pitch: (9, 9) is at 126; taps then read p1 up to 155 < 169
H2 = 10  # conv2 output rows/cols that pool2 reads (of 11)
NK2 = C1 * 9  # 72: one conv2 patch (ic, ky, kx)

_PARALLEL = dict(parallel=True, cache=True, fastmath=False)  # the two batch kernels
_SERIAL = dict(cache=True, fastmath=False)  # per-sample helpers and small kernels


# ------------------------------------------------------------------ per-sample helpers
@njit(**_SERIAL)
def _pool2x2_bias_relu(c, pitch, npool, b, out, am):
    """out[ch, pi*npool + pj] = relu(max of c's 2x2 window + b[ch]); am = first arg-max 0..3.

    c (nc, L) conv output on a `pitch`-wide plane; out, am (nc, npool*npool)."""
    for ch in range(c.shape[0]):
        bc = b[ch]
        for pi in range(npool):
            for pj in range(npool):
                q = 2 * pi * pitch + 2 * pj
                best = c[ch, q]
                k = 0
                v = c[ch, q + 1]
                if v > best:
                    best = v
                    k = 1
                v = c[ch, q + pitch]
                if v > best:
                    best = v
                    k = 2
                v = c[ch, q + pitch + 1]
                if v > best:
                    best = v
                    k = 3
                best += bc
                out[ch, pi * npool + pj] = best if best > 0.0 else 0.0
                am[ch, pi * npool + pj] = k


@njit(**_SERIAL)
def _conv1_pool1(xs, w1, b1, c1, ps, am):
    """xs (784,) -> conv1 on a 28 pitch into scratch c1 (C1,L1) -> ps, am (C1,169)."""
    for c in range(C1):
        w00, w01, w02 = w1[c, 0, 0, 0], w1[c, 0, 0, 1], w1[c, 0, 0, 2]
        w10, w11, w12 = w1[c, 0, 1, 0], w1[c, 0, 1, 1], w1[c, 0, 1, 2]
        w20, w21, w22 = w1[c, 0, 2, 0], w1[c, 0, 2, 1], w1[c, 0, 2, 2]
        o = c1[c]
        for q in range(L1):
            o[q] = (w00 * xs[q] + w01 * xs[q + 1] + w02 * xs[q + 2]
                    + w10 * xs[q + W0] + w11 * xs[q + W0 + 1] + w12 * xs[q + W0 + 2]
                    + w20 * xs[q + 2 * W0] + w21 * xs[q + 2 * W0 + 1] + w22 * xs[q + 2 * W0 + 2])
    _pool2x2_bias_relu(c1, W0, P1, b1, ps, am)


@njit(**_SERIAL)
def _conv2_pool2(ps, w2, b2, c2, flat, am):
    """ps (C1,169) -> conv2 on a 13 pitch into scratch c2 (C2,L2) -> flat, am (400,)."""
    for oc in range(C2):
        o = c2[oc]
        for q in range(L2):
            o[q] = 0.0
        for ic in range(C1):
            w00, w01, w02 = w2[oc, ic, 0, 0], w2[oc, ic, 0, 1], w2[oc, ic, 0, 2]
            w10, w11, w12 = w2[oc, ic, 1, 0], w2[oc, ic, 1, 1], w2[oc, ic, 1, 2]
            w20, w21, w22 = w2[oc, ic, 2, 0], w2[oc, ic, 2, 1], w2[oc, ic, 2, 2]
            xi = ps[ic]
            for q in range(L2):
                o[q] += (w00 * xi[q] + w01 * xi[q + 1] + w02 * xi[q + 2]
                         + w10 * xi[q + P1] + w11 * xi[q + P1 + 1] + w12 * xi[q + P1 + 2]
                         + w20 * xi[q + 2 * P1] + w21 * xi[q + 2 * P1 + 1]
                         + w22 * xi[q + 2 * P1 + 2])
    _pool2x2_bias_relu(c2, P1, P2, b2, flat.reshape(C2, P2 * P2), am.reshape(C2, P2 * P2))


@njit(**_SERIAL)
def _vec_mat(u, m, out):
    """out (c,) = u (r,) @ m (r,c), 4 rows of m per pass; skips blocks where u is all 0."""
    r = u.shape[0]
    c = out.shape[0]
    for j in range(c):
        out[j] = 0.0
    for i in range(0, r - 3, 4):
        a0, a1, a2, a3 = u[i], u[i + 1], u[i + 2], u[i + 3]
        if a0 == 0.0 and a1 == 0.0 and a2 == 0.0 and a3 == 0.0:
            continue
        m0, m1, m2, m3 = m[i], m[i + 1], m[i + 2], m[i + 3]
        for j in range(c):
            out[j] += a0 * m0[j] + a1 * m1[j] + a2 * m2[j] + a3 * m3[j]
    for i in range(r - r % 4, r):
        a0 = u[i]
        m0 = m[i]
        for j in range(c):
            out[j] += a0 * m0[j]


@njit(**_SERIAL)
def _outer_acc(u, v, out):
    """out (a,b) += u.T @ v for u (s,a), v (s,b): sum of outer products, 4 samples per pass."""
    ns = u.shape[0]
    nb = v.shape[1]
    for s in range(0, ns - 3, 4):
        v0, v1, v2, v3 = v[s], v[s + 1], v[s + 2], v[s + 3]
        for i in range(u.shape[1]):
            a0, a1, a2, a3 = u[s, i], u[s + 1, i], u[s + 2, i], u[s + 3, i]
            if a0 == 0.0 and a1 == 0.0 and a2 == 0.0 and a3 == 0.0:
                continue
            o = out[i]
            for j in range(nb):
                o[j] += a0 * v0[j] + a1 * v1[j] + a2 * v2[j] + a3 * v3[j]
    for s in range(ns - ns % 4, ns):
        v0 = v[s]
        for i in range(u.shape[1]):
            a0 = u[s, i]
            o = out[i]
            for j in range(nb):
                o[j] += a0 * v0[j]


@njit(**_SERIAL)
def _softmax_xent_row(z, label, scale, dz):
    """Cross-entropy of logits z (K,) at `label` (returned, float64); dz = scale*(softmax - onehot)."""
    m = z[0]
    for k in range(1, K):
        if z[k] > m:
            m = z[k]
    tot = np.float32(0.0)
    for k in range(K):
        e = np.exp(z[k] - m)
        dz[k] = e
        tot += e
    inv = scale / tot
    for k in range(K):
        dz[k] *= inv
    dz[label] -= scale
    return np.float64(np.log(tot) + m - z[label])


@njit(**_SERIAL)
def _conv2_backward_sample(ps, w2, flat, a2s, dflat, col, dcol, rows, gs, dp1, dw2, db2):
    """conv2's weight/bias gradients (accumulated into dw2, db2) and dp1 = dL/dp1 (C1,169)
    of one sample, from dflat = dL/dp2 (400,).

    ps (C1,169), flat = p2 (400,), a2s (400,) from the forward. Scratch: col, dcol (100,72)
    (im2col of ps at the 10x10 conv2 outputs pool2 reads, and its gradient), rows (25,)
    int64, gs (25,). With a patch as one contiguous 72-vector, every update below is a
    72-long SIMD loop: dw2[oc] += g * col[r] (4 positions per pass), dcol[r] += g * w2[oc]."""
    for i in range(H2):
        for j in range(H2):
            cr = col[i * H2 + j]
            for ic in range(C1):
                for ky in range(3):
                    for kx in range(3):
                        cr[ic * 9 + ky * 3 + kx] = ps[ic, (i + ky) * P1 + j + kx]
    dcol[:] = 0.0
    w2f = w2.reshape(C2, NK2)
    dw2f = dw2.reshape(C2, NK2)
    for oc in range(C2):
        # this channel's windows that pass gradient: arg-max row of col and dL/dconv2 there
        cnt = 0
        for pi in range(P2):
            for pj in range(P2):
                f = oc * P2 * P2 + pi * P2 + pj
                if flat[f] <= 0.0:
                    continue
                k = a2s[f]
                rows[cnt] = (2 * pi + (k >> 1)) * H2 + 2 * pj + (k & 1)
                gs[cnt] = dflat[f]
                cnt += 1
        wr = w2f[oc]
        for t in range(cnt):
            g = gs[t]
            db2[oc] += g
            d = dcol[rows[t]]
            for u in range(NK2):
                d[u] += g * wr[u]
        o = dw2f[oc]
        for t in range(0, cnt - 3, 4):
            g0, g1, g2, g3 = gs[t], gs[t + 1], gs[t + 2], gs[t + 3]
            r0, r1, r2, r3 = col[rows[t]], col[rows[t + 1]], col[rows[t + 2]], col[rows[t + 3]]
            for u in range(NK2):
                o[u] += g0 * r0[u] + g1 * r1[u] + g2 * r2[u] + g3 * r3[u]
        for t in range(cnt - cnt % 4, cnt):
            g0 = gs[t]
            r0 = col[rows[t]]
            for u in range(NK2):
                o[u] += g0 * r0[u]
    # col2im: dp1 = sum of the patches' gradients at their places
    dp1[:] = 0.0
    for i in range(H2):
        for j in range(H2):
            d = dcol[i * H2 + j]
            for ic in range(C1):
                for ky in range(3):
                    for kx in range(3):
                        dp1[ic, (i + ky) * P1 + j + kx] += d[ic * 9 + ky * 3 + kx]


@njit(**_SERIAL)
def _conv1_backward_sample(xs, ps, a1s, dp1, dw1, db1):
    """conv1's weight/bias gradients of one sample (accumulated into dw1, db1) from dp1.

    Scalar, with the 9 taps' sums in registers (accumulating in dw1 itself chained every
    update through memory: 2x slower)."""
    for c in range(C1):
        gb = np.float32(0.0)
        s00 = s01 = s02 = s10 = s11 = s12 = s20 = s21 = s22 = np.float32(0.0)
        for pi in range(P1):
            for pj in range(P1):
                f = pi * P1 + pj
                if ps[c, f] <= 0.0:
                    continue
                g = dp1[c, f]
                k = a1s[c, f]
                q = (2 * pi + (k >> 1)) * W0 + 2 * pj + (k & 1)
                gb += g
                s00 += g * xs[q]
                s01 += g * xs[q + 1]
                s02 += g * xs[q + 2]
                s10 += g * xs[q + W0]
                s11 += g * xs[q + W0 + 1]
                s12 += g * xs[q + W0 + 2]
                s20 += g * xs[q + 2 * W0]
                s21 += g * xs[q + 2 * W0 + 1]
                s22 += g * xs[q + 2 * W0 + 2]
        db1[c] += gb
        dw1[c, 0, 0, 0] += s00
        dw1[c, 0, 0, 1] += s01
        dw1[c, 0, 0, 2] += s02
        dw1[c, 0, 1, 0] += s10
        dw1[c, 0, 1, 1] += s11
        dw1[c, 0, 1, 2] += s12
        dw1[c, 0, 2, 0] += s20
        dw1[c, 0, 2, 1] += s21
        dw1[c, 0, 2, 2] += s22


# ------------------------------------------------------------------ batch kernels
@njit(**_PARALLEL)
def _forward(x, w1, b1, w2, b2, fc1_wt, fc1_b, fc2_wt, fc2_b, c1s, c2s, p1, a1, p2, a2, h1, logits):
    """x (n,784) -> logits (n,K), caching p1/a1 (n,C1,169), p2/a2 (n,400), h1 (n,D1).

    fc1_wt (F1,D1), fc2_wt (D1,K): the dense weights transposed. Scratch c1s (nch,C1,L1),
    c2s (nch,C2,L2)."""
    n = x.shape[0]
    nch = c1s.shape[0]
    for ch in prange(nch):
        for s in range(ch * n // nch, (ch + 1) * n // nch):
            _conv1_pool1(x[s], w1, b1, c1s[ch], p1[s], a1[s])
            _conv2_pool2(p1[s], w2, b2, c2s[ch], p2[s], a2[s])
            h = h1[s]
            _vec_mat(p2[s], fc1_wt, h)
            for j in range(D1):
                v = h[j] + fc1_b[j]
                h[j] = v if v > 0.0 else 0.0
            z = logits[s]
            _vec_mat(h, fc2_wt, z)
            for k in range(K):
                z[k] += fc2_b[k]


@njit(**_SERIAL)
def _dense_backward_sample(logits_s, y_s, scale, dz, fc2_w, h_s, dh, dfc2_b, dfc1_b):
    """One sample through the dense layers backwards (shared by _backward and _backward_dense):
    writes dz (K,) and dh (D1,), adds the bias gradients; returns the sample's scaled loss."""
    loss = _softmax_xent_row(logits_s, y_s, scale, dz)
    for k in range(K):
        dfc2_b[k] += dz[k]
    _vec_mat(dz, fc2_w, dh)
    for j in range(D1):
        if h_s[j] <= 0.0:
            dh[j] = 0.0
        dfc1_b[j] += dh[j]
    return loss


@njit(**_PARALLEL)
def _backward(x, y, w2, fc1_w, fc2_w, p1, a1, p2, a2, h1, logits, dlogits, dh1, dp2s, dp1s,
              cols, dcols, rows, gs, dw1p, db1p, dw2p, db2p, dfc1_wp, dfc1_bp, dfc2_wp, dfc2_bp, lossp):
    """Mean-CE loss and all gradients of the last forward; per-chunk partial sums.

    Writes dlogits, dh1 (n,.) and per chunk: lossp (nch,) float64 loss sums, gradient
    partials d*p (nch, *param shape). Scratch per chunk: dp2s (nch,F1), dp1s (nch,C1,169),
    cols, dcols (nch,100,72), rows (nch,25) int64, gs (nch,25)."""
    n = x.shape[0]
    nch = dp1s.shape[0]
    scale = np.float32(1.0 / n)
    for ch in prange(nch):
        lo = ch * n // nch
        hi = (ch + 1) * n // nch
        dw1p[ch] = 0.0
        db1p[ch] = 0.0
        dw2p[ch] = 0.0
        db2p[ch] = 0.0
        dfc1_wp[ch] = 0.0
        dfc1_bp[ch] = 0.0
        dfc2_wp[ch] = 0.0
        dfc2_bp[ch] = 0.0
        loss = 0.0
        for s in range(lo, hi):
            loss += _dense_backward_sample(logits[s], y[s], scale, dlogits[s], fc2_w, h1[s], dh1[s], dfc2_bp[ch], dfc1_bp[ch])
            _vec_mat(dh1[s], fc1_w, dp2s[ch])
            _conv2_backward_sample(p1[s], w2, p2[s], a2[s], dp2s[ch], cols[ch], dcols[ch],
                                   rows[ch], gs[ch], dp1s[ch], dw2p[ch], db2p[ch])
            _conv1_backward_sample(x[s], p1[s], a1[s], dp1s[ch], dw1p[ch], db1p[ch])
        _outer_acc(dlogits[lo:hi], h1[lo:hi], dfc2_wp[ch])
        _outer_acc(dh1[lo:hi], p2[lo:hi], dfc1_wp[ch])
        lossp[ch] = loss


@njit(**_PARALLEL)
def _backward_dense(y, fc2_w, p2, h1, logits, dlogits, dh1, dfc1_wp, dfc1_bp, dfc2_wp, dfc2_bp, lossp):
    """Variant "seed" (seed 000's Numba nets): mean-CE loss and the two dense layers' gradients
    only, per-chunk partial sums; nothing flows back into the convolutions.

    The same loops, in the same order, as the dense part of _backward, so these gradients equal
    _backward's bit for bit for the same chunking. p2 (n,F1), h1 (n,D1), logits (n,K) are the
    forward's (here, or copied from a GPU by numba-cuda's seed variant)."""
    n = logits.shape[0]
    nch = lossp.shape[0]
    scale = np.float32(1.0 / n)
    for ch in prange(nch):
        lo = ch * n // nch
        hi = (ch + 1) * n // nch
        dfc1_wp[ch] = 0.0
        dfc1_bp[ch] = 0.0
        dfc2_wp[ch] = 0.0
        dfc2_bp[ch] = 0.0
        loss = 0.0
        for s in range(lo, hi):
            loss += _dense_backward_sample(logits[s], y[s], scale, dlogits[s], fc2_w, h1[s], dh1[s], dfc2_bp[ch], dfc1_bp[ch])
        _outer_acc(dlogits[lo:hi], h1[lo:hi], dfc2_wp[ch])
        _outer_acc(dh1[lo:hi], p2[lo:hi], dfc1_wp[ch])
        lossp[ch] = loss


# ------------------------------------------------------------------ small kernels
@njit(**_SERIAL)
def _sum_chunks(parts, out):
    """out (m,) = parts (nch,m).sum(0), chunks added in order."""
    out[:] = parts[0]
    for c in range(1, parts.shape[0]):
        pc = parts[c]
        for j in range(out.shape[0]):
            out[j] += pc[j]


@njit(**_SERIAL)
def _sgd_momentum(p, g, v, lr, momentum):
    """torch SGD(momentum, dampening=0): v = m*v + g; p -= lr*v. Flat float32 arrays, in place."""
    lr32 = np.float32(lr)
    m32 = np.float32(momentum)
    for i in range(p.shape[0]):
        vi = m32 * v[i] + g[i]
        v[i] = vi
        p[i] -= lr32 * vi


@njit(**_SERIAL)
def _sgd_momentum_scaled(p, g, v, lr, momentum, gscale):
    """v = m*v + gscale*g; p -= lr*v. Seed 000's update is gscale = (1-m)*n on the batch-mean
    gradient: its v = m*v + (1-m)*G with G the gradient of the batch's summed loss."""
    lr32 = np.float32(lr)
    m32 = np.float32(momentum)
    c32 = np.float32(gscale)
    for i in range(p.shape[0]):
        vi = m32 * v[i] + c32 * g[i]
        v[i] = vi
        p[i] -= lr32 * vi


# ------------------------------------------------------------------ Python API
class Workspace:
    """Preallocated buffers for batch size n: activation caches, pool arg-maxes, per-chunk
    scratch and partial gradients. Chunks: one per Numba thread as set when the Workspace is
    made (numba.get_num_threads()), at most one per sample; results do not depend on which
    thread runs which chunk, only (in the last bits) on the number of chunks."""

    def __init__(self, n: int):
        if n < 1:
            raise ValueError(f"batch size must be >= 1, got {n}")
        self.n = n
        self.nch = nch = min(n, numba.get_num_threads())
        f32 = np.float32
        # forward cache
        self.x = None  # the last forward's input (by reference), (n,784)
        self.p1 = np.empty((n, C1, P1 * P1), f32)
        self.a1 = np.empty((n, C1, P1 * P1), np.uint8)
        self.p2 = np.empty((n, F1), f32)
        self.a2 = np.empty((n, F1), np.uint8)
        self.h1 = np.empty((n, D1), f32)
        self.logits = np.empty((n, K), f32)
        self.fc1_wt = np.empty((F1, D1), f32)
        self.fc2_wt = np.empty((D1, K), f32)
        # backward
        self.dlogits = np.empty((n, K), f32)
        self.dh1 = np.empty((n, D1), f32)
        self.lossp = np.empty(nch, np.float64)
        self.partials = {name: np.empty((nch, *shape), f32) for name, shape in PARAM_SHAPES.items()}
        # per-chunk scratch
        self.c1s = np.empty((nch, C1, L1), f32)
        self.c2s = np.empty((nch, C2, L2), f32)
        self.dp2s = np.empty((nch, F1), f32)
        self.dp1s = np.empty((nch, C1, P1 * P1), f32)
        self.cols = np.empty((nch, H2 * H2, NK2), f32)
        self.dcols = np.empty((nch, H2 * H2, NK2), f32)
        self.rows = np.empty((nch, P2 * P2), np.int64)
        self.gs = np.empty((nch, P2 * P2), f32)


def forward(params: dict[str, np.ndarray], x: np.ndarray, ws: Workspace) -> np.ndarray:
    """Logits (n,10), a view into ws, for x (n,1,28,28) float32 normalised; caches for backward."""
    if x.shape != (ws.n, *IMAGE_SHAPE):
        raise ValueError(f"x has shape {x.shape}, workspace expects {(ws.n, *IMAGE_SHAPE)}")
    x = np.ascontiguousarray(x, dtype=np.float32).reshape(ws.n, W0 * W0)
    ws.x = x
    np.copyto(ws.fc1_wt, params["fc1.weight"].T)
    np.copyto(ws.fc2_wt, params["fc2.weight"].T)
    _forward(x, params["conv1.weight"], params["conv1.bias"], params["conv2.weight"],
             params["conv2.bias"], ws.fc1_wt, params["fc1.bias"], ws.fc2_wt, params["fc2.bias"],
             ws.c1s, ws.c2s, ws.p1, ws.a1, ws.p2, ws.a2, ws.h1, ws.logits)
    return ws.logits


def loss_backward(params: dict[str, np.ndarray], y: np.ndarray, ws: Workspace,
                  grads: dict[str, np.ndarray]) -> float:
    """Mean CE loss of the last forward on labels y (n,) int; writes dL/dparam into grads."""
    if ws.x is None:
        raise RuntimeError("loss_backward needs a forward on this workspace first")
    y = np.ascontiguousarray(y, dtype=np.int64)
    if y.shape != (ws.n,) or y.min() < 0 or y.max() >= K:
        raise ValueError(f"labels must have shape ({ws.n},) and lie in [0, {K})")
    pt = ws.partials
    _backward(ws.x, y, params["conv2.weight"], params["fc1.weight"], params["fc2.weight"],
              ws.p1, ws.a1, ws.p2, ws.a2, ws.h1, ws.logits, ws.dlogits, ws.dh1, ws.dp2s, ws.dp1s,
              ws.cols, ws.dcols, ws.rows, ws.gs, pt["conv1.weight"], pt["conv1.bias"], pt["conv2.weight"], pt["conv2.bias"],
              pt["fc1.weight"], pt["fc1.bias"], pt["fc2.weight"], pt["fc2.bias"], ws.lossp)
    for name, part in pt.items():
        g = grads[name]
        if not g.flags.c_contiguous or g.dtype != np.float32 or g.shape != part.shape[1:]:
            raise ValueError(f"grads[{name!r}] must be C-contiguous float32 {part.shape[1:]}")
        _sum_chunks(part.reshape(ws.nch, -1), g.reshape(-1))
    return float(ws.lossp.sum() / ws.n)



def loss_backward_dense(params: dict[str, np.ndarray], y: np.ndarray, ws: Workspace,
                        grads: dict[str, np.ndarray]) -> float:
    """Variant "seed": mean CE loss of ws.logits on labels y (n,) int; writes the four dense
    gradients into grads (other entries, if any, are left alone). Reads ws.p2, ws.h1 and
    ws.logits: from the last forward, or filled by the caller (numba-cuda's seed variant
    copies them from the GPU). params needs only fc2.weight."""
    y = np.ascontiguousarray(y, dtype=np.int64)
    if y.shape != (ws.n,) or y.min() < 0 or y.max() >= K:
        raise ValueError(f"labels must have shape ({ws.n},) and lie in [0, {K})")
    pt = ws.partials
    _backward_dense(y, params["fc2.weight"], ws.p2, ws.h1, ws.logits, ws.dlogits, ws.dh1,
                    pt["fc1.weight"], pt["fc1.bias"], pt["fc2.weight"], pt["fc2.bias"], ws.lossp)
    for name in DENSE:
        part, g = pt[name], grads[name]
        if not g.flags.c_contiguous or g.dtype != np.float32 or g.shape != part.shape[1:]:
            raise ValueError(f"grads[{name!r}] must be C-contiguous float32 {part.shape[1:]}")
        _sum_chunks(part.reshape(ws.nch, -1), g.reshape(-1))
    return float(ws.lossp.sum() / ws.n)


def zeros_like_params(params: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Fresh C-contiguous float32 zeros with each parameter's shape (grads, velocity)."""
    return {k: np.zeros(v.shape, np.float32) for k, v in params.items()}


def sgd_momentum_step(params, grads, velocity, lr: float, momentum: float, names=None,
                      grad_scale: float | None = None) -> None:
    """In place on params and velocity, torch's form: v = m*v + g; p -= lr*v. NAMES: only these
    parameters (variant "seed": DENSE); None = all of params. GRAD_SCALE c: v = m*v + c*g
    instead (sgd=seed: c = (1-m)*batch, seed 000's form); None = torch's."""
    for name in params if names is None else names:
        p = params[name]
        if not (p.flags.c_contiguous and velocity[name].flags.c_contiguous):
            raise ValueError(f"{name}: param and velocity must be C-contiguous (updated in place)")
        g = np.ascontiguousarray(grads[name]).reshape(-1)
        if grad_scale is None:
            _sgd_momentum(p.reshape(-1), g, velocity[name].reshape(-1), lr, momentum)
        else:
            _sgd_momentum_scaled(p.reshape(-1), g, velocity[name].reshape(-1), lr, momentum, grad_scale)


def predict(params: dict[str, np.ndarray], x: np.ndarray, batch: int = 1024) -> np.ndarray:
    """Predicted labels (n,) int64 for x (n,1,28,28) of any n, `batch` samples at a time."""
    n = x.shape[0]
    out = np.empty(n, np.int64)
    ws = None
    for lo in range(0, n, batch):
        hi = min(lo + batch, n)
        if ws is None or ws.n != hi - lo:
            ws = Workspace(hi - lo)
        out[lo:hi] = forward(params, x[lo:hi], ws).argmax(axis=1)
    return out


def warmup() -> float:
    """Runs every kernel once on a tiny batch (JIT compile or cache load); returns seconds."""
    t0 = time.perf_counter()
    params = init_params(0)
    rng = np.random.default_rng(0)
    n = 3
    x = rng.standard_normal((n, *IMAGE_SHAPE), dtype=np.float32)
    y = rng.integers(0, K, n)
    ws = Workspace(n)
    grads = zeros_like_params(params)
    vel = zeros_like_params(params)
    forward(params, x, ws)
    loss_backward(params, y, ws, grads)
    loss_backward_dense(params, y, ws, grads)
    sgd_momentum_step(params, grads, vel, 0.01, 0.9)
    sgd_momentum_step(params, grads, vel, 0.01, 0.9, DENSE, grad_scale=0.3)
    predict(params, x, batch=2)
    return time.perf_counter() - t0


assert PARAM_SHAPES["fc1.weight"] == (D1, F1) and PARAM_SHAPES["conv2.weight"] == (C2, C1, 3, 3)
