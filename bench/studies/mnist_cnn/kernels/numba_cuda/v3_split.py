"""numba-cuda kernel variant 3, "split": the dense layers leave the per-sample blocks (variant
2 read all of W1, 200 KB, from L2 twice per sample) and become batched 32x32-tile GEMMs that
read W1 once per tile. 6 launches per train_step:

  k3_conv_fwd   variant 2's conv part (net.conv_fwd_kernel over v2_fast.conv_fwd_sample), a
                block per sample
  k3_fc1        h = ReLU(p2 W1^T + b1) as 32x32 tiles over the batch
  k3_head       fc2, softmax-CE, dlogits, dh; DS = 4 samples a block
  k3_dense_bwd  dp2 = dh W1 as 32x32 tiles, beside variant 2's dense weight-gradient tiles
  k3_conv_bwd   variant 2's conv blocks (net.conv_bwd_kernel over v2_fast.conv_bwd_sample),
                dp2 read back
  k_sgd_state   SGD over S

Every tile GEMM (gemm_tile) loads the next 32-row chunk of both operands into registers before
multiplying the current one. A forward without labels (predict) runs variant 2's k_forward.
Launched one by one from Python the step is host-bound (the numba launch costs 40-70 us);
DeviceNet.capture_steps() records a run of steps as one CUDA graph.

Measured by `bash scripts/gpu_run.sh numba` at f5174de on one NVIDIA H100 80GB HBM3, numba
0.68.0, numba-cuda 0.30.4, NumPy 2.3.5 (results/reference/H100-80GB-HBM3-numba-graph/): 200
train_steps captured as one CUDA graph, 5 replays, us per step between events around a replay:
272.9 [272.5..273.3], 1,876,438 samples/s (eager, launched one by one: 287 us/step).
"""

from __future__ import annotations

import numpy as np

from bench.studies.mnist_cnn.kernels.numba_cuda.net import (
    A_DH,
    A_H,
    A_P2,
    D1,
    K_SPLIT,
    MAX_REGS,
    N_GEMM_UNITS,
    N_P2,
    O_F1B,
    O_F1W,
    O_F2B,
    O_F2W,
    TILE,
    TPB,
    TS,
    K,
    add_wgrad_tile,
    conv_bwd_kernel,
    conv_fwd_kernel,
    cuda,
    jit,
    named_kernel,
    pick4,
    softmax_ce,
    wgrad_unit,
)
from bench.studies.mnist_cnn.kernels.numba_cuda.v2_fast import FastNet, conv_bwd_sample, conv_fwd_sample

LAUNCHES_PER_STEP = 6
DS = 4  # samples per block of k3_head
GT_FC1 = D1 // TILE  # 4 output tiles of fc1 per 32-sample tile
GT_DP2 = (N_P2 + TILE - 1) // TILE  # 13 column tiles of dp2 per 32-sample tile
SH_TILE = TILE * TS
SH_HEAD_H = DS * D1
SH_HEAD_RED = DS * K * 33
SH_HEAD_L = DS * 16


@jit(device=True)
def operand(mode, side, act, P, m, r, c, a_col, b_col, n_out, n_in):
    """Element (r, c) of a tile GEMM's operand: C[i, j] = sum_r A[r, i] B[r, j].
    mode 0 (fc1 pre-activation, C = (n, o)): A[k, n] = p2[n, k], B[k, o] = W1[o, k];
    mode 1 (dp2, C = (n, k)): A[o, n] = dh[n, o], B[o, k] = W1[o, k];
    mode 2 (dense [dW | db], C = (o, k)): A[n, o] = act[n, a_col + o], B[n, k] = act[n, b_col + k]
    (1 in the bias column k == n_in). Zero outside the operand."""
    v = np.float32(0.0)
    if mode == 0:
        if r < N_P2:
            if side == 0:
                if c < m:
                    v = act[c, A_P2 + r]
            else:
                v = P[O_F1W + c * N_P2 + r]
    elif mode == 1:
        if side == 0:
            if c < m:
                v = act[c, A_DH + r]
        elif c < N_P2:
            v = P[O_F1W + r * N_P2 + c]
    elif r < m:
        if side == 0:
            if c < n_out:
                v = act[r, a_col + c]
        elif c < n_in:
            v = act[r, b_col + c]
        elif c == n_in:
            v = np.float32(1.0)
    return v


