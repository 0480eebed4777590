"""The device net shared by the numba-cuda kernel variants (v1_naive.py .. v5_splitk.py): sizes,
the parameter and activation layout, the device functions and per-sample kernel loops that more
than one variant runs, and the SGD kernel.

Network, shapes (n = batch, m = rows actually in this call, m <= n), float32 throughout:

    x (n,1,28,28) -> conv1 8@3x3 +b, ReLU, maxpool 2 -> p1 (n,8,13,13)  argmax a1 0..3
      -> conv2 16@3x3 +b, ReLU, maxpool 2 (floor: 11 -> 5) -> p2 (n,16,5,5) == (n,400)  argmax a2
      -> fc1 128 +b, ReLU -> h (n,128) -> fc2 10 +b -> logits (n,10)
    loss = mean softmax cross-entropy; SGD with momentum in torch's form: v = m*v + g; p -= lr*v

Argmax a = 2*row + col inside the 2x2 window, first maximum wins (torch's tie rule); the ReLU
is applied before the pool as in torch, so "pooled value > 0" is exactly the ReLU mask of the
position the pool picked.

Device state (device_net.DeviceNet allocates it once; nothing is allocated per step):
- S (3, 53866) float32 = [P; G; V]: all 8 parameters, their gradients and momentum buffers,
  each row flat in torch's state_dict order (offsets O_*), so SGD is one launch over S.
- loss_sum (1,) float64: every sample's loss is atomically added.
- variants 2-5: act (n, ACT_W=2048) float32, per sample row
  [p1 1352 | p2 400 | h 128 | dlogits 10 | dh 128 | loss 1 | pad]; am (n, 1792) int8
  [a1 1352 | a2 400 | pad]. Packed because numba's Python launch cost grows with every
  argument (H100 host: ~18 us for 1 argument, ~53 us for 11).

Every kernel is grid-stride, so a grid cap (DeviceNet(max_blocks=...), used by the simulator
tests) changes the speed, never the result. Shared-array sizes are plain module constants (an
expression types as a run-time int64 on the GPU compiler, although the simulator takes it).
"""

from __future__ import annotations

import math
import os

import numpy as np

from bench.studies.mnist_cnn.net import N_CLASSES, PARAM_NAMES, PARAM_SHAPES

try:  # numba-cuda may be missing on a CPU-only host: the module still imports (reference only)
    from numba import cuda

    IMPORT_ERROR: str | None = None
except Exception as _exc:  # noqa: BLE001
    cuda = None
    IMPORT_ERROR = f"{type(_exc).__name__}: {_exc}"


def _cuda_sim() -> bool:
    if cuda is None:
        return False
    try:
        from numba.cuda.core import config  # numba-cuda >= 0.2x keeps its own config
    except ImportError:
        from numba.core import config
    return bool(getattr(config, "ENABLE_CUDASIM", 0))


SIM = _cuda_sim()


def jit(*args, **kwargs):
    """cuda.jit, or a no-op decorator when numba.cuda could not be imported. The simulator's
    jit takes no max_registers: it is dropped there. KIT_NUMBA_LINEINFO=1 compiles every kernel
    with line information, so ncu's source page can tie each machine instruction to its Python
    line (lab/ncu_source.py sums them). Kernels only: device functions compiled with it too made
    NVVM refuse the kernels that call them ("Symbol name with unsupported characters", numba-cuda
    0.30.4 on an H100, 2026-11-27: the debug types of their array arguments, NVIDIA/numba-cuda#876);
    their inlined code is still attributed to source lines."""
    if SIM:
        kwargs.pop("max_registers", None)
    elif os.environ.get("KIT_NUMBA_LINEINFO") == "1" and not kwargs.get("device"):
        kwargs.setdefault("lineinfo", True)
    if cuda is not None:
        return cuda.jit(*args, **kwargs)
    if args and callable(args[0]):
        return args[0]
    return lambda f: f


