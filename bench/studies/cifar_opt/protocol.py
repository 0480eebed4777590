"""One cifar-opt cell: open() loads the subsample, builds the trainer and warms it up;
then the steps are

    trials    (variant optuna only) one Optuna trial per step (search.py), each with its own
              RSS and GPU-allocator peaks; after the last, what the search left is given back
              (release_memory: garbage, cuBLAS's per-stream workspaces, cached blocks, freed
              heap pages) and the peak counters zeroed, so the trained model's memory is its own
    epochs    one per step: training timed as a whole (device synced, RSS sampled, the
              GPU allocator's peak reset), then evaluation on the test subsample timed
              apart (eval_s, never inside epoch_s)
    inference one step: the trained model's deployment forms (inference.py)

Before the first timed epoch, outside every timed region: warm-up (compile, autotune,
graph capture; real steps, undone: compile_s) and a tracemalloc pass of a few steps
(undone). For optuna the trainer is built after the search, in the first epoch step,
before its clock starts. The training seed is cell.seed + cell.repeat: the seed's
"3 seeds, medians reported" are the kit's 3 repeats.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bench.core.cell import Cell
from bench.core.errors import KitError
from bench.core.study import RunContext, Study
from bench.studies.cifar_opt.config import Settings, chance_limit, parse_variant, settings, variant_kind
from bench.studies.cifar_opt.trainer import Split, Trainer, TrainerData, release_memory, zero_steps

MakeTrainer = Callable[[Split, int, float, "str | None"], Trainer]  # (split, batch, lr, variant): the backend's create()


@dataclass
class CellRun:
    """A prepared cell (a StepRun)."""

    cfg: Settings
    ctx: RunContext
    split: Split
    dataset: dict
    threads: int
    n_trials: int
    make: MakeTrainer
    trainer: Trainer | None = None
    search: Any = None
    pick: dict = field(default_factory=dict)
    warmup_s: float = 0.0
    heap_mb: float | None = None
    last_acc: float | None = None
    released: dict = field(default_factory=dict)
    search_peaks: dict = field(default_factory=dict)
    n_params: int | None = None  # the trained model's parameters, counted once as it is built (use)

    @property
    def steps(self) -> int:
        return self.n_trials + self.cfg.epochs + 1

    @property
    def kind(self) -> str:
        return variant_kind(self.cfg.variant)

    def base(self) -> dict:
        tr, opts = self.trainer, parse_variant(self.cfg.variant)
        amp = "fp16" if "fp16" in opts else "bf16" if "bf16" in opts else "fp32"
        return {
            "model": self.cfg.model,
            "pipeline": self.cfg.pipeline,
            "kind": self.kind,
            "precision": amp,
            "channels_last": "cl" in opts,
            "compiled": "compile" in opts,
            "cuda_graphs": "graphs" in opts,
            "batch_size": tr.batch if tr else self.cfg.batch_size,
            "lr": tr.opt.param_groups[0]["lr"] if tr else self.cfg.lr,
            "num_workers": tr.pipe.workers if tr else None,
            "threads": self.threads,
            "world_size": self.dist.world if self.dist else 1,
            "n_train": len(self.split.y_train),
            "n_test": len(self.split.y_eval),
            "last_batch": "drop",
            "chance_epochs": self.cfg.chance_epochs,
            "n_params": self.n_params,  # None in a search's rows: no model is trained yet
        }

    def use(self, trainer: Trainer) -> Trainer:
        """TRAINER becomes the cell's, its model's parameters counted (outside every clock): the
        count every row carries and the speed line prints (Study.param_count reads `n_params`)."""
        from bench.studies.cifar_opt.models import n_params

        self.trainer, self.n_params = trainer, n_params(trainer.model)
        return trainer

    @property
    def dist(self) -> Any:
        """This rank of a many-device cell (bench.core.dist.Dist), or None: one process (or no
        context at all, as the unit tests build a run)."""
        return getattr(self.ctx, "dist", None)

    def _ensure_trainer(self) -> Trainer:
        if self.trainer is None:  # optuna: build with the pick, warm up, before the first clock
            bs, lr = self.pick["batch_size_picked"], self.pick["lr_picked"]
            self.released = release_memory(self.cfg.device)  # the search's leftovers are not this model's
            tr = self.use(self.make(self.split, bs, lr, "default"))
            self.warmup_s = tr.warmup()
            self.heap_mb = tr.python_heap_peak_mb()
            return tr
        return self.trainer

    def step(self, i: int) -> list[dict]:
        if i < self.n_trials:
            row = {**self.trial_with_peaks(i), "status": "ok"}
            rows = [{**self.base(), **row}]
            if i == 0:  # the journal's interrupted (FAIL) trials: listed once, not counted against `trials`
                rows += [{**self.base(), **r, "status": "ok"} for r in self.search.uncounted]
            if i == self.n_trials - 1:
                self.pick = {**self.search.pick(), **self.search_peaks}
                rows.append({**self.base(), **self.pick, "status": "ok"})
            return rows
        e = i - self.n_trials
        if e < self.cfg.epochs:
            return [self.epoch(e + 1)]
        return self.inference()

    def trial_with_peaks(self, i: int) -> dict:
        """Run trial I with its own memory peaks: process RSS (sampled) and the GPU allocator's peak."""
        import torch

        from bench.measure.memory import RSSSampler
        from bench.measure.torchdev import memory_peaks, reset_peak

        dev = torch.device(self.cfg.device)
        reset_peak(dev)
        with RSSSampler() as rss:
            row = self.search.trial(i)
        gpu = memory_peaks(dev).get("gpu_alloc_peak_mb")
        for key, v in (("search_rss_peak_mb", rss.peak_mb), ("search_gpu_alloc_peak_mb", gpu)):
            if v is not None:
                self.search_peaks[key] = max(v, self.search_peaks.get(key, 0.0))
        return {**row, "trial_rss_peak_mb": rss.peak_mb, "trial_gpu_alloc_peak_mb": gpu}

    def epoch(self, epoch: int) -> dict:
        from bench.measure import energy
        from bench.measure.memory import RSSSampler
        from bench.measure.timer import stopwatch

        tr = self._ensure_trainer()
        tr.reset_peak()
        dist = self.dist

        def sync() -> None:  # the device, then (under ranks) every rank: the clock spans the whole world's epoch
            tr.sync_device()
            if dist:
                dist.barrier()

        e0 = energy.read()  # outside the clock
        with RSSSampler() as rss, stopwatch(sync) as sw:
            stats = tr.train_epoch()
        e1 = energy.read()
        if stats["steps"] < 1:  # whatever the backend's trainer: an epoch that trained nothing is an error, never ok
            raise zero_steps(tr.batch, len(self.split.y_train), f"epoch {epoch} ran")
        if dist:
            stats = {**stats, "samples": stats["samples"] * dist.world}
        synthetic = self.cfg.pipeline == "synthetic-gpu"
        with stopwatch() as ev:
            acc = None if synthetic or (dist and not dist.is_main) else tr.evaluate()
        if dist:
            dist.barrier()
        self.last_acc = acc
        return {
            **self.base(),
            "phase": "epoch",
            "status": "ok",
            "epoch": epoch,
            "epoch_s": sw.seconds,
            "steps": stats["steps"],
            "samples": stats["samples"],
            "samples_per_s": stats["samples"] / sw.seconds,
            "train_loss": stats["train_loss"],
            "test_acc": acc,
            "eval_s": ev.seconds,
            "compile_s": self.warmup_s,
            "rss_peak_mb": rss.peak_mb,
            "rss_mean_mb": rss.mean_mb,
            "python_heap_peak_mb": self.heap_mb,
            **tr.memory(),
            **({f"after_search_{k}": v for k, v in self.released.items()} if epoch == 1 else {}),
            **energy.fields(e0, e1, stats["samples"], self.cfg.device if self.cfg.device in ("cuda", "mps") else "cpu"),
        }

    def inference(self) -> list[dict]:
        from bench.studies.cifar_opt import inference

        if self.dist and not self.dist.is_main:  # the deployment forms: rank 0's model alone
            return []
        tr = self._ensure_trainer()
        cfg = self.cfg
        forms = inference.forms_for(self.kind, tr, cfg.infer_batch, cfg.calib_batches)
        rows = inference.measure(forms, tr, cfg.latency_calls, cfg.latency_warmup, cfg.infer_batch)
        ref = next((r["test_acc"] for r in rows if r["form"] in ("fp32-compiled", "fp32-eager")), None)
        return [
            {**self.base(), **r, "acc_drop_pts": None if ref is None else (ref - r["test_acc"]) * 100, "status": "ok"}
            for r in rows
        ]

    def close(self) -> list[dict]:
        return []

    def system_extra(self) -> dict:
        tr = self.trainer
        return {
            "compile_s": self.warmup_s,
            "normalise_mean": tr.mean if tr else None,
            "normalise_std": tr.std if tr else None,
            "n_params": self.n_params,
            "search": self.pick or None,
            "released_after_search": self.released or None,
            "training_seed": self.cfg.seed,
        }