@jit(device=True)
def ld(mode, side, lanes_r, e, r0, c0, act, P, m, a_col, b_col, n_out, n_in):
    """Element e (0..1023) of a 32x32 operand chunk at (r0, c0). lanes_r: consecutive e walk r
    (the operand is contiguous along r), else along c: coalesced either way."""
    if lanes_r:
        return operand(mode, side, act, P, m, r0 + (e & 31), c0 + (e >> 5), a_col, b_col, n_out, n_in)
    return operand(mode, side, act, P, m, r0 + (e >> 5), c0 + (e & 31), a_col, b_col, n_out, n_in)


@jit(device=True)
def st(buf, lanes_r, e, v):
    """Store element e of a chunk at [r * TS + c] (row r of the padded chunk)."""
    if lanes_r:
        buf[(e & 31) * TS + (e >> 5)] = v
    else:
        buf[(e >> 5) * TS + (e & 31)] = v


@jit(device=True)
def ld8(mode, a_r, b_r, t, r0, i0, j0, act, P, m, a_col, b_col, n_out, n_in):
    """Thread t's 8 elements of the next chunk (rows r0..) of a tile GEMM: 4 of operand A at
    column i0, then 4 of B at column j0 (elements t, t + 256, t + 512, t + 768 of each)."""
    return (
        ld(mode, 0, a_r, t, r0, i0, act, P, m, a_col, b_col, n_out, n_in),
        ld(mode, 0, a_r, t + 256, r0, i0, act, P, m, a_col, b_col, n_out, n_in),
        ld(mode, 0, a_r, t + 512, r0, i0, act, P, m, a_col, b_col, n_out, n_in),
        ld(mode, 0, a_r, t + 768, r0, i0, act, P, m, a_col, b_col, n_out, n_in),
        ld(mode, 1, b_r, t, r0, j0, act, P, m, a_col, b_col, n_out, n_in),
        ld(mode, 1, b_r, t + 256, r0, j0, act, P, m, a_col, b_col, n_out, n_in),
        ld(mode, 1, b_r, t + 512, r0, j0, act, P, m, a_col, b_col, n_out, n_in),
        ld(mode, 1, b_r, t + 768, r0, j0, act, P, m, a_col, b_col, n_out, n_in),
    )


@jit(device=True)
def mac_chunk(As, Bs, t, acc0, acc1, acc2, acc3):
    """Thread t's four sums of a 32x32 tile GEMM over one 32-row chunk in shared memory:
    C[ty + 8q, tx] += sum_rr As[rr, ty + 8q] Bs[rr, tx] (rows of TS). Signed indices: numba
    adds a negative-index wraparound to every load (variant 7's mac_chunk_unsigned does not)."""
    tx = t % 32
    ty = t // 32
    for rr in range(TILE):
        bv = Bs[rr * TS + tx]
        acc0 += As[rr * TS + ty] * bv
        acc1 += As[rr * TS + ty + 8] * bv
        acc2 += As[rr * TS + ty + 16] * bv
        acc3 += As[rr * TS + ty + 24] * bv
    return acc0, acc1, acc2, acc3


