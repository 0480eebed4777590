"""One profile cell. open(): the idle baseline first (before this process touches a GPU), then
data, model, weights, warm-up; the telemetry sampler starts. Steps:

    epoch 1..E   timed and UNPROFILED: training as a whole (device synced), then evaluation
                 timed apart; per epoch the telemetry window's utilisation, power, energy
                 (idle baseline subtracted), J/img and img/J
    overhead     the sampler's own cost: blocks of steps with it on and off, alternated
    profile      torch.profiler over its schedule (wait/warmup/active, repeat): the trace
                 (.json.gz), operator tables, the step-time breakdown, and the profiler's
                 overhead against the unprofiled steps (never the timed figures)

`parallel=dp` is the same in one process over nn.DataParallel; `parallel=ddp` runs one rank per
device under the core's torchrun (bench/run/ranks.py): every rank opens and steps this same
cell with ctx.dist set, its steps are the epochs (no sampler-cost or profiler step), and rank 0
measures the idle baseline and runs the sampler over every GPU of the run.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from bench.core.cell import Cell
from bench.core.errors import KitError
from bench.core.study import RunContext, Study
from bench.measure.energy import row_energy
from bench.studies.profile.config import Settings

SAMPLER_COSTLY = 0.01  # the sampler's cost, as a share of step time, flagged once its interval's lower end reaches it

CSV_NAME = "telemetry.csv"
TRACE_DIR = "trace"


def nvml_indices(cfg: Settings) -> tuple[list[int], str | None]:
    """(the NVML indices of the GPUs this cell uses, why none are sampled when a GPU cell has none)."""
    if cfg.device != "cuda":
        return [], None
    if cfg.device_list:
        return [int(d) for d in cfg.device_list], None
    from bench.measure.sampler import nvml_indices_for_visible

    try:
        return nvml_indices_for_visible()[:1], None
    except RuntimeError as err:  # no NVML, MIG, an order NVML and CUDA may not share: run on, unsampled
        return [], " ".join(str(err).split())


def energy_fields(summary: dict, idle: dict, gpus: list[int], samples: int) -> dict:
    """Energy of one window from the sampler's summary, each source on its own: the GPUs' (NVML
    energy counter, else their power samples) and the CPU packages' (RAPL, which VMs and most
    containers lack). One missing never drops the other. Gross per GPU and in all; net = gross
    minus the idle baseline's power x the window (None where the baseline is missing); J per
    image and images per J from the cell's own device's net energy; per GPU, gpu<i>_energy_net_j
    and gpu<i>_j_per_img: that GPU's net energy over the images it trained (SAMPLES / the GPUs:
    dp and ddp split every step evenly). None where not measured, with the reason in
    gpu_energy_note / cpu_energy_note."""
    out: dict[str, Any] = {}
    window = summary.get("window_s")
    win = window if isinstance(window, (int, float)) and window > 0 else None
    gross: list[float] = []
    net: list[float] = []
    why: list[str] = []
    for i in gpus:
        e = summary.get(f"gpu{i}_energy_j")
        w = idle.get(f"gpu{i}_idle_power_w")
        out[f"gpu{i}_energy_j"] = e
        if not isinstance(e, (int, float)):
            why.append(f"GPU {i}: {summary.get(f'gpu{i}_energy_source') or 'not sampled'}")
            continue
        gross.append(float(e))
        if isinstance(w, (int, float)) and win is not None:
            net.append(float(e) - float(w) * win)
            out[f"gpu{i}_energy_net_j"] = net[-1]
            own = samples / len(gpus) if samples else 0
            out[f"gpu{i}_j_per_img"] = net[-1] / own if own and net[-1] > 0 else None
        else:
            why.append(f"GPU {i}: no idle baseline, net energy not formed")
    every = bool(gpus) and len(gross) == len(gpus)  # a sum over some of the GPUs would read as all of them
    out["gpu_energy_j"] = sum(gross) if every else None
    out["gpu_energy_net_j"] = sum(net) if every and len(net) == len(gpus) else None
    idle_w = [w for w in (idle.get(f"gpu{i}_idle_power_w") for i in gpus) if isinstance(w, (int, float))]
    out["gpu_idle_w"] = float(sum(idle_w)) if gpus and len(idle_w) == len(gpus) else None
    out["gpu_energy_note"] = ("; ".join(why) or None) if gpus else None
    counter = all(str(summary.get(f"gpu{i}_energy_source") or "").startswith("counter") for i in gpus)
    ce, cw = summary.get("cpu_energy_j"), idle.get("cpu_idle_power_w")
    out["cpu_energy_j"] = ce
    out["cpu_energy_net_j"] = (
        ce - cw * win if isinstance(ce, (int, float)) and isinstance(cw, (int, float)) and win is not None else None
    )
    out["cpu_energy_note"] = summary.get("cpu_energy_note")
    main = out["gpu_energy_net_j"] if gpus else out["cpu_energy_net_j"]
    gpu_src = "GPU (NVML energy counter)" if counter else "GPU (NVML power samples: gpu*_energy_source says how)"
    out["energy_source"] = (gpu_src if gpus else "CPU package (RAPL)") if main is not None else None
    out["energy_net_j"] = main
    out["j_per_img"] = main / samples if main is not None and samples and main > 0 else None
    out["img_per_j"] = samples / main if main is not None and samples and main > 0 else None
    # the fields every study's timed rows carry (bench.measure.energy): J per sample, or why not
    out["energy_window_s"] = win
    out["energy_j_per_sample"] = out["j_per_img"]
    if out["j_per_img"] is not None:
        out["energy_note"] = None
    elif main is not None and main <= 0:
        out["energy_note"] = "not measured: the idle baseline is at or above the load over this window"
    else:
        note = out["gpu_energy_note"] if gpus else out["cpu_energy_note"]
        out["energy_note"] = f"not measured: {note or 'no energy counter over the window'}"
    # the kit's one rule for a window's figure (energy.window_check: a counter, 1 s or more, within the limit)
    judged = row_energy(out)
    if out["energy_j_per_sample"] is not None and judged.j_per_sample is None:
        out["energy_j_per_sample"], out["energy_note"] = None, judged.why
    return out


def telemetry_fields(summary: dict, gpus: list[int]) -> dict:
    """The per-GPU and CPU figures a row keeps from a window's summary."""
    out = {
        k: v
        for k, v in summary.items()
        if k.startswith(("cpu_", "rss_", "threads", "processes")) and not isinstance(v, (list, dict))
    }
    out.update({k: summary.get(k) for k in ("sampler_cpu_pct", "sample_ms_mean")})
    for i in gpus:
        out.update({k: v for k, v in summary.items() if k.startswith(f"gpu{i}_") and not isinstance(v, (list, dict))})
    out["telemetry_samples"] = summary.get("samples")
    out["telemetry_window_s"] = summary.get("window_s")
    out["telemetry_hz"] = summary.get("achieved_hz")
    return out


