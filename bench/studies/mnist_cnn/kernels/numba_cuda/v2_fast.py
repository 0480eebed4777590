"""numba-cuda kernel variant 2, "fast": 3 launches per train_step, TPB = 256 threads per
block, register cap 64.

  k_forward    grid n: a block per sample; x and conv weights in shared memory;
               conv1+bias+ReLU+pool, conv2+bias+ReLU+pool (4 conv outputs per weight load),
               fc1+ReLU and fc2 (a warp per output row, lanes over the inputs: coalesced,
               fixed 13/4-step loops, partial sums reduced via shared memory); with labels
               also softmax-CE, dlogits = (softmax - onehot)/m, the loss (atomic, float64)
               and dh = W2^T dlogits masked by the ReLU. Writes preds (argmax) too.
  k_backward   grid 228 + n, two kinds of block in one launch:
               blocks 0..227: dense weight+bias gradients, 57 tiles of 32x32 outputs
                 (fc1: 4x13 of [dW1 | db1] = dh^T [p2 | 1], fc2: 1x5) x 4 batch splits,
                 shared-memory tiled GEMM, atomics into G;
               blocks 228..: a sample each: dp2 = W1^T dh masked by pool2/ReLU, scattered
                 into a dense zero-haloed dconv2 (16x15x15, shared); conv2 weight/bias
                 gradients and dp1 (transposed conv, masked by pool1/ReLU) as dense loops
                 over it; conv1 weight/bias gradients over the 169 pool-argmax positions;
                 one atomic add per weight per block into G.
  k_sgd_state  grid 211 over S: v = m*v + g; p -= lr*v; g = 0 (so the next backward's
               atomics start from zero).

Measured with `python -m lab.check_numba_cuda` on one NVIDIA H100 80GB HBM3 (132 SMs, driver
13.0), Python 3.12.3, numba 0.68.0, numba-cuda 0.30.4, NumPy 2.4.6, batch 512, random
MNIST-like data; step = train_step between CUDA events, median of 5 repeats [spread]:
worst rel err 1.7e-06, first call 5.2 s, 296 us/step [295..297], 1,727,831 samples/s
(forward 102 us, backward 194 us, SGD 5 us, host enqueue 121 us): GPU-bound. 5.5 MiB of
device memory at batch 512. As a CUDA graph of 200 steps (`bash scripts/gpu_run.sh numba`,
the same H100 kind, NumPy 2.3.5; results/reference/H100-80GB-HBM3-numba-graph/): 292.3 us/step
[292.0..293.2], 1,751,797 samples/s.
"""

from __future__ import annotations

import math

import numpy as np

from bench.studies.mnist_cnn.kernels.numba_cuda.device_net import DeviceNet
from bench.studies.mnist_cnn.kernels.numba_cuda.net import (
    A_DH,
    A_DLOG,
    A_H,
    A_LOSS,
    A_P2,
    ACT_W,
    AM_2,
    AM_W,
    C2,
    D1,
    DC_C,
    DC_W,
    K_SPLIT,
    MAX_REGS,
    N_C2WB,
    N_GEMM_TILES,
    N_GEMM_UNITS,
    N_P1,
    N_P2,
    O_F1B,
    O_F1W,
    O_F2B,
    O_F2W,
    SH_DC2,
    TILE,
    TPB,
    TS,
    K,
    add_wgrad_tile,
    conv1_wgrad_clear,
    conv_bwd_flush,
    conv_bwd_load,
    conv_bwd_setup,
    cuda,
    dc2_index,
    jit,
    load_conv_weights,
    load_image,
    pool_pick,
    site,
    softmax_ce,
    store_p1,
    wgrad_unit,
)

LAUNCHES_PER_STEP = 3