def tile_gemm(mac):
    """gemm_tile (below) over the chunk multiply-add MAC (a device function like mac_chunk)."""

    @jit(device=True)
    def gemm_tile(mode, i0, j0, r_start, r_stop, r_step, act, P, m, a_col, b_col, n_out, n_in, t, As, Bs):
        """Thread (ty = t//32, tx = t%32) of a 32x32 tile C[i0.., j0..]: returns its four sums
        C[i0 + ty + 8q, j0 + tx], q = 0..3, over the 32-row chunks r_start, r_start + r_step, ...
        < r_stop. The next chunk's 8 elements per thread are loaded before this one is multiplied."""
        a_r = mode != 2  # operand A contiguous along r
        b_r = mode == 0
        zero = np.float32(0.0)
        acc0 = acc1 = acc2 = acc3 = zero
        r0 = r_start
        a0 = a1 = a2 = a3 = b0 = b1 = b2 = b3 = zero
        if r0 < r_stop:
            a0, a1, a2, a3, b0, b1, b2, b3 = ld8(mode, a_r, b_r, t, r0, i0, j0, act, P, m, a_col, b_col, n_out, n_in)
        while r0 < r_stop:
            cuda.syncthreads()  # the last chunk's readers are done
            st(As, a_r, t, a0)
            st(As, a_r, t + 256, a1)
            st(As, a_r, t + 512, a2)
            st(As, a_r, t + 768, a3)
            st(Bs, b_r, t, b0)
            st(Bs, b_r, t + 256, b1)
            st(Bs, b_r, t + 512, b2)
            st(Bs, b_r, t + 768, b3)
            cuda.syncthreads()
            rn = r0 + r_step
            if rn < r_stop:  # in flight while this chunk is multiplied
                a0, a1, a2, a3, b0, b1, b2, b3 = ld8(mode, a_r, b_r, t, rn, i0, j0, act, P, m, a_col, b_col, n_out, n_in)
            acc0, acc1, acc2, acc3 = mac(As, Bs, t, acc0, acc1, acc2, acc3)
            r0 = rn
        return acc0, acc1, acc2, acc3

    return gemm_tile


gemm_tile = tile_gemm(mac_chunk)

k3_conv_fwd = conv_fwd_kernel("k3_conv_fwd", conv_fwd_sample, N_P2)