@dataclass
class Common:
    """What the single-process and the ddp runs share: settings, data identity, idle baseline."""

    cfg: Settings
    ctx: RunContext
    dataset: dict
    gpus: list[int]
    idle: dict
    facts: dict = field(default_factory=dict)
    threads: int = 0
    warmup_s: float = 0.0
    sampler: Any = None
    epoch_rows: list[dict] = field(default_factory=list)

    def base(self) -> dict:
        c = self.cfg
        return {
            "model": c.model,
            "transfer": c.transfer,
            "precision": "bf16" if c.bf16_cl else "fp32",
            "channels_last": c.bf16_cl,
            "pipeline": c.pipeline,
            "batch_size": c.batch_size,
            "global_batch": c.batch_size * c.world_size,
            "lr": c.lr,
            "optimizer": "Adam",
            "image_size": c.image_size,
            "parallel": c.mode,
            "cudnn_benchmark": c.cudnn_benchmark,
            "world_size": c.world_size,
            "devices": ",".join(c.device_list),
            "num_workers": c.num_workers if c.pipeline == "loader" else 0,
            "threads": self.threads,
            **{k: self.facts.get(k) for k in ("weights", "weights_sha256", "params_total", "params_trainable")},
        }

    def epoch_row(self, e: int, stats: dict, acc: float | None, n_eval: int, eval_s: float, mem: dict) -> dict:
        win = self.sampler.window(stats["t_start_mono"], stats["t_end_mono"], f"epoch{e}") if self.sampler else {}
        return {
            **self.base(),
            "phase": "epoch",
            "status": "ok",
            "epoch": e,
            **{k: v for k, v in stats.items() if not k.startswith("t_")},
            "test_acc": acc,
            "n_test": n_eval,
            "eval_s": eval_s,
            "warmup_s": self.warmup_s,
            **mem,
            **telemetry_fields(win, self.gpus),
            **energy_fields(win, self.idle, self.gpus, stats["samples"]),
        }

    def finish_sampler(self) -> None:
        if self.sampler is not None and not getattr(self, "_sampler_done", False):
            self._sampler_done = True
            self.sampler.stop()
            self.sampler.write_csv(self.ctx.cell_dir / CSV_NAME)

    def system_common(self) -> dict:
        s = self.sampler
        return {
            "idle_baseline": self.idle,
            "telemetry": {
                "csv": CSV_NAME,
                "hz": self.cfg.telemetry_hz,
                "notes": {
                    **dict(getattr(s, "notes", {}) or {}),
                    **({"nvml": self.idle["nvml_note"]} if self.idle.get("nvml_note") else {}),
                },
                "gpus": self.gpus,
                "power_fields": {f"gpu{i}_power_field": f for i, f in (getattr(s, "power_fields", {}) or {}).items()},
            },
            **self.facts,
        }


