"""mnist-cnn (seed 000): the 8c3-pool-16c3-pool-128-10 CNN on MNIST, one cell per process.

Protocol of one cell:
  1. load data (real MNIST if present, else the embedded digits), initial weights from
     bench.nets.cnn.init_params(seed): identical across backends;
  2. warm up (JIT / first-call work) -> compile_s, never inside an epoch;
  3. per epoch: a seeded permutation (same for every backend), padded to a multiple of
     the batch by repeating its first samples (the seed's way) or with the tail dropped;
     train with per-phase timers and an RSS sampler; then evaluate on the full test set
     (eval_s, excluded from epoch_s);
  4. a row per epoch goes to rows.partial.jsonl as it finishes; rows.jsonl + rows.csv +
     system.json are written atomically at the end.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.errors import KitError

STUDY = "mnist-cnn"


@dataclass(frozen=True)
class MnistCnnConfig:
    backend: str
    pipeline: str = "resident"  # seed | resident (how batches reach the model)
    variant: str = "default"  # backend-specific tuning label (e.g. amp-bf16, graphs)
    epochs: int = 10  # passes over the training set
    batch_size: int = 512  # samples per step
    lr: float = 0.01  # SGD learning rate
    momentum: float = 0.9  # SGD momentum (torch form)
    seed: int = 0  # weights and batch order
    threads: int = 0  # CPU threads for torch/numba; 0 = all cores this process may use
    last_batch: str = "pad"  # pad (repeat from the start, as the seed) | drop
    dataset: str = "auto"  # auto | mnist | digits
    data_dir: str | None = None  # where <dir>/mnist/ lives; None = $KIT_DATA_DIR or ./data
    limit_train: int = 0  # use only the first N training samples (smoke runs); 0 = all

    def cell_id(self) -> str:
        tail = f"_n{self.limit_train}" if self.limit_train else ""
        return f"{self.backend}_{self.pipeline}_{self.variant}_b{self.batch_size}_s{self.seed}_e{self.epochs}{tail}"

    def validate(self) -> None:
        from bench import backends

        mod = backends.load(STUDY, self.backend)  # unknown backend -> KitError
        if self.pipeline not in mod.PIPELINES:
            raise KitError(f"{self.backend} has no pipeline {self.pipeline!r}: choose {', '.join(mod.PIPELINES)}")
        if self.variant not in mod.VARIANTS:
            raise KitError(f"{self.backend} has no variant {self.variant!r}: choose {', '.join(mod.VARIANTS)}")
        if self.epochs <= 0:
            raise KitError(f"--epochs must be > 0 (got {self.epochs})")
        if self.batch_size <= 0:
            raise KitError(f"--batch-size must be > 0 (got {self.batch_size})")
        if self.lr <= 0:
            raise KitError(f"--lr must be > 0 (got {self.lr})")
        if self.threads < 0:
            raise KitError(f"--threads must be >= 0 (got {self.threads})")
        if self.last_batch not in ("pad", "drop"):
            raise KitError(f"--last-batch must be pad or drop (got {self.last_batch!r})")
        if self.limit_train < 0:
            raise KitError(f"--limit-train must be >= 0 (got {self.limit_train})")


def default_matrix(platform: str, smoke: bool = False, epochs: int | None = None) -> list[MnistCnnConfig]:
    """Every backend x pipeline x variant a platform runs by default."""
    from bench.backends import PLATFORM_BACKENDS

    if platform not in PLATFORM_BACKENDS:
        raise KitError(f"unknown platform {platform!r}: choose {', '.join(PLATFORM_BACKENDS)}")
    cells = {
        "cpu": [("torch-cpu", "seed", "default"), ("torch-cpu", "resident", "default"), ("numba-cpu", "resident", "default")],
        "cuda": [("torch-cuda", "seed", "default"), ("torch-cuda", "resident", "default"),
                 ("torch-cuda", "resident", "tuned"), ("numba-cuda", "resident", "default")],
        "mps": [("torch-mps", "seed", "default"), ("torch-mps", "resident", "default")],
    }[platform]
    n_epochs = epochs if epochs is not None else (2 if smoke else 10)
    limit = 4096 if smoke else 0
    return [MnistCnnConfig(backend=b, pipeline=p, variant=v, epochs=n_epochs, limit_train=limit) for b, p, v in cells]


def epoch_order(n: int, batch: int, seed: int, epoch: int, last_batch: str) -> np.ndarray:
    """The sample order of one epoch: a seeded permutation, padded or trimmed to whole batches."""
    perm = np.random.default_rng([seed, epoch]).permutation(n).astype(np.int64)
    rem = n % batch
    if rem == 0:
        return perm
    if last_batch == "drop":
        return perm[: n - rem]
    pad = batch - rem
    reps = -(-pad // n)  # when batch > n (only possible with tiny limits) repeat more than once
    return np.concatenate([perm, np.tile(perm, reps)[:pad]])


def _set_threads(n: int) -> int:
    n = n or (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    os.environ.setdefault("OMP_NUM_THREADS", str(n))
    os.environ.setdefault("MKL_NUM_THREADS", str(n))
    return n


@dataclass
class CellRun:
    """A prepared cell: its trainer, data and rows so far (see prepare/run_epoch/finish)."""

    cfg: MnistCnnConfig
    cell_dir: Path
    base: dict
    n_train: int
    dataset: dict
    threads: int
    trainer: object = None
    compile_s: float = 0.0
    rows: list = None
    extra: dict = None


def prepare(cfg: MnistCnnConfig, out_dir: Path) -> CellRun:
    """Validate, load data, build the trainer, warm up. Raises KitError on bad input before
    writing anything; an unavailable backend is finished at once as a skipped cell."""
    from bench import backends, results
    from bench.data.mnist import load_dataset
    from bench.nets.cnn import init_params

    cfg.validate()
    threads = _set_threads(cfg.threads)
    data = load_dataset(cfg.data_dir, cfg.dataset)
    if cfg.limit_train:
        import dataclasses
        data = dataclasses.replace(data, x_train=data.x_train[: cfg.limit_train], y_train=data.y_train[: cfg.limit_train])
    n_train = len(data.y_train)
    if cfg.batch_size > n_train:
        raise KitError(f"--batch-size {cfg.batch_size} is larger than the training set ({n_train} samples of {data.name})")

    cell_dir = Path(out_dir) / STUDY / cfg.cell_id()
    run_id = results.new_run_id()
    rt = results.runtime_info()
    base = {"study": STUDY, "backend": cfg.backend, "pipeline": cfg.pipeline, "variant": cfg.variant,
            "batch_size": cfg.batch_size, "seed": cfg.seed, "run_id": run_id, "cell": cfg.cell_id(),
            "dataset": data.name, "dataset_real_mnist": data.real_mnist, "last_batch": cfg.last_batch,
            "image_id": rt["image_id"], "lock_hash": rt["lock_hash"]}
    run = CellRun(cfg, cell_dir, base, n_train, data.describe(), threads, rows=[], extra={})
    (cell_dir / "rows.partial.jsonl").unlink(missing_ok=True)

    reason = backends.why_unavailable(STUDY, cfg.backend)
    if reason:
        run.rows = [{**base, "epoch": None, "status": "skipped", "reason": reason}]
        return run

    import numba  # noqa: F401 - so thread settings can be pinned and recorded
    if "torch" in cfg.backend:
        import torch
        torch.set_num_threads(threads)
        torch.manual_seed(cfg.seed)
    if cfg.backend.startswith("numba"):
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))

    run.trainer = backends.load(STUDY, cfg.backend).create(cfg, init_params(cfg.seed), data)
    run.compile_s = run.trainer.warmup()
    return run


def run_epoch(run: CellRun, epoch: int) -> dict:
    """Train one epoch (timed, RSS sampled), then evaluate (timed apart); append the row."""
    from bench import results
    from bench.measure.memory import RSSSampler
    from bench.measure.timer import PhaseTimer, stopwatch

    cfg, trainer = run.cfg, run.trainer
    order = epoch_order(run.n_train, cfg.batch_size, cfg.seed, epoch, cfg.last_batch)
    timer = PhaseTimer()  # CPU phases need no sync; device trainers time their own phases (phase_fields)
    with RSSSampler() as rss, stopwatch(getattr(trainer, "sync", None)) as sw:
        stats = trainer.train_epoch(order, timer)
    with stopwatch() as ev:
        acc = trainer.evaluate()
    phases = trainer.phase_fields() if hasattr(trainer, "phase_fields") else timer.as_fields()
    row = {**run.base, "epoch": epoch, "status": "ok",
           "epoch_s": sw.seconds, "samples": len(order), "samples_per_s": len(order) / sw.seconds,
           "train_loss": stats["train_loss"], "test_acc": acc, "eval_s": ev.seconds,
           "compile_s": run.compile_s, "batch_size_used": stats["batch_size_used"],
           "rss_mean_mb": rss.mean_mb, "rss_peak_mb": rss.peak_mb, "rss_samples": rss.n_samples,
           "threads": run.threads, "vram_peak_mb": None, **phases, **trainer.memory()}
    run.rows.append(row)
    results.append_partial(run.cell_dir, row)
    return row


def finish(run: CellRun) -> Path:
    """rows.jsonl, rows.csv and system.json, each atomically."""
    from dataclasses import asdict

    from bench import results
    from bench.nets.cnn import train_flops_per_sample

    extra = {"compile_s": run.compile_s, "n_train_used": run.n_train,
             "flops_per_sample_analytic": train_flops_per_sample(), **(run.extra or {})}
    results.write_json(run.cell_dir / "system.json",
                       results.system_info(asdict(run.cfg), run.dataset, run.base["run_id"], extra))
    results.write_rows(run.cell_dir, run.rows)
    return run.cell_dir


def run_cell(cfg: MnistCnnConfig, out_dir: Path, progress=None) -> Path:
    """Run one cell; returns its directory."""
    import json
    import sys

    gate = os.environ.get("KIT_EPOCH_GATE") == "1"  # the interleaved benchmark steps us epoch by epoch
    run = prepare(cfg, out_dir)
    if run.trainer is not None:
        task = progress.add_task(cfg.cell_id(), total=cfg.epochs) if progress else None
        if gate:
            print(f"KIT READY {run.compile_s}", flush=True)
        for epoch in range(1, cfg.epochs + 1):
            if gate and sys.stdin.readline().strip() != "go":
                raise SystemExit(3)  # the parent went away: leave only the partial rows
            row = run_epoch(run, epoch)
            if gate:
                print("KIT EPOCH " + json.dumps(row, default=float), flush=True)
            if progress:
                progress.update(task, advance=1, description=f"{cfg.cell_id()} acc={row['test_acc']:.4f}")
    return finish(run)


def error_row(cfg: MnistCnnConfig, reason: str) -> dict:
    from bench import results

    return {"study": STUDY, "backend": cfg.backend, "pipeline": cfg.pipeline, "variant": cfg.variant,
            "batch_size": cfg.batch_size, "seed": cfg.seed, "epoch": None, "status": "error",
            "reason": reason, "cell": cfg.cell_id(), "run_id": results.new_run_id(),
            "image_id": results.runtime_info()["image_id"], "lock_hash": results.runtime_info()["lock_hash"],
            "created": time.time()}