def fc1_kernel(name: str, gemm):
    """fc1 (the kernel below) compiled as NAME over the tile GEMM device function GEMM (v3: gemm_tile; v7 its own)."""

    def kernel(m, S, act, ksplit, hpre):
        """fc1 as 32x32 tiles (32 samples x 32 outputs), grid-stride over tiles x KSPLIT. ksplit 1:
        h = ReLU(p2 W1^T + b1) straight into act rows. ksplit > 1 (variant 5): each unit sums every
        ksplit-th 32-wide chunk of the 400 inputs and adds it atomically into hpre (zero on entry;
        k3_head adds the bias, applies the ReLU and zeroes hpre again)."""
        t = cuda.threadIdx.x
        P = S[0]
        As = cuda.shared.array(SH_TILE, np.float32)
        Bs = cuda.shared.array(SH_TILE, np.float32)
        zero = np.float32(0.0)
        units = ((m + TILE - 1) // TILE) * GT_FC1 * ksplit
        for u in range(cuda.blockIdx.x, units, cuda.gridDim.x):
            ks = u % ksplit
            tile = u // ksplit
            nt = tile // GT_FC1
            i0 = nt * TILE
            j0 = (tile - nt * GT_FC1) * TILE
            c0, c1, c2, c3 = gemm(0, i0, j0, ks * TILE, N_P2, ksplit * TILE, act, P, m, 0, 0, 0, 0, t, As, Bs)
            o = j0 + t % 32
            n = i0 + t // 32
            if ksplit > 1:
                if n < m:
                    cuda.atomic.add(hpre, (n, o), c0)
                if n + 8 < m:
                    cuda.atomic.add(hpre, (n + 8, o), c1)
                if n + 16 < m:
                    cuda.atomic.add(hpre, (n + 16, o), c2)
                if n + 24 < m:
                    cuda.atomic.add(hpre, (n + 24, o), c3)
                continue
            b = P[O_F1B + o]
            if n < m:
                act[n, A_H + o] = max(c0 + b, zero)
            if n + 8 < m:
                act[n + 8, A_H + o] = max(c1 + b, zero)
            if n + 16 < m:
                act[n + 16, A_H + o] = max(c2 + b, zero)
            if n + 24 < m:
                act[n + 24, A_H + o] = max(c3 + b, zero)

    return named_kernel(kernel, name)


k3_fc1 = fc1_kernel("k3_fc1", gemm_tile)


@jit(max_registers=MAX_REGS)
def k3_head(m, y, S, act, logits, preds, loss_sum, pre, hpre):
    """fc2, softmax cross-entropy, dlogits and dh = W2^T dlogits (masked by fc1's ReLU) for DS
    samples per block (grid-stride over groups): a warp per (sample, class) logit, lanes over
    the 128 inputs, partial sums reduced through shared memory. pre != 0: fc1 left its sums in
    hpre (split-K): h = ReLU(hpre + b1) is written to the act rows here and hpre zeroed."""
    t = cuda.threadIdx.x
    lane = t % 32
    wp = t // 32
    P = S[0]
    hs = cuda.shared.array(SH_HEAD_H, np.float32)
    red = cuda.shared.array(SH_HEAD_RED, np.float32)
    ls = cuda.shared.array(SH_HEAD_L, np.float32)
    ds = cuda.shared.array(SH_HEAD_L, np.float32)
    zero = np.float32(0.0)
    inv_m = np.float32(1.0) / np.float32(m)
    groups = (m + DS - 1) // DS
    for g in range(cuda.blockIdx.x, groups, cuda.gridDim.x):
        n0 = g * DS
        cuda.syncthreads()  # the last group's readers are done
        for e in range(t, DS * D1, TPB):
            s = e // D1
            o = e - s * D1
            v = zero
            if n0 + s < m:
                if pre != 0:
                    v = max(hpre[n0 + s, o] + P[O_F1B + o], zero)
                    hpre[n0 + s, o] = zero
                    act[n0 + s, A_H + o] = v
                else:
                    v = act[n0 + s, A_H + o]
            hs[e] = v
        cuda.syncthreads()
        for q in range(wp, DS * K, TPB // 32):
            s = q // K
            c = q - s * K
            v = zero
            for j in range(4):
                v += P[O_F2W + c * D1 + lane + 32 * j] * hs[s * D1 + lane + 32 * j]
            red[q * 33 + lane] = v
        cuda.syncthreads()
        if t < DS * K:
            s = t // K
            c = t - s * K
            v = P[O_F2B + c]
            for j in range(32):
                v += red[t * 33 + j]
            ls[s * 16 + c] = v
            if n0 + s < m:
                logits[n0 + s, c] = v
        cuda.syncthreads()
        if t < DS and n0 + t < m:
            softmax_ce(n0 + t, ls, t * 16, y, 1, inv_m, ds, act, preds, loss_sum)
        cuda.syncthreads()
        for e in range(t, DS * D1, TPB):
            s = e // D1
            o = e - s * D1
            if n0 + s < m:
                v = zero
                if hs[e] > zero:
                    for c in range(K):
                        v += P[O_F2W + c * D1 + o] * ds[s * 16 + c]
                act[n0 + s, A_DH + o] = v


def dense_bwd_kernel(name: str, gemm):
    """The dense backward (the kernel below) compiled as NAME over the tile GEMM device function GEMM (as fc1_kernel)."""

    def kernel(m, S, act, dp2, n_wgrad_blocks):
        """Blocks [0, n_wgrad_blocks): [dW | db] of fc1 and fc2 (the N_GEMM_UNITS of k_backward:
        32x32 tiles x K_SPLIT batch splits, atomics into G = S[1], zero on entry). The others:
        dp2 = dh W1 masked by pool2/ReLU2 (p2 > 0), 32 samples x 32 inputs a tile, into dp2."""
        t = cuda.threadIdx.x
        P = S[0]
        G = S[1]
        As = cuda.shared.array(SH_TILE, np.float32)
        Bs = cuda.shared.array(SH_TILE, np.float32)
        zero = np.float32(0.0)
        tx = t % 32
        ty = t // 32
        if cuda.blockIdx.x < n_wgrad_blocks:
            for unit in range(cuda.blockIdx.x, N_GEMM_UNITS, n_wgrad_blocks):
                split, a_col, n_out, b_col, n_in, w_off, b_off, o0, k0 = wgrad_unit(unit)
                if split * TILE >= m:  # this batch split has no samples (short batches)
                    continue
                c0, c1, c2, c3 = gemm(2, o0, k0, split * TILE, m, K_SPLIT * TILE, act, P, m, a_col, b_col, n_out, n_in, t, As, Bs)
                add_wgrad_tile(G, t, o0, k0, n_out, n_in, w_off, b_off, c0, c1, c2, c3)
            return
        units = ((m + TILE - 1) // TILE) * GT_DP2
        for u in range(cuda.blockIdx.x - n_wgrad_blocks, units, cuda.gridDim.x - n_wgrad_blocks):
            nt = u // GT_DP2
            i0 = nt * TILE
            j0 = (u - nt * GT_DP2) * TILE
            c0, c1, c2, c3 = gemm(1, i0, j0, 0, D1, TILE, act, P, m, 0, 0, 0, 0, t, As, Bs)
            k = j0 + tx
            if k < N_P2:
                for q in range(4):
                    n = i0 + ty + 8 * q
                    v = pick4(q, c0, c1, c2, c3)
                    if n < m:
                        if act[n, A_P2 + k] <= zero:
                            v = zero
                        dp2[n, k] = v

    return named_kernel(kernel, name)


k3_dense_bwd = dense_bwd_kernel("k3_dense_bwd", gemm_tile)


k3_conv_bwd = conv_bwd_kernel("k3_conv_bwd", conv_bwd_sample)


class SplitNet(FastNet):
    """Variant 3 (and, through CONV and KSPLIT, variants 4 and 5): the six launches above when
    training; variant 2's k_forward for a forward without labels."""

    VARIANT = "split"
    CONV = (k3_conv_fwd, k3_conv_bwd)  # the conv forward and backward kernels
    DENSE = (k3_fc1, k3_dense_bwd)  # fc1 and the dense backward (over a tile GEMM)
    KSPLIT = 1  # fc1's 400 inputs split this many ways (summed atomically into hpre)

    def _allocate(self, samples_per_block: int) -> None:
        super()._allocate(samples_per_block)
        n, cap = self.batch, self.cap
        self.dp2 = self._alloc((n, N_P2), np.float32, zero=True)
        self.ksplit = self.KSPLIT
        self.hpre = self._alloc((n, D1), np.float32, zero=True) if self.ksplit > 1 else self.dp2  # dp2: never read
        n_tiles = (n + TILE - 1) // TILE
        self._grid.update(conv_fwd=cap(n), fc1=cap(n_tiles * GT_FC1 * self.ksplit), head3=cap((n + DS - 1) // DS),
                          dense_bwd=self.n_gemm_blocks + cap(n_tiles * GT_DP2), conv_bwd=cap(n))  # fmt: skip

    def _configure(self) -> None:
        super()._configure()
        g, st = self._grid, self.stream
        conv_fwd, conv_bwd = self.CONV
        fc1, dense_bwd = self.DENSE
        self._k3 = {
            "conv_fwd": conv_fwd[g["conv_fwd"], TPB, st],
            "fc1": fc1[g["fc1"], TPB, st],
            "head": k3_head[g["head3"], TPB, st],
            "dense_bwd": dense_bwd[g["dense_bwd"], TPB, st],
            "conv_bwd": conv_bwd[g["conv_bwd"], TPB, st],
        }

    def _launch_forward(self, x_dev, y_dev, mm: int, preds_out):
        if y_dev is None:  # inference: k_forward
            return super()._launch_forward(x_dev, y_dev, mm, preds_out)
        self._y_dtype = y_dev.dtype
        k = self._k3
        k["conv_fwd"](x_dev, mm, self.S, self.act, self.am)
        k["fc1"](mm, self.S, self.act, self.ksplit, self.hpre)
        k["head"](mm, y_dev, self.S, self.act, self.logits, self.preds, self.loss_sum, 1 if self.ksplit > 1 else 0, self.hpre)
        return self.logits if mm == self.batch else self.logits[:mm]

    def _launch_backward(self, mm: int) -> None:
        self._k3["dense_bwd"](mm, self.S, self.act, self.dp2, self.n_gemm_blocks)
        self._k3["conv_bwd"](self._x_last, mm, self.S, self.act, self.am, self.dp2)
