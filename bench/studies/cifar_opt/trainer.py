"""One training set-up: model, optimizer, precision, memory format, compile, CUDA graph,
and its input pipeline. The same class serves every device and variant; the options
come from the variant string (config.parse_variant).

Sync points: `train_epoch` reads the summed loss once at its end (one host sync per
epoch); `evaluate` reads the correct count once. Nothing in the step loop syncs, unless
the fp16 GradScaler does (it reads the inf check on the host each step: the seed's AMP).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from bench.core.errors import KitError
from bench.measure.torchdev import sync
from bench.studies.cifar_opt import pipeline
from bench.studies.cifar_opt.config import MIN_BATCH, Settings, parse_variant
from bench.studies.cifar_opt.models import build


@dataclass
class Split:
    """uint8 images (N,3,32,32) and int64 labels, for training and for scoring."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_eval: np.ndarray
    y_eval: np.ndarray


@dataclass(frozen=True)
class TrainerData:
    """What a backend's create() gets: the settings, the split to train on, the batch, the
    learning rate and seed, and the variant (None: the cell's; an Optuna trial trains 'default')."""

    cfg: Settings
    split: Split
    batch_size: int
    lr: float
    seed: int
    variant: str | None = None
    dist: Any = None  # bench.core.dist.Dist: this rank of a many-device cell (DDP around the model)


_WARMUP_STREAMS: dict[int, Any] = {}  # one side stream per GPU for every trainer of a process (see warmup)


def warmup_stream(device: torch.device) -> torch.cuda.Stream:
    """The side stream warm-ups run on, one per GPU and process. cuBLAS keeps a workspace per
    (handle, stream), allocated through torch's allocator and never freed: a new stream per
    trainer (each Optuna trial) would leave one behind per trial, counted in memory_allocated."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _WARMUP_STREAMS:
        _WARMUP_STREAMS[index] = torch.cuda.Stream(device=index)
    return _WARMUP_STREAMS[index]


def rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 1e6


def release_memory(device: str) -> dict[str, float]:
    """Give back what a finished phase left (the Optuna search, before the picked model trains):
    unreachable objects collected; on CUDA, cuBLAS's per-stream workspaces (each trial's warm-up
    stream had one: about 0.5 GB over 8 trials on the H100, read as the trained model's peak) and
    the allocator's cached blocks freed, and the peak counters zeroed; on glibc, freed heap pages
    returned to the system (malloc_trim), so process RSS is what is live. Returns what it saw:
    RSS (MB) before and after, and on CUDA the allocated MB before and after."""
    import gc

    out = {"rss_before_mb": rss_mb()}
    dev = torch.device(device)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
        out["gpu_alloc_before_mb"] = torch.cuda.memory_allocated(dev) / 1e6
    gc.collect()
    if dev.type == "cuda":
        clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)  # private, as torch's own cudagraph_trees uses it
        if clear is not None:
            clear()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(dev)
        out["gpu_alloc_after_mb"] = torch.cuda.memory_allocated(dev) / 1e6
    elif dev.type == "mps":
        torch.mps.empty_cache()
    _malloc_trim()
    out["rss_after_mb"] = rss_mb()
    return out


def _malloc_trim() -> None:
    """glibc's malloc_trim(0) where there is one (Linux with glibc); elsewhere nothing."""
    import ctypes
    import ctypes.util
    import sys

    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):  # musl and others: no malloc_trim
        return
    trim(0)


def zero_steps(batch_size: int, n_images: int, what: str = "an epoch ran") -> KitError:
    """The one line for an epoch that runs (or would run) no training step: an error, never an ok row."""
    return KitError(
        f"{what} 0 steps: batch_size {batch_size} is larger than the {n_images} training images "
        "(the last partial batch is dropped); nothing was trained"
    )


