"""One mlp-scratch cell: every backend the cell names ('+'-joined), side by side in one process.

Steps (each returns its rows; `phase` says which):
  0            check: each backend against the NumPy reference (MlpScratch.reference(); its
               parameters after a few steps), before timing
  1..R         plain run r of every backend, interleaved (total, per iteration, forward, backward)
  R+1          op breakdown per backend (a device sync around every op: distorted, separate)
  R+2          memory breakdown per backend, each in a fresh spawned process that creates it
               from its BackendSpec's module (seed Table 5)
  close()      convergence rows: plain run 0's records, every 10 iterations and at the end
               (training accuracy from that step's own forward pass, validation accuracy,
               loss), the reference vs each other backend within 1e-3. The records sit between
               timed steps: outside total_s, inside loop_wall_s (the seed's "entire process").
Every run holds NumPy's BLAS to `threads` threads (threadpoolctl); each row says which BLAS
and how many threads (`blas`, `blas_threads`), system.json the library details.
Data: MNIST train split 59,000 / 1,000 (validation), as the seed; with the embedded digits
1,197 / 300.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from bench.core.cell import Cell
from bench.core.errors import KitError
from bench.core.study import RunContext
from bench.studies.mlp_scratch import runner
from bench.studies.mlp_scratch.backends import Trainer, make
from bench.studies.mlp_scratch.memory import memory_isolated

PLAIN_KEYS = (
    "total_s",
    "loop_wall_s",
    "per_iter_ms",
    "per_iter_median_ms",
    "per_iter_min_ms",
    "per_iter_max_ms",
    "forward_ms",
    "forward_median_ms",
    "backward_ms",
    "backward_median_ms",
    "update_ms",
    "warmup_s",
    "first_iter_ms",
    "final_train_acc",
    "final_val_acc",
    "final_loss",
    "blas",
    "blas_threads",
)


def load_xy(params: dict, data_dir: str | None):
    """(X_train, y_train, X_val, y_val, dataset description): X (n,784) float in [0,1]."""
    from bench.data import digit_data

    ds = digit_data(params, data_dir)
    x = ds.x_train.reshape(len(ds.x_train), -1).astype(np.float32) / np.float32(255.0)
    y = ds.y_train.astype(np.int64)
    if x.ndim != 2 or x.shape[1] != 784 or len(x) != len(y):
        raise KitError(f"mlp-scratch needs (n, 784) images and n labels; got {x.shape} and {y.shape}")
    n_val = 1000 if ds.describe()["real"] else 300
    perm = np.random.default_rng(0).permutation(len(x))
    x, y = x[perm], y[perm]
    return x[n_val:], y[n_val:], x[:n_val], y[:n_val], ds.describe()


@dataclass
class MlpRun:
    """A prepared cell (a StepRun)."""

    cell: Cell
    variants: dict[str, Trainer]  # name -> created backend, those available here
    modules: dict[str, str]  # name -> its BackendSpec.module (the memory process creates it from there)
    reference: str  # the backend the others are checked against (MlpScratch.reference())
    skipped: dict  # name -> reason
    data: tuple  # X, y, Xv, yv
    rcfg: runner.RunConfig
    params: dict
    dataset: dict
    base: dict
    blas: dict = field(default_factory=dict)  # runner.blas_threads' reading at open
    warmup_s: float = 0.0
    runs: dict = field(default_factory=dict)
    agree: dict = field(default_factory=dict)
    platforms: dict = field(default_factory=dict)  # row backend -> its platform (which energy counters are its)

    @property
    def steps(self) -> int:
        return self.params["plain_runs"] + 3

    def _row(self, v: str, phase: str | None, **kw) -> dict:
        return {**self.base, "backend": v, "phase": phase, "status": "ok", **kw}

    def step(self, i: int) -> list[dict]:
        X, y, Xv, yv = self.data
        n_plain = self.params["plain_runs"]
        if i == 0:
            return self._check()
        if i <= n_plain:
            from bench.measure import energy

            rows = []
            for v, var in self.variants.items():
                e0 = energy.read()  # around the run as a whole: its total_s is the clock inside
                r = var.plain(X, y, Xv, yv, self.rcfg)
                e1 = energy.read()
                self.runs.setdefault(v, []).append(r)
                spent = energy.fields(e0, e1, self.rcfg.iterations * len(X), self.platforms[v])
                rows.append(self._row(v, "plain", plain_run=i - 1, **{k: r.get(k) for k in PLAIN_KEYS}, **spent))
            return rows
        if i == n_plain + 1:
            iters = min(self.params["breakdown_iterations"], self.params["iterations"])
            return [
                self._row(v, "op", op=o["op"], op_ms_per_iter=o["ms_per_iter"], op_ms_total=o["ms_total"], op_calls=o["calls"])
                for v, var in self.variants.items()
                for o in var.breakdown(X, y, self.rcfg, iters)["ops"]
            ]
        m_rows = []
        for v in self.variants:
            m = memory_isolated(self.modules[v], self.cell, X, y, Xv, yv, self.rcfg)
            m_rows.append(self._row(v, "memory", **{k: m.get(k) for k in runner.MEMORY_KEYS}))
        return m_rows

    def _check(self) -> list[dict]:
        X, y, _, _ = self.data
        rows = [self._row(v, None, status="skipped", reason=why) for v, why in self.skipped.items()]
        ref = self.variants.get(self.reference) or make(self.reference)
        for v, var in list(self.variants.items()):
            if v == self.reference:
                continue
            c = var.check(ref, X, y, self.params["check_steps"], self.rcfg)
            rows.append(
                self._row(
                    v,
                    "check",
                    status="ok" if c["ok"] else "error",
                    max_abs_err=c["max_abs_err"],
                    err_over_tol=c["max_err_over_tol"],
                    **({} if c["ok"] else {"reason": f"disagrees with {self.reference} before timing"}),
                )
            )
            if not c["ok"]:
                del self.variants[v]
        return rows

    def close(self) -> list[dict]:
        curves = {v: rs[0]["convergence"] for v, rs in self.runs.items()}
        ref = self.reference
        agree = {v: runner.compare_curves(curves[ref], curves[v]) for v in curves if v != ref and ref in curves}
        self.agree = agree
        rows = [
            self._row(v, "convergence", **point, agrees_with_numpy=agree[v]["agree"] if v in agree else None)
            for v, curve in curves.items()
            for point in curve
        ]
        rows += [
            self._row(v, "convergence", status="error", reason=f"curve differs from {ref} by more than {runner.CURVE_TOL}")
            for v, a in agree.items()
            if not a["agree"]
        ]
        return rows

    def system_extra(self) -> dict:
        return {
            "curve_checks": self.agree,
            "variants_run": list(self.variants),
            "variants_skipped": self.skipped,
            "numpy_blas": self.blas,
            "memory_overhead_definition": runner.OVERHEAD_DEFINITION,
        }


def open_cell(study, cell: Cell, ctx: RunContext) -> MlpRun:
    from bench.measure.fixedcost import phase

    p = cell.params
    with phase("data_s"):
        X, y, Xv, yv, dsinfo = load_xy(p, ctx.data_dir)
    variants: dict[str, Trainer] = {}
    skipped = {}
    for v in study.parts(cell):
        why = study.why_unavailable(v)
        if why:
            skipped[v] = why
        else:
            variants[v] = study.load_backend(v).create(cell, None)
    modules = {v: study.backend_spec(v).module for v in variants}
    threads = int(p.get("threads", 0))
    rcfg = runner.RunConfig(iterations=p["iterations"], lr=p["lr"], dtype=p["dtype"], seed=cell.seed, threads=threads)
    with runner.blas_threads(threads) as blas:  # what every run of this cell will hold NumPy's BLAS to
        pass
    base = {
        "dtype": p["dtype"],
        "iterations": p["iterations"],
        "dataset_real": dsinfo["real"],
        "n_train": len(X),
        "n_val": len(Xv),
        "blas": blas["blas"],
        "blas_threads": blas["blas_threads"],
    }
    run = MlpRun(cell, variants, modules, study.reference(), skipped, (X, y, Xv, yv), rcfg, p, dsinfo, base, blas)
    run.platforms = {v: study.backend_spec(v).platform for v in variants}
    return run
