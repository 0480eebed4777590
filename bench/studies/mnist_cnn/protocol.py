"""One mnist-cnn cell: open() loads data and weights and warms up; step(i) is epoch i+1.

1. data: real MNIST or the embedded digits, exactly the checksum the matrix resolved;
   initial weights from net.init_params(seed, init), identical across backends (init kit,
   or seed 000's); input scaling per `input_scale` (numba backends; torch: normalize);
2. warm-up (JIT / first-call work / graph capture): real training steps (forward,
   backward, optimizer) whose effect is undone -> compile_s and compile_kind (cold,
   cache, none), never inside an epoch;
3. a profiling pass: PROFILE_BATCHES batches with per-phase timers (synced), then the
   weights and optimizer state restored -> the phase split every row carries, scaled to
   an epoch and labelled by `phase_source`; the timed epochs run with no instrumentation;
4. per epoch: a seeded permutation (same for every backend), padded to whole batches by
   repeating its first samples (the seed's way) or with the tail dropped; training timed
   as a whole with an RSS sampler; then evaluation on the full test set (eval_s,
   excluded from epoch_s). One row per epoch.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bench.core.cell import Cell
from bench.core.errors import KitError
from bench.core.study import RunContext, Study
from bench.studies.mnist_cnn.config import Settings, settings


@dataclass
class CellData:
    """What a backend's create() gets: the settings, the initial weights, the dataset."""

    cfg: Settings
    params: dict
    dataset: Any  # bench.data.mnist.Dataset
    dist: Any = None  # bench.core.dist.Dist: this rank of a many-device cell (torch backends wrap in DDP)


def rank_order(order: np.ndarray, batch: int, dist: Any) -> np.ndarray:
    """This rank's samples of an epoch whose ORDER holds whole global batches (BATCH x world):
    of global batch k, the rank's BATCH consecutive samples."""
    return order.reshape(-1, dist.world, batch)[:, dist.rank, :].reshape(-1)


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