class Trainer:
    def __init__(
        self, cfg: Settings, split: Split, batch_size: int, lr: float, seed: int, variant: str | None = None, dist: Any = None
    ):
        if batch_size < MIN_BATCH:
            raise KitError(f"batch_size {batch_size} is below {MIN_BATCH}: BatchNorm cannot train on one image per batch")
        if len(split.y_train) // batch_size < 1:  # every pipeline drops the last partial batch
            raise zero_steps(batch_size, len(split.y_train), "every epoch would run")
        self.cfg, self.batch = cfg, batch_size
        self.opts = parse_variant(cfg.variant if variant is None else variant)
        dev = self.device = torch.device(cfg.device)
        self.fmt = torch.channels_last if "cl" in self.opts else torch.contiguous_format
        self.model = build(cfg.model, seed).to(dev).to(memory_format=self.fmt)
        self.amp = torch.bfloat16 if "bf16" in self.opts else torch.float16 if "fp16" in self.opts else None
        self.scaler = torch.amp.GradScaler(dev.type) if self.amp == torch.float16 else None
        self.opt = torch.optim.SGD(self.model.parameters(), lr=lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
        self.fwd = torch.compile(self.model) if "compile" in self.opts else dist.wrap(self.model) if dist else self.model
        self.eval_fwd = self.model if dist else self.fwd  # a DDP forward would wait for the other ranks
        self.split = split
        self.mean, self.std = pipeline.mean_std(split.x_train)
        self.pipe = pipeline.make(
            cfg.pipeline, split.x_train, split.y_train, self.mean, self.std, batch_size, seed, cfg.device, cfg.num_workers
        )
        m, s = torch.tensor(self.mean, device=dev), torch.tensor(self.std, device=dev)
        self.x_eval = pipeline.normalise(torch.tensor(split.x_eval, device=dev), m, s).contiguous(memory_format=self.fmt)
        self.y_eval = torch.tensor(split.y_eval, device=dev)
        self.x_warm = pipeline.normalise(torch.tensor(split.x_train[:batch_size], device=dev), m, s)
        self.y_warm = torch.tensor(split.y_train[:batch_size], device=dev)
        self.loss_sum = torch.zeros((), device=dev)  # summed on the device, read once per epoch
        self.graph: torch.cuda.CUDAGraph | None = None
        self.static_x: torch.Tensor | None = None  # the captured step reads its batch here
        self.static_y: torch.Tensor | None = None
        if "graphs" in self.opts and dev.type != "cuda":
            raise ValueError("graphs needs a CUDA device")

    def sync_device(self) -> None:
        sync(self.device)

    # ---- one step: no host sync in it (but the fp16 scaler's own)
    def _step(self, xb: torch.Tensor, yb: torch.Tensor) -> None:
        xb = xb.contiguous(memory_format=self.fmt)
        with torch.autocast(self.device.type, dtype=self.amp or torch.float32, enabled=self.amp is not None):
            loss = F.cross_entropy(self.fwd(xb), yb)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.opt)
            self.scaler.update()
        else:
            loss.backward()
            self.opt.step()
        self.opt.zero_grad(set_to_none=False)  # graph-safe: gradients keep their addresses
        self.loss_sum += loss.detach().float()

    def train_epoch(self) -> dict:
        """One pass of the pipeline's batches; returns steps, samples and the mean loss (one sync)."""
        self.model.train()
        self.loss_sum.zero_()
        n = 0
        for xb, yb in self.pipe.batches():
            if self.graph is not None and self.static_x is not None and self.static_y is not None:
                self.static_x.copy_(xb)
                self.static_y.copy_(yb)
                self.graph.replay()
            else:
                self._step(xb, yb)
            n += 1
        if n == 0:
            raise zero_steps(self.batch, len(self.split.y_train))
        loss = float(self.loss_sum.item()) / n
        return {"steps": n, "samples": n * self.batch, "train_loss": loss}

    def evaluate(self, batch: int = 500) -> float:
        """Top-1 accuracy on the scoring split (no augmentation), in the training precision."""
        self.model.eval()
        correct = torch.zeros((), dtype=torch.long, device=self.device)
        with torch.no_grad(), torch.autocast(self.device.type, dtype=self.amp or torch.float32, enabled=self.amp is not None):
            for i in range(0, len(self.y_eval), batch):
                logits = self.eval_fwd(self.x_eval[i : i + batch])
                correct += (logits.argmax(1) == self.y_eval[i : i + batch]).sum()
        self.model.train()
        return int(correct.item()) / len(self.y_eval)

    # ---- warm-up: compile, cuDNN autotune, capture; then back to the initial state
    def warmup(self, steps: int = 3) -> float:
        t0 = time.perf_counter()
        snap = self.snapshot()
        if self.device.type == "cuda":
            side = warmup_stream(self.device)
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # graph capture wants its warm-up on a side stream
                for _ in range(steps):
                    self._step(self.x_warm, self.y_warm)
            torch.cuda.current_stream().wait_stream(side)
            if "graphs" in self.opts:
                sx, sy = self.x_warm.clone(), self.y_warm.clone()
                self.static_x, self.static_y = sx, sy
                self.graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(self.graph):
                    self._step(sx, sy)
        else:
            for _ in range(steps):
                self._step(self.x_warm, self.y_warm)
        self.evaluate()  # the eval-mode code path (a compiled model recompiles for it)
        if self.graph is not None:
            self.graph.replay()  # one replay, then undone
        sync(self.device)
        self.restore(snap)
        return time.perf_counter() - t0

    def snapshot(self) -> dict:
        return {"model": {k: v.detach().clone() for k, v in self.model.state_dict().items()}}

    def restore(self, snap: dict) -> None:
        """Weights, BN statistics back in place (same addresses, which a captured graph needs);
        momentum buffers zeroed, which for SGD without dampening equals a fresh optimizer."""
        with torch.no_grad():
            for k, v in self.model.state_dict().items():
                v.copy_(snap["model"][k])
            for st in self.opt.state.values():
                if st.get("momentum_buffer") is not None:
                    st["momentum_buffer"].zero_()
        if self.scaler is not None:
            self.scaler = torch.amp.GradScaler(self.device.type)
        self.loss_sum.zero_()
        sync(self.device)

    def calibration_batches(self, n: int) -> list[torch.Tensor]:
        """N batches of the training split (the first N*batch images), normalised, not augmented, on the CPU."""
        m, s = torch.tensor(self.mean), torch.tensor(self.std)
        x = self.split.x_train[: n * self.batch]
        return [pipeline.normalise(torch.tensor(x[i : i + self.batch]), m, s) for i in range(0, len(x), self.batch)]

    def memory(self) -> dict[str, float | None]:
        from bench.measure.torchdev import memory_peaks

        return memory_peaks(self.device)

    def reset_peak(self) -> None:
        from bench.measure.torchdev import reset_peak

        reset_peak(self.device)

    def python_heap_peak_mb(self, steps: int = 4) -> float:
        """tracemalloc's peak over a few training steps, weights restored afterwards (never in a
        timed epoch: tracemalloc slows every Python allocation). It sees the Python heap only:
        tensor storage comes from torch's allocators, not Python's."""
        import tracemalloc

        snap = self.snapshot()
        tracemalloc.start()
        try:
            for i, (xb, yb) in enumerate(self.pipe.batches()):
                if i >= steps:
                    break
                self._step(xb, yb)
            sync(self.device)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        self.restore(snap)
        return peak / 1e6