@dataclass
class CellRun(Common):
    """One process: a single device, or nn.DataParallel over several (a StepRun)."""

    trainer: Any = None
    batches: Any = None
    device: Any = None
    probe: dict = field(default_factory=dict)  # dp: one GPU alone and DataParallel's threads (dp_probe)

    @property
    def steps(self) -> int:
        return self.cfg.epochs + (0 if self.ctx.dist else 2)

    def step(self, i: int) -> list[dict]:
        if i < self.cfg.epochs:
            return [self.epoch(i + 1)]
        if i == self.cfg.epochs:
            self.finish_sampler()
            return [self.overhead()]
        return [self.profile()]

    def memory(self) -> dict:
        import torch

        from bench.measure.torchdev import memory_peaks

        out = memory_peaks(self.device)
        if self.device.type == "cuda" and self.cfg.mode == "dp":  # DataParallel: every GPU's own peak (the seed's imbalance)
            for k in range(self.cfg.world_size):
                out[f"gpu{k}_alloc_peak_mb_torch"] = torch.cuda.max_memory_allocated(k) / 1e6
        return out

    def epoch(self, e: int) -> dict:
        import torch

        from bench.studies.profile.trainer import train_epoch

        dist = self.ctx.dist
        if self.device.type == "cuda":
            for k in [self.device.index or 0] if dist else range(self.cfg.world_size):
                torch.cuda.reset_peak_memory_stats(k)
        stats = train_epoch(self.trainer, self.batches, barrier=dist.barrier if dist else None)
        mem = self.memory()
        acc, n, eval_s = None, 0, 0.0
        if dist is None or dist.is_main:  # one rank evaluates; the others wait at the barrier
            t0 = time.perf_counter()
            acc, n = self.trainer.evaluate(self.batches)
            eval_s = time.perf_counter() - t0
        if dist:
            per_rank = dist.gather(mem.get("gpu_alloc_peak_mb"))
            dist.barrier()
            mem.update({f"gpu{k}_alloc_peak_mb_torch": v for k, v in enumerate(per_rank) if v is not None})
            stats["backend_dist"] = dist.comm
        row = {**self.epoch_row(e, stats, acc, n, eval_s, mem), **self.probe}
        self.epoch_rows.append(row)
        return row

    def _steps(self):
        """Training batches without end (a new epoch's iterator when one runs out)."""
        while True:
            got = False
            for xy in self.batches.train():
                got = True
                yield xy
            if not got:
                raise KitError("the training split gives no batch: lower batch_size or add images")

    def _block(self, xy, n: int) -> float:
        tr = self.trainer
        x, y = xy
        tr.sync()
        t0 = time.perf_counter()
        for _ in range(n):
            tr.step(x, y)
        tr.sync()
        return (time.perf_counter() - t0) / n

    def overhead(self) -> dict:
        """The sampler's cost: blocks with it on and off (order alternated), per-step medians, on one
        batch held on the device (a DataLoader's worker start at an epoch's end would swamp a 1 % effect)."""
        from bench.core.stats import ratio
        from bench.measure.sampler import TelemetrySampler

        cfg = self.cfg
        it = self._steps()
        xy = next(it)
        it.close()
        self.trainer.train_mode()
        self._block(xy, 1)
        on, off = [], []
        for b in range(cfg.overhead_blocks):
            for state in ("off", "on") if b % 2 == 0 else ("on", "off"):
                if state == "on":
                    s = TelemetrySampler(self.gpus, hz=cfg.telemetry_hz).start()
                    on.append(self._block(xy, cfg.overhead_steps))
                    s.stop()
                else:
                    off.append(self._block(xy, cfg.overhead_steps))
        pairs = [a / b - 1 for a, b in zip(on, off, strict=True)]
        cost = ratio(dict(enumerate(on)), dict(enumerate(off)))  # step times, paired by block
        return {
            **self.base(),
            "phase": "overhead",
            "status": "ok",
            "step_ms_sampler_on": statistics.median(on) * 1e3,
            "step_ms_sampler_off": statistics.median(off) * 1e3,
            "sampler_cost": statistics.median(on) / statistics.median(off) - 1,
            "sampler_cost_pairs": pairs,
            # the cost's interval (bench.core.stats.ratio - 1): a 95 % bootstrap from 6 pairs, the pairs' range below
            "sampler_cost_lo": None if cost.lo is None else cost.lo - 1,
            "sampler_cost_hi": None if cost.hi is None else cost.hi - 1,
            "sampler_cost_interval": cost.tag,
            "overhead_blocks": cfg.overhead_blocks,
            "overhead_batch": "one batch held on the device",
            "overhead_steps": cfg.overhead_steps,
            "telemetry_hz": cfg.telemetry_hz,
        }

    def profile(self) -> dict:
        from bench.measure.profiling import StepProfiler

        cfg = self.cfg
        trace_dir = self.ctx.cell_dir / TRACE_DIR
        prof = StepProfiler(
            trace_dir,
            self.device.type,
            wait=cfg.prof_wait,
            warmup=cfg.prof_warmup,
            active=cfg.prof_active,
            repeat=cfg.prof_repeat,
            record_shapes=True,
            profile_memory=True,
        )
        it = self._steps()
        self.trainer.train_mode()
        with prof:
            for _ in range(prof.total_steps):
                x, y = next(it)  # inside the step window: data loading is part of the step's breakdown
                self.trainer.step(x, y)
                self.trainer.sync()  # each step's GPU work inside its own window (the breakdown cuts by window)
                prof.step()
        self.trainer.sync()
        # one level per table: operators (CPU side) by their self device and self CPU time, and on
        # a GPU the kernels apart (an operator's self device time is its kernels': never both in one)
        by_dev = prof.op_table("self_device", cfg.prof_top_k, level="op")
        by_cpu = prof.op_table("self_cpu", cfg.prof_top_k, level="op")
        kernels = prof.op_table("self_device", cfg.prof_top_k, level="kernel") if self.device.type == "cuda" else []
        br = prof.step_breakdown()
        doc = {"ops_self_device": by_dev, "ops_self_cpu": by_cpu, "kernels_self_device": kernels, "breakdown": br}
        (self.ctx.cell_dir / "profile.json").write_text(json.dumps(doc, indent=1, default=str))
        unprof = [r["epoch_s"] / r["steps"] * 1e3 for r in self.epoch_rows if r.get("steps")]
        unprof_ms = statistics.median(unprof) if unprof else None
        prof_ms = br.get("mean_step_ms")
        means = {k: v for k, v in br.items() if k.startswith("mean_") or k.endswith("_share")}
        means = {k: v for k, v in means.items() if isinstance(v, (int, float))}
        return {
            **self.base(),
            "phase": "profile",
            "status": "ok",
            "prof_schedule": f"wait {cfg.prof_wait}, warmup {cfg.prof_warmup}, active {cfg.prof_active}, repeat {cfg.prof_repeat}",
            "profiled_steps": br.get("n_steps"),
            "breakdown_kind": br.get("kind"),
            **means,
            "unprofiled_step_ms": unprof_ms,
            "profiler_overhead": prof_ms / unprof_ms - 1 if isinstance(prof_ms, (int, float)) and unprof_ms else None,
            "top_op_device": by_dev[0]["name"] if by_dev else None,
            "top_op_cpu": by_cpu[0]["name"] if by_cpu else None,
            "traces": sorted(p.name for p in trace_dir.glob("*.json.gz")),
        }

    def close(self) -> list[dict]:
        self.finish_sampler()
        return []

    def system_extra(self) -> dict:
        import torch

        out = self.system_common()
        out["cudnn_benchmark"] = bool(torch.backends.cudnn.benchmark)
        return out


