"""Tuned CuPy variant of the seed-001 MLP: net.py's maths in 3 hand-written kernels, graph-replayed.

Row-major, one row per sample (m rows). Each bias rides in its weight matrix through a
ones column, and rows are padded so every row starts 16-byte aligned:
    Xa  (m, 800) = [X | 1 | 0 x15]     W1a (10, 800) = [W1 | b1 | 0]
    A1a (m, 16)  = [A1 | 1 | 0 x5]     W2a (10, 16)  = [W2 | b2 | 0]
One training iteration, gemm="kernels" (default): 3 launches, X read twice, no host sync
    1. mlp_forward   a warp per 32 rows: Z1 = Xa W1a^T (W1a in shared memory, shuffle
                     reduction), then per row A1 = ReLU(Z1), Z2 = W2 A1 + b2, A2 = softmax,
                     dZ2 = A2 - Y, dZ1 = W2^T dZ2 * ReLU'(Z1)  -> A1a, dZ2, dZ1 (m, 10)
    2. mlp_backward_partial  block b sums dZ^T [Xa | A1a] over its rows -> part[b] (10, 816)
    3. mlp_reduce_update     W1a, W2a += (-lr/m) sum_b part[b]   (dW, db and the update at once;
                             fixed summation order, so runs are bit-reproducible)
gemm="cublas": Z1 and the dW GEMMs (with the update folded in as beta = 1) go through
cuBLAS and a per-row kernel does step 1's second half. CuPy refuses cuBLAS calls during
stream capture, so this path runs without a CUDA graph; it is kept for comparison.

A recording iteration (every `record_every`) also adds correct-count and summed loss into
a device stats buffer, runs step 1 on the validation set (stats only), and a 1-thread
kernel appends the stats to a device history; the host reads the history once, after the
run. The record at iteration i uses the params after i updates, as runner.plain_run.
Each kind of iteration (plain, recording) is captured once into a CUDA graph and replayed.

Run on a GPU host: `python -m lab.mlp_check_gpu --data DIR --out DIR` (checks this
variant against NumPy before timing it). float32 (default) or float64. TF32 is never used.
"""
from __future__ import annotations

import time

import numpy as np

from bench.studies.mlp_scratch import net

K_PAD = 800       # Xa row: 784 pixels + ones column + 15 zeros (3200 B in float32)
H_PAD = 16        # A1a row: 10 hidden + ones column + 5 zeros
N_OUT_COLS = K_PAD + H_PAD  # columns of one partial-sum row: [dW1a | dW2a]
GEMMS = ("kernels", "cublas")
# Launch shapes per dtype: rows a warp reduces at once in mlp_forward, its min blocks per
# SM (register cap: 2 -> 128 registers, ~100 B spilled, still faster), and partial-sum
# blocks per SM in mlp_backward_partial. Chosen by a sweep on an H200 (132 SMs), m = 59,000,
# back-to-back replays between two events: float32 forward 94 us, backward + update 90 us,
# graph step 176 us (rows 2 / 1 block: 287 us; cuBLAS path 276 us, no graph). float64:
# 205 + 256 us (its cuBLAS path was faster there, 292 us: fp64 is for checks, not speed).
TUNE_F32 = {"rows": 4, "fwd_min_blocks": 2, "partial_blocks_per_sm": 4}
TUNE_F64 = {"rows": 4, "fwd_min_blocks": 1, "partial_blocks_per_sm": 2}

