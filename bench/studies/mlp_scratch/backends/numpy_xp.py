"""mlp-scratch backend `numpy`: net.py on NumPy (the host BLAS), the study's reference.

XpNet runs net.py, the seed's code, on any array module; cupy_xp.py makes one on CuPy.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any

from bench.core.cell import Cell
from bench.studies.mlp_scratch import net, runner
from bench.studies.mlp_scratch.runner import RunConfig, nonneg, record, timing_stats


@dataclass
class XpNet(runner.Backend):
    """net.py on the array module `xp`; one column per sample (XT (784, m))."""

    name: str  # its registry name
    xp: Any  # numpy or cupy
    device: bool = False  # True with CuPy: CUDA-event clock, memory measured on the GPU

    def prepare(self, X, y, dtype: str) -> tuple:
        """What net.py trains on: XT (784, m) C-contiguous in DTYPE and y (m,) int64, on xp."""
        return net.prepare_data(X, y, self.xp, dtype)

    def timed_run(self, init: dict, X, y, X_val, y_val, cfg: RunConfig) -> dict:
        XT, yd = self.prepare(X, y, cfg.dtype)  # (784, m), (m,)
        XvT, yvd = self.prepare(X_val, y_val, cfg.dtype)  # (784, mv), (mv,)
        clock = self.clock()

        # warm-up: kernels compiled, BLAS/cuBLAS handles made, pool filled; own copy of the init
        p = net.to_device(init, self.xp)
        clock.sync()
        t0 = time.perf_counter()
        for k in range(cfg.warmup_iters):
            net.train_step(p, XT, yd, cfg.lr)
            if k == 0:  # the record's kernels too, for both set sizes (CuPy may pick per shape); syncs
                net.evaluate(p, XT, yd)
                net.evaluate(p, XvT, yvd)
                first_iter_ms = nonneg((time.perf_counter() - t0) * 1e3, "first iteration")
        clock.sync()
        warmup_s = nonneg(time.perf_counter() - t0, "warm-up")

        p = net.to_device(init, self.xp)
        marks, rows = [], []
        clock.sync()
        w0 = time.perf_counter()
        for i in range(cfg.iterations):
            rec = i % cfg.record_every == 0
            if rec:
                vcache = net.forward(p, XvT)  # val forward with the params after i updates
            t = [clock.mark()]
            cache = net.forward(p, XT)
            t.append(clock.mark())
            grads = net.backward(p, cache, XT, yd)
            t.append(clock.mark())
            net.update(p, grads, cfg.lr)
            t.append(clock.mark())
            marks.append(t)
            if rec:  # float() syncs the host for CuPy, as the seed's print did
                rows.append(record(i, net.accuracy(cache["A2"], yd), net.accuracy(vcache["A2"], yvd), net.loss(cache["Z2"], yd)))
        clock.sync()
        loop_wall_s = time.perf_counter() - w0

        fwd = [clock.ms(a, b, "forward") for a, b, c, d in marks]
        bwd = [clock.ms(b, d, "backward") for a, b, c, d in marks]
        upd = [clock.ms(c, d, "update") for a, b, c, d in marks]
        it = [clock.ms(a, d, "iteration") for a, b, c, d in marks]
        tr_acc, tr_loss = net.evaluate(p, XT, yd)
        va_acc, _ = net.evaluate(p, XvT, yvd)
        rows.append(record(cfg.iterations, tr_acc, va_acc, tr_loss))
        return {
            "timer": clock.kind,
            "warmup_iters": cfg.warmup_iters,
            "warmup_s": warmup_s,
            "first_iter_ms": first_iter_ms,
            "total_s": sum(it) / 1e3,
            "loop_wall_s": loop_wall_s,
            **timing_stats("per_iter", it),
            **timing_stats("forward", fwd),
            **timing_stats("backward", bwd),
            **timing_stats("update", upd),
            "convergence": rows,
        }

    def op_stepper(self, init: dict, X, y, cfg: RunConfig):
        XT, yd = self.prepare(X, y, cfg.dtype)
        p = net.to_device(init, self.xp)
        return self.clock(), lambda ops: net.train_step(p, XT, yd, cfg.lr, ops)

    @contextlib.contextmanager
    def live_arrays(self, init: dict, X, y, X_val, y_val, cfg: RunConfig):
        XT, yd = self.prepare(X, y, cfg.dtype)
        XvT, yvd = self.prepare(X_val, y_val, cfg.dtype)
        p = net.to_device(init, self.xp)
        cache = net.forward(p, XT)
        temps: dict = {}
        grads = net.backward(p, cache, XT, yd, keep=temps)
        self.clock().sync()
        nb = lambda d: sum(int(a.nbytes) for a in d.values())  # noqa: E731
        yield {
            "params_bytes": nb(p),
            "input_bytes": XT.nbytes + yd.nbytes + XvT.nbytes + yvd.nbytes,
            "activations_bytes": nb(cache),
            "gradients_bytes": nb(grads) + nb(temps),
            "other_bytes": 0,
        }

    def params_after(self, init: dict, X, y, steps: int, cfg: RunConfig) -> list[dict]:
        XT, yd = self.prepare(X, y, cfg.dtype)
        p = net.to_device(init, self.xp)
        out = []
        for _ in range(steps):
            net.train_step(p, XT, yd, cfg.lr)
            out.append({k: net.to_host(v).copy() for k, v in p.items()})
        return out


def available() -> str | None:
    try:
        import numpy  # noqa: F401
    except ImportError as err:
        return f"numpy not installed: {err}"
    return None


def create(cell: Cell, data: None) -> XpNet:
    return XpNet("numpy", net.get_xp("numpy"))