@dataclass
class EpochRun:
    """A prepared cell (a StepRun): one step per epoch."""

    cfg: Settings
    trainer: Any  # backends.Trainer
    n_train: int
    threads: int
    dataset: dict
    steps: int
    warmup_s: float = 0.0
    base: dict = field(default_factory=dict)
    profile: dict = field(default_factory=dict)  # per-batch phase seconds from the profiling pass
    dist: Any = None  # bench.core.dist.Dist under ranks: each trains its share of every global batch
    platform: str = "cpu"  # the backend's: which energy counters stand for its device

    def step(self, i: int) -> list[dict]:
        """Train epoch i+1 (timed, RSS sampled), then evaluate (timed apart). Under ranks the
        clock runs from one barrier to the next and the samples are the whole world's."""
        from bench.measure import energy
        from bench.measure.memory import RSSSampler
        from bench.measure.timer import NullTimer, stopwatch

        cfg, trainer, epoch, dist = self.cfg, self.trainer, i + 1, self.dist
        order = epoch_order(self.n_train, cfg.batch_size * (dist.world if dist else 1), cfg.seed, epoch, cfg.last_batch)
        mine = rank_order(order, cfg.batch_size, dist) if dist else order
        timer = NullTimer()  # nothing inside the timed loop: phases come from the profiling pass

        def sync() -> None:  # the device, then (under ranks) every rank: the clock spans the whole world's epoch
            trainer.sync()
            if dist:
                dist.barrier()

        e0 = energy.read()  # outside the clock: the counters' reads are not the epoch's
        with RSSSampler() as rss, stopwatch(sync) as sw:
            stats = trainer.train_epoch(mine, timer)
        e1 = energy.read()
        if not math.isfinite(stats["train_loss"]):  # diverged: a flagged end, never a silent number
            raise KitError(f"non-finite training loss ({stats['train_loss']}) in epoch {epoch}: lr {cfg.lr} diverged")
        with stopwatch() as ev:
            acc = trainer.evaluate() if dist is None or dist.is_main else None
        if dist:
            dist.barrier()
        row = {
            **self.base,
            "epoch": epoch,
            "status": "ok",
            "epoch_s": sw.seconds,
            "samples": len(order),
            "samples_per_s": len(order) / sw.seconds,
            "train_loss": stats["train_loss"],
            "test_acc": acc,
            "eval_s": ev.seconds,
            "compile_s": self.warmup_s,
            "batch_size_used": stats["batch_size_used"],
            "rss_mean_mb": rss.mean_mb,
            "rss_peak_mb": rss.peak_mb,
            "rss_samples": rss.n_samples,
            "threads": self.threads,
            "vram_peak_mb": None,
            **trainer.phase_fields(timer),
            **self.phase_split(len(order) // cfg.batch_size),
            **trainer.memory(),
            **energy.fields(e0, e1, len(order), self.platform),
        }
        return [row]

    def phase_split(self, n_batches: int) -> dict:
        """The profiling pass's per-batch phase times scaled to this epoch's batches."""
        if not self.profile:
            return {"phase_source": "none (this backend times its loop as a whole; see its own *_s fields)"}
        n = self.profile["batches"]
        out: dict[str, Any] = {k: v / n * n_batches for k, v in self.profile["phases"].items()}
        out["phase_source"] = (
            f"profiling pass of {n} batches before epoch 1, synced per phase, weights restored; scaled to the epoch"
        )
        return out

    def close(self) -> list[dict]:
        return []

    def system_extra(self) -> dict:
        from bench.studies.mnist_cnn.net import train_flops_per_sample

        return {
            "compile_s": self.warmup_s,
            "n_train_used": self.n_train,
            "flops_per_sample_analytic": train_flops_per_sample(),
            "phase_profile": self.profile,
        }


def open_cell(study: Study, cell: Cell, ctx: RunContext) -> EpochRun:
    """Load data, build the trainer, warm up. KitError on bad input, before anything is written."""
    from bench.data.digits import load_for_cell
    from bench.measure.fixedcost import phase
    from bench.studies.mnist_cnn.config import trains
    from bench.studies.mnist_cnn.net import init_params

    cfg = settings(cell)
    threads = study.runtime_setup(cell, cfg.threads, cfg.seed)  # the backend family's threads and seed
    with phase("data_s"):
        data = load_for_cell(cell.params, ctx.data_dir)
    if cfg.limit_train:
        data = dataclasses.replace(data, x_train=data.x_train[: cfg.limit_train], y_train=data.y_train[: cfg.limit_train])
    n_train = len(data.y_train)
    if cfg.batch_size > n_train:
        raise KitError(f"batch_size {cfg.batch_size} is larger than the training set ({n_train} samples of {data.name})")
    world = ctx.dist.world if ctx.dist else 1
    if cfg.batch_size * world > n_train:
        raise KitError(f"batch_size {cfg.batch_size} on {world} ranks is more than the training set ({n_train} samples)")
    trainer = study.load_backend(cell.backend).create(cell, CellData(cfg, init_params(cfg.seed, cfg.init), data, ctx.dist))
    compile_s = trainer.warmup()
    profile = profile_phases(trainer, cfg, n_train)
    base = {
        "pipeline": cfg.pipeline,
        "batch_size": cfg.batch_size,
        "dataset_real_mnist": data.real_mnist,
        "last_batch": cfg.last_batch,
        "trains": trains(cell.backend, cell.variant),  # all layers | dense layers only (variant seed)
        "compile_kind": trainer.compile_kind(),
    }
    base["world_size"] = world
    run = EpochRun(cfg, trainer, n_train, threads, data.describe(), cfg.epochs, compile_s, base, profile, ctx.dist)
    run.platform = study.platform_of(cell)
    return run


PROFILE_BATCHES = 20  # batches in the profiling pass (fewer when an epoch has fewer)


def profile_phases(trainer: Any, cfg: Settings, n_train: int) -> dict:
    """Per-phase seconds over a few batches, synced at every phase boundary, outside every
    timed epoch; then the trainer is put back to its state before the pass (weights and
    optimizer), so training and accuracy are as if the pass never ran. Backends that time
    their loop as a whole (profiles_phases = False) are skipped."""
    from bench.measure.timer import PhaseTimer

    if not trainer.profiles_phases:
        return {}
    order = epoch_order(n_train, cfg.batch_size, cfg.seed, 0, cfg.last_batch)  # epoch 0: never a timed epoch's order
    n = max(1, min(PROFILE_BATCHES, len(order) // cfg.batch_size))
    snap = trainer.snapshot()
    timer = PhaseTimer(sync=trainer.sync)
    trainer.train_epoch(order[: n * cfg.batch_size], timer)
    phases = {k: v for k, v in trainer.phase_fields(timer).items() if k in ("data_s", "forward_s", "backward_s", "step_s")}
    trainer.restore(snap)
    return {"batches": n, "phases": phases}
