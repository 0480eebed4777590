"""Hand-written Numba CUDA kernels: the seed CNN (bench/studies/mnist_cnn/net.py) trained entirely on the GPU.

Network, shapes (n = batch, m = rows actually in this call, m <= n), float32 throughout:

    x (n,1,28,28) -> conv1 8@3x3 +b, ReLU, maxpool 2 -> p1 (n,8,13,13)  argmax a1 0..3
      -> conv2 16@3x3 +b, ReLU, maxpool 2 (floor: 11 -> 5) -> p2 (n,16,5,5) == (n,400)  argmax a2
      -> fc1 128 +b, ReLU -> h (n,128) -> fc2 10 +b -> logits (n,10)
    loss = mean softmax cross-entropy; SGD with momentum in torch's form: v = m*v + g; p -= lr*v

Argmax a = 2*row + col inside the 2x2 window, first maximum wins (torch's tie rule); the ReLU
is applied before the pool as in torch, so "pooled value > 0" is exactly the ReLU mask of the
position the pool picked.

Device state of a DeviceNet (allocated once in __init__, nothing is allocated per step):
- S (3, 53866) float32 = [P; G; V]: all 8 parameters, their gradients and momentum buffers,
  each row flat in torch's state_dict order (offsets O_*), so SGD is one launch over S;
  `params`/`grads` are torch-shaped views into P = S[0] / G = S[1].
- loss_sum (1,) float64: every sample's loss is atomically added; epoch_loss_sum() is the one
  host sync per epoch.
- "fast" workspace: act (n, ACT_W=2048) float32, per sample row
  [p1 1352 | p2 400 | h 128 | dlogits 10 | dh 128 | loss 1 | pad]; am (n, 1792) int8
  [a1 1352 | a2 400 | pad]; logits (n,10); preds (n,) int32. Packed because numba's Python
  launch cost grows with every argument (H100 host: ~18 us for 1 argument, ~53 us for 11).
- "naive" workspace: one array per intermediate, torch's layouts.

Variants (check_numba_cuda checks each against `reference_step`, NumPy float64, and torch-cpu
before timing it):
  1 "naive": one thread per output element, one kernel per op (conv, ReLU, pool, dense and
     their backwards; each weight gradient one thread looping over the whole batch), one SGD
     launch per parameter. 30 launches per train_step. The baseline.
  2 "fast": 3 launches per train_step, TPB = 256 threads per block, register cap 64:
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
  3 "split": the dense layers leave the per-sample blocks (variant 2 read all of W1, 200 KB,
     from L2 twice per sample). 6 launches: k3_conv_fwd (variant 2's conv part, a block per
     sample), k3_fc1 (h = ReLU(p2 W1^T + b1) as 32x32 tiles over the batch), k3_head (fc2,
     softmax-CE, dlogits, dh; 4 samples a block), k3_dense_bwd (dp2 = dh W1 as 32x32 tiles,
     beside variant 2's dense weight-gradient tiles), k3_conv_bwd (variant 2's conv blocks,
     dp2 read back), SGD. Every tile GEMM (_gemm_tile) loads the next 32-row chunk of both
     operands into registers before multiplying the current one.
  4 "tiled": 3 with register-blocked convolutions (a 4x4 input patch per 2x2 conv outputs in
     both forward convs and in dp1; rolling 3-wide windows for conv2's weight gradient: see the
     variant 4 section).
  5 "splitk": 4 with fc1 split 4 ways over its 400 inputs (256 blocks instead of 64, a chain of
     4 chunks instead of 13), summed atomically into hpre; k3_head adds the bias, applies the
     ReLU and zeroes hpre for the next step.
  Variants 3-5 issue 6 launches a step from Python (host-bound when launched one by one: the
  numba launch costs 40-70 us); DeviceNet.capture_steps() records a run of steps as one CUDA
  graph (kernels/numba_cuda_graph.py, through torch), and the mnist-cnn cell variant `graph`
  replays each epoch (118 gathers + steps) as one graph.
  Every kernel is grid-stride, so a grid cap (DeviceNet(max_blocks=...), used by the
  simulator tests) changes the speed, never the result.

Partial batches (m < n rows): pass device arrays with m rows; kernels take m and skip the rest,
the loss mean divides by m, as torch does for a short last batch.

Run the GPU check (every variant against the reference, then timed):

    python -m lab.check_numba_cuda --out results/numba_cuda_check.json

Tests (CPU, CUDA simulator): pytest tests/test_numba_cuda_sim.py (sets NUMBA_ENABLE_CUDASIM=1)

Measured with check_numba_cuda on one NVIDIA H100 80GB HBM3 (132 SMs, driver 13.0), Python
3.12.3, numba 0.68.0, numba-cuda 0.30.4, NumPy 2.4.6, batch 512, random MNIST-like data;
step = train_step between CUDA events, median of 5 repeats (spread in brackets):

    variant  worst rel err  1st call  step us          samples/s   fwd us  bwd us  sgd us  host enqueue us
    naive    4.3e-06        3.3 s     53383 [53370..53929]   9,591     254   53068      27     1156
    fast     1.7e-06        5.2 s       296 [295..297]   1,727,831     102     194       5      121

  (phases: median per step with events between them). The fast step is GPU-bound (296 us of
  device time against 121 us of host launch time). History of variant 2 on the same check: a
  sparse gather for dp1/conv2 grads, 57 GEMM blocks, no register cap: 743 us/step (H100);
  dense haloed dconv2: 425 us (H200); + register cap 64, 1 sample per block, 4-way batch split
  of the GEMMs: 296 us (H100). Device memory of a batch-512 net: fast 5.5 MiB, naive 37.6 MiB.

Variants 3-5 (`bash scripts/gpu_run.sh numba` at f5174de, the same H100 kind, NumPy 2.3.5;
results/reference/H100-80GB-HBM3-numba-graph/): 200 train_steps captured as one CUDA graph,
5 replays, us per step between events around a replay [min..max]:

    variant  graph us/step        samples/s    (eager, launched one by one: us/step)
    fast     292.3 [292.0..293.2]  1,751,797    297
    split    272.9 [272.5..273.3]  1,876,438    287
    tiled    209.3 [209.1..209.3]  2,446,352    299 (host-bound)
    splitk   198.3 [198.1..198.3]  2,582,505    437 (host-bound)

  Where splitk's 198 us go (ncu, steady state: launches 61-72 of a check, at ncu's locked
  clocks, so 1.24x the graph's time in all): k4_conv_fwd 41 us, k3_fc1 27.5, k3_head 11.6,
  k3_dense_bwd 52, k4_conv_bwd 110, SGD 4. The conv kernels look issue-bound (SM throughput
  62-66 %, 38-44 % occupancy at 64 registers and 4 blocks an SM); k3_dense_bwd
  runs at 64 % SM throughput on GEMMs whose multiply-adds need a few us (which instructions
  fill it, the operand loads' index arithmetic or the atomics, was not measured).
  Floors: 0.689 GFLOP a step (torch.utils.flop_counter over the same net at batch 512,
  matmul/conv only) is 10 us at the H100's 67 TFLOP/s fp32 datasheet rate; 6-7 graph nodes a
  step at a few us each make a launch floor of roughly 15-20 us (an estimate, not measured). 198 us is 19x the FLOP floor: the 3M samples/s
  (170 us) of issue 26 is not reached; the next cuts to try are conv_bwd's instruction count
  and dense_bwd's, with a source-level ncu profile (SourceCounters) first.
  NumPy >= 2.5 breaks numba-cuda 0.30.4's import (np.row_stack is gone): pin NumPy < 2.5.
"""
from __future__ import annotations

import math
import weakref

import numpy as np

from bench.studies.mnist_cnn.net import N_CLASSES, PARAM_NAMES, PARAM_SHAPES

try:  # numba-cuda may be missing on a CPU-only host: the module still imports (reference only)
    from numba import cuda

    _IMPORT_ERROR: str | None = None
except Exception as _exc:  # noqa: BLE001
    cuda = None
    _IMPORT_ERROR = f"{type(_exc).__name__}: {_exc}"


def _cuda_sim() -> bool:
    if cuda is None:
        return False
    try:
        from numba.cuda.core import config  # numba-cuda >= 0.2x keeps its own config
    except ImportError:
        from numba.core import config
    return bool(getattr(config, "ENABLE_CUDASIM", 0))


_SIM = _cuda_sim()


def _jit(*args, **kwargs):
    """cuda.jit, or a no-op decorator when numba.cuda could not be imported. The simulator's
    jit takes no max_registers: it is dropped there."""
    if _SIM:
        kwargs.pop("max_registers", None)
    if cuda is not None:
        return cuda.jit(*args, **kwargs)
    if args and callable(args[0]):
        return args[0]
    return lambda f: f


VARIANTS = ("naive", "fast", "split", "tiled", "splitk")  # variants 1 to 5
LAUNCHES_PER_STEP = {"naive": 30, "fast": 3, "split": 6, "tiled": 6, "splitk": 6}
FC1_KSPLIT = 4  # variant 5: fc1's 13 input chunks shared by 4 blocks per tile (4 x the blocks, a third the chain)

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
_OFFSETS: dict[str, int] = {}
_o = 0
for _name in PARAM_NAMES:
    _OFFSETS[_name] = _o
    _o += int(np.prod(PARAM_SHAPES[_name]))
