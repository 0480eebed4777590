"""Runs of the mlp-scratch study (seed 001): plain, op breakdown, memory, convergence, checks.

Every function takes a `Backend` (below), what a backend module's create() returns
(backends/: numpy and cupy run net.py on their array module, cupy-tuned runs tuned_cupy.py),
and drives its four hooks from one host init (net.init_params): so nothing here knows a
backend by name. Every function returns plain dicts / lists of numbers (None where a field
does not apply), units in the key names. Inputs everywhere: X (n, 784) floats in [0, 1] and
y (n,) int labels, numpy or cupy.

Timing rules (DESIGN.md "Measuring honestly"):
- plain_run: warm-up steps first (warmup_s, first_iter_ms), then a timed run from the same
  initial weights. Each iteration is bracketed by timestamps that do not sync: CUDA events
  on the stream for a device backend (CuPy), perf_counter for NumPy; the device is synced
  once at the end and every duration is checked >= 0. total_s sums the training steps only;
  the convergence record every `record_every` iterations sits between steps (for naive CuPy
  it syncs the host, as the seed's print did) and is in loop_wall_s, not in total_s.
- breakdown_run: a separate run that syncs the device before and after every op, so its
  totals are distorted; quote total_s from plain_run.
- Threads: every run (plain, breakdown, memory, the checks) holds NumPy's BLAS to
  cfg.threads threads (0 = every core this process may use) with threadpoolctl's
  threadpool_limits, and plain_run reports the library and the limit as read inside
  (`blas`, `blas_threads`).
"""

from __future__ import annotations

import abc
import contextlib
import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from bench.core import machine
from bench.studies.mlp_scratch import net

# Tolerances for comparing params with the NumPy reference, defined once per dtype:
# |a - ref| <= atol + rtol * |ref| elementwise (weights are O(0.5)).
TOL = {"float32": {"atol": 1e-5, "rtol": 1e-4}, "float64": {"atol": 1e-12, "rtol": 1e-10}}
# what memory_breakdown reports, in Table 5's order (bytes): the components, which add up to
# memory_total_bytes, then what was also read
MEMORY_PARTS = ("params_bytes", "input_bytes", "activations_bytes", "gradients_bytes", "other_bytes", "framework_overhead_bytes")
MEMORY_KEYS = (
    *MEMORY_PARTS,
    "memory_total_bytes",
    "accounted_bytes",
    "pool_used_bytes",
    "pool_total_bytes",
    "rss_bytes",
    "rss_start_bytes",
    "device_used_bytes",
    "device_used_start_bytes",
)
OVERHEAD_DEFINITION = (
    "total = growth of the process's memory on the variant's compute device (NumPy: host RSS; CuPy: GPU memory "
    "in use, cudaMemGetInfo) from the start of the measurement (framework imported, device initialised, no "
    "array made) to one iteration with every array alive; framework overhead = total - the arrays' bytes"
)
CURVE_TOL = 1e-3  # largest allowed |acc_a - acc_b| between two convergence curves


@dataclass(frozen=True)
class RunConfig:
    iterations: int = 500  # full-batch gradient-descent steps
    lr: float = 0.1  # learning rate
    dtype: str = "float32"  # float32 | float64
    seed: int = 0  # numpy default_rng seed of the initial weights
    record_every: int = 10  # iterations between convergence records
    warmup_iters: int = 3  # steps before the timed run (own copy of the init), in warmup_s
    threads: int = 0  # NumPy's BLAS threads during every run; 0 = every core this process may use

    def __post_init__(self):
        net.check_iterations(self.iterations)
        net.check_lr(self.lr)
        net.resolve_dtype(self.dtype)
        if isinstance(self.record_every, bool) or not isinstance(self.record_every, int) or self.record_every <= 0:
            raise net.MLPInputError(f"record_every must be an int > 0, got {self.record_every!r}")
        if isinstance(self.warmup_iters, bool) or not isinstance(self.warmup_iters, int) or self.warmup_iters < 1:
            raise net.MLPInputError(f"warmup_iters must be an int >= 1, got {self.warmup_iters!r}")
        if isinstance(self.threads, bool) or not isinstance(self.threads, int) or self.threads < 0:
            raise net.MLPInputError(f"threads must be an int >= 0 (0 = every core this process may use), got {self.threads!r}")


# ---------------------------------------------------------------- NumPy's BLAS threads