_SOURCE = r"""
// T is float or double (typedef'd before this text). Row-major; m = rows (samples).
#define NIN_PAD 800                // Xa row length
#define NCH (NIN_PAD / 4)          // 4-element chunks per Xa row
#define HP 16                      // A1a / W2a row length
#define NOUT (NIN_PAD + HP)        // columns of a partial row [dW1a | dW2a]
#define WCH 44                     // shared W1 floats per chunk: 40 + 4 pad (no bank conflicts)
#ifndef ROWS
#define ROWS 4                     // rows a warp reduces at once in mlp_forward (divides 32)
#endif
#ifndef FWD_MIN_BLOCKS
#define FWD_MIN_BLOCKS 1           // mlp_forward's __launch_bounds__ minimum blocks per SM
#endif

__device__ __forceinline__ void load4(const float* p, float v[4]) {
    const float4 q = *reinterpret_cast<const float4*>(p); v[0] = q.x; v[1] = q.y; v[2] = q.z; v[3] = q.w;
}
__device__ __forceinline__ void load4(const double* p, double v[4]) {
    const double2 a = reinterpret_cast<const double2*>(p)[0], b = reinterpret_cast<const double2*>(p)[1];
    v[0] = a.x; v[1] = a.y; v[2] = b.x; v[3] = b.y;
}

// One sample's head. z: its Z1 row (b1 included); w: W2a (10x16) in shared memory.
__device__ __forceinline__ void finish_row(const T z[10], const T* w, const int yi, const long long i,
        const int want_grad, const int want_stats, T* A1a, T* dZ2, T* dZ1, double& correct, double& nll) {
    T a[10], s[10], mx = 0, zy = 0, sum = 0;
#pragma unroll
    for (int j = 0; j < 10; ++j) a[j] = z[j] > (T)0 ? z[j] : (T)0;
#pragma unroll
    for (int k = 0; k < 10; ++k) {
        T acc = w[k * HP + 10];
#pragma unroll
        for (int j = 0; j < 10; ++j) acc += w[k * HP + j] * a[j];
        s[k] = acc;
        mx = (k == 0 || acc > mx) ? acc : mx;
        zy = (k == yi) ? acc : zy;                     // Z2[y] without a dynamic index
    }
#pragma unroll
    for (int k = 0; k < 10; ++k) { s[k] = exp(s[k] - mx); sum += s[k]; }   // s = exp(Z2 - max)
    if (want_stats) {
        int arg = 0; T best = s[0] / sum;              // argmax of A2, first on ties (as numpy)
#pragma unroll
        for (int k = 1; k < 10; ++k) { const T p = s[k] / sum; if (p > best) { best = p; arg = k; } }
        correct += (arg == yi) ? 1.0 : 0.0;
        nll += (double)log(sum) + (double)mx - (double)zy;   // -log A2[y], log-sum-exp form
    }
    if (want_grad) {
        T d2[10];
#pragma unroll
        for (int k = 0; k < 10; ++k) { d2[k] = s[k] / sum - (k == yi ? (T)1 : (T)0); dZ2[i * 10 + k] = d2[k]; }
#pragma unroll
        for (int j = 0; j < 10; ++j) {
            T g = 0;
#pragma unroll
            for (int k = 0; k < 10; ++k) g += w[k * HP + j] * d2[k];
            dZ1[i * 10 + j] = z[j] > (T)0 ? g : (T)0;
            A1a[i * HP + j] = a[j];
        }
    }
}

// Warp-sum correct and nll, one atomicAdd per warp. Every lane of the warp must call it.
__device__ __forceinline__ void add_stats(double correct, double nll, double* stats) {
    for (int off = 16; off > 0; off >>= 1) {
        correct += __shfl_down_sync(0xffffffffu, correct, off);
        nll += __shfl_down_sync(0xffffffffu, nll, off);
    }
    if ((threadIdx.x & 31) == 0) { atomicAdd(&stats[0], correct); atomicAdd(&stats[1], nll); }
}

// Step 1. Block 256 threads, grid ceil(m / 256): each warp owns 32 consecutive rows and
// takes them ROWS at a time (a lane reads 16 B chunks lane, lane+32, ... of each row:
// coalesced); after the pass lane l holds Z1 of row base+l and finishes it.
// Dynamic shared memory: (NCH * WCH + 160) * sizeof(T).
extern "C" __global__ void __launch_bounds__(256, FWD_MIN_BLOCKS) mlp_forward(
        const T* __restrict__ Xa, const T* __restrict__ W1a, const T* __restrict__ W2a,
        const int* __restrict__ y, const int m, const int want_grad, const int want_stats,
        T* __restrict__ A1a, T* __restrict__ dZ2, T* __restrict__ dZ1, double* __restrict__ stats) {
    extern __shared__ __align__(16) unsigned char smem[];
    T* sW1 = reinterpret_cast<T*>(smem);             // [NCH][WCH]: W1a[j][4c + e] at c*WCH + j*4 + e
    T* sW2 = sW1 + NCH * WCH;                        // [10][16]
    for (int t = threadIdx.x; t < NCH * 40; t += blockDim.x) {
        const int c = t / 40, j = (t / 4) % 10, e = t % 4;
        sW1[c * WCH + j * 4 + e] = W1a[j * NIN_PAD + c * 4 + e];
    }
    for (int t = threadIdx.x; t < 10 * HP; t += blockDim.x) sW2[t] = W2a[t];
    __syncthreads();
    const int lane = threadIdx.x & 31;
    const long long base = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32 * 32;
    double correct = 0.0, nll = 0.0;
    T mine[10];
#pragma unroll
    for (int j = 0; j < 10; ++j) mine[j] = 0;
#pragma unroll 1
    for (int sub = 0; sub < 32; sub += ROWS) {
        T acc[ROWS][10];
#pragma unroll
        for (int r = 0; r < ROWS; ++r)
#pragma unroll
            for (int j = 0; j < 10; ++j) acc[r][j] = 0;
        for (int c = lane; c < NCH; c += 32) {
            T x[ROWS][4];
#pragma unroll
            for (int r = 0; r < ROWS; ++r) {
                const long long i = base + sub + r;
                if (i < m) load4(Xa + i * NIN_PAD + c * 4, x[r]);
                else { x[r][0] = 0; x[r][1] = 0; x[r][2] = 0; x[r][3] = 0; }
            }
#pragma unroll
            for (int j = 0; j < 10; ++j) {
                T w[4];
                load4(sW1 + c * WCH + j * 4, w);
#pragma unroll
                for (int r = 0; r < ROWS; ++r)
                    acc[r][j] += w[0] * x[r][0] + w[1] * x[r][1] + w[2] * x[r][2] + w[3] * x[r][3];
            }
        }
#pragma unroll
        for (int r = 0; r < ROWS; ++r)
#pragma unroll
            for (int j = 0; j < 10; ++j) {
#pragma unroll
                for (int off = 16; off > 0; off >>= 1) acc[r][j] += __shfl_xor_sync(0xffffffffu, acc[r][j], off);
                if (lane == sub + r) mine[j] = acc[r][j];
            }
    }
    const long long i = base + lane;
    if (i < m) finish_row(mine, sW2, y[i], i, want_grad, want_stats, A1a, dZ2, dZ1, correct, nll);
    if (want_stats) add_stats(correct, nll, stats);
}

// cublas path, step 1's second half: one thread per row of Z1 (m, 10), b1 included.
extern "C" __global__ void mlp_rows(
        const T* __restrict__ Z1, const T* __restrict__ W2a, const int* __restrict__ y, const int m,
        const int want_grad, const int want_stats,
        T* __restrict__ A1a, T* __restrict__ dZ2, T* __restrict__ dZ1, double* __restrict__ stats) {
    __shared__ T w[10 * HP];
    for (int t = threadIdx.x; t < 10 * HP; t += blockDim.x) w[t] = W2a[t];
    __syncthreads();
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    double correct = 0.0, nll = 0.0;
    if (i < m) {
        T z[10];
#pragma unroll
        for (int j = 0; j < 10; ++j) z[j] = Z1[i * 10 + j];
        finish_row(z, w, y[i], i, want_grad, want_stats, A1a, dZ2, dZ1, correct, nll);
    }
    if (want_stats) add_stats(correct, nll, stats);
}

// Step 2. Block b sums rows [b*rows_per_block, ...) of dZ1^T Xa (threads 0..199, one 16 B
// chunk of columns each) and dZ2^T A1a (threads 200..203) -> part[b] (10, NOUT).
extern "C" __global__ void __launch_bounds__(224) mlp_backward_partial(
        const T* __restrict__ Xa, const T* __restrict__ A1a, const T* __restrict__ dZ1,
        const T* __restrict__ dZ2, const int m, const int rows_per_block, T* __restrict__ part) {
    const int t = threadIdx.x;
    const T* A; const T* D; int ld, col;
    if (t < NCH) { A = Xa + t * 4; ld = NIN_PAD; D = dZ1; col = t * 4; }
    else if (t < NCH + HP / 4) { A = A1a + (t - NCH) * 4; ld = HP; D = dZ2; col = NIN_PAD + (t - NCH) * 4; }
    else return;                                   // no block-wide sync below
    const long long r0 = (long long)blockIdx.x * rows_per_block;
    const long long r1 = min((long long)m, r0 + rows_per_block);
    T acc[10][4];
#pragma unroll
    for (int j = 0; j < 10; ++j) { acc[j][0] = 0; acc[j][1] = 0; acc[j][2] = 0; acc[j][3] = 0; }
#pragma unroll 4
    for (long long i = r0; i < r1; ++i) {
        T x[4];
        load4(A + i * ld, x);
        const T* d = D + i * 10;                   // same address across the warp: one broadcast
#pragma unroll
        for (int j = 0; j < 10; ++j) {
            const T dj = d[j];
            acc[j][0] += dj * x[0]; acc[j][1] += dj * x[1]; acc[j][2] += dj * x[2]; acc[j][3] += dj * x[3];
        }
    }
    T* out = part + (long long)blockIdx.x * 10 * NOUT + col;
#pragma unroll
    for (int j = 0; j < 10; ++j) { out[j * NOUT] = acc[j][0]; out[j * NOUT + 1] = acc[j][1];
                                   out[j * NOUT + 2] = acc[j][2]; out[j * NOUT + 3] = acc[j][3]; }
}

// Step 3. One thread per output (10 * NOUT): sum the partials in block order, update.
extern "C" __global__ void mlp_reduce_update(const T* __restrict__ part, const int nparts, const T alpha,
                                             T* __restrict__ W1a, T* __restrict__ W2a) {
    const int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= 10 * NOUT) return;
    T s = 0;
    for (int b = 0; b < nparts; ++b) s += part[(long long)b * 10 * NOUT + o];
    const int j = o / NOUT, c = o % NOUT;
    if (c < NIN_PAD) W1a[j * NIN_PAD + c] += alpha * s;
    else W2a[j * HP + (c - NIN_PAD)] += alpha * s;
}

// One thread: append stats[0..3] (train correct, train nll sum, val correct, val nll sum)
// to hist[count], zero stats, ++count.
extern "C" __global__ void mlp_commit(double* stats, double* hist, int* count, const int capacity) {
    const int k = *count;
    if (k < capacity) for (int j = 0; j < 4; ++j) hist[k * 4 + j] = stats[j];
    for (int j = 0; j < 4; ++j) stats[j] = 0.0;
    *count = k + 1;
}
"""


