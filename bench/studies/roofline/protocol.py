"""One roofline cell. open() loads the data index, builds the model, counts its FLOPs and
bytes at the input it trains on (untimed): the tree's image size (index.image_size: 64 px for
Tiny-ImageNet; the loader resizes every image to it, and the synthetic-gpu batch has it too), reads the device's measured roofs (cached; measured
on the first cell of a device) and warms up; then the steps are

    scenario A   step 0: the training pass (at most max_train_batches steps) timed as a whole,
                 device synced, RSS sampled, the GPU allocator's peak reset, CPU and GPU
                 utilisation over it; step 1: the validation pass, timed apart
    scenario B   one step per batch size (sweep_sizes): two untimed steps at that size (cuDNN
                 autotunes per shape), then sweep_batches timed ones; the sweep ends at an
                 out-of-memory error, at a size whose predicted memory does not fit, or at
                 sweep_max_batch; later steps return no rows; close() returns the sweep's end
                 row (why it stopped, and where). An OOM is the sweep's end, never a crash.

A non-finite training loss is kept as a row with loss_finite False and flagged (the seed's
SqueezeNet NaNs at batch 128), not dropped.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from bench.core.cell import Cell
from bench.core.errors import KitError
from bench.core.study import RunContext, Study
from bench.studies.roofline.config import IMAGE_SIDE, ROOF_OF, Settings, settings, sweep_sizes
from bench.studies.roofline.roofmath import roof_fields
from bench.studies.roofline.seed import KIND, epoch_images


def quick_sizes():
    from bench.measure.roofs import RoofSizes

    return RoofSizes(gemm_n=1024, conv=(8, 64, 28, 3), stream_mib=64, repeats=3, warmup=1)


def decode_rate(index, n: int = 48) -> float | None:
    """Images per second one process decodes (bench.data.images.load_image: JPEG -> uint8 RGB),
    the first N training files; untimed for training, measured in open()."""
    from bench.data.images import load_image

    files = index.train_files[:n]
    if not files:
        return None
    t0 = time.perf_counter()
    for f in files:
        load_image(index.root / f, index.image_size)
    return len(files) / (time.perf_counter() - t0)


@dataclass
class CellRun:
    """A prepared cell (a StepRun)."""

    cfg: Settings
    ctx: RunContext
    trainer: Any
    index: Any
    dataset: dict
    threads: int
    counts: dict
    roofs: Any
    tf32: dict
    warmup_s: float = 0.0
    graph_check: dict = field(default_factory=dict)  # step=cuda-graph: the capture's check (Trainer.capture)
    graph_checks: dict = field(default_factory=dict)  # the sweep's, by batch
    decode_img_per_s: float | None = None
    sizes: list[int] = field(default_factory=list)
    sweep_stop: dict = field(default_factory=dict)
    last_ok_batch: int | None = None
    cpu: Any = None
    gpu: Any = None

    @property
    def steps(self) -> int:
        return 2 if self.cfg.scenario == "A" else len(self.sizes)

    @property
    def world(self) -> int:
        return self.ctx.dist.world if self.ctx.dist else 1

    # ---- the fields every row carries
    def roof_values(self) -> tuple[float | None, float | None]:
        c, b = self.roofs.compute(ROOF_OF[self.cfg.precision]), self.roofs.bandwidth()
        return (c.value if c else None), (b.value if b else None)

    def base(self) -> dict:
        cfg, fl = self.cfg, self.counts["flops"]
        c, b = self.roofs.compute(ROOF_OF[cfg.precision]), self.roofs.bandwidth()
        return {
            "model": cfg.model,
            "scenario": cfg.scenario,
            "pipeline": cfg.pipeline,
            "step": cfg.step,
            "precision": cfg.precision,
            "channels_last": cfg.precision == "bf16-cl",
            **self.tf32,
            "num_classes": self.trainer.n_classes,
            "num_workers": cfg.num_workers if cfg.pipeline == "loader" else 0,
            "threads": self.threads,
            "world_size": self.world,
            "device_type": self.trainer.device.type,
            "image_size": self.trainer.side,  # px, square: the input trained on and every count made at
            "n_params": sum(p.numel() for p in self.trainer.model.parameters()),
            "flops_counter": fl.counter,
            "forward_flops_per_sample": fl.forward_flops,
            "train_flops_per_sample": fl.train_flops_used,
            "train_counted_flops_per_sample": fl.train_flops_counted,
            "train_analytic_flops_per_sample": fl.train_flops_analytic,
            "train_flops_why": fl.why,
            "bytes_counter": self.counts["bytes2"].counter,
            "roofs_device_id": self.roofs.device_id,
            "roofs_from_cache": self.roofs.from_cache,
            # measured while the 1-minute load was above the logical CPUs: other work hid part of the peak
            "roofs_measured_busy": _busy(self.roofs.conditions),
            "roof_sizes": cfg.roof_sizes,
            "roof_compute_name": c.name if c else None,
            "roof_compute_flop_per_s": c.value if c else None,
            "roof_bandwidth_name": b.name if b else None,
            "roof_bandwidth_b_per_s": b.value if b else None,
        }

    def point(self, kind: str, batch: int, flop_per_s: float) -> dict:
        """AI at BATCH (both bounds) and the roof fields of one measured point; KIND train | forward."""
        fits = self.counts["fits"]
        flops = self.counts["flops"].train_flops_used if kind == "train" else self.counts["flops"].forward_flops
        hi_bytes, lo_bytes = fits[kind].per_sample_at(batch), fits[f"{kind}_lower"].per_sample_at(batch)
        ai_low, ai_high = flops / hi_bytes, flops / lo_bytes
        compute, bandwidth = self.roof_values()
        return {
            "bytes_per_sample": hi_bytes,
            "lower_bytes_per_sample": lo_bytes,
            "ai_low_flops_per_byte": ai_low,
            "ai_high_flops_per_byte": ai_high,
            **roof_fields(flop_per_s, ai_low, ai_high, compute, bandwidth),
        }

    # ---- the steps
    def step(self, i: int) -> list[dict]:
        if self.cfg.scenario == "A":
            return [self.train_row() if i == 0 else self.val_row()]
        return self.sweep_row(self.sizes[i])

    def _batches(self, split: str):
        """One pass's batches: under ranks, this rank's share of the split (batch_size per rank)."""
        tr, cfg, dist = self.trainer, self.cfg, self.ctx.dist
        world = dist.world if dist else 1
        if cfg.pipeline == "synthetic-gpu":  # the same device batch every step: no tree limits the pass, so
            # max_*_batches steps when given (as at 256 a GPU on 4 GPUs, where the tree holds 12 a rank), else the loader's
            x, y = tr.fixed_batch(cfg.batch_size)
            most = cfg.max_train_batches if split == "train" else cfg.max_val_batches
            return [(x, y)] * (most or len(self.index.files(split)) // (cfg.batch_size * world))
        import torch

        from bench.data import tinyimagenet

        ds: Any = tinyimagenet.dataset(self.index, split)
        if dist:
            ds = torch.utils.data.Subset(ds, list(dist.shard(len(ds))))
        return tr.loader(ds, cfg.batch_size, shuffle=split == "train")

    def _timed(self, fn):
        """FN under the clock: device synced (and every rank met) at both ends; its images are the
        whole world's (every rank ran the same number of steps)."""
        from bench.measure import energy
        from bench.measure.memory import RSSSampler
        from bench.measure.timer import stopwatch

        tr, dist = self.trainer, self.ctx.dist

        def sync() -> None:
            tr.sync_device()
            if dist:
                dist.barrier()

        tr.reset_peak()
        self.cpu.start()
        self.gpu.start()
        e0 = energy.read()  # outside the clock
        with RSSSampler() as rss, stopwatch(sync) as sw:
            stats = fn()
        e1 = energy.read()
        usage = {**self.cpu.stop(), **self.gpu.stop()}
        if dist:
            stats = {**stats, "images": stats["images"] * dist.world}
        spent = energy.fields(e0, e1, stats["images"], tr.device.type if tr.device.type in ("cuda", "mps") else "cpu")
        return stats, sw.seconds, {"rss_peak_mb": rss.peak_mb, **tr.memory(), **usage, **spent}

    def train_row(self) -> dict:
        cfg = self.cfg
        batches = self._batches("train")
        stats, secs, usage = self._timed(lambda: self.trainer.train_pass(batches, cfg.max_train_batches))
        if not stats["steps"]:
            raise KitError(f"no training batch of {cfg.batch_size}: the train split is smaller than one batch")
        ips = stats["images"] / secs  # the whole world's; FLOP/s and the roof are one device's
        flop_s = ips / self.world * self.counts["flops"].train_flops_used
        return {
            **self.base(),
            "phase": "train",
            "status": "ok",
            "batch_size": cfg.batch_size,
            "epoch_s": secs,
            "steps": stats["steps"],
            "images": stats["images"],
            "img_per_s": ips,
            "achieved_flop_per_s": flop_s,
            **self.point("train", cfg.batch_size, flop_s),
            "train_loss": stats["train_loss"],
            "loss_finite": _finite(stats["train_loss"]),
            "data_wait_s": stats["data_wait_s"],
            "first_batch_s": stats["first_batch_s"],
            "decode_img_per_s_1proc": self.decode_img_per_s,
            **self.seed_epoch(ips),
            "warmup_s": self.warmup_s,
            **self.check_fields(self.graph_check),
            **usage,
        }

    @staticmethod
    def check_fields(check: dict) -> dict:
        """The capture check's numbers for a row (its per-step losses go to system.json)."""
        return {k: v for k, v in check.items() if not isinstance(v, list)}

    def seed_epoch(self, ips: float) -> dict:
        """The seed's epoch (seed.epoch_images: 6,400 images, 3,200 for SqueezeNet on its T4) at IPS img/s."""
        n = epoch_images(self.cfg.model, KIND.get(self.cfg.device, ""))
        return {"seed_epoch_images": n, "seed_epoch_projected_s": n / ips}

    def val_row(self) -> dict:
        cfg = self.cfg
        batches = self._batches("val")
        stats, secs, usage = self._timed(lambda: self.trainer.val_pass(batches, cfg.max_val_batches))
        if not stats["steps"]:
            raise KitError(f"no validation batch of {cfg.batch_size}: the val split is smaller than one batch")
        ips = stats["images"] / secs  # the whole world's; FLOP/s and the roof are one device's
        flop_s = ips / self.world * self.counts["flops"].forward_flops
        return {
            **self.base(),
            "phase": "val",
            "status": "ok",
            "batch_size": cfg.batch_size,
            "epoch_s": secs,
            "steps": stats["steps"],
            "images": stats["images"],
            "img_per_s": ips,
            "achieved_flop_per_s": flop_s,
            **self.point("forward", cfg.batch_size, flop_s),
            "val_acc": stats["val_acc"],
            "data_wait_s": stats["data_wait_s"],
            "decode_img_per_s_1proc": self.decode_img_per_s,
            **self.seed_epoch(ips),
            **usage,
        }

    def sweep_row(self, batch: int) -> list[dict]:
        if self.sweep_stop:
            return []
        tr, cfg = self.trainer, self.cfg
        need, free = tr.predicted_bytes(batch, self.counts["fits"]["saved"]), tr.free_bytes()
        if need > cfg.sweep_mem_fraction * free:
            self._stop(
                "memory-bound",
                batch,
                f"batch {batch} predicted {need / 1e9:.2f} GB > {cfg.sweep_mem_fraction:g} x {free / 1e9:.2f} GB free",
            )
            return []
        x = y = None
        snap: dict | None = None
        try:
            x, y = tr.fixed_batch(batch)
            snap = tr.snapshot()
            # untimed: this shape's autotune and allocations (2 steps), or its capture as a graph
            _, check = tr.warmup(x, y, 2, evaluate=False, snap=snap)
            self.graph_checks[batch] = check
            stats, secs, usage = self._timed(partial(tr.train_pass, [(x, y)] * cfg.sweep_batches, 0))
            tr.restore(snap)
            tr.release()
        except Exception as err:
            if not _is_oom(err):
                raise
            del x, y
            tr.release()
            tr.opt.zero_grad(set_to_none=True)
            if snap is not None:
                tr.restore(snap)
            tr.free_cached()
            first = self.last_ok_batch is None
            self._stop("oom", batch, f"out of memory at batch {batch}{' (the first size: no points)' if first else ''}")
            return []
        ips = stats["images"] / secs  # the whole world's; FLOP/s and the roof are one device's
        flop_s = ips / self.world * self.counts["flops"].train_flops_used
        loss = stats["train_loss"]
        self.last_ok_batch = batch
        del x, y
        tr.free_cached()
        return [
            {
                **self.base(),
                "phase": "sweep",
                "status": "ok",
                "batch_size": batch,
                "sweep_s": secs,
                "steps": stats["steps"],
                "images": stats["images"],
                "img_per_s": ips,
                "achieved_flop_per_s": flop_s,
                **self.point("train", batch, flop_s),
                "train_loss": loss,
                "loss_finite": _finite(loss),
                "predicted_mb": need / 1e6,
                **self.check_fields(check),
                **usage,
            }
        ]

    def _stop(self, why: str, batch: int, text: str) -> None:
        self.sweep_stop = {"sweep_stop": why, "sweep_stop_batch": batch, "sweep_stop_reason": text}
        self.ctx.echo(f"sweep {self.cfg.model}: {text}")

    def close(self) -> list[dict]:
        if self.cfg.scenario != "B":
            return []
        stop = self.sweep_stop or {
            "sweep_stop": "max-batch",
            "sweep_stop_batch": None,
            "sweep_stop_reason": f"reached sweep_max_batch {self.cfg.sweep_max_batch}",
        }
        return [{**self.base(), "phase": "sweep_end", "status": "ok", **stop, "sweep_last_ok_batch": self.last_ok_batch}]

    def system_extra(self) -> dict:
        fits = self.counts["fits"]
        return {
            "image_size_counted": self.trainer.side,
            "flops": self.counts["flops"].to_json(),
            "bytes_batch2": self.counts["bytes2"].to_json(),
            "bytes_affine_fits": {k: {"per_sample": f.per_sample, "per_batch": f.per_batch} for k, f in fits.items()},
            "roofs": self.roofs.to_json(),
            "roofs_cache_path": self.roofs.cache_path,
            "warmup_s": self.warmup_s,
            "step": self.cfg.step,
            "graph_check": self.graph_check or None,
            "graph_checks_by_batch": {str(b): c for b, c in self.graph_checks.items() if c} or None,
            "decode_img_per_s_1proc": self.decode_img_per_s,
            "sweep_sizes": self.sizes,
            "gpu_util_meaning": "NVML: share of time one or more kernels ran (not occupancy)",
        }


