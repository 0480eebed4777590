"""mlp-scratch (seed 001): a 784-10-10 MLP written once against an `xp` array module,
full-batch gradient descent, on NumPy and CuPy (naive, as the seed wrote it, and tuned).

One cell = the study on this host, in one process: every variant available here runs
side by side (NumPy always; CuPy and tuned CuPy where a GPU is), so Table 3's speedups
are ratios of medians from one session. Order of work:
  1. each CuPy variant checked against NumPy (parameters after a few steps) before timing;
  2. plain runs, interleaved over --repeats: total, per iteration, forward, backward;
  3. an op-breakdown run per variant (device sync around every op: distorted, separate);
  4. a memory breakdown per variant, each in a fresh spawned process (seed Table 5);
  5. convergence (accuracy every 10 iterations), NumPy vs each CuPy variant within 1e-3.
Rows: phase = check | plain | op | memory | convergence, one metric set per row.
Data: MNIST train split 59,000 / 1,000 (validation), as the seed; with the embedded
digits, 1,197 / 300.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.errors import KitError

STUDY = "mlp-scratch"
PLATFORM_VARIANTS = {"cpu": ("numpy",), "cuda": ("numpy", "cupy", "cupy-tuned")}


@dataclass(frozen=True)
class MlpConfig:
    variants: tuple = ("numpy",)  # numpy | cupy | cupy-tuned
    iterations: int = 500  # full-batch gradient-descent steps
    lr: float = 0.1  # learning rate
    dtype: str = "float32"  # float32 | float64
    seed: int = 0  # initial weights
    repeats: int = 3  # interleaved plain runs per variant
    breakdown_iterations: int = 100  # iterations of the synced op-breakdown run
    check_steps: int = 5  # steps compared with NumPy before timing
    dataset: str = "auto"  # auto | mnist | digits
    data_dir: str | None = None

    def cell_id(self) -> str:
        return f"{'+'.join(self.variants)}_{self.dtype}_i{self.iterations}_s{self.seed}"

    def validate(self) -> None:
        from bench.mlp import net

        try:
            net.check_iterations(self.iterations)
            net.check_lr(self.lr)
            net.resolve_dtype(self.dtype)
        except net.MLPError as err:
            raise KitError(str(err).replace("iterations", "--iterations", 1)) from None
        for v in self.variants:
            if v not in ("numpy", "cupy", "cupy-tuned"):
                raise KitError(f"unknown mlp-scratch variant {v!r}: choose numpy, cupy, cupy-tuned")
        if self.repeats <= 0:
            raise KitError(f"--repeats must be > 0 (got {self.repeats})")


def load_xy(cfg: MlpConfig):
    """(X_train, y_train, X_val, y_val, dataset description): X (n,784) float in [0,1]."""
    from bench.data.mnist import load_dataset

    ds = load_dataset(cfg.data_dir, cfg.dataset)
    x = ds.x_train.reshape(len(ds.x_train), -1).astype(np.float32) / np.float32(255.0)
    y = ds.y_train.astype(np.int64)
    if x.ndim != 2 or x.shape[1] != 784 or len(x) != len(y):
        raise KitError(f"mlp-scratch needs (n, 784) images and n labels; got {x.shape} and {y.shape}")
    n_val = 1000 if ds.real_mnist else 300
    perm = np.random.default_rng(0).permutation(len(x))
    x, y = x[perm], y[perm]
    return x[n_val:], y[n_val:], x[:n_val], y[:n_val], ds.describe()


def available_variants(wanted) -> tuple[list[str], dict[str, str]]:
    from bench.mlp import net

    why = net.cupy_unavailable_reason()
    ok = [v for v in wanted if v == "numpy" or why is None]
    return ok, {v: why for v in wanted if v not in ok}


def run_cell(cfg: MlpConfig, out_dir: Path, echo=print) -> Path:
    from bench import results
    from bench.mlp import runner
    from bench.mlp.check_gpu import memory_isolated

    cfg.validate()
    X, y, Xv, yv, dsinfo = load_xy(cfg)
    variants, skipped = available_variants(cfg.variants)
    rcfg = runner.RunConfig(iterations=cfg.iterations, lr=cfg.lr, dtype=cfg.dtype, seed=cfg.seed)
    cell_dir = Path(out_dir) / STUDY / cfg.cell_id()
    run_id = results.new_run_id()
    rt = results.runtime_info()
    base = {"study": STUDY, "dtype": cfg.dtype, "iterations": cfg.iterations, "seed": cfg.seed, "run_id": run_id,
            "cell": cfg.cell_id(), "dataset": dsinfo["name"], "dataset_real_mnist": dsinfo["real_mnist"],
            "n_train": len(X), "n_val": len(Xv), "image_id": rt["image_id"], "lock_hash": rt["lock_hash"]}
    rows = [{**base, "backend": v, "phase": None, "status": "skipped", "reason": why} for v, why in skipped.items()]

    for v in variants:  # 1. correctness before timing
        if v == "numpy":
            continue
        c = runner.check_against_numpy(v, X, y, cfg.check_steps, rcfg)
        rows.append({**base, "backend": v, "phase": "check", "status": "ok" if c["ok"] else "error",
                     "max_abs_err": c["max_abs_err"], "err_over_tol": c["max_err_over_tol"],
                     **({} if c["ok"] else {"reason": "disagrees with numpy before timing"})})
        echo(f"check {v} vs numpy: max abs err {c['max_abs_err']:.3g} -> {'ok' if c['ok'] else 'FAIL'}")
    failed = {r["backend"] for r in rows if r["phase"] == "check" and r["status"] == "error"}
    variants = [v for v in variants if v not in failed]

    runs = {v: [] for v in variants}  # 2. plain runs, interleaved
    for rep in range(cfg.repeats):
        for v in variants:
            r = runner.plain_run(v, X, y, Xv, yv, rcfg)
            runs[v].append(r)
            rows.append({**base, "backend": v, "phase": "plain", "repeat": rep, "status": "ok",
                         **{k: r.get(k) for k in ("total_s", "loop_wall_s", "per_iter_ms", "per_iter_median_ms",
                                                  "per_iter_min_ms", "per_iter_max_ms", "forward_ms", "forward_median_ms",
                                                  "backward_ms", "backward_median_ms", "update_ms", "warmup_s",
                                                  "first_iter_ms", "final_train_acc", "final_val_acc", "final_loss")}})
            echo(f"repeat {rep} {v:<10} total {r['total_s']:.4g} s  {r['per_iter_median_ms']:.4g} ms/iter (median)  "
                 f"val acc {r['final_val_acc']:.4f}")
    for v in variants:  # 3. op breakdown (synced, separate)
        bd = runner.breakdown_run(v, X, y, rcfg, min(cfg.breakdown_iterations, cfg.iterations))
        for o in bd["ops"]:
            rows.append({**base, "backend": v, "phase": "op", "status": "ok", "op": o["op"],
                         "op_ms_per_iter": o["ms_per_iter"], "op_ms_total": o["ms_total"], "op_calls": o["calls"]})
    for v in variants:  # 4. memory, each in a fresh process
        m = memory_isolated(v, X, y, Xv, yv, rcfg)
        rows.append({**base, "backend": v, "phase": "memory", "status": "ok",
                     **{k: m.get(k) for k in ("params_bytes", "input_bytes", "activations_bytes", "gradients_bytes",
                                              "framework_overhead_bytes", "pool_used_bytes", "pool_total_bytes",
                                              "rss_bytes", "device_used_bytes")}})
    curves = {v: runs[v][0]["convergence"] for v in variants}  # 5. convergence
    agree = {v: runner.compare_curves(curves["numpy"], curves[v]) for v in variants if v != "numpy" and "numpy" in curves}
    for v, curve in curves.items():
        for point in curve:
            rows.append({**base, "backend": v, "phase": "convergence", "status": "ok", **point,
                         "agrees_with_numpy": agree[v]["agree"] if v in agree else None})
    for v, a in agree.items():
        if not a["agree"]:
            rows.append({**base, "backend": v, "phase": "convergence", "status": "error",
                         "reason": f"curve differs from numpy by more than {runner.CURVE_TOL}"})
    results.write_json(cell_dir / "system.json",
                       results.system_info(dataclasses.asdict(cfg), dsinfo, run_id, {"curve_checks": agree}))
    results.write_rows(cell_dir, rows)
    return cell_dir