def numpy_blas(info: list[dict] | None = None) -> list[dict]:
    """threadpoolctl's entries for the BLAS that NumPy loaded (those under NumPy's own folder
    when it ships one, e.g. numpy.libs/libscipy_openblas; else every BLAS in the process)."""
    if info is None:
        from threadpoolctl import threadpool_info

        info = threadpool_info()
    blas = [d for d in info if d.get("user_api") == "blas"]
    here = os.path.dirname(os.path.dirname(os.path.abspath(np.__file__)))  # site-packages
    own = [d for d in blas if os.path.abspath(str(d.get("filepath", ""))).startswith(os.path.join(here, "numpy"))]
    return own or blas


def describe_blas(libs: list[dict]) -> tuple[str, int | None]:
    """("openblas 0.3.31, 2 threads", 2) from numpy_blas() entries; the thread count is the
    smallest any of them runs with (None when threadpoolctl sees no BLAS)."""
    if not libs:
        return "unknown (threadpoolctl finds no BLAS in this process)", None
    names = sorted({f"{d.get('internal_api')} {d.get('version') or '?'}" for d in libs})
    threads = min(int(d.get("num_threads") or 0) for d in libs)
    return f"{' + '.join(names)}, {threads} thread{'s' if threads != 1 else ''}", threads


@contextlib.contextmanager
def blas_threads(threads: int = 0):
    """Hold NumPy's BLAS to THREADS threads (0: every core this process may use, the kit's
    thread rule machine.thread_count) for the block; yields {blas, blas_threads,
    blas_threads_requested, blas_libs} as read inside the limit."""
    n = machine.thread_count(threads)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # not in the image: say so, run unpinned
        yield {
            "blas": "unknown (threadpoolctl not installed; threads not pinned)",
            "blas_threads": None,
            "blas_threads_requested": n,
            "blas_libs": [],
        }
        return
    with threadpool_limits(limits=n, user_api="blas"):
        libs = numpy_blas()
        text, got = describe_blas(libs)
        keep = ("internal_api", "version", "num_threads", "threading_layer", "architecture", "filepath")
        yield {
            "blas": text,
            "blas_threads": got,
            "blas_threads_requested": n,
            "blas_libs": [{k: d.get(k) for k in keep} for d in libs],
        }


# ---------------------------------------------------------------- clocks


def nonneg(ms: float, what: str) -> float:
    if not ms >= 0:  # also catches NaN
        raise net.MLPError(f"negative or NaN duration for {what}: {ms} ms")
    return ms


class Clock:
    """Timestamps that do not sync: perf_counter on the host (cp None) or CUDA events of the
    CuPy module cp on `stream` (a device backend's)."""

    def __init__(self, cp: Any = None, stream=None):
        self.cp = cp
        self.stream = stream
        self.kind = "perf_counter" if cp is None else "cuda_events"

    def sync(self):
        if self.cp is not None:
            (self.stream or self.cp.cuda.get_current_stream()).synchronize()

    def mark(self):
        if self.cp is None:
            return time.perf_counter()
        ev = self.cp.cuda.Event()
        ev.record(self.stream)
        return ev

    def ms(self, a, b, what="interval") -> float:
        """Milliseconds from mark a to mark b (sync first)."""
        d = (b - a) * 1e3 if self.cp is None else self.cp.cuda.get_elapsed_time(a, b)
        return nonneg(d, what)


class _OpTimer:
    """ops(name) for net.py / tuned_cupy.py: sync, time on the host, sync; sums per op."""

    def __init__(self, clock: Clock):
        self.clock = clock
        self.ms: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    @contextlib.contextmanager
    def __call__(self, name: str):
        self.clock.sync()
        t0 = time.perf_counter()
        yield
        self.clock.sync()
        d = nonneg((time.perf_counter() - t0) * 1e3, name)
        self.ms[name] = self.ms.get(name, 0.0) + d
        self.calls[name] = self.calls.get(name, 0) + 1


def timing_stats(prefix: str, samples: list[float]) -> dict:
    """{prefix}_ms (mean), _median_ms, _min_ms, _max_ms and the samples (all in ms)."""
    return {
        f"{prefix}_ms": statistics.fmean(samples),
        f"{prefix}_median_ms": statistics.median(samples),
        f"{prefix}_min_ms": min(samples),
        f"{prefix}_max_ms": max(samples),
        f"{prefix}_samples_ms": list(samples),
    }


def record(iteration, train_acc, val_acc, loss) -> dict:
    """One convergence point: accuracies are fractions, loss the mean cross-entropy."""
    return {"iteration": int(iteration), "train_acc": float(train_acc), "val_acc": float(val_acc), "loss": float(loss)}


# ---------------------------------------------------------------- what a backend gives


