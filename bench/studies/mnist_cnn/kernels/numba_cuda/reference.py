"""The reference every numba-cuda kernel variant is checked against before it is timed
(lab/check_numba_cuda.py): one training step of the seed CNN (net.py's shapes) in plain NumPy,
float64, and SGD with momentum in torch's form."""

from __future__ import annotations

import numpy as np

from bench.studies.mnist_cnn.kernels.numba_cuda.net import H1, H2, N_P2, Q1, Q2
from bench.studies.mnist_cnn.net import PARAM_NAMES


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
