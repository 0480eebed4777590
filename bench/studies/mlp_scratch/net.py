"""The seed-001 network, written once against an array module `xp` (numpy or cupy).

Layout follows the seed's Algorithm 1: one column per sample (m samples).
    XT (784, m) pixels in [0, 1]    y (m,) int labels    Y one-hot (10, m)
    W1 (10, 784)  b1 (10, 1)        W2 (10, 10)  b2 (10, 1)
    Z1 = W1 XT + b1 ; A1 = ReLU(Z1)               (10, m)   seed eq. 1-2
    Z2 = W2 A1 + b2 ; A2 = softmax(Z2)            (10, m)   eq. 3-4
    dZ2 = A2 - Y ; dW2 = dZ2 A1^T / m ; db2 = sum_i dZ2 / m             eq. 5-7
    dZ1 = W2^T dZ2 * ReLU'(Z1) ; dW1 = dZ1 XT^T / m ; db1 = sum_i dZ1 / m  eq. 8-10
    p -= lr * dp                                  full-batch gradient descent
Loss (reported only): mean softmax cross-entropy.

Deliberate differences from the seed's code: softmax subtracts the column max (same value,
no overflow), and db is the per-unit sum of eq. 7/10 (the seed's code summed every entry
of dZ into one scalar). Initial weights as the seed (`rand - 0.5`, i.e. U(-0.5, 0.5)),
drawn with numpy's default_rng(seed) on the host and copied to the device, so every
backend starts from identical weights.

`ops` is an optional callable `ops(name) -> context manager` wrapped around each op; the
breakdown run passes one that syncs the device and times (runner.py). Op names:
matmul (the 5 matrix products, bias add and 1/m included), relu, softmax,
gradient (one-hot, dZ2, ReLU' mask, bias sums), update.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np

N_IN, N_HIDDEN, N_OUT = 784, 10, 10
DTYPES = ("float32", "float64")
BACKENDS = ("numpy", "cupy")
PARAM_SHAPES = {"W1": (N_HIDDEN, N_IN), "b1": (N_HIDDEN, 1), "W2": (N_OUT, N_HIDDEN), "b2": (N_OUT, 1)}
OPS = ("matmul", "relu", "softmax", "gradient", "update")


class MLPError(Exception):
    """Base of this study's errors; the message is one line."""


class MLPInputError(MLPError, ValueError):
    """Bad input: data missing or mis-shaped, iterations <= 0, unknown dtype or backend."""


class BackendUnavailable(MLPError, RuntimeError):
    """The backend cannot run on this host (no CuPy, no GPU); the message says why."""


_NULL = contextlib.nullcontext()


def no_ops(name: str):
    """Default `ops`: time nothing."""
    return _NULL


# ---------------------------------------------------------------- checks


def resolve_dtype(dtype) -> np.dtype:
    """'float32' | 'float64' (or the numpy type/dtype) -> np.dtype; anything else raises."""
    try:
        name = dtype if isinstance(dtype, str) or dtype is None else np.dtype(dtype).name
    except TypeError:
        name = None
    if name not in DTYPES:
        raise MLPInputError(f"unknown dtype {dtype!r}: choose one of {', '.join(DTYPES)}")
    return np.dtype(name)


def check_iterations(iterations) -> int:
    if isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer)):
        raise MLPInputError(f"iterations must be an int, got {type(iterations).__name__}")
    if iterations <= 0:
        raise MLPInputError(f"iterations must be > 0, got {iterations}")
    return int(iterations)


def check_lr(lr) -> float:
    if not (isinstance(lr, (int, float, np.floating)) and math.isfinite(lr) and lr > 0):
        raise MLPInputError(f"learning rate must be a finite number > 0, got {lr!r}")
    return float(lr)


