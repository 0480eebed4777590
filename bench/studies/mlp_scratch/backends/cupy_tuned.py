"""mlp-scratch backend `cupy-tuned`: tuned_cupy.TunedCupyMLP (3 fused kernels, one CUDA
graph per kind of step), row-major. `gemm` and `use_graph` pick its variants (the lab's
comparisons); the study runs the defaults."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

from bench.core.cell import Cell
from bench.studies.mlp_scratch import net, runner
from bench.studies.mlp_scratch.runner import RunConfig, nonneg, record, timing_stats

FUSED = ("forward", "backward", "update")  # timings its fused kernels cannot split: None in plain_run


@dataclass
class TunedCupy(runner.Backend):
    gemm: str = "kernels"  # tuned_cupy.GEMMS: hand-written kernels, or cuBLAS for Z1 and dW (no graph)
    use_graph: bool = True  # plain runs replay CUDA graphs of the steps (kernels only)
    name = "cupy-tuned"
    device = True

    def __post_init__(self):
        self.xp = net.get_xp("cupy")  # BackendUnavailable with the reason

    @property
    def label(self) -> str:
        return f"{self.name} ({self.gemm})"

    def _mlp(self, init: dict, X, y, X_val, y_val, cfg: RunConfig, capacity: int = 4, use_graph: bool = False):
        from bench.studies.mlp_scratch.tuned_cupy import TunedCupyMLP

        return TunedCupyMLP(X, y, X_val, y_val, init, cfg.lr, cfg.dtype, capacity=capacity, use_graph=use_graph, gemm=self.gemm)

    def timed_run(self, init: dict, X, y, X_val, y_val, cfg: RunConfig) -> dict:
        n_rec = (cfg.iterations - 1) // cfg.record_every + 2  # records + the final row
        t0 = time.perf_counter()
        mlp = self._mlp(init, X, y, X_val, y_val, cfg, max(n_rec, cfg.warmup_iters + 1), self.use_graph)
        setup_s = time.perf_counter() - t0  # upload + kernel compile (NVRTC, or its disk cache)

        clock = self.clock(mlp.stream)
        t0 = time.perf_counter()
        for k in range(cfg.warmup_iters):
            mlp.step(record=(k == 0))
            if k == 0:
                clock.sync()
                first_iter_ms = nonneg((time.perf_counter() - t0) * 1e3, "first iteration")
        clock.sync()
        mlp.capture()
        if mlp.graphs:  # first replay of each graph, outside the timed run
            mlp.step(False)
            mlp.step(True)
        clock.sync()
        warmup_s = nonneg(time.perf_counter() - t0, "warm-up")
        mlp.reset()

        marks = []
        clock.sync()
        w0 = time.perf_counter()
        for i in range(cfg.iterations):
            a = clock.mark()
            mlp.step(record=(i % cfg.record_every == 0))  # no host sync
            marks.append((a, clock.mark()))
        clock.sync()
        loop_wall_s = time.perf_counter() - w0
        it = [clock.ms(a, b, "iteration") for a, b in marks]

        mlp.enqueue_eval()
        hist = mlp.history()  # the one host read of the records
        iters = list(range(0, cfg.iterations, cfg.record_every)) + [cfg.iterations]
        if len(hist) != len(iters):
            raise net.MLPError(f"tuned history has {len(hist)} rows, expected {len(iters)}")
        rows = [record(i, h[0] / mlp.m, h[2] / mlp.mv, h[1] / mlp.m) for i, h in zip(iters, hist)]
        return {
            "timer": clock.kind,
            "warmup_iters": cfg.warmup_iters,
            "warmup_s": warmup_s,
            "first_iter_ms": first_iter_ms,
            "setup_s": setup_s,
            "capture_s": mlp.capture_s,
            "gemm": self.gemm,
            "graph": bool(mlp.graphs),
            "graph_error": mlp.graph_error,
            "total_s": sum(it) / 1e3,
            "loop_wall_s": loop_wall_s,
            **timing_stats("per_iter", it),
            **{f"{k}{s}": None for k in FUSED for s in ("_ms", "_median_ms", "_min_ms", "_max_ms", "_samples_ms")},
            "convergence": rows,
        }

    def op_stepper(self, init: dict, X, y, cfg: RunConfig):
        k = min(int(X.shape[0]), 64)  # a small validation set: the breakdown never records
        mlp = self._mlp(init, X, y, X[:k], y[:k], cfg)
        return self.clock(mlp.stream), lambda ops: mlp.enqueue_step(False, ops)

    @contextlib.contextmanager
    def live_arrays(self, init: dict, X, y, X_val, y_val, cfg: RunConfig):
        mlp = self._mlp(init, X, y, X_val, y_val, cfg)
        mlp.step(record=True)
        mlp.stream.synchronize()
        yield mlp.array_bytes()

    def params_after(self, init: dict, X, y, steps: int, cfg: RunConfig) -> list[dict]:
        k = min(int(X.shape[0]), 64)
        mlp = self._mlp(init, X, y, X[:k], y[:k], cfg)
        out = []
        for _ in range(steps):
            mlp.step()
            out.append(mlp.params())
        return out


def available() -> str | None:
    return net.cupy_unavailable_reason()


def create(cell: Cell, data: None) -> TunedCupy:
    return TunedCupy()
