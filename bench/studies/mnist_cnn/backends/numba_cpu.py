"""numba-cpu: the seed CNN with hand-written @njit(parallel=True) kernels, full backprop.

The kernels live in bench.studies.mnist_cnn.kernels.numba_cpu_cnn; this module only feeds them batches.
Data: the training set is scaled once (the "resident" pipeline; input_scale normalize or
div255); each batch is gathered with np.take into a preallocated buffer.

Variant "seed" (seed 000's own Numba CPU setup): the same forward through every layer, then
backpropagation through the two dense layers only and SGD on them; the conv weights keep
their initial values (the seed's src/model_cpu_numba.py updated only W1, b1, W2, b2). Rows
say `trains: dense layers only`. The matrix gives it the seed's init, input scaling and
optimizer form (init=seed, input_scale=div255, sgd=seed; see config.py).
"""

from __future__ import annotations

import numpy as np

from bench.measure.timer import NullTimer


def available() -> str | None:
    try:
        import numba  # noqa: F401
    except ImportError as err:
        return f"numba not installed: {err}"
    return None


_NO_PHASES = NullTimer()  # warm-up steps record nothing


class NumbaCpuTrainer:
    profiles_phases = True  # the profiling pass times its phases (synced) before epoch 1

    def __init__(self, cfg, params, data):
        from bench.studies.mnist_cnn.kernels import numba_cpu_cnn as K
        from bench.studies.mnist_cnn.net import scale_u8

        self.K, self.cfg = K, cfg
        self.dense_only = cfg.variant == "seed"
        self.step_names = K.DENSE if self.dense_only else None
        # sgd=seed: seed 000's v = m*v + (1-m)*G with G the batch-summed gradient = (1-m)*n * mean
        self.grad_scale = (1.0 - cfg.momentum) * cfg.batch_size if cfg.sgd == "seed" else None
        self.p = {k: np.array(v, dtype=np.float32, copy=True) for k, v in params.items()}
        self.grads = K.zeros_like_params(self.p)
        self.vel = K.zeros_like_params(self.p)
        self.x_train = scale_u8(data.x_train, cfg.input_scale)
        self.y_train = np.ascontiguousarray(data.y_train, dtype=np.int64)
        self.x_test = scale_u8(data.x_test, cfg.input_scale)
        self.y_test = data.y_test
        self.ws = K.Workspace(cfg.batch_size)
        self.xb = np.empty((cfg.batch_size, 1, 28, 28), np.float32)
        self.yb = np.empty(cfg.batch_size, np.int64)

    def sync(self) -> None:
        return None

    def warmup(self) -> float:
        """Every kernel once (JIT compile or cache load) on a tiny batch of its own, then one
        real training step on this cell's weights, undone: epoch 1 pays no first-call cost."""
        secs = float(self.K.warmup())
        import time

        t0 = time.perf_counter()
        snap = self.snapshot()
        self.train_epoch(np.arange(self.cfg.batch_size, dtype=np.int64) % len(self.y_train), _NO_PHASES)
        self.restore(snap)
        return secs + time.perf_counter() - t0

    def snapshot(self):
        return {k: v.copy() for k, v in self.p.items()}, {k: v.copy() for k, v in self.vel.items()}

    def restore(self, snap) -> None:
        p, vel = snap
        for k in self.p:
            self.p[k][...] = p[k]  # in place: the kernels hold these arrays
            self.vel[k][...] = vel[k]

    def compile_kind(self) -> str:
        """cache (every kernel loaded from numba's on-disk cache), cold (all compiled), or mixed."""
        hits = misses = 0
        for obj in vars(self.K).values():
            stats = getattr(obj, "stats", None)
            if stats is not None and hasattr(stats, "cache_hits"):
                hits += sum(stats.cache_hits.values())
                misses += sum(stats.cache_misses.values())
        if hits and not misses:
            return "cache"
        if misses and not hits:
            return "cold"
        return "mixed" if hits else "cold (no cache record)"

    def train_epoch(self, order: np.ndarray, timer) -> dict:
        K, bs = self.K, self.cfg.batch_size
        losses = []
        for s in range(0, len(order), bs):
            idx = order[s : s + bs]
            if len(idx) != bs:  # only with last_batch="drop" off and an odd tail; the study pads by default
                raise ValueError(f"partial batch of {len(idx)}: the study must pad or drop")
            with timer.phase("data"):
                np.take(self.x_train, idx, axis=0, out=self.xb)
                np.take(self.y_train, idx, out=self.yb)
            with timer.phase("forward"):
                K.forward(self.p, self.xb, self.ws)
            with timer.phase("backward"):
                if self.dense_only:
                    losses.append(K.loss_backward_dense(self.p, self.yb, self.ws, self.grads))
                else:
                    losses.append(K.loss_backward(self.p, self.yb, self.ws, self.grads))
            with timer.phase("step"):
                K.sgd_momentum_step(
                    self.p, self.grads, self.vel, self.cfg.lr, self.cfg.momentum, self.step_names, self.grad_scale
                )
        return {
            "train_loss": float(np.mean(losses)),
            "batch_size_used": int(self.xb.shape[0]),
            "batch_sizes_seen": [int(self.xb.shape[0])],
        }

    def evaluate(self) -> float:
        pred = self.K.predict(self.p, self.x_test)
        return float((pred == self.y_test).mean())

    def phase_fields(self, timer) -> dict:
        return timer.as_fields()

    def memory(self) -> dict:
        return {}

    def params(self) -> dict[str, np.ndarray]:
        return {k: v.copy() for k, v in self.p.items()}


def create(cell, data):
    return NumbaCpuTrainer(data.cfg, data.params, data.dataset)