def check_steps(cfg: Settings, index) -> None:
    """An epoch of the loader pipeline drops the last partial batch, so a train split smaller than
    one step's images (batch_size x world_size) would give epochs of 0 steps: one line instead,
    before any work. (synthetic-gpu runs max_steps, else ceil(n_train / step's images) >= 1 steps.)"""
    need, n = cfg.batch_size * cfg.world_size, len(index.files("train"))
    if cfg.pipeline == "loader" and n < need:
        per = f" ({cfg.batch_size} on each of {cfg.world_size} devices)" if cfg.world_size > 1 else ""
        raise KitError(
            f"{index.name}: train has {n} images, fewer than one step's {need}{per}: "
            "an epoch would run 0 steps; lower batch_size or add images"
        )


def prepare(cfg: Settings, cell: Cell, ctx: RunContext) -> tuple[Any, dict, list[int], dict]:
    """The checks and measurements every run makes first: (index, dataset facts, NVML GPUs, idle
    baseline). The index and the step check come first: bad data is one line before the idle wait.
    Under ddp only rank 0 samples (every GPU of the run); the others wait for it at a barrier."""
    from bench.data import imagefolder
    from bench.measure.fixedcost import phase
    from bench.measure.sampler import idle_baseline

    with phase("data_s"):
        index = imagefolder.load_for_cell(cell.params, ctx.data_dir)  # reads files only: no GPU touched
    check_steps(cfg, index)
    if ctx.dist is not None and not ctx.dist.is_main:
        ctx.dist.barrier()  # rank 0's idle baseline: nothing of ours on any GPU yet
        return index, index.describe(), [], {}
    gpus, why = nvml_indices(cfg)
    idle = {**idle_baseline(gpus, cfg.idle_s, cfg.telemetry_hz), "nvml_note": why}  # nothing of ours on the GPU yet
    if ctx.dist is not None:
        ctx.dist.barrier()
    return index, index.describe(), gpus, idle