def open_cell(study: Study, cell: Cell, ctx: RunContext) -> CellRun:
    """Load the subsample, build and warm up the trainer (or the search). KitError on bad input."""
    import torch

    from bench.data import cifar10
    from bench.measure.fixedcost import phase

    cfg = settings(cell)
    threads = study.runtime_setup(cell, cfg.threads)
    backend = study.load_backend(cell.backend)

    def make(split: Split, batch_size: int, lr: float, variant: str | None = None) -> Trainer:
        return backend.create(cell, TrainerData(cfg, split, batch_size, lr, cfg.seed, variant, ctx.dist))

    torch.backends.cudnn.benchmark = True  # the seed's CUDA setting
    with phase("data_s"):
        ds = cifar10.load_for_cell(cell.params, ctx.data_dir)
        sub = cifar10.subsample(ds, cfg.n_train, cfg.n_test, cfg.subsample_seed)
    split = Split(sub.x_train, sub.y_train, sub.x_test, sub.y_test)
    if ctx.dist is not None:  # this rank trains on its share; batch_size is per rank, the test set whole (rank 0)
        mine = np.asarray(ctx.dist.shard(len(split.y_train)))
        split = Split(split.x_train[mine], split.y_train[mine], split.x_eval, split.y_eval)
    if cfg.batch_size > len(split.y_train):
        raise KitError(f"batch_size {cfg.batch_size} is larger than the training subsample ({len(split.y_train)} images)")
    n_trials = cfg.trials if variant_kind(cfg.variant) == "optuna" else 0
    run = CellRun(cfg, ctx, split, ds.describe(), threads, n_trials, make)
    if run.n_trials:
        from bench.studies.cifar_opt.search import Search

        if not ctx.cell_dir.resolve().is_relative_to(ctx.out.resolve()):  # the journal goes in the cell dir
            raise KitError(f"cell dir {ctx.cell_dir} leads outside {ctx.out} (a symlink?): results are never written through one")

        run.search = Search(cfg, split.x_train, split.y_train, ctx.cell_dir, make)
    else:
        tr = run.use(make(split, cfg.batch_size, cfg.lr))
        run.warmup_s = tr.warmup()
        run.heap_mb = tr.python_heap_peak_mb()
    return run


def validity_flags(rows: list[dict]) -> list[str]:
    """diverged: a non-finite training loss; at-chance: test accuracy still at chance after
    chance_epochs epochs (the seed's AMP run stuck at 10%); both on the real pipelines only.
    The epochs in their own order (readout.rows), whatever order the rows come in."""
    from bench.studies.cifar_opt.readout import rows as phase_rows

    flags = []
    epochs = phase_rows(rows, "epoch")
    bad = [r["epoch"] for r in epochs if not (isinstance(r.get("train_loss"), float) and math.isfinite(r["train_loss"]))]
    if bad:
        flags.append(f"diverged(epoch {bad[0]})")
    scored = [r for r in epochs if r.get("test_acc") is not None]
    if scored:
        last = scored[-1]
        limit = chance_limit(int(last.get("n_test") or 1000))
        n_needed = int(np.clip(last.get("chance_epochs") or 2, 1, None))
        if last["epoch"] >= n_needed and last["test_acc"] <= limit:
            flags.append(f"at-chance(acc {last['test_acc']:.3f} after {last['epoch']} epochs)")
    return flags