class TunedCupyMLP:
    """Device state and launches of the tuned variant; all work on `self.stream`.

    X, X_val: (n, 784) in [0, 1] (numpy or cupy); y, y_val: (n,) int labels;
    init: net.init_params(...) dict (host); capacity: history rows;
    gemm: "kernels" (default) or "cublas"; use_graph: capture CUDA graphs (kernels only).
    """

    def __init__(self, X, y, X_val, y_val, init: dict, lr: float = 0.1, dtype="float32",
                 capacity: int = 1024, use_graph: bool = True, gemm: str = "kernels",
                 tune: dict | None = None):
        if gemm not in GEMMS:
            raise net.MLPInputError(f"unknown gemm {gemm!r}: choose one of {', '.join(GEMMS)}")
        net.check_data(X, y, "train")
        net.check_data(X_val, y_val, "val")
        import cupy as cp
        import cupy.cublas
        self.cp, self._gemm, self.gemm = cp, cupy.cublas.gemm, gemm
        self.dt = net.resolve_dtype(dtype)
        self.lr = net.check_lr(lr)
        self.m, self.mv = int(X.shape[0]), int(X_val.shape[0])
        self.stream = cp.cuda.Stream(non_blocking=True)
        self.init = {k: np.asarray(v, dtype=self.dt) for k, v in init.items()}
        self.tune = {**(TUNE_F32 if self.dt == np.float32 else TUNE_F64), **(tune or {})}
        n_sm = cp.cuda.Device().attributes["MultiProcessorCount"]
        self.nparts = max(1, min(n_sm * self.tune["partial_blocks_per_sm"], self.m))
        self.rows_per_part = -(-self.m // self.nparts)
        with self.stream:
            self.Xa = self._augment(X)                       # (m, K_PAD)
            self.Xva = self._augment(X_val)                  # (mv, K_PAD)
            self.y = cp.asarray(y, dtype=cp.int32)           # (m,)
            self.yv = cp.asarray(y_val, dtype=cp.int32)      # (mv,)
            self.W1a = cp.zeros((10, K_PAD), self.dt)
            self.W2a = cp.zeros((10, H_PAD), self.dt)
            self.A1a = cp.zeros((self.m, H_PAD), self.dt)
            self.A1a[:, 10] = 1
            self.dZ2 = cp.empty((self.m, 10), self.dt)
            self.dZ1 = cp.empty((self.m, 10), self.dt)
            if gemm == "cublas":
                self.Z1, self.Z1v, self.part = cp.empty((self.m, 10), self.dt), cp.empty((self.mv, 10), self.dt), None
            else:
                self.Z1 = self.Z1v = None
                self.part = cp.empty((self.nparts, 10, N_OUT_COLS), self.dt)   # per-block partial dW sums
            self.stats = cp.zeros(4, cp.float64)
            self.capacity = int(capacity)
            self.hist = cp.zeros((self.capacity, 4), cp.float64)
            self.count = cp.zeros(1, cp.int32)
        ctype = "float" if self.dt == np.float32 else "double"
        defs = f"typedef {ctype} T;\n#define ROWS {self.tune['rows']}\n#define FWD_MIN_BLOCKS {self.tune['fwd_min_blocks']}\n"
        mod = cp.RawModule(code=defs + _SOURCE, options=("--std=c++17",))
        self._k = {name: mod.get_function(name) for name in
                   ("mlp_forward", "mlp_rows", "mlp_backward_partial", "mlp_reduce_update", "mlp_commit")}
        self.smem = (K_PAD // 4 * 44 + 160) * self.dt.itemsize   # mlp_forward's dynamic shared memory
        if self.smem > 48 * 1024:
            self._k["mlp_forward"].max_dynamic_shared_size_bytes = self.smem
        self.alpha = self.dt.type(-self.lr / self.m)   # -lr/m: the mean's 1/m and the step in one
        self.reset()
        self.graphs: dict = {}
        self.capture_s = 0.0
        self.use_graph = use_graph and gemm == "kernels"
        self.graph_error = None if self.use_graph or not use_graph else \
            "not captured: CuPy refuses cuBLAS calls during stream capture"

    # -- setup
    def _augment(self, X):
        cp = self.cp
        Xa = cp.zeros((X.shape[0], K_PAD), self.dt)
        Xa[:, :net.N_IN] = cp.asarray(X, dtype=self.dt)
        Xa[:, net.N_IN] = 1
        return Xa

    def reset(self):
        """Params back to `init`; stats and history emptied."""
        p = self.init
        W1a = np.zeros((10, K_PAD), self.dt)
        W1a[:, :net.N_IN], W1a[:, net.N_IN] = p["W1"], p["b1"][:, 0]
        W2a = np.zeros((10, H_PAD), self.dt)
        W2a[:, :10], W2a[:, 10] = p["W2"], p["b2"][:, 0]
        with self.stream:
            self.W1a.set(W1a, self.stream)
            self.W2a.set(W2a, self.stream)
            self.stats.fill(0)
            self.hist.fill(0)
            self.count.fill(0)
        self.stream.synchronize()

    def params(self) -> dict[str, np.ndarray]:
        """Current params as net.py's host dict {W1 (10,784), b1 (10,1), W2 (10,10), b2 (10,1)}."""
        self.stream.synchronize()
        W1a, W2a = self.W1a.get(), self.W2a.get()
        return {"W1": W1a[:, :net.N_IN].copy(), "b1": W1a[:, net.N_IN:net.N_IN + 1].copy(),
                "W2": W2a[:, :10].copy(), "b2": W2a[:, 10:11].copy()}

    # -- launches: enqueue only (no allocation, no sync), so they can be captured
    def _forward(self, val: bool, grad: bool, stats: bool):
        Xa, y, n = (self.Xva, self.yv, self.mv) if val else (self.Xa, self.y, self.m)
        st = self.stats[2:] if val else self.stats
        flags = (np.int32(grad), np.int32(stats))
        outs = (self.A1a, self.dZ2, self.dZ1, st)
        blocks = ((n + 255) // 256,)
        if self.gemm == "kernels":
            self._k["mlp_forward"](blocks, (256,), (Xa, self.W1a, self.W2a, y, np.int32(n), *flags, *outs),
                                   shared_mem=self.smem)
        else:
            Z1 = self.Z1v if val else self.Z1
            self._gemm("N", "T", Xa, self.W1a, out=Z1)                                 # Z1 = Xa W1a^T
            self._k["mlp_rows"](blocks, (256,), (Z1, self.W2a, y, np.int32(n), *flags, *outs))

    def _backward_update(self):
        if self.gemm == "kernels":
            self._k["mlp_backward_partial"]((self.nparts,), (224,), (
                self.Xa, self.A1a, self.dZ1, self.dZ2, np.int32(self.m), np.int32(self.rows_per_part), self.part))
            n_out = 10 * N_OUT_COLS
            self._k["mlp_reduce_update"](((n_out + 255) // 256,), (256,), (
                self.part, np.int32(self.nparts), self.alpha, self.W1a, self.W2a))
        else:
            a = float(self.alpha)
            self._gemm("T", "N", self.dZ1, self.Xa, out=self.W1a, alpha=a, beta=1.0)    # W1a += a dZ1^T Xa
            self._gemm("T", "N", self.dZ2, self.A1a, out=self.W2a, alpha=a, beta=1.0)   # W2a += a dZ2^T A1a

    def _commit(self):
        self._k["mlp_commit"]((1,), (1,), (self.stats, self.hist, self.count, np.int32(self.capacity)))

    def enqueue_step(self, record: bool = False, ops=net.no_ops):
        """One iteration; with record, train/val stats of the pre-update params go to history.
        ops: as in net.py (the breakdown run syncs and times each op)."""
        with self.stream:
            with ops("forward_fused"):
                self._forward(val=False, grad=True, stats=record)
            if record:
                with ops("record"):
                    self._forward(val=True, grad=False, stats=True)
            with ops("backward_update"):
                self._backward_update()
            if record:
                with ops("record"):
                    self._commit()

    def enqueue_eval(self):
        """Append a history row for the current params without training (the final point)."""
        with self.stream:
            self._forward(val=False, grad=False, stats=True)
            self._forward(val=True, grad=False, stats=True)
            self._commit()

    # -- CUDA graphs
    def capture(self) -> None:
        """Capture one plain and one recording iteration as CUDA graphs. Call after a warm-up
        step (module load stays outside). On failure run uncaptured; self.graph_error says why."""
        if not self.use_graph:
            return
        t0 = time.perf_counter()
        try:
            for record in (False, True):
                self.stream.begin_capture()
                try:
                    self.enqueue_step(record)
                finally:
                    g = self.stream.end_capture()
                self.graphs[record] = g
        except Exception as e:  # keep the reason, run uncaptured
            self.graphs, self.graph_error = {}, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        self.stream.synchronize()
        self.capture_s = time.perf_counter() - t0

    def step(self, record: bool = False) -> None:
        g = self.graphs.get(record)
        if g is not None:
            g.launch(self.stream)
        else:
            self.enqueue_step(record)

    def history(self) -> np.ndarray:
        """(rows, 4) float64 on the host: train correct, train nll sum, val correct, val nll sum."""
        self.stream.synchronize()
        n = min(int(self.count.get()[0]), self.capacity)
        return self.hist[:n].get()

    # -- memory (keys as runner.memory_breakdown)
    def array_bytes(self) -> dict[str, int]:
        nb = lambda *arrs: sum(a.nbytes for a in arrs if a is not None)  # noqa: E731
        return {
            "params_bytes": nb(self.W1a, self.W2a),
            "input_bytes": nb(self.Xa, self.Xva, self.y, self.yv),
            "activations_bytes": nb(self.A1a, self.Z1, self.Z1v),
            "gradients_bytes": nb(self.dZ1, self.dZ2, self.part),   # dW lives only as partial sums
            "other_bytes": nb(self.stats, self.hist, self.count),
        }