def check_data(X, y, name: str = "train"):
    """X (n, 784) real in [0, 1], y (n,) ints in 0..9; numpy or cupy. Returns (X, y)."""
    if X is None or y is None:
        raise MLPInputError(f"{name} data missing: X is {type(X).__name__}, y is {type(y).__name__}")
    if not (hasattr(X, "shape") and hasattr(X, "dtype")) or not (hasattr(y, "shape") and hasattr(y, "dtype")):
        raise MLPInputError(f"{name} data must be arrays, got {type(X).__name__} and {type(y).__name__}")
    if X.ndim != 2 or X.shape[1] != N_IN:
        raise MLPInputError(f"{name} X has shape {tuple(X.shape)}; expected (n, {N_IN})")
    n = X.shape[0]
    if n == 0:
        raise MLPInputError(f"{name} X is empty (0 samples)")
    if y.shape != (n,):
        raise MLPInputError(f"{name} y has shape {tuple(y.shape)}; expected ({n},) to match X")
    if X.dtype.kind not in "fiu":
        raise MLPInputError(f"{name} X has dtype {X.dtype}; expected a real number type")
    if y.dtype.kind not in "iu":
        raise MLPInputError(f"{name} y has dtype {y.dtype}; expected integer labels")
    lo, hi = float(X.min()), float(X.max())
    if not (0.0 <= lo and hi <= 1.0):  # also false for NaN
        raise MLPInputError(f"{name} X has values in [{lo}, {hi}]; expected [0, 1] (divide pixels by 255)")
    ylo, yhi = int(y.min()), int(y.max())
    if ylo < 0 or yhi >= N_OUT:
        raise MLPInputError(f"{name} y has labels in [{ylo}, {yhi}]; expected 0..{N_OUT - 1}")
    return X, y


# ---------------------------------------------------------------- array modules


def cupy_unavailable_reason() -> str | None:
    """None if CuPy and a CUDA device can be used here, else why not (one line)."""
    try:
        import cupy
    except Exception as e:  # ImportError, or a broken CUDA install
        return f"cupy not importable: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:
        return f"no CUDA device: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return None if n > 0 else "no CUDA device: getDeviceCount() == 0"


def get_xp(name: str):
    """The array module NAME ('numpy' or 'cupy'); raises BackendUnavailable with the reason."""
    if name == "numpy":
        return np
    if name == "cupy":
        why = cupy_unavailable_reason()
        if why:
            raise BackendUnavailable(why)
        import cupy

        return cupy
    raise MLPInputError(f"unknown array module {name!r}: choose one of {', '.join(BACKENDS)}")


def array_module(a):
    """numpy or cupy, whichever `a` belongs to, without importing cupy for numpy arrays."""
    if type(a).__module__.startswith("cupy"):
        import cupy

        return cupy
    return np


def to_host(a) -> np.ndarray:
    return a.get() if hasattr(a, "get") and not isinstance(a, np.ndarray) else np.asarray(a)


# ---------------------------------------------------------------- params and data


def init_params(seed: int, dtype="float32") -> dict[str, np.ndarray]:
    """Seed's init, U(-0.5, 0.5) for weights and biases, drawn in float64 on the host then cast."""
    dt = resolve_dtype(dtype)
    rng = np.random.default_rng(seed)
    return {k: (rng.random(s) - 0.5).astype(dt) for k, s in PARAM_SHAPES.items()}


def to_device(params: dict, xp) -> dict:
    """A copy of params on xp (a copy for NumPy too: training updates in place)."""
    return {k: xp.array(v, copy=True) for k, v in params.items()}


def prepare_data(X, y, xp, dtype="float32"):
    """(n, 784) host/device X, (n,) y -> XT (784, n) C-contiguous in `dtype`, y int64 on xp."""
    check_data(X, y)
    dt = resolve_dtype(dtype)
    XT = xp.ascontiguousarray(xp.asarray(X, dtype=dt).T)
    return XT, xp.asarray(y, dtype=xp.int64)


# ---------------------------------------------------------------- the network