def named_kernel(fn, name: str):
    """fn (a kernel built by a factory below) compiled under `name`, the name profilers show."""
    fn.__name__ = fn.__qualname__ = name
    return jit(max_registers=MAX_REGS)(fn)


# ------------------------------------------------------------------ sizes (compile-time constants)
C1, H1, Q1 = 8, 26, 13  # conv1 channels, conv1 output side, pool1 output side
C2, H2, Q2 = 16, 11, 5  # conv2 channels, conv2 output side, pool2 output side (floor)
N_P1 = C1 * Q1 * Q1  # 1352
N_P2 = C2 * Q2 * Q2  # 400 = fc1 inputs
D1 = 128
K = N_CLASSES  # 10
TPB = 256  # threads per block of the fused kernels (8 warps)
TILE = 32  # GEMM tile (outputs 32x32, batch chunk 32)
TS = TILE + 1  # padded shared row: no bank conflicts

# flat parameter buffer: offsets in torch's state_dict order
OFFSETS: dict[str, int] = {}
_o = 0
for _name in PARAM_NAMES:
    OFFSETS[_name] = _o
    _o += int(np.prod(PARAM_SHAPES[_name]))
N_PARAMS = _o  # 53,866
O_C1W, O_C1B = OFFSETS["conv1.weight"], OFFSETS["conv1.bias"]
O_C2W, O_C2B = OFFSETS["conv2.weight"], OFFSETS["conv2.bias"]
O_F1W, O_F1B = OFFSETS["fc1.weight"], OFFSETS["fc1.bias"]
O_F2W, O_F2B = OFFSETS["fc2.weight"], OFFSETS["fc2.bias"]
assert O_C1B == O_C1W + 72 and O_C2B == O_C2W + 1152  # conv weight+bias are contiguous

# "fast" per-sample activation row (float32) and argmax row (int8)
A_P1 = 0
A_P2 = A_P1 + N_P1
A_H = A_P2 + N_P2
A_DLOG = A_H + D1
A_DH = A_DLOG + K
A_LOSS = A_DH + D1
ACT_W = 2048
assert A_LOSS < ACT_W
AM_1 = 0
AM_2 = N_P1
AM_W = 1792