class Backend(abc.ABC):
    """One array backend as this module's functions drive it: what a backend module's
    create() returns. A subclass sets name, device and xp and gives the four hooks, each
    starting from INIT (host params, net.init_params: every backend starts from the same
    weights); check / plain / breakdown / memory, the study's Trainer protocol
    (backends/__init__.py), are this module's functions on self."""

    name: str  # its registry name (MlpScratch.backends): the `variant` of every dict out
    device: bool  # computes on a CUDA device through CuPy (`xp`): CUDA-event clock, memory = GPU memory growth
    xp: Any  # its array module: numpy or cupy

    @property
    def label(self) -> str:
        """The `variant` of check_against_numpy's dict."""
        return self.name

    def clock(self, stream=None) -> Clock:
        return Clock(self.xp if self.device else None, stream)

    @abc.abstractmethod
    def timed_run(self, init: dict, X, y, X_val, y_val, cfg: RunConfig) -> dict:
        """plain_run's measured part: warm-up, then the timed run; plain_run's keys from
        `timer` to `convergence` (its docstring)."""

    @abc.abstractmethod
    def op_stepper(self, init: dict, X, y, cfg: RunConfig) -> tuple[Clock, Callable[[Any], object]]:
        """For breakdown_run: (its clock, step(ops)), one training step with `ops` around every op."""

    @abc.abstractmethod
    def live_arrays(self, init: dict, X, y, X_val, y_val, cfg: RunConfig) -> contextlib.AbstractContextManager[dict]:
        """A context: one synced iteration with every array alive until it exits; yields their
        bytes: params_bytes, input_bytes, activations_bytes, gradients_bytes, other_bytes."""

    @abc.abstractmethod
    def params_after(self, init: dict, X, y, steps: int, cfg: RunConfig) -> list[dict]:
        """Host params {W1, b1, W2, b2} after each of STEPS training steps (no timing)."""

    # ---- the study's Trainer protocol
    def check(self, reference: Backend, X, y, steps: int, cfg: RunConfig) -> dict:
        return check_against_numpy(self, reference, X, y, steps, cfg)

    def plain(self, X, y, X_val, y_val, cfg: RunConfig) -> dict:
        return plain_run(self, X, y, X_val, y_val, cfg)

    def breakdown(self, X, y, cfg: RunConfig, iterations: int) -> dict:
        return breakdown_run(self, X, y, cfg, iterations)

    def memory(self, X, y, X_val, y_val, cfg: RunConfig) -> dict:
        """In this process; protocol.py calls it in a fresh one (memory.memory_isolated)."""
        return memory_breakdown(self, X, y, X_val, y_val, cfg)


# ---------------------------------------------------------------- plain run


def plain_run(backend: Backend, X, y, X_val, y_val, cfg: RunConfig = RunConfig()) -> dict:
    """Timed training run; returns timings, warm-up, and the convergence curve.

    Keys: variant, dtype, iterations, lr, seed, n_train, n_val, timer, warmup_iters,
    warmup_s, first_iter_ms (first warm-up step with its records: compiles, handles),
    total_s (training steps only), loop_wall_s (host wall of the loop, records included), per_iter_ms (mean) / _median_ms /
    _min_ms / _max_ms / _samples_ms, the same for forward and backward (backward_* include
    the update, as the seed's Table 3; update_* is that part; None for cupy-tuned, whose
    kernels fuse them), convergence [{iteration, train_acc, val_acc, loss}] every
    record_every iterations plus a final row at iteration == iterations, final_train_acc,
    final_val_acc, final_loss; blas, blas_threads (NumPy's BLAS and its thread limit, read
    inside the run); cupy-tuned adds gemm, graph, graph_error, setup_s, capture_s."""
    net.check_data(X, y, "train")
    net.check_data(X_val, y_val, "val")
    with blas_threads(cfg.threads) as blas:
        out = backend.timed_run(net.init_params(cfg.seed, cfg.dtype), X, y, X_val, y_val, cfg)
    last = out["convergence"][-1]
    head = {
        "variant": backend.name,
        "dtype": cfg.dtype,
        "iterations": cfg.iterations,
        "lr": cfg.lr,
        "seed": cfg.seed,
        "n_train": int(X.shape[0]),
        "n_val": int(X_val.shape[0]),
        "blas": blas["blas"],
        "blas_threads": blas["blas_threads"],
    }
    return {**head, **out, "final_train_acc": last["train_acc"], "final_val_acc": last["val_acc"], "final_loss": last["loss"]}


# ---------------------------------------------------------------- op breakdown