def forward(p: dict, XT, ops=no_ops) -> dict:
    """p: params on xp; XT (784, m). Returns the cache {Z1, A1, Z2, A2}, each (10, m)."""
    xp = array_module(XT)
    with ops("matmul"):
        Z1 = p["W1"] @ XT + p["b1"]  # (10, m)  eq. 1
    with ops("relu"):
        A1 = xp.maximum(Z1, 0)  # eq. 2
    with ops("matmul"):
        Z2 = p["W2"] @ A1 + p["b2"]  # (10, m)  eq. 3
    with ops("softmax"):
        E = xp.exp(Z2 - Z2.max(axis=0, keepdims=True))  # column max removed: no overflow
        A2 = E / E.sum(axis=0, keepdims=True)  # eq. 4
    return {"Z1": Z1, "A1": A1, "Z2": Z2, "A2": A2}


def backward(p: dict, cache: dict, XT, y, ops=no_ops, keep: dict | None = None) -> dict:
    """Gradients {W1, b1, W2, b2} (shapes as p) of the mean cross-entropy.

    keep: if a dict, the backward temporaries Y, dZ2, dZ1 (each (10, m)) are stored in it
    (the memory breakdown counts them)."""
    xp = array_module(XT)
    m = XT.shape[1]
    A1, A2, Z1 = cache["A1"], cache["A2"], cache["Z1"]
    with ops("gradient"):
        Y = xp.zeros_like(A2)  # one-hot, rebuilt every step as the seed does
        Y[y, xp.arange(m)] = 1
        dZ2 = A2 - Y  # (10, m)  eq. 5
    with ops("matmul"):
        dW2 = (1.0 / m) * (dZ2 @ A1.T)  # (10, 10) eq. 6
    with ops("gradient"):
        db2 = (1.0 / m) * dZ2.sum(axis=1, keepdims=True)  # (10, 1)  eq. 7
    with ops("matmul"):
        dA1 = p["W2"].T @ dZ2  # (10, m)
    with ops("gradient"):
        dZ1 = dA1 * (Z1 > 0)  # eq. 8, ReLU'(Z1)
    with ops("matmul"):
        dW1 = (1.0 / m) * (dZ1 @ XT.T)  # (10, 784) eq. 9
    with ops("gradient"):
        db1 = (1.0 / m) * dZ1.sum(axis=1, keepdims=True)  # (10, 1)  eq. 10
    if keep is not None:
        keep.update(Y=Y, dZ2=dZ2, dZ1=dZ1)
    return {"W1": dW1, "b1": db1, "W2": dW2, "b2": db2}


def update(p: dict, grads: dict, lr: float, ops=no_ops) -> None:
    """In place: p -= lr * grad (lr is a Python float, so the dtype stays)."""
    with ops("update"):
        for k in PARAM_SHAPES:
            p[k] -= lr * grads[k]


def train_step(p: dict, XT, y, lr: float, ops=no_ops) -> dict:
    """One full-batch iteration; returns the forward cache (pre-update params)."""
    cache = forward(p, XT, ops)
    update(p, backward(p, cache, XT, y, ops), lr, ops)
    return cache


def accuracy(A2, y):
    """Fraction of columns whose argmax is the label; a 0-d xp array (no host sync)."""
    xp = array_module(A2)
    return (xp.argmax(A2, axis=0) == y).mean()


def loss(Z2, y):
    """Mean cross-entropy from logits, log-sum-exp form; a 0-d xp array."""
    xp = array_module(Z2)
    mx = Z2.max(axis=0, keepdims=True)
    lse = xp.log(xp.exp(Z2 - mx).sum(axis=0)) + mx[0]
    return (lse - xp.take_along_axis(Z2, y[None, :], axis=0)[0]).mean()


def evaluate(p: dict, XT, y) -> tuple[float, float]:
    """(accuracy, loss) of params p on (XT, y), as host floats (syncs)."""
    c = forward(p, XT)
    return float(accuracy(c["A2"], y)), float(loss(c["Z2"], y))