@dataclass
class BuildData:
    """What a backend's create() needs besides the cell."""

    n_classes: int
    data_dir: str | None
    device: Any
    wrap: Any = None


def open_single(study: Study, cfg: Settings, cell: Cell, ctx: RunContext) -> CellRun:
    import torch

    from bench.measure.sampler import TelemetrySampler
    from bench.studies.profile.trainer import Batches

    if cfg.parallel == "dp" and cfg.device != "cuda":
        raise KitError("parallel=dp (nn.DataParallel) needs CUDA GPUs; on the CPU use parallel=ddp (gloo)")
    dist = ctx.dist
    index, dataset, gpus, idle = prepare(cfg, cell, ctx)  # the cell's GPUs are this process's 0..N-1 (bench.run.cell)
    if cfg.device == "cuda" and cfg.world_size > torch.cuda.device_count():
        raise KitError(f"parallel={cfg.mode} over {cfg.world_size} GPUs, but torch sees {torch.cuda.device_count()}")
    threads = study.runtime_setup(cell, cfg.threads, cfg.seed)
    torch.backends.cudnn.benchmark = cfg.cudnn_benchmark
    if dist is not None:  # one rank of ddp: its device, DDP around the model, its shard of every epoch
        device, wrap = dist.device, dist.wrap
        batches = Batches(cfg, index, device, cfg.batch_size, rank=dist.rank, world=dist.world)
    else:
        device = torch.device("cuda:0" if cfg.device == "cuda" else "cpu")
        wrap = (lambda m: torch.nn.DataParallel(m, device_ids=list(range(cfg.world_size)))) if cfg.parallel == "dp" else None
        batches = Batches(cfg, index, device, cfg.batch_size * cfg.world_size)  # DataParallel splits one batch over the GPUs
    trainer = study.load_backend(cell.backend).create(cell, BuildData(len(index.classes), ctx.data_dir, device, wrap))
    run = CellRun(cfg, ctx, dataset, gpus, idle, trainer.facts, threads, trainer=trainer, batches=batches, device=device)
    run.warmup_s = trainer.warmup(batches)
    if cfg.mode == "dp":
        run.probe = dp_probe(trainer, batches, cfg)
    if dist is None or dist.is_main:
        run.sampler = TelemetrySampler(gpus, hz=cfg.telemetry_hz).start()
    return run