def breakdown_run(backend: Backend, X, y, cfg: RunConfig = RunConfig(), iterations: int | None = None) -> dict:
    """Separate run with a device sync around every op (distorted totals).

    Keys: variant, dtype, iterations, timer, ops [{op, ms_total, ms_per_iter, calls}],
    ops_sum_ms_per_iter, total_s and per_iter_ms (of this synced run)."""
    net.check_data(X, y, "train")
    n = net.check_iterations(cfg.iterations if iterations is None else iterations)
    with blas_threads(cfg.threads):
        return _breakdown(backend, X, y, cfg, n)


def _breakdown(backend: Backend, X, y, cfg: RunConfig, n: int) -> dict:
    clock, step = backend.op_stepper(net.init_params(cfg.seed, cfg.dtype), X, y, cfg)
    for _ in range(cfg.warmup_iters):
        step(net.no_ops)
    timer = _OpTimer(clock)
    clock.sync()
    t0 = time.perf_counter()
    for _ in range(n):
        step(timer)
    clock.sync()
    total_s = nonneg(time.perf_counter() - t0, "breakdown run")
    ops = [{"op": k, "ms_total": v, "ms_per_iter": v / n, "calls": timer.calls[k]} for k, v in timer.ms.items()]
    return {
        "variant": backend.name,
        "dtype": cfg.dtype,
        "iterations": n,
        "timer": "perf_counter, device sync around each op",
        "ops": ops,
        "ops_sum_ms_per_iter": sum(o["ms_per_iter"] for o in ops),
        "total_s": total_s,
        "per_iter_ms": total_s * 1e3 / n,
    }


# ---------------------------------------------------------------- memory


def _rss_bytes() -> int:
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except ImportError:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _rss_peak_bytes() -> int:
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # Linux reports KiB


def memory_breakdown(backend: Backend, X, y, X_val, y_val, cfg: RunConfig = RunConfig()) -> dict:
    """Bytes held while one iteration's arrays are all alive (seed Table 5).

    Keys: variant, dtype, params_bytes, input_bytes (train+val X and labels as the net holds
    them), activations_bytes (forward cache), gradients_bytes (dW/db plus the backward
    temporaries one-hot Y, dZ2, dZ1; tuned: dZ1, dZ2 only, dW is folded into the GEMM),
    other_bytes (tuned: its record buffers), accounted_bytes (the sum of these array
    sizes), caller_input_bytes (X, y, X_val, y_val as passed in),
    memory_total_bytes and framework_overhead_bytes, one definition for every variant
    (OVERHEAD_DEFINITION): the total is how much the process's memory on the variant's compute
    device grew from the start of the measurement (framework imported, device initialised, no
    array made) to one iteration with every array alive: NumPy rss_bytes - rss_start_bytes,
    CuPy device_used_bytes - device_used_start_bytes; overhead = total - accounted_bytes.
    Also pool_used_bytes, pool_total_bytes (CuPy memory pool; None for NumPy),
    device_used_bytes, device_used_start_bytes (cudaMemGetInfo total - free: the CUDA
    context and everyone on the GPU; None for NumPy). The pool never shrinks unless asked, so
    in a fresh process pool_total_bytes is its high-water mark. rss_bytes, rss_start_bytes,
    rss_peak_bytes (process peak so far: max of ru_maxrss, which can lag, and rss_bytes)."""
    net.check_data(X, y, "train")
    net.check_data(X_val, y_val, "val")
    with blas_threads(cfg.threads):
        return _memory(backend, X, y, X_val, y_val, cfg)


def _memory(backend: Backend, X, y, X_val, y_val, cfg: RunConfig) -> dict:
    init = net.init_params(cfg.seed, cfg.dtype)
    cp: Any = backend.xp if backend.device else None
    if cp is not None:
        cp.get_default_memory_pool().free_all_blocks()  # drop what earlier runs left cached
        free0, total0 = cp.cuda.runtime.memGetInfo()  # creates the CUDA context if none yet: it is the baseline
        device_start = int(total0 - free0)
    rss_start = _rss_bytes()
    with backend.live_arrays(init, X, y, X_val, y_val, cfg) as arrays:  # every reading below while they are alive
        parts = {k: int(v) for k, v in arrays.items()}
        accounted = sum(parts.values())
        rss = _rss_bytes()
        caller = sum(int(a.nbytes) for a in (X, y, X_val, y_val) if isinstance(a, np.ndarray))
        out = {
            "variant": backend.name,
            "dtype": cfg.dtype,
            **parts,
            "accounted_bytes": accounted,
            "caller_input_bytes": caller,
            "pool_used_bytes": None,
            "pool_total_bytes": None,
            "device_used_bytes": None,
            "device_used_start_bytes": None,
            "rss_bytes": rss,
            "rss_start_bytes": rss_start,
            "rss_peak_bytes": max(rss, _rss_peak_bytes()),
            "overhead_definition": OVERHEAD_DEFINITION,
        }
        if cp is None:
            total_growth = rss - rss_start  # host RAM: the compute device of NumPy
        else:
            pool = cp.get_default_memory_pool()
            free, total = cp.cuda.runtime.memGetInfo()
            out.update(
                pool_used_bytes=int(pool.used_bytes()),
                pool_total_bytes=int(pool.total_bytes()),
                device_used_bytes=int(total - free),
                device_used_start_bytes=device_start,
            )
            total_growth = int(total - free) - device_start  # GPU memory: the compute device of CuPy
    out["memory_total_bytes"] = total_growth
    out["framework_overhead_bytes"] = total_growth - accounted
    return out