N_PARAMS = _o  # 53,866
O_C1W, O_C1B = _OFFSETS["conv1.weight"], _OFFSETS["conv1.bias"]
O_C2W, O_C2B = _OFFSETS["conv2.weight"], _OFFSETS["conv2.bias"]
O_F1W, O_F1B = _OFFSETS["fc1.weight"], _OFFSETS["fc1.bias"]
O_F2W, O_F2B = _OFFSETS["fc2.weight"], _OFFSETS["fc2.bias"]
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
_F1_KT = (N_P2 + 1 + TILE - 1) // TILE  # 13 column tiles of dW1 | db1
_F2_KT = (D1 + 1 + TILE - 1) // TILE  # 5 column tiles of dW2 | db2
N_GEMM_TILES = (D1 // TILE) * _F1_KT + _F2_KT  # 4*13 + 5 = 57
K_SPLIT = 4  # each tile's sum over the batch is split 4 ways (more blocks in flight), atomics
N_GEMM_UNITS = N_GEMM_TILES * K_SPLIT  # 228
MAX_REGS = 64  # register cap of the fused kernels: measured faster (more blocks per SM)


# ================================================================== NumPy reference (float64)
def _windows(a: np.ndarray) -> np.ndarray:
    """(n,c,h,w) -> (n,c,h-2,w-2,3,3) view of every 3x3 window."""
    return np.lib.stride_tricks.sliding_window_view(a, (3, 3), axis=(2, 3))


def _pool(a: np.ndarray, q: int) -> tuple[np.ndarray, np.ndarray]:
    """2x2 max pool, floor mode, first max wins. Returns pooled (n,c,q,q) and argmax 0..3."""
    n, c = a.shape[:2]
    w = a[:, :, :2 * q, :2 * q].reshape(n, c, q, 2, q, 2).transpose(0, 1, 2, 4, 3, 5).reshape(n, c, q, q, 4)
    arg = w.argmax(-1)
    return np.take_along_axis(w, arg[..., None], -1)[..., 0], arg


def _unpool(g: np.ndarray, arg: np.ndarray, side: int) -> np.ndarray:
    """Route pooled gradients g (n,c,q,q) back to their argmax positions in an (n,c,side,side) map."""
    n, c, q, _ = g.shape
    hot = (arg[..., None] == np.arange(4)) * g[..., None]  # (n,c,q,q,4)
    out = np.zeros((n, c, side, side), g.dtype)
    out[:, :, :2 * q, :2 * q] = hot.reshape(n, c, q, q, 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(n, c, 2 * q, 2 * q)
    return out


def reference_step(params: dict[str, np.ndarray], x: np.ndarray, y: np.ndarray
                   ) -> tuple[float, dict[str, np.ndarray], np.ndarray]:
    """Mean softmax-CE loss, gradients of all 8 parameters, logits - plain NumPy in float64."""
    p = {k: np.asarray(v, np.float64) for k, v in params.items()}
    x = np.asarray(x, np.float64)
    n = x.shape[0]
    w0 = _windows(x)
    c1 = np.maximum(np.einsum("nchwij,ocij->nohw", w0, p["conv1.weight"]) + p["conv1.bias"][:, None, None], 0)
    p1, a1 = _pool(c1, Q1)
    w1 = _windows(p1)
    c2 = np.maximum(np.einsum("nchwij,ocij->nohw", w1, p["conv2.weight"]) + p["conv2.bias"][:, None, None], 0)
    p2, a2 = _pool(c2, Q2)
    f = p2.reshape(n, N_P2)
    h = np.maximum(f @ p["fc1.weight"].T + p["fc1.bias"], 0)
    logits = h @ p["fc2.weight"].T + p["fc2.bias"]

    z = logits - logits.max(1, keepdims=True)
    lse = np.log(np.exp(z).sum(1))
    loss = float(np.mean(lse - z[np.arange(n), y]))
    dlog = np.exp(z - lse[:, None])
    dlog[np.arange(n), y] -= 1
    dlog /= n

    g = {"fc2.weight": dlog.T @ h, "fc2.bias": dlog.sum(0)}
    dh = (dlog @ p["fc2.weight"]) * (h > 0)
    g["fc1.weight"] = dh.T @ f
    g["fc1.bias"] = dh.sum(0)
    dp2 = (dh @ p["fc1.weight"]).reshape(p2.shape)
    dc2 = _unpool(dp2, a2, H2) * (c2 > 0)
    g["conv2.weight"] = np.einsum("nohw,nchwij->ocij", dc2, w1)
    g["conv2.bias"] = dc2.sum((0, 2, 3))
    dp1 = np.zeros_like(p1)
    for ky in range(3):
        for kx in range(3):
            dp1[:, :, ky:ky + H2, kx:kx + H2] += np.einsum("nohw,oc->nchw", dc2, p["conv2.weight"][:, :, ky, kx])
    dc1 = _unpool(dp1, a1, H1) * (c1 > 0)
    g["conv1.weight"] = np.einsum("nohw,nchwij->ocij", dc1, w0)
    g["conv1.bias"] = dc1.sum((0, 2, 3))
    return loss, {k: g[k] for k in PARAM_NAMES}, logits


def reference_sgd(params, grads, velocity, lr: float, momentum: float) -> None:
    """In place, torch's form: v = m*v + g; p -= lr*v."""
    for k in params:
        velocity[k] *= momentum
        velocity[k] += grads[k]
        params[k] -= lr * velocity[k]


def rel_err(got, want) -> float:
    """Norm-wise relative error ||got - want|| / ||want|| (float64)."""
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))


# ================================================================== variant 1: naive kernels
@_jit
def nv_conv_fwd(x, w, b, out):
    """out[n,co,y,x] = b[co] + sum w[co,ci,ky,kx] x[n,ci,y+ky,x+kx]; one thread per output."""
    nb, co_n, ho, wo = out.shape
    for i in range(cuda.grid(1), nb * co_n * ho * wo, cuda.gridsize(1)):
        xo = i % wo
        r = i // wo
        yo = r % ho
        r = r // ho
        co = r % co_n
        n = r // co_n
        s = b[co]
        for ci in range(x.shape[1]):
            for ky in range(3):
                for kx in range(3):
                    s += w[co, ci, ky, kx] * x[n, ci, yo + ky, xo + kx]
        out[n, co, yo, xo] = s


@_jit
def nv_relu(a):
    """In place on a flat view."""
    for i in range(cuda.grid(1), a.size, cuda.gridsize(1)):
        if a[i] < 0:
            a[i] = 0