@jit(device=True)
def conv_fwd_sample(n, t, xs, w1s, w2s, p1s, p2s, act, am):
    """conv1+bias+ReLU+pool, conv2+bias+ReLU+pool of sample n (its image in xs, the conv weights
    in w1s/w2s, all synced): p1s, p2s (shared) and the act/am rows of n. Ends synced."""
    zero = np.float32(0.0)
    # conv1 + bias + ReLU + pool: one pooled output (4 conv outputs) per thread-iteration
    for i in range(t, N_P1, TPB):
        c, py, px = site(i, 169, 13)
        best = np.float32(-1.0)
        arg = 0
        for a in range(4):
            s = w1s[72 + c]
            base = (2 * py + a // 2) * 28 + 2 * px + a % 2
            for ky in range(3):
                for kx in range(3):
                    s += w1s[c * 9 + ky * 3 + kx] * xs[base + ky * 28 + kx]
            if s < zero:
                s = zero
            if s > best:
                best = s
                arg = a
        store_p1(n, i, best, arg, p1s, act, am)
    cuda.syncthreads()

    # conv2 + bias + ReLU + pool: 4 conv outputs share each weight load
    for i in range(t, N_P2, TPB):
        co, py, px = site(i, 25, 5)
        s0 = w2s[1152 + co]
        s1 = s0
        s2 = s0
        s3 = s0
        for ci in range(8):
            for ky in range(3):
                for kx in range(3):
                    wv = w2s[co * 72 + ci * 9 + ky * 3 + kx]
                    base = ci * 169 + (2 * py + ky) * 13 + 2 * px + kx
                    s0 += wv * p1s[base]
                    s1 += wv * p1s[base + 1]
                    s2 += wv * p1s[base + 13]
                    s3 += wv * p1s[base + 14]
        best, arg = pool_pick(s0, s1, s2, s3)
        p2s[i] = best
        act[n, A_P2 + i] = best
        am[n, AM_2 + i] = arg
    cuda.syncthreads()



@jit(max_registers=MAX_REGS)
def k_forward(x, m, y, has_y, S, act, am, logits, preds, loss_sum):
    """One block (TPB threads) per sample n < m (grid-stride: a smaller grid loops). Reads the
    parameters from S[0]. Writes act rows (p1, p2, h), am rows, logits, preds; with has_y != 0
    also dlogits, dh, the sample's loss, and adds it to loss_sum[0]."""
    t = cuda.threadIdx.x
    lane = t % 32
    wp = t // 32
    P = S[0]
    xs = cuda.shared.array(784, np.float32)
    w1s = cuda.shared.array(80, np.float32)
    w2s = cuda.shared.array(N_C2WB, np.float32)
    p1s = cuda.shared.array(1352, np.float32)
    p2s = cuda.shared.array(400, np.float32)
    red = cuda.shared.array((128, 33), np.float32)
    hs = cuda.shared.array(128, np.float32)
    ls = cuda.shared.array(16, np.float32)
    ds = cuda.shared.array(16, np.float32)
    zero = np.float32(0.0)
    inv_m = np.float32(1.0) / np.float32(m)

    load_conv_weights(t, P, w1s, w2s)

    n = cuda.blockIdx.x
    while n < m:  # samples blockIdx, blockIdx + gridDim, ... (one each when grid == m)
        cuda.syncthreads()  # weights loaded / the previous sample's readers are done
        load_image(n, t, x, xs)
        cuda.syncthreads()

        conv_fwd_sample(n, t, xs, w1s, w2s, p1s, p2s, act, am)

        # fc1 + ReLU: warp wp takes rows wp, wp+8, ...; lane reads k = lane + 32j (coalesced),
        # a fixed 13-step loop so all loads of a row can be in flight; partials summed below
        for o in range(wp, D1, TPB // 32):
            s = zero
            for j in range(13):
                k = lane + 32 * j
                if k < N_P2:
                    s += P[O_F1W + o * N_P2 + k] * p2s[k]
            red[o, lane] = s
        cuda.syncthreads()
        for o in range(t, D1, TPB):
            s = P[O_F1B + o]
            for j in range(32):
                s += red[o, j]
            s = max(s, zero)
            hs[o] = s
            act[n, A_H + o] = s
        cuda.syncthreads()

        # fc2 -> logits, the same way (4 steps of 32 over the 128 inputs)
        for o in range(wp, K, TPB // 32):
            s = zero
            for j in range(4):
                k = lane + 32 * j
                s += P[O_F2W + o * D1 + k] * hs[k]
            red[o, lane] = s
        cuda.syncthreads()
        if t < K:
            s = P[O_F2B + t]
            for j in range(32):
                s += red[t, j]
            ls[t] = s
            logits[n, t] = s
        cuda.syncthreads()

        # softmax cross-entropy and its gradient (one thread; 10 classes)
        if t == 0:
            softmax_ce(n, ls, 0, y, has_y, inv_m, ds, act, preds, loss_sum)
        cuda.syncthreads()

        # dh = W2^T dlogits, masked by fc1's ReLU
        if has_y != 0:
            for o in range(t, D1, TPB):
                s = zero
                if hs[o] > zero:
                    for c in range(K):
                        s += P[O_F2W + c * D1 + o] * ds[c]
                act[n, A_DH + o] = s
        n += cuda.gridDim.x


@jit(device=True)
def wgrad_tile(unit, m, act, G, t, As, Bs):
    """A 32x32 tile of a dense layer's [dW | db] = dY^T [X | 1], summed over the batch chunks
    split, split + K_SPLIT, ... (32 samples each) and atomically added to G (zero before).

    unit = split * N_GEMM_TILES + gb; gb < 52: fc1 (dY = dh, X = p2), else fc2 (dY = dlogits,
    X = h). As, Bs: (>= 32*33,) shared. Thread (ty = t//32, tx = t%32) owns outputs
    (o0 + ty + 8r, k0 + tx), r = 0..3."""
    split, a_col, n_out, b_col, n_in, w_off, b_off, o0, k0 = wgrad_unit(unit)
    tx = t % 32
    ty = t // 32
    zero = np.float32(0.0)
    acc0 = zero
    acc1 = zero
    acc2 = zero
    acc3 = zero
    for n0 in range(split * TILE, m, K_SPLIT * TILE):
        for e in range(t, TILE * TILE, TPB):
            nn = e // TILE
            j = e - nn * TILE
            n = n0 + nn
            va = zero
            vb = zero
            if n < m:
                if o0 + j < n_out:
                    va = act[n, a_col + o0 + j]
                kk = k0 + j
                if kk < n_in:
                    vb = act[n, b_col + kk]
                elif kk == n_in:
                    vb = np.float32(1.0)  # the bias column
            As[nn * TS + j] = va
            Bs[nn * TS + j] = vb
        cuda.syncthreads()
        for nn in range(min(TILE, m - n0)):
            bv = Bs[nn * TS + tx]
            acc0 += As[nn * TS + ty] * bv
            acc1 += As[nn * TS + ty + 8] * bv
            acc2 += As[nn * TS + ty + 16] * bv
            acc3 += As[nn * TS + ty + 24] * bv
        cuda.syncthreads()
    add_wgrad_tile(G, t, o0, k0, n_out, n_in, w_off, b_off, acc0, acc1, acc2, acc3)


@jit(device=True)
def conv_bwd_sample(n, t, am, xs, w2s, p1s, g1s, dc2, o1s, g2s, acc2, acc1):
    """The conv part of sample n's backward, once dp2 (masked) is in g2s and scattered into the
    zero-haloed dc2, synced: conv2 weight/bias gradients into acc2, dp1 (g1s), conv1 weight/bias
    gradients into acc1; clears the dc2 entries it was given. Not synced at the end."""
    zero = np.float32(0.0)
    # conv2 weight (1152) and bias (16) gradients: dense over the 10x10 outputs pool2 reads
    for w in range(t, 1168, TPB):
        s = zero
        if w < 1152:
            co = w // 72
            r = w - co * 72
            ci = r // 9
            r = r - ci * 9
            ky = r // 3
            kx = r - ky * 3
            gb = co * DC_C + 2 * DC_W + 2
            pb = ci * 169 + ky * 13 + kx
            for yy in range(10):
                for xx in range(10):
                    s += dc2[gb + yy * DC_W + xx] * p1s[pb + yy * 13 + xx]
        else:
            co = w - 1152
            for q in range(25):
                s += g2s[co * 25 + q]
        acc2[w] += s

    # dp1 = conv2 input gradient (transposed convolution over the zero-haloed dconv2),
    # masked by pool1/ReLU1 (p1 > 0)
    for i in range(t, N_P1, TPB):
        s = zero
        if p1s[i] > zero:
            ci, yy, xx = site(i, 169, 13)
            gb = (yy + 2) * DC_W + xx + 2
            for co in range(C2):
                for ky in range(3):
                    for kx in range(3):
                        s += dc2[co * DC_C + gb - ky * DC_W - kx] * w2s[co * 72 + ci * 9 + ky * 3 + kx]
        g1s[i] = s
    cuda.syncthreads()

    conv1_wgrad_clear(n, t, am, xs, g1s, dc2, o1s, acc1)


@jit(max_registers=MAX_REGS)
def k_backward(x, m, S, act, am, n_gemm_blocks):
    """Blocks [0, n_gemm_blocks): dense weight/bias gradients, work units b, b + n_gemm_blocks,
    ... of the N_GEMM_UNITS (tile x batch split, tiled GEMMs, atomics into G = S[1], which is
    zero on entry). The other blocks (conv part)
    take samples b, b + n_conv, ...: dp2 = W1^T dh (masked) scattered into a dense, zero-haloed
    dconv2; conv2 weight/bias gradients and dp1 as dense loops over it; conv1 weight/bias
    gradients over the 169 pool-argmax positions. Sums stay in shared memory across the
    block's samples; one atomic add per weight per block into G."""
    t = cuda.threadIdx.x
    P = S[0]
    G = S[1]
    xs = cuda.shared.array(784, np.float32)
    w2s = cuda.shared.array(1152, np.float32)
    p1s = cuda.shared.array(1352, np.float32)
    g1s = cuda.shared.array(1352, np.float32)
    dc2 = cuda.shared.array(SH_DC2, np.float32)  # (16, 15, 15)
    o1s = cuda.shared.array(1352, np.int16)  # xs offset of each pool1 argmax's 3x3 patch
    dhs = cuda.shared.array(128, np.float32)
    g2s = cuda.shared.array(400, np.float32)
    acc2 = cuda.shared.array(N_C2WB, np.float32)
    acc1 = cuda.shared.array((3, 80), np.float32)
    zero = np.float32(0.0)

    if cuda.blockIdx.x < n_gemm_blocks:
        for unit in range(cuda.blockIdx.x, N_GEMM_UNITS, n_gemm_blocks):
            if (unit // N_GEMM_TILES) * TILE < m:  # this batch split has samples (short batches)
                wgrad_tile(unit, m, act, G, t, g1s, p1s)  # two 1352-float arrays reused as tiles
        return

    b = cuda.blockIdx.x - n_gemm_blocks
    n_conv = cuda.gridDim.x - n_gemm_blocks
    conv_bwd_setup(t, P, w2s, dc2, SH_DC2, acc2, N_C2WB, acc1)

    n = b
    while n < m:
        cuda.syncthreads()  # the previous sample's readers are done
        conv_bwd_load(n, t, x, act, am, xs, p1s, o1s)
        for i in range(t, D1, TPB):
            dhs[i] = act[n, A_DH + i]
        cuda.syncthreads()

        # dp2 = W1^T dh, masked by pool2/ReLU2 (pooled value > 0); threads over k: coalesced.
        # Scattered to its pool-argmax position in dconv2 (the rest of dconv2 is zero).
        for k in range(t, N_P2, TPB):
            s = zero
            if act[n, A_P2 + k] > zero:
                for o in range(D1):
                    s += P[O_F1W + o * N_P2 + k] * dhs[o]
            g2s[k] = s
            dc2[dc2_index(n, k, am)] = s
        cuda.syncthreads()

        conv_bwd_sample(n, t, am, xs, w2s, p1s, g1s, dc2, o1s, g2s, acc2, acc1)
        n += n_conv

    cuda.syncthreads()
    conv_bwd_flush(t, G, acc2, acc1)


@jit
def k_loss_head(m, y, S, act, logits, loss_sum):
    """Softmax-CE + dlogits + dh for a forward that was run without labels (a block per sample,
    grid-stride). train_step never needs it: k_forward does this itself when given labels."""
    t = cuda.threadIdx.x
    P = S[0]
    ds = cuda.shared.array(16, np.float32)
    zero = np.float32(0.0)
    inv_m = np.float32(1.0) / np.float32(m)
    n = cuda.blockIdx.x
    while n < m:
        cuda.syncthreads()  # the previous sample's readers of ds are done
        if t == 0:
            mx = logits[n, 0]
            for c in range(1, K):
                mx = max(mx, logits[n, c])
            se = zero
            for c in range(K):
                se += math.exp(logits[n, c] - mx)
            yy = y[n]
            loss = mx + math.log(se) - logits[n, yy]
            act[n, A_LOSS] = loss
            cuda.atomic.add(loss_sum, 0, np.float64(loss))
            for c in range(K):
                d = math.exp(logits[n, c] - mx) / se
                if c == yy:
                    d -= np.float32(1.0)
                d = d * inv_m
                ds[c] = d
                act[n, A_DLOG + c] = d
        cuda.syncthreads()
        for o in range(t, D1, cuda.blockDim.x):
            s = zero
            if act[n, A_H + o] > zero:
                for c in range(K):
                    s += P[O_F2W + c * D1 + o] * ds[c]
            act[n, A_DH + o] = s
        n += cuda.gridDim.x



class FastNet(DeviceNet):
    """Variant 2: k_forward, k_backward, k_sgd_state."""

    VARIANT = "fast"

    def _allocate(self, samples_per_block: int) -> None:
        n, cap = self.batch, self.cap
        self._y_dtype = np.dtype(np.int64)
        self._y_dummy: dict = {}
        self.act = self._alloc((n, ACT_W), np.float32, zero=True)
        self.am = self._alloc((n, AM_W), np.int8, zero=True)
        self.logits = self._alloc((n, K), np.float32, zero=True)
        self.preds = self._alloc(n, np.int32, zero=True)
        self.n_gemm_blocks = cap(N_GEMM_UNITS)
        # k_backward derives the conv blocks' count as gridDim - n_gemm_blocks
        self.n_conv_blocks = cap((n + samples_per_block - 1) // samples_per_block)
        self._grid.update(fwd=cap(n), bwd=self.n_gemm_blocks + self.n_conv_blocks, head=cap(n))

    def _configure(self) -> None:
        super()._configure()
        g, st = self._grid, self.stream
        self._k_fwd = k_forward[g["fwd"], TPB, st]
        self._k_bwd = k_backward[g["bwd"], TPB, st]
        self._k_head = k_loss_head[g["head"], D1, st]

    def _extra_bytes(self) -> int:
        return sum(d.nbytes for d in self._y_dummy.values())

    def _launch_forward(self, x_dev, y_dev, mm: int, preds_out):
        if y_dev is not None:
            self._y_dtype = y_dev.dtype
            y = y_dev
        else:
            y = self._dummy_y()
        self._k_fwd(x_dev, mm, y, 1 if y_dev is not None else 0, self.S, self.act, self.am, self.logits,
                    self.preds if preds_out is None else preds_out, self.loss_sum)  # fmt: skip
        return self.logits if mm == self.batch else self.logits[:mm]

    def _launch_loss_head(self, y_dev, mm: int) -> None:
        self._k_head(mm, y_dev, self.S, self.act, self.logits, self.loss_sum)

    def _launch_backward(self, mm: int) -> None:
        self._k_bwd(self._x_last, mm, self.S, self.act, self.am, self.n_gemm_blocks)

    def _host_losses(self, mm: int) -> np.ndarray:
        return self.act[:mm].copy_to_host()[:, A_LOSS]

    def _dummy_y(self):
        """Labels for a forward without labels (never read): same dtype as the training labels,
        so k_forward is not compiled twice."""
        key = np.dtype(self._y_dtype).str
        d = self._y_dummy.get(key)
        if d is None:
            d = self._y_dummy[key] = cuda.to_device(np.zeros(self.batch, self._y_dtype))
        return d