# ---------------------------------------------------------------- convergence and checks


def compare_curves(a: list[dict], b: list[dict], tol: float = CURVE_TOL) -> dict:
    """Two convergence lists (same iterations) -> largest differences and agree (acc <= tol)."""
    ia, ib = [r["iteration"] for r in a], [r["iteration"] for r in b]
    if ia != ib:
        raise net.MLPInputError(f"curves have different iterations: {ia[:3]}... vs {ib[:3]}...")
    d = {k: max(abs(ra[k] - rb[k]) for ra, rb in zip(a, b)) for k in ("train_acc", "val_acc", "loss")}
    return {
        "points": len(a),
        "max_abs_diff_train_acc": d["train_acc"],
        "max_abs_diff_val_acc": d["val_acc"],
        "max_abs_diff_loss": d["loss"],
        "tol": tol,
        "agree": bool(d["train_acc"] <= tol and d["val_acc"] <= tol),
    }


def train_params(backend: Backend, X, y, steps: int, cfg: RunConfig = RunConfig()) -> list[dict]:
    """Host params {W1, b1, W2, b2} after each of `steps` training steps (no timing)."""
    net.check_data(X, y, "train")
    steps = net.check_iterations(steps)
    with blas_threads(cfg.threads):
        return backend.params_after(net.init_params(cfg.seed, cfg.dtype), X, y, steps, cfg)


def param_errors(got: dict, ref: dict, dtype: str) -> dict:
    """Largest |got - ref| and largest |got - ref| / (atol + rtol |ref|) over all params."""
    tol = TOL[net.resolve_dtype(dtype).name]
    abs_err, ratio = 0.0, 0.0
    for k in net.PARAM_SHAPES:
        g, r = np.asarray(got[k], np.float64), np.asarray(ref[k], np.float64)
        if g.shape != r.shape:
            raise net.MLPError(f"param {k} has shape {g.shape}, reference {r.shape}")
        e = np.abs(g - r)
        abs_err = max(abs_err, float(e.max()))
        ratio = max(ratio, float((e / (tol["atol"] + tol["rtol"] * np.abs(r))).max()))
    if math.isnan(abs_err) or math.isnan(ratio):
        abs_err = ratio = math.inf
    return {"max_abs_err": abs_err, "max_err_over_tol": ratio, **tol}


def check_against_numpy(backend: Backend, reference: Backend, X, y, steps: int = 5, cfg: RunConfig = RunConfig()) -> dict:
    """Params of `backend` vs the NumPy REFERENCE (the study's MlpScratch.reference(), made
    from the registry) after each of `steps` steps, same init.

    Keys: variant (backend.label), dtype, steps, per_step [{step, max_abs_err,
    max_err_over_tol}], max_abs_err, max_err_over_tol, atol, rtol, ok (every element within
    tolerance)."""
    ref = train_params(reference, X, y, steps, cfg)
    got = train_params(backend, X, y, steps, cfg)
    per = [{"step": s + 1, **param_errors(g, r, cfg.dtype)} for s, (g, r) in enumerate(zip(got, ref))]
    worst = max(per, key=lambda e: e["max_err_over_tol"])
    return {
        "variant": backend.label,
        "dtype": cfg.dtype,
        "steps": steps,
        "per_step": [{k: e[k] for k in ("step", "max_abs_err", "max_err_over_tol")} for e in per],
        "max_abs_err": max(e["max_abs_err"] for e in per),
        "max_err_over_tol": worst["max_err_over_tol"],
        "atol": worst["atol"],
        "rtol": worst["rtol"],
        "ok": bool(worst["max_err_over_tol"] <= 1.0),
    }


def config_dict(cfg: RunConfig) -> dict:
    return asdict(cfg)