def dp_probe(trainer: Any, batches: Any, cfg: Settings, steps: int = 3) -> dict:
    """Untimed, after the warm-up, for a DataParallel cell: the model alone on GPU 0 at the same
    per-GPU batch (a copy, its own optimizer: one GPU's img/s), and the threads DataParallel
    starts per step (its parallel_apply makes fresh ones each step: with cudnn.benchmark on,
    cuDNN's plan cache is per thread, so every step may autotune again). The rows carry both:
    the evidence validity_flags' `dp-collapse` and the report read."""
    import copy
    import threading

    import torch

    x, y = next(batches.train())
    batches.epoch = 0
    one = copy.deepcopy(trainer.core)
    opt = torch.optim.Adam([p for p in one.parameters() if p.requires_grad], lr=cfg.lr)
    xs, ys = x[: cfg.batch_size], y[: cfg.batch_size]

    def one_step() -> None:
        opt.zero_grad(set_to_none=True)
        with trainer.amp:
            trainer.loss_fn(one(xs), ys).backward()
        opt.step()

    one_step()  # its own warm-up
    trainer.sync()
    t0 = time.perf_counter()
    for _ in range(steps):
        one_step()
    trainer.sync()
    one_ips = steps * cfg.batch_size / (time.perf_counter() - t0)
    started = [0]
    start = threading.Thread.start

    def counted(self: threading.Thread) -> None:
        started[0] += 1
        start(self)

    state = copy.deepcopy(trainer.core.state_dict()), copy.deepcopy(trainer.opt.state_dict())
    threading.Thread.start = counted  # type: ignore[method-assign]
    try:
        trainer.step(x, y)
        trainer.sync()
    finally:
        threading.Thread.start = start  # type: ignore[method-assign]
    trainer.core.load_state_dict(state[0])
    trainer.opt.load_state_dict(state[1])
    return {"dp_one_gpu_img_per_s": one_ips, "dp_threads_started_per_step": started[0]}


def validity_flags(rows: list[dict]) -> list[str]:
    """diverged: a non-finite training loss; sampler-costly: the sampler took >= 1% of step time
    at the LOWER end of its interval (every pair of a few blocks, or a 95 % bootstrap from 6), so
    a median that one noisy block pair pushed past 1 % is not a cost (the committed references'
    pairs of 10-step blocks ran from -33 % to +23 % within one cell, medians -14 % to +12 %);
    dp-collapse: DataParallel over N GPUs slower than one GPU alone at the same per-GPU batch
    (dp_probe), with its evidence (threads started per step, cudnn.benchmark)."""
    flags = []
    ep = [r for r in rows if r.get("phase") == "epoch" and r.get("parallel") == "dp" and r.get("dp_one_gpu_img_per_s")]
    if ep:
        dp = statistics.median(float(r["samples_per_s"]) for r in ep)
        one = float(ep[0]["dp_one_gpu_img_per_s"])
        if dp < one:
            why = (
                f"{ep[0].get('dp_threads_started_per_step')} threads started a step, "
                f"cudnn.benchmark {'on' if ep[0].get('cudnn_benchmark') else 'off'}"
            )
            flags.append(f"dp-collapse({dp / one:.2f}x one GPU; {why})")
    bad = [r.get("epoch") for r in rows if r.get("phase") == "epoch" and r.get("loss_finite") is False]
    if bad:
        flags.append(f"diverged(epoch {bad[0]})")
    for r in rows:
        if r.get("phase") != "overhead":
            continue
        c, lo, pairs = r.get("sampler_cost"), r.get("sampler_cost_lo"), r.get("sampler_cost_pairs")
        if lo is None and isinstance(pairs, list) and len(pairs) > 1 and all(isinstance(p, float) for p in pairs):
            lo = min(pairs)  # a row written before the interval was: its pairs' range
            r = {**r, "sampler_cost_interval": f"range of {len(pairs)}"}
        if isinstance(c, float) and isinstance(lo, float) and lo >= SAMPLER_COSTLY:
            flags.append(f"sampler-costly({c:.1%} of step time, lower end {lo:.1%}, {r.get('sampler_cost_interval')})")
    return flags