def _finite(v: float) -> bool:
    import math

    return isinstance(v, float) and math.isfinite(v)


def _is_oom(err: BaseException) -> bool:
    from bench.studies.roofline.trainer import is_oom

    return is_oom(err)


@dataclass(frozen=True)
class TrainerData:
    """What a backend's create() gets: the data index (its classes size the head) and, under
    ranks, this rank (bench.core.dist.Dist)."""

    index: Any
    dist: Any = None


def load_roofs(device: str, roof_sizes: str):
    from bench.measure.roofs import get_roofs

    return get_roofs(device, sizes=quick_sizes() if roof_sizes == "quick" else None)


def open_cell(study: Study, cell: Cell, ctx: RunContext) -> CellRun:
    """Load the index, build the model, count, read the roofs, warm up. KitError on bad input."""
    import torch

    from bench.data import tinyimagenet
    from bench.measure.fixedcost import phase
    from bench.measure.usage import CpuUsage, GpuUsage
    from bench.studies.roofline.trainer import set_tf32

    cfg = settings(cell)
    threads = study.runtime_setup(cell, cfg.threads)
    cpu = CpuUsage()  # primed here: its first reading would be a meaningless 0.0
    torch.backends.cudnn.benchmark = True
    tf32 = set_tf32(cfg.precision)
    with phase("data_s"):
        index = tinyimagenet.load_for_cell(cell.params, ctx.data_dir)
    if cfg.scenario == "A":
        for split in ("train", "val"):
            if len(index.files(split)) < cfg.batch_size:
                raise KitError(
                    f"{index.name}: {split} has {len(index.files(split))} images, fewer than one batch of {cfg.batch_size}"
                )
    trainer = study.load_backend(cell.backend).create(cell, TrainerData(index, ctx.dist))  # index.n_classes sizes the head
    trainer.side = index.image_size or IMAGE_SIDE  # trained and counted at the tree's size, never a fixed 64
    counts = trainer.count(cfg.batch_size)
    roofs = load_roofs(cfg.device, cfg.roof_sizes)
    run = CellRun(cfg, ctx, trainer, index, index.describe(), threads, counts, roofs, tf32, cpu=cpu)
    run.gpu = GpuUsage(enabled=cfg.device == "cuda")
    if cfg.scenario == "A":
        x, y = trainer.fixed_batch(cfg.batch_size)
        run.warmup_s, run.graph_check = trainer.warmup(x, y, cfg.warmup_batches)
        if cfg.pipeline == "loader":
            run.decode_img_per_s = decode_rate(index)
    else:
        run.sizes = sweep_sizes(cfg.sweep_min_batch, cfg.sweep_max_batch)
    return run


def validity_flags(rows: list[dict]) -> list[str]:
    """nan-loss: a non-finite training loss; above-roof: a point above its measured roof (a wrong
    count, or roofs measured under load); sweep-oom-first-size: a sweep with no point."""
    flags = []
    bad = [r for r in rows if r.get("phase") in ("train", "sweep") and r.get("loss_finite") is False]
    if bad:
        flags.append("nan-loss(" + ",".join(f"b{r.get('batch_size')}" for r in bad) + ")")
    above = [r for r in rows if isinstance(r.get("roof_fraction"), float) and r["roof_fraction"] > 1.0]
    if above:
        flags.append("above-roof(" + ",".join(f"{r['phase']} {r['roof_fraction']:.2f}" for r in above) + ")")
    end = next((r for r in rows if r.get("phase") == "sweep_end"), None)
    if end and end.get("sweep_last_ok_batch") is None:
        flags.append(f"sweep-no-points({end.get('sweep_stop')} at b{end.get('sweep_stop_batch')})")
    return flags


def median(vals: list[float]) -> float | None:
    return statistics.median(vals) if vals else None


def _busy(conditions: dict) -> bool:
    from bench.measure.roofs import busy

    return busy(conditions or {})