# fast backward: 32x32 output tiles of the dense weight gradients
F1_KT = (N_P2 + 1 + TILE - 1) // TILE  # 13 column tiles of dW1 | db1
F2_KT = (D1 + 1 + TILE - 1) // TILE  # 5 column tiles of dW2 | db2
N_GEMM_TILES = (D1 // TILE) * F1_KT + F2_KT  # 4*13 + 5 = 57
K_SPLIT = 4  # each tile's sum over the batch is split 4 ways (more blocks in flight), atomics
N_GEMM_UNITS = N_GEMM_TILES * K_SPLIT  # 228
MAX_REGS = 64  # register cap of the fused kernels: measured faster (more blocks per SM)
# conv2's output gradient lives in shared memory with a zero halo of 2 (rows/cols 0..10 of
# the 11x11 map at offset 2, padded to 15x15), so the transposed convolution needs no bounds
DC_W = 15
DC_C = DC_W * DC_W  # 225 floats per channel
SH_DC2 = C2 * DC_C  # 3600
N_C2WB = 1168  # conv2 weight (1152) + bias (16), contiguous in S


# ================================================================== device functions
@jit(device=True)
def site(i, area, side):
    """Flat index i of a (., side, side) map (area = side * side) -> (channel, row, column)."""
    c = i // area
    r = i - c * area
    py = r // side
    return c, py, r - py * side


@jit(device=True)
def load_image(n, t, x, xs):
    """Sample n's 28x28 image into xs (784,) shared. No sync."""
    for i in range(t, 784, TPB):
        xs[i] = x[n, 0, i // 28, i % 28]


@jit(device=True)
def load_conv_weights(t, P, w1s, w2s):
    """conv1 weight (72) + bias (8) into w1s, conv2 weight (1152) + bias (16) into w2s. No sync."""
    for i in range(t, 80, TPB):
        w1s[i] = P[O_C1W + i]
    for i in range(t, N_C2WB, TPB):
        w2s[i] = P[O_C2W + i]


@jit(device=True)
def pool_pick(s0, s1, s2, s3):
    """ReLU then 2x2 max pool over four conv outputs: (pooled value, argmax), first max wins."""
    best = max(s0, np.float32(0.0))
    arg = 0
    if s1 > best:
        best = s1
        arg = 1
    if s2 > best:
        best = s2
        arg = 2
    if s3 > best:
        best = s3
        arg = 3
    return best, arg


@jit(device=True)
def store_p1(n, i, best, arg, p1s, act, am):
    """Pooled conv1 output i of sample n (value, argmax) into p1s and the act/am rows."""
    p1s[i] = best
    act[n, A_P1 + i] = best
    am[n, AM_1 + i] = arg


@jit(device=True)
def softmax_ce(n, ls, lo, y, has_y, inv_m, ds, act, preds, loss_sum):
    """One thread, sample n, its 10 logits in ls[lo:lo+10]: preds[n] (argmax, first wins); with
    has_y != 0 also the loss (act row, atomically into loss_sum[0]) and dlogits = (softmax -
    onehot) * inv_m into ds[lo:lo+10] and the act row."""
    zero = np.float32(0.0)
    mx = ls[lo]
    best_c = 0
    for c in range(1, K):
        if ls[lo + c] > mx:
            mx = ls[lo + c]
            best_c = c
    preds[n] = best_c
    if has_y != 0:
        se = zero
        for c in range(K):
            se += math.exp(ls[lo + c] - mx)
        yy = y[n]
        loss = mx + math.log(se) - ls[lo + yy]
        act[n, A_LOSS] = loss
        cuda.atomic.add(loss_sum, 0, np.float64(loss))
        for c in range(K):
            d = math.exp(ls[lo + c] - mx) / se
            if c == yy:
                d -= np.float32(1.0)
            d = d * inv_m
            ds[lo + c] = d
            act[n, A_DLOG + c] = d



@jit(device=True)
def wgrad_unit(unit):
    """Work unit `unit` of the dense weight gradients [dW | db] = dY^T [X | 1]: unit = split *
    N_GEMM_TILES + gb; gb < 52: fc1 (dY = dh, X = p2), else fc2 (dY = dlogits, X = h). Returns
    (split, a_col, n_out, b_col, n_in, w_off, b_off, o0, k0): the act columns of dY and X, their
    widths, the offsets of W and b in S and the tile's first output row and column."""
    split = unit // N_GEMM_TILES
    gb = unit - split * N_GEMM_TILES
    if gb < (D1 // TILE) * F1_KT:
        ot = gb // F1_KT
        return split, A_DH, D1, A_P2, N_P2, O_F1W, O_F1B, ot * TILE, (gb - ot * F1_KT) * TILE
    return split, A_DLOG, K, A_H, D1, O_F2W, O_F2B, 0, (gb - (D1 // TILE) * F1_KT) * TILE


@jit(device=True)
def pick4(q, c0, c1, c2, c3):
    """c_q of four per-thread tile sums (q = 0..3)."""
    v = c0
    if q == 1:
        v = c1
    elif q == 2:
        v = c2
    elif q == 3:
        v = c3
    return v


@jit(device=True)
def add_wgrad_tile(G, t, o0, k0, n_out, n_in, w_off, b_off, c0, c1, c2, c3):
    """Thread (ty = t//32, tx = t%32) adds its four sums of a [dW | db] tile, outputs
    (o0 + ty + 8q, k0 + tx), atomically into G (the bias in column n_in)."""
    k = k0 + t % 32
    for q in range(4):
        o = o0 + t // 32 + 8 * q
        v = pick4(q, c0, c1, c2, c3)
        if o < n_out:
            if k < n_in:
                cuda.atomic.add(G, w_off + o * n_in + k, v)
            elif k == n_in:
                cuda.atomic.add(G, b_off + o, v)


@jit(device=True)
def dc2_index(n, k, am):
    """Where pooled gradient k of sample n lands in the zero-haloed dc2: its pool2 argmax."""
    a = int(am[n, AM_2 + k])
    co, py, px = site(k, 25, 5)
    return co * DC_C + (2 * py + a // 2 + 2) * DC_W + 2 * px + a % 2 + 2


@jit(device=True)
def conv_bwd_load(n, t, x, act, am, xs, p1s, o1s):
    """Sample n's image (xs), pooled conv1 output (p1s) and, for each pooled position, the xs
    offset of the 3x3 patch its argmax read (o1s). No sync."""
    load_image(n, t, x, xs)
    for i in range(t, N_P1, TPB):
        p1s[i] = act[n, A_P1 + i]
        a = int(am[n, AM_1 + i])
        c, py, px = site(i, 169, 13)
        o1s[i] = (2 * py + a // 2) * 28 + 2 * px + a % 2


@jit(device=True)
def conv1_wgrad_clear(n, t, am, xs, g1s, dc2, o1s, acc1):
    """conv1 weight/bias gradients from dp1 (g1s, synced) into acc1; clears sample n's dc2 entries."""
    zero = np.float32(0.0)
    # conv1 weight (72) and bias (8) gradients over the 169 pooled positions (one conv1
    # output each), 3 threads per weight; also clear this sample's dconv2 entries
    if t < 240:
        part = t // 80
        w = t - part * 80
        c = w // 9
        kk = w - c * 9
        off = (kk // 3) * 28 + kk % 3
        if w >= 72:
            c = w - 72
        s = zero
        base = c * 169
        if w < 72:
            for q in range(part, 169, 3):
                s += g1s[base + q] * xs[o1s[base + q] + off]
        else:
            for q in range(part, 169, 3):
                s += g1s[base + q]
        acc1[part, w] += s
    for k in range(t, N_P2, TPB):
        dc2[dc2_index(n, k, am)] = zero



@jit(device=True)
def conv_bwd_setup(t, P, w2s, dc2, n_dc2, acc2, n_acc2, acc1):
    """A conv-backward block's start: conv2's weights into w2s, dc2 and the sums zeroed. No sync."""
    zero = np.float32(0.0)
    for i in range(t, n_acc2, TPB):
        acc2[i] = zero
    if t < 240:
        acc1[t // 80, t % 80] = zero
    for i in range(t, 1152, TPB):
        w2s[i] = P[O_C2W + i]
    for i in range(t, n_dc2, TPB):
        dc2[i] = zero


@jit(device=True)
def conv_bwd_flush(t, G, acc2, acc1):
    """A conv-backward block's end: one atomic add per conv weight and bias into G."""
    for i in range(t, N_C2WB, TPB):  # conv2 weight + bias are contiguous in G
        cuda.atomic.add(G, O_C2W + i, acc2[i])
    if t < 80:  # conv1 weight + bias likewise
        cuda.atomic.add(G, O_C1W + t, acc1[0, t] + acc1[1, t] + acc1[2, t])


@jit(device=True)
def scatter_dp2(n, t, am, dp2, g2s, dc2):
    """Sample n's dp2 row into g2s and onto its pool2-argmax positions of the haloed dc2. No sync."""
    for k in range(t, N_P2, TPB):
        s = dp2[n, k]
        g2s[k] = s
        dc2[dc2_index(n, k, am)] = s



# ================================================================== per-sample kernels
def conv_fwd_kernel(name: str, sample, n_p2s: int):
    """The conv forward as its own kernel (variants 3-5): a block per sample (grid-stride),
    conv weights loaded once, then sample(n, t, xs, w1s, w2s, p1s, p2s, act, am) per sample,
    which writes p1, p2 and the pool argmaxes into the act/am rows. n_p2s: the shared p2s
    floats the sample function uses (1 where it keeps p2 in registers only)."""

    def kernel(x, m, S, act, am):
        xs = cuda.shared.array(784, np.float32)
        w1s = cuda.shared.array(80, np.float32)
        w2s = cuda.shared.array(N_C2WB, np.float32)
        p1s = cuda.shared.array(N_P1, np.float32)
        p2s = cuda.shared.array(n_p2s, np.float32)
        t = cuda.threadIdx.x
        load_conv_weights(t, S[0], w1s, w2s)
        n = cuda.blockIdx.x
        while n < m:
            cuda.syncthreads()  # weights loaded / the previous sample's readers are done
            load_image(n, t, x, xs)
            cuda.syncthreads()
            sample(n, t, xs, w1s, w2s, p1s, p2s, act, am)
            n += cuda.gridDim.x

    return named_kernel(kernel, name)


def conv_bwd_kernel(name: str, sample, n_dc2: int = SH_DC2, n_acc2: int = N_C2WB, halves: bool = False):
    """The conv backward as its own kernel (variants 3-5), dp2 read from the dense backward's
    output: a block per sample (grid-stride); per sample, the image, p1 and argmax patches are
    loaded, dp2 scattered into the zero-haloed dc2 (n_dc2 floats), then sample(n, t, am, xs,
    w2s, p1s, g1s, dc2, o1s, g2s, acc2, acc1) adds the sample's conv gradients into acc2
    (n_acc2 floats) and acc1; sums stay in shared memory, one atomic per weight at the end.
    halves: acc2 holds two partial sums per conv2 weight (acc2[i], acc2[N_C2WB + i]), added
    before the atomics."""

    def kernel(x, m, S, act, am, dp2):
        xs = cuda.shared.array(784, np.float32)
        w2s = cuda.shared.array(1152, np.float32)
        p1s = cuda.shared.array(N_P1, np.float32)
        g1s = cuda.shared.array(N_P1, np.float32)
        dc2 = cuda.shared.array(n_dc2, np.float32)
        o1s = cuda.shared.array(N_P1, np.int16)  # xs offset of each pool1 argmax's 3x3 patch
        g2s = cuda.shared.array(N_P2, np.float32)
        acc2 = cuda.shared.array(n_acc2, np.float32)
        acc1 = cuda.shared.array((3, 80), np.float32)
        t = cuda.threadIdx.x
        conv_bwd_setup(t, S[0], w2s, dc2, n_dc2, acc2, n_acc2, acc1)
        n = cuda.blockIdx.x
        while n < m:
            cuda.syncthreads()  # the previous sample's readers are done
            conv_bwd_load(n, t, x, act, am, xs, p1s, o1s)
            scatter_dp2(n, t, am, dp2, g2s, dc2)
            cuda.syncthreads()
            sample(n, t, am, xs, w2s, p1s, g1s, dc2, o1s, g2s, acc2, acc1)
            n += cuda.gridDim.x
        cuda.syncthreads()
        if halves:
            for i in range(t, N_C2WB, TPB):
                acc2[i] = acc2[i] + acc2[N_C2WB + i]
        conv_bwd_flush(t, S[1], acc2, acc1)

    return named_kernel(kernel, name)


# ================================================================== SGD and fills
@jit
def k_sgd_state(S, lr, mom):
    """The same over the packed state S (3, N_PARAMS) = [P; G; V]: all parameters, one launch."""
    for i in range(cuda.grid(1), S.shape[1], cuda.gridsize(1)):
        vi = mom * S[2, i] + S[1, i]
        S[2, i] = vi
        S[0, i] -= lr * vi
        S[1, i] = 0


@jit
def k_fill_zero(a):
    for i in range(cuda.grid(1), a.size, cuda.gridsize(1)):
        a[i] = 0