@_jit
def nv_pool_fwd(inp, out, am):
    """2x2 max pool (floor), first max wins; one thread per pooled output."""
    nb, c_n, q, _ = out.shape
    for i in range(cuda.grid(1), nb * c_n * q * q, cuda.gridsize(1)):
        px = i % q
        r = i // q
        py = r % q
        r = r // q
        c = r % c_n
        n = r // c_n
        best = inp[n, c, 2 * py, 2 * px]
        arg = 0
        for a in range(1, 4):
            v = inp[n, c, 2 * py + a // 2, 2 * px + a % 2]
            if v > best:
                best = v
                arg = a
        out[n, c, py, px] = best
        am[n, c, py, px] = arg


@_jit
def nv_dense_fwd(x, w, b, out):
    """out[n,o] = b[o] + sum_k w[o,k] x[n,k]; one thread per output."""
    nb, o_n = out.shape
    for i in range(cuda.grid(1), nb * o_n, cuda.gridsize(1)):
        o = i % o_n
        n = i // o_n
        s = b[o]
        for k in range(x.shape[1]):
            s += w[o, k] * x[n, k]
        out[n, o] = s


@_jit
def nv_softmax_ce(logits, y, inv_n, dlog, loss_vec, loss_sum, preds):
    """One thread per sample: loss, dlogits = (softmax - onehot) * inv_n, argmax."""
    for n in range(cuda.grid(1), logits.shape[0], cuda.gridsize(1)):
        m = logits[n, 0]
        best = 0
        for c in range(1, logits.shape[1]):
            if logits[n, c] > m:
                m = logits[n, c]
                best = c
        preds[n] = best
        se = np.float32(0.0)
        for c in range(logits.shape[1]):
            se += math.exp(logits[n, c] - m)
        yy = y[n]
        loss = m + math.log(se) - logits[n, yy]
        loss_vec[n] = loss
        cuda.atomic.add(loss_sum, 0, np.float64(loss))
        for c in range(logits.shape[1]):
            d = math.exp(logits[n, c] - m) / se
            if c == yy:
                d -= np.float32(1.0)
            dlog[n, c] = d * inv_n


@_jit
def nv_argmax(logits, preds):
    for n in range(cuda.grid(1), logits.shape[0], cuda.gridsize(1)):
        m = logits[n, 0]
        best = 0
        for c in range(1, logits.shape[1]):
            if logits[n, c] > m:
                m = logits[n, c]
                best = c
        preds[n] = best


@_jit
def nv_dense_bwd_x(dy, w, dx):
    """dx[n,k] = sum_o dy[n,o] w[o,k]; one thread per input element."""
    nb, k_n = dx.shape
    for i in range(cuda.grid(1), nb * k_n, cuda.gridsize(1)):
        k = i % k_n
        n = i // k_n
        s = np.float32(0.0)
        for o in range(dy.shape[1]):
            s += dy[n, o] * w[o, k]
        dx[n, k] = s


@_jit
def nv_relu_bwd(g, act):
    """g *= (act > 0), flat views; act is the ReLU output."""
    for i in range(cuda.grid(1), g.size, cuda.gridsize(1)):
        if act[i] <= 0:
            g[i] = 0


@_jit
def nv_dense_wgrad(dy, x, gw, gb):
    """gw[o,k] = sum_n dy[n,o] x[n,k], gb[o] = sum_n dy[n,o]; one thread per weight, loops over n."""
    o_n, k_n = gw.shape
    for i in range(cuda.grid(1), o_n * (k_n + 1), cuda.gridsize(1)):
        o = i // (k_n + 1)
        k = i % (k_n + 1)
        s = np.float32(0.0)
        if k < k_n:
            for n in range(dy.shape[0]):
                s += dy[n, o] * x[n, k]
            gw[o, k] = s
        else:
            for n in range(dy.shape[0]):
                s += dy[n, o]
            gb[o] = s


@_jit
def nv_pool_bwd(gp, am, gout):
    """gout[n,c,y,x] = gp[n,c,y//2,x//2] where (y,x) is the window's argmax, else 0."""
    nb, c_n, hh, ww = gout.shape
    q = gp.shape[2]
    for i in range(cuda.grid(1), nb * c_n * hh * ww, cuda.gridsize(1)):
        xx = i % ww
        r = i // ww
        yy = r % hh
        r = r // hh
        c = r % c_n
        n = r // c_n
        v = np.float32(0.0)
        py = yy // 2
        px = xx // 2
        if py < q and px < q:
            if am[n, c, py, px] == (yy % 2) * 2 + xx % 2:
                v = gp[n, c, py, px]
        gout[n, c, yy, xx] = v


@_jit
def nv_conv_wgrad(x, gout, gw, gb):
    """gw[co,ci,ky,kx] = sum_{n,y,x} gout[n,co,y,x] x[n,ci,y+ky,x+kx]; gb[co] = sum gout.
    One thread per weight (then one per bias), each looping over the whole batch."""
    co_n, ci_n = gw.shape[0], gw.shape[1]
    nw = co_n * ci_n * 9
    nb, _, ho, wo = gout.shape
    for i in range(cuda.grid(1), nw + co_n, cuda.gridsize(1)):
        s = np.float32(0.0)
        if i < nw:
            kx = i % 3
            ky = (i // 3) % 3
            ci = (i // 9) % ci_n
            co = i // (9 * ci_n)
            for n in range(nb):
                for yy in range(ho):
                    for xx in range(wo):
                        s += gout[n, co, yy, xx] * x[n, ci, yy + ky, xx + kx]
            gw[co, ci, ky, kx] = s
        else:
            co = i - nw
            for n in range(nb):
                for yy in range(ho):
                    for xx in range(wo):
                        s += gout[n, co, yy, xx]
            gb[co] = s


@_jit
def nv_conv_bwd_x(gout, w, gx):
    """gx[n,ci,y,x] = sum_{co,ky,kx} gout[n,co,y-ky,x-kx] w[co,ci,ky,kx]; one thread per input."""
    nb, ci_n, hi, wi = gx.shape
    ho, wo = gout.shape[2], gout.shape[3]
    for i in range(cuda.grid(1), nb * ci_n * hi * wi, cuda.gridsize(1)):
        xx = i % wi
        r = i // wi
        yy = r % hi
        r = r // hi
        ci = r % ci_n
        n = r // ci_n
        s = np.float32(0.0)
        for co in range(gout.shape[1]):
            for ky in range(3):
                for kx in range(3):
                    yo = yy - ky
                    xo = xx - kx
                    if yo >= 0 and yo < ho and xo >= 0 and xo < wo:
                        s += gout[n, co, yo, xo] * w[co, ci, ky, kx]
        gx[n, ci, yy, xx] = s


# ================================================================== shared by both variants
@_jit
def k_sgd(p, g, v, lr, mom):
    """v = mom*v + g; p -= lr*v; g = 0. Flat float32 arrays (one parameter: naive); lr, mom float32."""
    for i in range(cuda.grid(1), p.size, cuda.gridsize(1)):
        vi = mom * v[i] + g[i]
        v[i] = vi
        p[i] -= lr * vi
        g[i] = 0


@_jit
def k_sgd_state(S, lr, mom):
    """The same over the packed state S (3, N_PARAMS) = [P; G; V]: all parameters, one launch."""
    for i in range(cuda.grid(1), S.shape[1], cuda.gridsize(1)):
        vi = mom * S[2, i] + S[1, i]
        S[2, i] = vi
        S[0, i] -= lr * vi
        S[1, i] = 0


@_jit
def k_fill_zero(a):
    for i in range(cuda.grid(1), a.size, cuda.gridsize(1)):
        a[i] = 0


# ================================================================== variant 2: fused kernels
@_jit(device=True)
def _conv_fwd_sample(n, t, xs, w1s, w2s, p1s, p2s, act, am):
    """conv1+bias+ReLU+pool, conv2+bias+ReLU+pool of sample n (its image in xs, the conv weights
    in w1s/w2s, all synced): p1s, p2s (shared) and the act/am rows of n. Ends synced."""
    zero = np.float32(0.0)
    # conv1 + bias + ReLU + pool: one pooled output (4 conv outputs) per thread-iteration
    for i in range(t, N_P1, TPB):
        c = i // 169
        r = i - c * 169
        py = r // 13
        px = r - py * 13
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
        p1s[i] = best
        act[n, A_P1 + i] = best
        am[n, AM_1 + i] = arg
    cuda.syncthreads()

    # conv2 + bias + ReLU + pool: 4 conv outputs share each weight load
    for i in range(t, N_P2, TPB):
        co = i // 25
        r = i - co * 25
        py = r // 5
        px = r - py * 5
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
        best = max(s0, zero)
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
        p2s[i] = best
        act[n, A_P2 + i] = best
        am[n, AM_2 + i] = arg
    cuda.syncthreads()


@_jit(device=True)
def _softmax_ce(n, ls, lo, y, has_y, inv_m, ds, act, preds, loss_sum):
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


@_jit(max_registers=MAX_REGS)
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
    w2s = cuda.shared.array(1168, np.float32)
    p1s = cuda.shared.array(1352, np.float32)
    p2s = cuda.shared.array(400, np.float32)
    red = cuda.shared.array((128, 33), np.float32)
    hs = cuda.shared.array(128, np.float32)
    ls = cuda.shared.array(16, np.float32)
    ds = cuda.shared.array(16, np.float32)
    zero = np.float32(0.0)
    inv_m = np.float32(1.0) / np.float32(m)

    for i in range(t, 80, TPB):  # conv1 weight (72) + bias (8)
        w1s[i] = P[O_C1W + i]
    for i in range(t, 1168, TPB):  # conv2 weight (1152) + bias (16)
        w2s[i] = P[O_C2W + i]

    n = cuda.blockIdx.x
    while n < m:  # samples blockIdx, blockIdx + gridDim, ... (one each when grid == m)
        cuda.syncthreads()  # weights loaded / the previous sample's readers are done
        for i in range(t, 784, TPB):
            xs[i] = x[n, 0, i // 28, i % 28]
        cuda.syncthreads()

        _conv_fwd_sample(n, t, xs, w1s, w2s, p1s, p2s, act, am)

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
            _softmax_ce(n, ls, 0, y, has_y, inv_m, ds, act, preds, loss_sum)
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


@_jit(device=True)
def _wgrad_tile(unit, m, act, G, t, As, Bs):
    """A 32x32 tile of a dense layer's [dW | db] = dY^T [X | 1], summed over the batch chunks
    split, split + K_SPLIT, ... (32 samples each) and atomically added to G (zero before).

    unit = split * N_GEMM_TILES + gb; gb < 52: fc1 (dY = dh, X = p2), else fc2 (dY = dlogits,
    X = h). As, Bs: (>= 32*33,) shared. Thread (ty = t//32, tx = t%32) owns outputs
    (o0 + ty + 8r, k0 + tx), r = 0..3."""
    split = unit // N_GEMM_TILES
    gb = unit - split * N_GEMM_TILES
    if gb < (D1 // TILE) * _F1_KT:
        a_col = A_DH
        n_out = D1
        b_col = A_P2
        n_in = N_P2
        ot = gb // _F1_KT
        kt = gb - ot * _F1_KT
        w_off = O_F1W
        b_off = O_F1B
    else:
        a_col = A_DLOG
        n_out = K
        b_col = A_H
        n_in = D1
        ot = 0
        kt = gb - (D1 // TILE) * _F1_KT
        w_off = O_F2W
        b_off = O_F2B
    o0 = ot * TILE
    k0 = kt * TILE
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
    k = k0 + tx
    for r in range(4):
        o = o0 + ty + 8 * r
        if r == 0:
            v = acc0
        elif r == 1:
            v = acc1
        elif r == 2:
            v = acc2
        else:
            v = acc3
        if o < n_out:
            if k < n_in:
                cuda.atomic.add(G, w_off + o * n_in + k, v)
            elif k == n_in:
                cuda.atomic.add(G, b_off + o, v)


# conv2's output gradient lives in shared memory with a zero halo of 2 (rows/cols 0..10 of
# the 11x11 map at offset 2, padded to 15x15), so the transposed convolution needs no bounds
DC_W = 15
DC_C = DC_W * DC_W  # 225 floats per channel


@_jit(device=True)
def _conv_bwd_load(n, t, x, act, am, xs, p1s, o1s):
    """Sample n's image (xs), pooled conv1 output (p1s) and, for each pooled position, the xs
    offset of the 3x3 patch its argmax read (o1s). No sync."""
    for i in range(t, 784, TPB):
        xs[i] = x[n, 0, i // 28, i % 28]
    for i in range(t, N_P1, TPB):
        p1s[i] = act[n, A_P1 + i]
        a = int(am[n, AM_1 + i])
        c = i // 169
        r = i - c * 169
        py = r // 13
        px = r - py * 13
        o1s[i] = (2 * py + a // 2) * 28 + 2 * px + a % 2


@_jit(device=True)
def _conv1_wgrad_clear(n, t, am, xs, g1s, dc2, o1s, acc1):
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
        a = int(am[n, AM_2 + k])
        co = k // 25
        r = k - co * 25
        py = r // 5
        px = r - py * 5
        dc2[co * DC_C + (2 * py + a // 2 + 2) * DC_W + 2 * px + a % 2 + 2] = zero


@_jit(device=True)
def _conv_bwd_sample(n, t, am, xs, w2s, p1s, g1s, dc2, o1s, g2s, acc2, acc1):
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
            ci = i // 169
            r = i - ci * 169
            yy = r // 13
            xx = r - yy * 13
            gb = (yy + 2) * DC_W + xx + 2
            for co in range(C2):
                for ky in range(3):
                    for kx in range(3):
                        s += dc2[co * DC_C + gb - ky * DC_W - kx] * w2s[co * 72 + ci * 9 + ky * 3 + kx]
        g1s[i] = s
    cuda.syncthreads()

    _conv1_wgrad_clear(n, t, am, xs, g1s, dc2, o1s, acc1)


@_jit(max_registers=MAX_REGS)
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
    dc2 = cuda.shared.array(3600, np.float32)  # (16, 15, 15)
    o1s = cuda.shared.array(1352, np.int16)  # xs offset of each pool1 argmax's 3x3 patch
    dhs = cuda.shared.array(128, np.float32)
    g2s = cuda.shared.array(400, np.float32)
    acc2 = cuda.shared.array(1168, np.float32)
    acc1 = cuda.shared.array((3, 80), np.float32)
    zero = np.float32(0.0)

    if cuda.blockIdx.x < n_gemm_blocks:
        for unit in range(cuda.blockIdx.x, N_GEMM_UNITS, n_gemm_blocks):
            if (unit // N_GEMM_TILES) * TILE < m:  # this batch split has samples (short batches)
                _wgrad_tile(unit, m, act, G, t, g1s, p1s)  # two 1352-float arrays reused as tiles
        return

    b = cuda.blockIdx.x - n_gemm_blocks
    n_conv = cuda.gridDim.x - n_gemm_blocks
    for i in range(t, 1168, TPB):
        acc2[i] = zero
    if t < 240:
        acc1[t // 80, t % 80] = zero
    for i in range(t, 1152, TPB):
        w2s[i] = P[O_C2W + i]
    for i in range(t, 3600, TPB):
        dc2[i] = zero

    n = b
    while n < m:
        cuda.syncthreads()  # the previous sample's readers are done
        _conv_bwd_load(n, t, x, act, am, xs, p1s, o1s)
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
            a = int(am[n, AM_2 + k])
            co = k // 25
            r = k - co * 25
            py = r // 5
            px = r - py * 5
            dc2[co * DC_C + (2 * py + a // 2 + 2) * DC_W + 2 * px + a % 2 + 2] = s
        cuda.syncthreads()

        _conv_bwd_sample(n, t, am, xs, w2s, p1s, g1s, dc2, o1s, g2s, acc2, acc1)
        n += n_conv

    cuda.syncthreads()
    for i in range(t, 1168, TPB):  # conv2 weight + bias are contiguous in G
        cuda.atomic.add(G, O_C2W + i, acc2[i])
    if t < 80:  # conv1 weight + bias likewise
        cuda.atomic.add(G, O_C1W + t, acc1[0, t] + acc1[1, t] + acc1[2, t])


@_jit
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


# ================================================================== variant 3: split
# The dense layers leave the per-sample blocks: fc1, dp2 = dh W1 and the dense weight gradients
# become batched 32x32-tile GEMMs that read W1 once per tile instead of once per sample, each
# with the next chunk's operands loaded into registers while the current one is multiplied.
# Six launches per step; DeviceNet.capture_steps() records them in a CUDA graph.
TILE_VARIANTS = ("split", "tiled", "splitk")  # variants 3-5: the dense layers as batched tiles
DS = 4  # samples per block of k3_head
GT_FC1 = D1 // TILE  # 4 output tiles of fc1 per 32-sample tile
GT_DP2 = (N_P2 + TILE - 1) // TILE  # 13 column tiles of dp2 per 32-sample tile
# shared-array sizes must be plain constants for the GPU compiler (an expression types as a
# run-time int64 there, although the simulator takes it)
SH_TILE = TILE * TS
SH_HEAD_H = DS * D1
SH_HEAD_RED = DS * K * 33
SH_HEAD_L = DS * 16


@_jit(device=True)
def _operand(mode, side, act, P, m, r, c, a_col, b_col, n_out, n_in):
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


@_jit(device=True)
def _ld(mode, side, lanes_r, e, r0, c0, act, P, m, a_col, b_col, n_out, n_in):
    """Element e (0..1023) of a 32x32 operand chunk at (r0, c0). lanes_r: consecutive e walk r
    (the operand is contiguous along r), else along c: coalesced either way."""
    if lanes_r:
        return _operand(mode, side, act, P, m, r0 + (e & 31), c0 + (e >> 5), a_col, b_col, n_out, n_in)
    return _operand(mode, side, act, P, m, r0 + (e >> 5), c0 + (e & 31), a_col, b_col, n_out, n_in)


@_jit(device=True)
def _st(buf, lanes_r, e, v):
    """Store element e of a chunk at [r * TS + c] (row r of the padded chunk)."""
    if lanes_r:
        buf[(e & 31) * TS + (e >> 5)] = v
    else:
        buf[(e >> 5) * TS + (e & 31)] = v


@_jit(device=True)
def _gemm_tile(mode, i0, j0, r_start, r_stop, r_step, act, P, m, a_col, b_col, n_out, n_in, t, As, Bs):
    """Thread (ty = t//32, tx = t%32) of a 32x32 tile C[i0.., j0..]: returns its four sums
    C[i0 + ty + 8q, j0 + tx], q = 0..3, over the 32-row chunks r_start, r_start + r_step, ...
    < r_stop. The next chunk's 8 elements per thread are loaded before this one is multiplied."""
    a_r = mode != 2  # operand A contiguous along r
    b_r = mode == 0
    tx = t % 32
    ty = t // 32
    zero = np.float32(0.0)
    acc0 = zero
    acc1 = zero
    acc2 = zero
    acc3 = zero
    r0 = r_start
    a0 = a1 = a2 = a3 = b0 = b1 = b2 = b3 = zero
    if r0 < r_stop:
        a0 = _ld(mode, 0, a_r, t, r0, i0, act, P, m, a_col, b_col, n_out, n_in)
        a1 = _ld(mode, 0, a_r, t + 256, r0, i0, act, P, m, a_col, b_col, n_out, n_in)
        a2 = _ld(mode, 0, a_r, t + 512, r0, i0, act, P, m, a_col, b_col, n_out, n_in)
        a3 = _ld(mode, 0, a_r, t + 768, r0, i0, act, P, m, a_col, b_col, n_out, n_in)
        b0 = _ld(mode, 1, b_r, t, r0, j0, act, P, m, a_col, b_col, n_out, n_in)
        b1 = _ld(mode, 1, b_r, t + 256, r0, j0, act, P, m, a_col, b_col, n_out, n_in)
        b2 = _ld(mode, 1, b_r, t + 512, r0, j0, act, P, m, a_col, b_col, n_out, n_in)
        b3 = _ld(mode, 1, b_r, t + 768, r0, j0, act, P, m, a_col, b_col, n_out, n_in)
    while r0 < r_stop:
        cuda.syncthreads()  # the last chunk's readers are done
        _st(As, a_r, t, a0)
        _st(As, a_r, t + 256, a1)
        _st(As, a_r, t + 512, a2)
        _st(As, a_r, t + 768, a3)
        _st(Bs, b_r, t, b0)
        _st(Bs, b_r, t + 256, b1)
        _st(Bs, b_r, t + 512, b2)
        _st(Bs, b_r, t + 768, b3)
        cuda.syncthreads()
        rn = r0 + r_step
        if rn < r_stop:  # in flight while this chunk is multiplied
            a0 = _ld(mode, 0, a_r, t, rn, i0, act, P, m, a_col, b_col, n_out, n_in)
            a1 = _ld(mode, 0, a_r, t + 256, rn, i0, act, P, m, a_col, b_col, n_out, n_in)
            a2 = _ld(mode, 0, a_r, t + 512, rn, i0, act, P, m, a_col, b_col, n_out, n_in)
            a3 = _ld(mode, 0, a_r, t + 768, rn, i0, act, P, m, a_col, b_col, n_out, n_in)
            b0 = _ld(mode, 1, b_r, t, rn, j0, act, P, m, a_col, b_col, n_out, n_in)
            b1 = _ld(mode, 1, b_r, t + 256, rn, j0, act, P, m, a_col, b_col, n_out, n_in)
            b2 = _ld(mode, 1, b_r, t + 512, rn, j0, act, P, m, a_col, b_col, n_out, n_in)
            b3 = _ld(mode, 1, b_r, t + 768, rn, j0, act, P, m, a_col, b_col, n_out, n_in)
        for rr in range(TILE):
            bv = Bs[rr * TS + tx]
            acc0 += As[rr * TS + ty] * bv
            acc1 += As[rr * TS + ty + 8] * bv
            acc2 += As[rr * TS + ty + 16] * bv
            acc3 += As[rr * TS + ty + 24] * bv
        r0 = rn
    return acc0, acc1, acc2, acc3


@_jit(max_registers=MAX_REGS)
def k3_conv_fwd(x, m, S, act, am):
    """k_forward's conv part alone: a block per sample, p1/p2 and pool argmaxes into act/am."""
    t = cuda.threadIdx.x
    P = S[0]
    xs = cuda.shared.array(784, np.float32)
    w1s = cuda.shared.array(80, np.float32)
    w2s = cuda.shared.array(1168, np.float32)
    p1s = cuda.shared.array(1352, np.float32)
    p2s = cuda.shared.array(400, np.float32)
    for i in range(t, 80, TPB):
        w1s[i] = P[O_C1W + i]
    for i in range(t, 1168, TPB):
        w2s[i] = P[O_C2W + i]
    n = cuda.blockIdx.x
    while n < m:
        cuda.syncthreads()
        for i in range(t, 784, TPB):
            xs[i] = x[n, 0, i // 28, i % 28]
        cuda.syncthreads()
        _conv_fwd_sample(n, t, xs, w1s, w2s, p1s, p2s, act, am)
        n += cuda.gridDim.x


@_jit(max_registers=MAX_REGS)
def k3_fc1(m, S, act, ksplit, hpre):
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
        c0, c1, c2, c3 = _gemm_tile(0, i0, j0, ks * TILE, N_P2, ksplit * TILE, act, P, m, 0, 0, 0, 0, t, As, Bs)
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


@_jit(max_registers=MAX_REGS)
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
            _softmax_ce(n0 + t, ls, t * 16, y, 1, inv_m, ds, act, preds, loss_sum)
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


@_jit(max_registers=MAX_REGS)
def k3_dense_bwd(m, S, act, dp2, n_wgrad_blocks):
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
            split = unit // N_GEMM_TILES
            if split * TILE >= m:  # this batch split has no samples (short batches)
                continue
            gb = unit - split * N_GEMM_TILES
            if gb < (D1 // TILE) * _F1_KT:
                a_col, n_out, b_col, n_in, w_off, b_off = A_DH, D1, A_P2, N_P2, O_F1W, O_F1B
                ot = gb // _F1_KT
                kt = gb - ot * _F1_KT
            else:
                a_col, n_out, b_col, n_in, w_off, b_off = A_DLOG, K, A_H, D1, O_F2W, O_F2B
                ot = 0
                kt = gb - (D1 // TILE) * _F1_KT
            o0 = ot * TILE
            k0 = kt * TILE
            c0, c1, c2, c3 = _gemm_tile(2, o0, k0, split * TILE, m, K_SPLIT * TILE, act, P, m,
                                        a_col, b_col, n_out, n_in, t, As, Bs)
            k = k0 + tx
            for q in range(4):
                o = o0 + ty + 8 * q
                v = c0
                if q == 1:
                    v = c1
                elif q == 2:
                    v = c2
                elif q == 3:
                    v = c3
                if o < n_out:
                    if k < n_in:
                        cuda.atomic.add(G, w_off + o * n_in + k, v)
                    elif k == n_in:
                        cuda.atomic.add(G, b_off + o, v)
        return
    units = ((m + TILE - 1) // TILE) * GT_DP2
    for u in range(cuda.blockIdx.x - n_wgrad_blocks, units, cuda.gridDim.x - n_wgrad_blocks):
        nt = u // GT_DP2
        i0 = nt * TILE
        j0 = (u - nt * GT_DP2) * TILE
        c0, c1, c2, c3 = _gemm_tile(1, i0, j0, 0, D1, TILE, act, P, m, 0, 0, 0, 0, t, As, Bs)
        k = j0 + tx
        if k < N_P2:
            for q in range(4):
                n = i0 + ty + 8 * q
                v = c0
                if q == 1:
                    v = c1
                elif q == 2:
                    v = c2
                elif q == 3:
                    v = c3
                if n < m:
                    if act[n, A_P2 + k] <= zero:
                        v = zero
                    dp2[n, k] = v


@_jit(device=True)
def _scatter_dp2(n, t, am, dp2, g2s, dc2):
    """Sample n's dp2 row into g2s and onto its pool2-argmax positions of the haloed dc2. No sync."""
    for k in range(t, N_P2, TPB):
        s = dp2[n, k]
        g2s[k] = s
        a = int(am[n, AM_2 + k])
        co = k // 25
        r = k - co * 25
        py = r // 5
        px = r - py * 5
        dc2[co * DC_C + (2 * py + a // 2 + 2) * DC_W + 2 * px + a % 2 + 2] = s


@_jit(max_registers=MAX_REGS)
def k3_conv_bwd(x, m, S, act, am, dp2):
    """k_backward's conv blocks with dp2 read from k3_dense_bwd's output instead of computed per
    sample: a block per sample (grid-stride), sums in shared memory, one atomic per weight."""
    t = cuda.threadIdx.x
    P = S[0]
    G = S[1]
    xs = cuda.shared.array(784, np.float32)
    w2s = cuda.shared.array(1152, np.float32)
    p1s = cuda.shared.array(1352, np.float32)
    g1s = cuda.shared.array(1352, np.float32)
    dc2 = cuda.shared.array(3600, np.float32)  # (16, 15, 15)
    o1s = cuda.shared.array(1352, np.int16)
    g2s = cuda.shared.array(400, np.float32)
    acc2 = cuda.shared.array(1168, np.float32)
    acc1 = cuda.shared.array((3, 80), np.float32)
    zero = np.float32(0.0)
    for i in range(t, 1168, TPB):
        acc2[i] = zero
    if t < 240:
        acc1[t // 80, t % 80] = zero
    for i in range(t, 1152, TPB):
        w2s[i] = P[O_C2W + i]
    for i in range(t, 3600, TPB):
        dc2[i] = zero
    n = cuda.blockIdx.x
    while n < m:
        cuda.syncthreads()
        _conv_bwd_load(n, t, x, act, am, xs, p1s, o1s)
        _scatter_dp2(n, t, am, dp2, g2s, dc2)
        cuda.syncthreads()
        _conv_bwd_sample(n, t, am, xs, w2s, p1s, g1s, dc2, o1s, g2s, acc2, acc1)
        n += cuda.gridDim.x
    cuda.syncthreads()
    for i in range(t, 1168, TPB):
        cuda.atomic.add(G, O_C2W + i, acc2[i])
    if t < 80:
        cuda.atomic.add(G, O_C1W + t, acc1[0, t] + acc1[1, t] + acc1[2, t])


# ================================================================== variant 4: tiled
# Variant 3 with register-blocked convolutions: every thread keeps a 4x4 input patch (or a
# rolling 3-wide window) in registers and reuses each loaded value for several outputs, so
# the per-sample blocks issue fewer shared-memory loads per multiply-add:
#   conv1+pool:  one pooled output = 2x2 conv outputs from a 4x4 image patch: 16 + 9 loads per 36 FMA
#   conv2+pool:  the same per input channel: 8 x (16 + 9) loads per 288 FMA (variant 2: 360)
#   conv2 dW:    a thread per (co, ci, half of the rows), 9 sums, rolling windows: 4 loads per 9 FMA
#   dp1:         a thread per (ci, 2x2 output block), 4x4 dconv2 patch per co: 25 loads per 36 FMA
DC4 = C2 * DC_C + 32  # dc2 plus a zero tail: a 4x4 patch at the map's last block reads one row past it
SH_ACC2H = 2 * 1168


@_jit(device=True)
def _conv_fwd_sample4(n, t, xs, w1s, w2s, p1s, act, am):
    """_conv_fwd_sample with 4x4 register patches (see above); writes p1s and the act/am rows."""
    zero = np.float32(0.0)
    for i in range(t, N_P1, TPB):
        c = i // 169
        r = i - c * 169
        py = r // 13
        px = r - py * 13
        b = 2 * py * 28 + 2 * px
        x00, x01, x02, x03 = xs[b], xs[b + 1], xs[b + 2], xs[b + 3]
        x10, x11, x12, x13 = xs[b + 28], xs[b + 29], xs[b + 30], xs[b + 31]
        x20, x21, x22, x23 = xs[b + 56], xs[b + 57], xs[b + 58], xs[b + 59]
        x30, x31, x32, x33 = xs[b + 84], xs[b + 85], xs[b + 86], xs[b + 87]
        wb = c * 9
        w0, w1, w2 = w1s[wb], w1s[wb + 1], w1s[wb + 2]
        w3, w4, w5 = w1s[wb + 3], w1s[wb + 4], w1s[wb + 5]
        w6, w7, w8 = w1s[wb + 6], w1s[wb + 7], w1s[wb + 8]
        bias = w1s[72 + c]
        s0 = (bias + w0 * x00 + w1 * x01 + w2 * x02 + w3 * x10 + w4 * x11 + w5 * x12
              + w6 * x20 + w7 * x21 + w8 * x22)
        s1 = (bias + w0 * x01 + w1 * x02 + w2 * x03 + w3 * x11 + w4 * x12 + w5 * x13
              + w6 * x21 + w7 * x22 + w8 * x23)
        s2 = (bias + w0 * x10 + w1 * x11 + w2 * x12 + w3 * x20 + w4 * x21 + w5 * x22
              + w6 * x30 + w7 * x31 + w8 * x32)
        s3 = (bias + w0 * x11 + w1 * x12 + w2 * x13 + w3 * x21 + w4 * x22 + w5 * x23
              + w6 * x31 + w7 * x32 + w8 * x33)
        best = max(s0, zero)  # ReLU then pool, first maximum wins (as variant 2)
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
        p1s[i] = best
        act[n, A_P1 + i] = best
        am[n, AM_1 + i] = arg
    cuda.syncthreads()

    for i in range(t, N_P2, TPB):
        co = i // 25
        r = i - co * 25
        py = r // 5
        px = r - py * 5
        s0 = w2s[1152 + co]
        s1 = s0
        s2 = s0
        s3 = s0
        for ci in range(C1):
            b = ci * 169 + 2 * py * 13 + 2 * px
            x00, x01, x02, x03 = p1s[b], p1s[b + 1], p1s[b + 2], p1s[b + 3]
            x10, x11, x12, x13 = p1s[b + 13], p1s[b + 14], p1s[b + 15], p1s[b + 16]
            x20, x21, x22, x23 = p1s[b + 26], p1s[b + 27], p1s[b + 28], p1s[b + 29]
            x30, x31, x32, x33 = p1s[b + 39], p1s[b + 40], p1s[b + 41], p1s[b + 42]
            wb = co * 72 + ci * 9
            w0, w1, w2 = w2s[wb], w2s[wb + 1], w2s[wb + 2]
            w3, w4, w5 = w2s[wb + 3], w2s[wb + 4], w2s[wb + 5]
            w6, w7, w8 = w2s[wb + 6], w2s[wb + 7], w2s[wb + 8]
            s0 += (w0 * x00 + w1 * x01 + w2 * x02 + w3 * x10 + w4 * x11 + w5 * x12
                   + w6 * x20 + w7 * x21 + w8 * x22)
            s1 += (w0 * x01 + w1 * x02 + w2 * x03 + w3 * x11 + w4 * x12 + w5 * x13
                   + w6 * x21 + w7 * x22 + w8 * x23)
            s2 += (w0 * x10 + w1 * x11 + w2 * x12 + w3 * x20 + w4 * x21 + w5 * x22
                   + w6 * x30 + w7 * x31 + w8 * x32)
            s3 += (w0 * x11 + w1 * x12 + w2 * x13 + w3 * x21 + w4 * x22 + w5 * x23
                   + w6 * x31 + w7 * x32 + w8 * x33)
        best = max(s0, zero)
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
        act[n, A_P2 + i] = best
        am[n, AM_2 + i] = arg
    cuda.syncthreads()


@_jit(device=True)
def _conv_bwd_sample4(n, t, am, xs, w2s, p1s, g1s, dc2, o1s, g2s, acc2h, acc1):
    """_conv_bwd_sample, register-blocked (see above). acc2h: (2 * 1168,) one conv2 weight/bias
    sum per half of the rows; the caller adds the halves."""
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
    wb = h * 1168 + co * 72 + ci * 9
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
            d00, d01, d02, d03 = dc2[b], dc2[b + 1], dc2[b + 2], dc2[b + 3]
            d10, d11, d12, d13 = dc2[b + 15], dc2[b + 16], dc2[b + 17], dc2[b + 18]
            d20, d21, d22, d23 = dc2[b + 30], dc2[b + 31], dc2[b + 32], dc2[b + 33]
            d30, d31, d32, d33 = dc2[b + 45], dc2[b + 46], dc2[b + 47], dc2[b + 48]
            wb = co * 72 + ci * 9
            w0, w1, w2 = w2s[wb], w2s[wb + 1], w2s[wb + 2]
            w3, w4, w5 = w2s[wb + 3], w2s[wb + 4], w2s[wb + 5]
            w6, w7, w8 = w2s[wb + 6], w2s[wb + 7], w2s[wb + 8]
            # out(dy,dx) reads patch row dy+2-ky, column dx+2-kx
            s0 += (w0 * d22 + w1 * d21 + w2 * d20 + w3 * d12 + w4 * d11 + w5 * d10
                   + w6 * d02 + w7 * d01 + w8 * d00)
            s1 += (w0 * d23 + w1 * d22 + w2 * d21 + w3 * d13 + w4 * d12 + w5 * d11
                   + w6 * d03 + w7 * d02 + w8 * d01)
            s2 += (w0 * d32 + w1 * d31 + w2 * d30 + w3 * d22 + w4 * d21 + w5 * d20
                   + w6 * d12 + w7 * d11 + w8 * d10)
            s3 += (w0 * d33 + w1 * d32 + w2 * d31 + w3 * d23 + w4 * d22 + w5 * d21
                   + w6 * d13 + w7 * d12 + w8 * d11)
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
    _conv1_wgrad_clear(n, t, am, xs, g1s, dc2, o1s, acc1)


@_jit(max_registers=MAX_REGS)
def k4_conv_fwd(x, m, S, act, am):
    """k3_conv_fwd with _conv_fwd_sample4."""
    t = cuda.threadIdx.x
    P = S[0]
    xs = cuda.shared.array(784, np.float32)
    w1s = cuda.shared.array(80, np.float32)
    w2s = cuda.shared.array(1168, np.float32)
    p1s = cuda.shared.array(1352, np.float32)
    for i in range(t, 80, TPB):
        w1s[i] = P[O_C1W + i]
    for i in range(t, 1168, TPB):
        w2s[i] = P[O_C2W + i]
    n = cuda.blockIdx.x
    while n < m:
        cuda.syncthreads()
        for i in range(t, 784, TPB):
            xs[i] = x[n, 0, i // 28, i % 28]
        cuda.syncthreads()
        _conv_fwd_sample4(n, t, xs, w1s, w2s, p1s, act, am)
        n += cuda.gridDim.x


@_jit(max_registers=MAX_REGS)
def k4_conv_bwd(x, m, S, act, am, dp2):
    """k3_conv_bwd with _conv_bwd_sample4."""
    t = cuda.threadIdx.x
    P = S[0]
    G = S[1]
    xs = cuda.shared.array(784, np.float32)
    w2s = cuda.shared.array(1152, np.float32)
    p1s = cuda.shared.array(1352, np.float32)
    g1s = cuda.shared.array(1352, np.float32)
    dc2 = cuda.shared.array(DC4, np.float32)
    o1s = cuda.shared.array(1352, np.int16)
    g2s = cuda.shared.array(400, np.float32)
    acc2h = cuda.shared.array(SH_ACC2H, np.float32)
    acc1 = cuda.shared.array((3, 80), np.float32)
    zero = np.float32(0.0)
    for i in range(t, 2 * 1168, TPB):
        acc2h[i] = zero
    if t < 240:
        acc1[t // 80, t % 80] = zero
    for i in range(t, 1152, TPB):
        w2s[i] = P[O_C2W + i]
    for i in range(t, DC4, TPB):
        dc2[i] = zero
    n = cuda.blockIdx.x
    while n < m:
        cuda.syncthreads()
        _conv_bwd_load(n, t, x, act, am, xs, p1s, o1s)
        _scatter_dp2(n, t, am, dp2, g2s, dc2)
        cuda.syncthreads()
        _conv_bwd_sample4(n, t, am, xs, w2s, p1s, g1s, dc2, o1s, g2s, acc2h, acc1)
        n += cuda.gridDim.x
    cuda.syncthreads()
    for i in range(t, 1168, TPB):
        cuda.atomic.add(G, O_C2W + i, acc2h[i] + acc2h[1168 + i])
    if t < 80:
        cuda.atomic.add(G, O_C1W + t, acc1[0, t] + acc1[1, t] + acc1[2, t])


# ================================================================== Python API
_LIVE: weakref.WeakSet[DeviceNet] = weakref.WeakSet()


def available() -> str | None:
    """None if numba.cuda can run kernels here (a GPU, or the simulator), else why not."""
    if cuda is None:
        return f"numba.cuda cannot be imported: {_IMPORT_ERROR}"
    try:
        if not cuda.is_available():
            return "numba.cuda.is_available() is False (no CUDA driver or GPU visible)"
    except Exception as exc:  # noqa: BLE001
        return f"numba.cuda.is_available() failed: {type(exc).__name__}: {exc}"
    return None


def simulated() -> bool:
    """True when numba.cuda runs kernels in its CPU simulator (NUMBA_ENABLE_CUDASIM=1 was set
    before numba.cuda was first imported)."""
    return _SIM


def device_bytes() -> int:
    """Bytes of device memory held by every live DeviceNet of this module (its own buffers)."""
    return sum(net.device_bytes() for net in _LIVE)


def _blocks(n: int, tpb: int = TPB) -> int:
    return max(1, (n + tpb - 1) // tpb)


class DeviceNet:
    """The seed CNN on one GPU: parameters, momentum, gradients and activations stay on device.

    Sync points: epoch_loss_sum(), loss_and_grads(), params_host(), predict() (one each);
    forward/backward/step/train_step only enqueue kernels on the default stream.
    """

    def __init__(self, params: dict[str, np.ndarray], batch: int, variant: str = "fast", *,
                 samples_per_block: int = 1, max_blocks: int | None = None):
        """params: torch-named float32 arrays (copied to the device). batch: rows of the largest
        batch (buffers are allocated for it once). samples_per_block: samples each conv block
        of the fast backward sums before its atomics. max_blocks: cap on every grid (kernels
        are grid-stride, so any cap is correct); None on a GPU. The CUDA simulator runs each
        thread as a Python thread, so the simulator tests set a small cap."""
        why = available()
        if why is not None:
            raise RuntimeError(why)
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, not {variant!r}")
        self.variant = variant

        def cap(nb: int) -> int:
            return max(1, min(nb, max_blocks)) if max_blocks else max(1, nb)

        def blocks(count: int, tpb: int = TPB) -> int:
            return cap(_blocks(count, tpb))

        self.batch = int(batch)
        self._arrays: list = []
        flat = np.concatenate([np.asarray(params[k], np.float32).ravel() for k in PARAM_NAMES])
        assert flat.size == N_PARAMS
        state = np.zeros((3, N_PARAMS), np.float32)
        state[0] = flat
        self.S = self._keep(cuda.to_device(state))  # [P; G; V], one buffer
        self.P, self.G, self.V = self.S[0], self.S[1], self.S[2]  # (N_PARAMS,) views
        self.params = self._views(self.P)  # name -> device view, torch shape
        self.grads = self._views(self.G)
        self.loss_sum = self._alloc(1, np.float64, zero=True)
        self._grads_dirty = False  # a backward ran since the last step (G holds gradients)
        self._have_head = False  # the last forward computed dlogits/dh (it was given labels)
        self._m = self.batch
        self._x_last = None  # input of the last forward (backward reads it)
        self._y_dtype = np.dtype(np.int64)
        self._y_dummy = {}
        self._preds_all = None
        self._k_zero_1 = k_fill_zero[1, 32]
        n = self.batch
        self._grid: dict[str, int] = {"sgd": blocks(N_PARAMS), "zero_g": blocks(N_PARAMS)}
        if variant != "naive":
            self.act = self._alloc((n, ACT_W), np.float32, zero=True)
            self.am = self._alloc((n, AM_W), np.int8, zero=True)
            self.logits = self._alloc((n, K), np.float32, zero=True)
            self.preds = self._alloc(n, np.int32, zero=True)
            self.n_gemm_blocks = cap(N_GEMM_UNITS)
            # k_backward derives the conv blocks' count as gridDim - n_gemm_blocks
            self.n_conv_blocks = cap((n + samples_per_block - 1) // samples_per_block)
            self._grid.update(fwd=cap(n), bwd=self.n_gemm_blocks + self.n_conv_blocks, head=cap(n))
        if variant in TILE_VARIANTS:
            self.dp2 = self._alloc((n, N_P2), np.float32, zero=True)
            self.ksplit = FC1_KSPLIT if variant == "splitk" else 1
            self.hpre = self._alloc((n, D1), np.float32, zero=True) if self.ksplit > 1 else self.dp2  # dp2: never read
            n_tiles = (n + TILE - 1) // TILE
            self._grid.update(conv_fwd=cap(n), fc1=cap(n_tiles * GT_FC1 * self.ksplit), head3=cap((n + DS - 1) // DS),
                              dense_bwd=self.n_gemm_blocks + cap(n_tiles * GT_DP2), conv_bwd=cap(n))
        self.stream = 0
        self._configure()
        if variant == "naive":
            a = self._alloc
            self.c1 = a((n, C1, H1, H1), np.float32)
            self.p1 = a((n, C1, Q1, Q1), np.float32)
            self.a1 = a((n, C1, Q1, Q1), np.int8)
            self.c2 = a((n, C2, H2, H2), np.float32)
            self.p2 = a((n, C2, Q2, Q2), np.float32)
            self.a2 = a((n, C2, Q2, Q2), np.int8)
            self.h = a((n, D1), np.float32)
            self.logits = a((n, K), np.float32)
            self.dlog = a((n, K), np.float32)
            self.dh = a((n, D1), np.float32)
            self.dp2 = a((n, C2, Q2, Q2), np.float32)
            self.dc2 = a((n, C2, H2, H2), np.float32)
            self.dp1 = a((n, C1, Q1, Q1), np.float32)
            self.dc1 = a((n, C1, H1, H1), np.float32)
            self.loss_vec = a(n, np.float32)
            self.preds = a(n, np.int32)
            # launch configs: one thread per output element, for the full batch
            self._nv_cfg = {
                "conv1": nv_conv_fwd[blocks(self.c1.size), TPB],
                "relu1": nv_relu[blocks(self.c1.size), TPB],
                "pool1": nv_pool_fwd[blocks(self.p1.size), TPB],
                "conv2": nv_conv_fwd[blocks(self.c2.size), TPB],
                "relu2": nv_relu[blocks(self.c2.size), TPB],
                "pool2": nv_pool_fwd[blocks(self.p2.size), TPB],
                "fc1": nv_dense_fwd[blocks(n * D1), TPB],
                "relu3": nv_relu[blocks(n * D1), TPB],
                "fc2": nv_dense_fwd[blocks(n * K), TPB],
                "loss": nv_softmax_ce[blocks(n, 128), 128],
                "argmax": nv_argmax[blocks(n, 128), 128],
                "fc2_dx": nv_dense_bwd_x[blocks(n * D1), TPB],
                "relu3_b": nv_relu_bwd[blocks(n * D1), TPB],
                "fc2_dw": nv_dense_wgrad[blocks(K * (D1 + 1)), TPB],
                "fc1_dx": nv_dense_bwd_x[blocks(n * N_P2), TPB],
                "fc1_dw": nv_dense_wgrad[blocks(D1 * (N_P2 + 1)), TPB],
                "pool2_b": nv_pool_bwd[blocks(self.c2.size), TPB],
                "relu2_b": nv_relu_bwd[blocks(self.c2.size), TPB],
                "conv2_dw": nv_conv_wgrad[blocks(C2 * C1 * 9 + C2), TPB],
                "conv2_dx": nv_conv_bwd_x[blocks(self.p1.size), TPB],
                "pool1_b": nv_pool_bwd[blocks(self.c1.size), TPB],
                "relu1_b": nv_relu_bwd[blocks(self.c1.size), TPB],
                "conv1_dw": nv_conv_wgrad[blocks(C1 * 9 + C1), TPB],
            }
            self._nv_sgd = [(k_sgd[blocks(int(np.prod(PARAM_SHAPES[k]))), TPB],
                             self._flat_view(self.P, k), self._flat_view(self.G, k), self._flat_view(self.V, k))
                            for k in PARAM_NAMES]  # one launch per parameter
            self._nv_views = {self.batch: self._naive_views(self.batch)}
        _LIVE.add(self)

    def _configure(self) -> None:
        """The launch configurations of the fused variants on self.stream (0: the default)."""
        g, st = self._grid, self.stream
        self._k_sgd = k_sgd_state[g["sgd"], TPB, st]
        self._k_zero_g = k_fill_zero[g["zero_g"], TPB, st]
        if "fwd" in g:
            self._k_fwd = k_forward[g["fwd"], TPB, st]
            self._k_bwd = k_backward[g["bwd"], TPB, st]
            self._k_head = k_loss_head[g["head"], D1, st]
        if "conv_fwd" in g:
            tiled = self.variant in ("tiled", "splitk")
            self._k3 = {
                "conv_fwd": (k4_conv_fwd if tiled else k3_conv_fwd)[g["conv_fwd"], TPB, st],
                "fc1": k3_fc1[g["fc1"], TPB, st],
                "head": k3_head[g["head3"], TPB, st],
                "dense_bwd": k3_dense_bwd[g["dense_bwd"], TPB, st],
                "conv_bwd": (k4_conv_bwd if tiled else k3_conv_bwd)[g["conv_bwd"], TPB, st],
            }

    def use_stream(self, stream) -> None:
        """Enqueue train_step's kernels (fast, split) on a numba stream from now on (0: the
        default stream); capture_steps() records them on a torch stream this way."""
        if self.variant == "naive":
            raise ValueError("the naive variant launches on the default stream only")
        self.stream = stream
        self._configure()

    # ---------------------------------------------------------------- buffers
    def _keep(self, arr):
        self._arrays.append(arr)
        return arr

    def _alloc(self, shape, dtype, zero: bool = False):
        if zero:
            return self._keep(cuda.to_device(np.zeros(shape, dtype)))
        return self._keep(cuda.device_array(shape, dtype))

    @staticmethod
    def _flat_view(buf, name: str):
        o = _OFFSETS[name]
        return buf[o:o + int(np.prod(PARAM_SHAPES[name]))]

    def _views(self, buf) -> dict:
        return {k: self._flat_view(buf, k).reshape(PARAM_SHAPES[k]) for k in PARAM_NAMES}

    def _naive_views(self, mm: int) -> dict:
        """Row-sliced views (first mm samples) of the naive buffers, plus flat views for ReLU."""
        v = {k: getattr(self, k)[:mm] for k in ("c1", "p1", "a1", "c2", "p2", "a2", "h", "logits", "dlog",
                                                 "dh", "dp2", "dc2", "dp1", "dc1", "loss_vec", "preds")}
        v["c1_flat"] = v["c1"].reshape(v["c1"].size)
        v["c2_flat"] = v["c2"].reshape(v["c2"].size)
        v["h_flat"] = v["h"].reshape(v["h"].size)
        v["dc1_flat"] = v["dc1"].reshape(v["dc1"].size)
        v["dc2_flat"] = v["dc2"].reshape(v["dc2"].size)
        v["dh_flat"] = v["dh"].reshape(v["dh"].size)
        v["f"] = v["p2"].reshape(mm, N_P2)
        v["df"] = v["dp2"].reshape(mm, N_P2)
        return v

    def device_bytes(self) -> int:
        """Bytes of device memory allocated by this net (parameters, state and workspace)."""
        extra = self._preds_all.nbytes if self._preds_all is not None else 0
        return int(sum(a.nbytes for a in self._arrays)) + int(extra) + sum(d.nbytes for d in self._y_dummy.values())

    def _rows(self, x_dev) -> int:
        mm = int(x_dev.shape[0])
        if not 0 < mm <= self.batch:
            raise ValueError(f"{mm} rows for a net allocated for batch {self.batch}")
        return mm

    # ---------------------------------------------------------------- phases
    def forward(self, x_dev, y_dev=None):
        """Enqueue the forward pass of x_dev (m,1,28,28) float32, m <= batch; returns the (m,10)
        logits (device). With y_dev (m,) int32/int64 the loss head runs too (loss, dlogits,
        dh) and the loss is added to the epoch sum. Labels must lie in [0, 10): checking them
        would cost a host sync, so they are not checked."""
        return self._forward(x_dev, y_dev, None)

    def _forward(self, x_dev, y_dev, preds_out):
        mm = self._rows(x_dev)
        if y_dev is not None and int(y_dev.shape[0]) < mm:
            raise ValueError(f"{y_dev.shape[0]} labels for {mm} images")
        self._m = mm
        self._x_last = x_dev  # conv1's weight gradient reads x in backward
        self._have_head = y_dev is not None
        if self.variant in TILE_VARIANTS and y_dev is not None:  # training: conv, fc1 tiles, head groups
            self._y_dtype = y_dev.dtype
            k = self._k3
            k["conv_fwd"](x_dev, mm, self.S, self.act, self.am)
            k["fc1"](mm, self.S, self.act, self.ksplit, self.hpre)
            k["head"](mm, y_dev, self.S, self.act, self.logits, self.preds, self.loss_sum, 1 if self.ksplit > 1 else 0, self.hpre)
            return self.logits if mm == self.batch else self.logits[:mm]
        if self.variant != "naive":  # fast, and split without labels (k_forward does inference)
            if y_dev is not None:
                self._y_dtype = y_dev.dtype
                y = y_dev
            else:
                y = self._dummy_y()
            self._k_fwd(x_dev, mm, y, 1 if y_dev is not None else 0, self.S, self.act, self.am, self.logits,
                        self.preds if preds_out is None else preds_out, self.loss_sum)
            return self.logits if mm == self.batch else self.logits[:mm]
        v, c, p = self._nview(mm), self._nv_cfg, self.params
        c["conv1"](x_dev, p["conv1.weight"], p["conv1.bias"], v["c1"])
        c["relu1"](v["c1_flat"])
        c["pool1"](v["c1"], v["p1"], v["a1"])
        c["conv2"](v["p1"], p["conv2.weight"], p["conv2.bias"], v["c2"])
        c["relu2"](v["c2_flat"])
        c["pool2"](v["c2"], v["p2"], v["a2"])
        c["fc1"](v["f"], p["fc1.weight"], p["fc1.bias"], v["h"])
        c["relu3"](v["h_flat"])
        c["fc2"](v["h"], p["fc2.weight"], p["fc2.bias"], v["logits"])
        if y_dev is not None:
            self._naive_loss(y_dev, mm)
        elif preds_out is not None:
            c["argmax"](v["logits"], preds_out)
        return v["logits"]

    def backward(self, y_dev=None):
        """Enqueue the backward pass of the last forward (gradients into G). y_dev is needed
        only if that forward had no labels."""
        mm = self._m
        if not self._have_head:
            if y_dev is None:
                raise ValueError("the last forward had no labels: pass y_dev to backward")
            if self.variant != "naive":
                self._k_head(mm, y_dev, self.S, self.act, self.logits, self.loss_sum)
            else:
                self._naive_loss(y_dev, mm)
            self._have_head = True
        if self._grads_dirty:  # two backwards without a step: G must restart from zero
            self._k_zero_g(self.G)
        self._grads_dirty = True
        if self.variant == "fast":
            self._k_bwd(self._x_last, mm, self.S, self.act, self.am, self.n_gemm_blocks)
            return
        if self.variant in TILE_VARIANTS:
            self._k3["dense_bwd"](mm, self.S, self.act, self.dp2, self.n_gemm_blocks)
            self._k3["conv_bwd"](self._x_last, mm, self.S, self.act, self.am, self.dp2)
            return
        v, c, p, g = self._nview(mm), self._nv_cfg, self.params, self.grads
        c["fc2_dx"](v["dlog"], p["fc2.weight"], v["dh"])
        c["relu3_b"](v["dh_flat"], v["h_flat"])
        c["fc2_dw"](v["dlog"], v["h"], g["fc2.weight"], g["fc2.bias"])
        c["fc1_dx"](v["dh"], p["fc1.weight"], v["df"])
        c["fc1_dw"](v["dh"], v["f"], g["fc1.weight"], g["fc1.bias"])
        c["pool2_b"](v["dp2"], v["a2"], v["dc2"])
        c["relu2_b"](v["dc2_flat"], v["c2_flat"])
        c["conv2_dw"](v["p1"], v["dc2"], g["conv2.weight"], g["conv2.bias"])
        c["conv2_dx"](v["dc2"], p["conv2.weight"], v["dp1"])
        c["pool1_b"](v["dp1"], v["a1"], v["dc1"])
        c["relu1_b"](v["dc1_flat"], v["c1_flat"])
        c["conv1_dw"](self._x_last, v["dc1"], g["conv1.weight"], g["conv1.bias"])

    def step(self, lr: float, momentum: float) -> None:
        """Enqueue SGD with momentum (torch form) on all parameters; zeroes the gradients."""
        lr32, m32 = np.float32(lr), np.float32(momentum)
        if self.variant != "naive":
            self._k_sgd(self.S, lr32, m32)
        else:
            for cfg, p, g, v in self._nv_sgd:
                cfg(p, g, v, lr32, m32)
        self._grads_dirty = False

    def train_step(self, x_dev, y_dev, lr: float, momentum: float) -> None:
        """forward (with the loss head) + backward + SGD step; no host sync, no allocation."""
        self.forward(x_dev, y_dev)
        self.backward()
        self.step(lr, momentum)

    def capture_steps(self, batches, lr: float, momentum: float, before=None):
        """One CUDA graph of len(batches) train_steps on (x_dev, y_dev) device batches (fast,
        split), each preceded by before(i, stream) if given (e.g. the gather that fills the batch
        buffers); .replay() enqueues them all with one host call. The graph reads this net's
        buffers and the batch arrays it was captured with."""
        from bench.studies.mnist_cnn.kernels.numba_cuda_graph import CapturedLaunches

        def enqueue(stream) -> None:
            self.use_stream(stream)
            try:
                for i, (xb, yb) in enumerate(batches):
                    if before is not None:
                        before(i, stream)
                    self.train_step(xb, yb, lr, momentum)
            finally:
                self.use_stream(0)

        return CapturedLaunches(enqueue)

    def _nview(self, mm: int) -> dict:
        v = self._nv_views.get(mm)
        if v is None:
            v = self._nv_views[mm] = self._naive_views(mm)
        return v

    def _naive_loss(self, y_dev, mm: int) -> None:
        v = self._nview(mm)
        self._nv_cfg["loss"](v["logits"], y_dev, np.float32(1.0 / mm), v["dlog"], v["loss_vec"],
                             self.loss_sum, v["preds"])

    def _dummy_y(self):
        """Labels for a forward without labels (never read): same dtype as the training labels,
        so k_forward is not compiled twice."""
        key = np.dtype(self._y_dtype).str
        d = self._y_dummy.get(key)
        if d is None:
            d = self._y_dummy[key] = cuda.to_device(np.zeros(self.batch, self._y_dtype))
        return d

    # ---------------------------------------------------------------- host-side helpers (sync)
    def loss_and_grads(self, x_dev, y_dev) -> tuple[float, dict[str, np.ndarray], np.ndarray]:
        """Host copies of the mean loss, the 8 gradients and the logits for (x_dev, y_dev).
        For tests: syncs; adds the batch's loss to the epoch sum like train_step does."""
        logits = self.forward(x_dev, y_dev)
        self.backward()
        cuda.synchronize()
        mm = self._m
        if self.variant != "naive":
            losses = self.act[:mm].copy_to_host()[:, A_LOSS]
        else:
            losses = self.loss_vec[:mm].copy_to_host()
        grads = {k: self.grads[k].copy_to_host() for k in PARAM_NAMES}
        return float(np.mean(losses.astype(np.float64))), grads, logits.copy_to_host()

    def epoch_loss_sum(self, reset: bool = True) -> float:
        """The one host sync per epoch: the sum of every sample's loss since the last reset."""
        total = float(self.loss_sum.copy_to_host()[0])
        if reset:
            self._k_zero_1(self.loss_sum)
        return total

    def params_host(self) -> dict[str, np.ndarray]:
        flat = self.P.copy_to_host()
        return {k: flat[_OFFSETS[k]:_OFFSETS[k] + int(np.prod(s))].reshape(s).copy()
                for k, s in PARAM_SHAPES.items()}

    def velocity_host(self) -> dict[str, np.ndarray]:
        flat = self.V.copy_to_host()
        return {k: flat[_OFFSETS[k]:_OFFSETS[k] + int(np.prod(s))].reshape(s).copy()
                for k, s in PARAM_SHAPES.items()}

    def predict(self, x_dev_all) -> np.ndarray:
        """Predicted labels (int64, host) for a device array (N,1,28,28) of any length, in chunks
        of `batch` (the last one short); one sync at the end. Does not touch gradients or loss."""
        total = int(x_dev_all.shape[0])
        if self._preds_all is None or self._preds_all.shape[0] < total:
            self._preds_all = cuda.device_array(max(total, 1), np.int32)
        out = self._preds_all
        for off in range(0, total, self.batch):
            mm = min(self.batch, total - off)
            self._forward(x_dev_all[off:off + mm], None, out[off:off + mm])
        self._have_head = False
        return out[:total].copy_to_host().astype(np.int64)
