"""What the harness costs a short GPU training step, and why fresh processes of one cell differ.

    python -m lab.gpu_harness inproc [--configs resnet50:64:128 mobilenet_v2:64:256 resnet50:224:64]
                                     [--precision bf16-cl] [--rounds 10] [--block-steps 30] [--step eager|graph]
                                     [--device cuda] --out DIR
    python -m lab.gpu_harness spread [--config resnet50:64:128] [--variants bench nobench] [--procs 5]
                                     [--steps 300] [--warmup 10] [--device cuda] --out DIR
    python -m lab.gpu_harness nvml --out DIR

inproc: in ONE process (one cuDNN autotuner cache, one allocator, one set of clocks: none of the
fresh-process spread), blocks of BLOCK_STEPS training steps of one fixed batch on the device, the
arms in a rotated order each round:
    bare       the kit's roofline step restated without the kit (lab/peer_check.py bare_run's step)
    kit-quiet  the kit's own Trainer.train_pass (bench/studies/roofline/trainer.py), no sampler
    kit        Trainer.train_pass with every sampler a roofline train row has running: the cell's
               Telemetry (bench/run/cell.py, NVML + psutil every 0.5 s), GpuUsage (NVML every 0.1 s)
               and RSSSampler (every 10 ms), each read by a child process (bench/measure/outproc.py),
               CpuUsage (two reads)
    kit-threads  the same with Telemetry, GpuUsage and RSSSampler read by threads in this process
               (as before)
    profile    Trainer.train_pass with the profile study's TelemetrySampler at 10 Hz
Each block is timed as the cell times a pass (device synced at both ends); samplers start before
the clock and settle 0.2 s (every arm waits the same). Per config: each arm's step time, and the
ratios kit/kit-quiet (the samplers' cost), kit-threads/kit-quiet, kit/kit-threads,
profile/kit-quiet, kit-quiet/bare and kit/bare (the harness in-process), each the median over rounds with bench.core.stats.ratio's 95 % bootstrap
interval, paired by round. Then torch.profiler over PROFILE_STEPS steps of bare and kit: the
host-side time per step (the CPU span of each step's record_function) and the host ops whose
CPU time per step differs most. A config's batch "auto" picks the batch whose step is nearest
20 ms (the issue's short step). --step graph: every arm's step is a CUDA graph (bare: Graphed
below; the kit's: its own step=cuda-graph, Trainer.capture, checked), so the GPU, not the host,
sets the pace and the blocks wander far less: what the samplers cost shows against ~1 % instead
of the host's ~10 % (the kit's cell with step=cuda-graph runs exactly this step).

spread: PROCS fresh processes per variant, interleaved, each the bare loop (one fixed batch on
the device) timed over STEPS steps after WARMUP, with: the per-step device time (CUDA events, no
host sync), the kernels of two profiled steps after the clock (names and count: which cuDNN
algorithms the autotuner picked show in the names; their hash tells two processes' choices
apart), their summed device time per step against the main thread's CPU time per step (the GPU
busy well under the step, the CPU near it: the host sets the pace, and a cuDNN choice cannot
move it), NVML's SM and memory clocks and temperature before and after, the allocator's counters,
the CPU it ran on. Variants: bench (cudnn.benchmark on: the kit's), nobench (off: cuDNN's
heuristics), bench-det (on, and torch.backends.cudnn.deterministic), long (bench, WARMUP x 5),
pinned (bench, the process bound to two CPUs on two physical cores near the GPU, the same in every
process: the scheduler's placement and migrations taken out), probed (pinned, with a pure-Python
loop of fixed work in a process of its own on a third CPU: in 0.25 s windows, does the training's
step time move with that loop's speed, i.e. does the whole host CPU speed up and slow down), graph (bench, the whole step captured
once as a CUDA graph and replayed: the host's per-kernel work taken out). Each process also records
its threads' CPU per step (the training thread and autograd's device thread), the CPUs they ran on,
the scheduler's migrations, and torch.profiler's host ops over 10 steps: where a slow process spends
the extra CPU (every op alike: the CPU ran slower; a few ops: those ops).

Why the host side first: the committed kit/timm and kit/bare runs (results/reference/
H100-80GB-HBM3-peer-check-long, 64 px, bf16-cl) step ResNet-50 in 24-29 ms at batch 128 and
23-26 ms at batch 512, ResNet-18 in 8-14 ms and 9-12 ms: four times the images in the same time,
so at batch 128 the GPU idles most of each step and the host (Python, dispatcher, launches) sets
the pace. A cuDNN algorithm choice cannot then move a 128 step by 10-20 %; the host's speed, and
anything that takes the GIL from the training thread (the samplers), can.

nvml: the wall time of each NVML call the kit's samplers make, idle and with the GPU busy.

Writes OUT/gpu_harness-<mode>.json (spread: gpu_harness-spread-<model>-b<batch>.json) and prints a table.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TAG = "HARNESS "
PROFILE_STEPS = 20
TARGET_STEP_S = 0.020


def fail(msg: str, code: int = 2):
    print(f"gpu_harness: error: {msg}", file=sys.stderr)
    raise SystemExit(code)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # bad input: one line, exit 2
        fail(message)


# ---- the two loops -----------------------------------------------------------------------------
class Bare:
    """lab/peer_check.py bare_run's model, optimiser, batch and step (no bench import needed)."""

    def __init__(self, model: str, batch: int, size: int, precision: str, device: str, classes: int = 200):
        import torch
        import torchvision

        self.torch = torch
        self.cuda = device == "cuda"
        if self.cuda:
            torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
            torch.backends.cudnn.allow_tf32 = precision == "tf32"
        self.bf16 = precision == "bf16-cl"
        fmt = torch.channels_last if self.bf16 else torch.contiguous_format
        torch.manual_seed(0)
        self.model = torchvision.models.get_model(model, weights=None, num_classes=classes).to(device).to(memory_format=fmt)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(batch, 3, size, size, generator=g).to(device).contiguous(memory_format=fmt)
        self.y = torch.randint(0, classes, (batch,), generator=g).to(device)
        self.loss_sum = torch.zeros((), device=device)
        self.device = device
        self.model.train()

    def step(self) -> None:
        import torch.nn.functional as F

        with self.torch.autocast(self.device, dtype=self.torch.bfloat16, enabled=self.bf16):
            loss = F.cross_entropy(self.model(self.x), self.y)
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        self.loss_sum.add_(loss.detach().float())

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def run(self, n: int) -> None:
        for _ in range(n):
            self.step()
        float(self.loss_sum.item())


class Graphed(Bare):
    """Bare's step captured once as a CUDA graph and replayed (torch.cuda.graph, the whole step:
    forward, loss, backward, optimizer step): the host launches one graph a step instead of every
    kernel, so the GPU, not Python and the dispatcher, sets the pace. CUDA only."""

    def __init__(self, model: str, batch: int, size: int, precision: str, device: str, classes: int = 200):
        super().__init__(model, batch, size, precision, device, classes)
        if not self.cuda:
            raise RuntimeError("the graph variant needs CUDA")
        torch = self.torch
        self.graph = None
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # cuDNN's autotuning, the optimizer's momentum buffers: before capture
            for _ in range(3):
                self._eager()
        torch.cuda.current_stream().wait_stream(side)
        self.opt.zero_grad(set_to_none=True)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self._eager(zero=False)

    def _eager(self, zero: bool = True) -> None:
        import torch.nn.functional as F

        if zero:
            self.opt.zero_grad(set_to_none=True)
        # the autocast cache holds casts made outside the graph's pool: off, as torch's notes on graphs ask
        with self.torch.autocast(self.device, dtype=self.torch.bfloat16, enabled=self.bf16, cache_enabled=False):
            loss = F.cross_entropy(self.model(self.x), self.y)
        loss.backward()
        self.opt.step()
        self.loss_sum.add_(loss.detach().float())

    def step(self) -> None:
        if self.graph is None:
            self._eager()
        else:
            self.graph.replay()


class Kit:
    """The roofline study's Trainer (the kit's own step and train_pass) on the same fixed batch;
    GRAPH: its step=cuda-graph, captured (and checked) by the kit's own warm-up."""

    def __init__(self, model: str, batch: int, size: int, precision: str, device: str, classes: int = 200, graph: bool = False):
        from bench.studies.roofline.config import Settings
        from bench.studies.roofline.trainer import Trainer

        backend = "torch-cuda" if device == "cuda" else "torch-cpu"
        cfg = Settings(model=model, precision=precision, device=device, backend=backend, step="cuda-graph" if graph else "eager")
        self.tr = Trainer(cfg, classes, side=size)
        self.x, self.y = self.tr.fixed_batch(batch)
        self.device = device
        self.check: dict = {}
        if graph:
            _, self.check = self.tr.warmup(self.x, self.y, 3, evaluate=False)

    def step(self) -> None:
        self.tr.step(self.x, self.y)

    def sync(self) -> None:
        self.tr.sync_device()

    def run(self, n: int) -> None:
        self.tr.train_pass([(self.x, self.y)] * n, n)


@contextlib.contextmanager
def samplers(arm: str, cuda: bool):
    """The sampler threads ARM has running (see the module docstring), started before the clock."""
    from bench.measure.memory import RSSSampler
    from bench.measure.sampler import TelemetrySampler, nvml_indices_for_visible
    from bench.measure.telemetry import Telemetry
    from bench.measure.usage import CpuUsage, GpuUsage

    if arm in ("kit", "kit-threads"):
        process = arm == "kit"
        tel = Telemetry(gpu=cuda, process=process).start()
        cpu, gpu = CpuUsage(), GpuUsage(enabled=cuda, process=process)
        cpu.start()
        gpu.start()
        with RSSSampler(process=process):
            time.sleep(0.2)
            yield
        cpu.stop()
        gpu.stop()
        tel.stop()
    elif arm == "profile":
        s = TelemetrySampler(nvml_indices_for_visible() if cuda else None, hz=10).start()
        time.sleep(0.2)
        yield
        s.stop()
    else:
        time.sleep(0.2)
        yield


def _runq_s(path: str) -> float | None:
    """Run-queue wait in seconds from a schedstat file; None where the kernel keeps no such figure
    (it reads zero CPU time) or the thread is gone."""
    try:
        run_ns, wait_ns = (int(x) for x in Path(path).read_text().split()[:2])
    except (OSError, ValueError):
        return None
    return wait_ns / 1e9 if run_ns > 0 else None


def host_waits() -> dict:
    """Counters so far: the training (calling) thread's CPU seconds, its voluntary and involuntary
    context switches (getrusage RUSAGE_THREAD: it blocked, e.g. on the GIL, in a driver call or
    waiting for autograd's device thread / the scheduler took the CPU away) and its run-queue wait
    (/proc/thread-self/schedstat); the whole process's CPU seconds (every thread: on CUDA,
    autograd's device thread runs the backward's host side, not the training thread) and the
    run-queue wait summed over its threads."""
    import resource

    ru = resource.getrusage(resource.RUSAGE_THREAD)
    waits = [w for w in (_runq_s(str(t / "schedstat")) for t in Path("/proc/self/task").glob("*")) if w is not None]
    return {
        "cpu": time.thread_time(),
        "proc_cpu": time.process_time(),
        "vcsw": ru.ru_nvcsw,
        "ivcsw": ru.ru_nivcsw,
        "runq": _runq_s("/proc/thread-self/schedstat"),
        "proc_runq": sum(waits) if waits else None,
    }


def block(loop, n: int, cpu: dict | None = None, key: int = 0) -> float:
    """Seconds per step of N steps, synced at both ends (the cell's clock). CPU, if given, gets
    under KEY the per-step differences of host_waits() over the block (a wall well above the
    training thread's CPU: it waited, and these say on what; threads the process started or
    ended within the block count only while alive)."""
    loop.sync()
    w0 = host_waits()
    t0 = time.perf_counter()
    loop.run(n)
    loop.sync()
    wall = (time.perf_counter() - t0) / n
    if cpu is not None:
        w1 = host_waits()
        cpu[key] = {k: None if w0[k] is None or w1[k] is None else (w1[k] - w0[k]) / n for k in w0}
    return wall


def host_profile(loop, steps: int) -> dict:
    """torch.profiler over STEPS steps: the CPU span of each step and the host ops' CPU time per step."""
    from torch.profiler import ProfilerActivity, profile, record_function

    loop.sync()
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if getattr(loop, "device", "cuda") == "cuda" else [])
    with profile(activities=acts) as prof:
        for _ in range(steps):
            with record_function("harness_step"):
                loop.step()
        loop.sync()
    ev = prof.key_averages()
    events = prof.events()
    spans = [e.time_range.elapsed_us() for e in events if e.name == "harness_step" and e.device_type.name == "CPU"]
    busy = sum(e.time_range.elapsed_us() for e in events if e.device_type.name == "CUDA" and e.name != "harness_step")
    ops = {e.key: e.self_cpu_time_total / steps for e in ev if e.key != "harness_step"}
    return {
        "host_step_us": spans,
        "host_step_us_median": statistics.median(spans),
        "gpu_busy_us_per_step": busy / steps,  # kernels and copies: well under the step time = the host sets the pace
        "self_cpu_us_per_step": ops,
    }


def pick_batch(model: str, size: int, precision: str, device: str, make: type = Bare) -> tuple[int, dict[int, float]]:
    """The batch (16..512, powers of two and their midpoints) whose bare step (MAKE: Bare, or
    Graphed for the step as a graph) is nearest 20 ms."""
    tried: dict[int, float] = {}
    for b in (16, 32, 48, 64, 96, 128, 192, 256, 384, 512):
        loop = make(model, b, size, precision, device)
        loop.run(5)
        tried[b] = block(loop, 10)
        del loop
        if tried[b] > TARGET_STEP_S * 1.5:
            break
    return min(tried, key=lambda b: abs(tried[b] - TARGET_STEP_S)), tried


def inproc(a: argparse.Namespace) -> dict:
    import torch

    from bench.core.stats import ratio

    cuda = a.device == "cuda"
    graph = a.step == "graph"
    bare = Graphed if graph else Bare
    torch.backends.cudnn.benchmark = True
    out = []
    for spec in a.configs:
        model, size, batch = spec.split(":")
        tried = None
        if batch == "auto":
            b, tried = pick_batch(model, int(size), a.precision, a.device, bare)
        else:
            b = int(batch)
        loops = {"bare": bare(model, b, int(size), a.precision, a.device)}
        loops["kit"] = Kit(model, b, int(size), a.precision, a.device, graph=graph)
        for lp in loops.values():
            lp.run(10)  # warm-up: cuDNN autotuning, allocator
        arms = {"bare": "bare", "kit-quiet": "kit", "kit": "kit", "kit-threads": "kit", "profile": "kit"}
        got: dict[str, dict[int, float]] = {k: {} for k in arms}
        cpu: dict[str, dict[int, float]] = {k: {} for k in arms}
        names = list(arms)
        t0 = time.monotonic()
        for r in range(a.rounds):
            for arm in names[r % len(names) :] + names[: r % len(names)]:
                with samplers(arm, cuda):
                    got[arm][r] = block(loops[arms[arm]], a.block_steps, cpu[arm], r)
        ratios = {}
        pairs = (("kit", "kit-quiet"), ("kit-threads", "kit-quiet"), ("kit", "kit-threads"), ("profile", "kit-quiet"))
        for num, den in (*pairs, ("kit-quiet", "bare"), ("kit", "bare")):
            s = ratio(got[num], got[den])  # step times: > 1 means slower
            ratios[f"{num}/{den}"] = {"median": s.median, "lo": s.lo, "hi": s.hi, "kind": s.kind, "n": s.n}
        prof = {}
        for side in ("bare", "kit"):
            with samplers("kit" if side == "kit" else "bare", cuda):
                prof[side] = host_profile(loops[side], a.profile_steps)
        diff = {
            k: prof["kit"]["self_cpu_us_per_step"].get(k, 0.0) - prof["bare"]["self_cpu_us_per_step"].get(k, 0.0)
            for k in set(prof["kit"]["self_cpu_us_per_step"]) | set(prof["bare"]["self_cpu_us_per_step"])
        }
        top = sorted(diff.items(), key=lambda kv: -abs(kv[1]))[:12]
        entry = {
            "config": f"{model} {size}px b{b} {a.precision}" + (" graph" if graph else ""),
            "step": a.step,
            "graph_check": {k: v for k, v in loops["kit"].check.items() if not isinstance(v, list)},
            "model": model,
            "image_size": int(size),
            "batch": b,
            "batch_tried_s": tried,
            "step_ms": {k: 1e3 * statistics.median(v.values()) for k, v in got.items()},
            "host_per_step": {k: host_medians(v) for k, v in cpu.items()},  # host_waits() per step, median over blocks
            "host_blocks": cpu,
            "block_spread": {k: spread_of(v.values()) for k, v in got.items()},
            "blocks_s": got,
            "ratios": ratios,
            "host_step_us_median": {k: v["host_step_us_median"] for k, v in prof.items()},
            "gpu_busy_us_per_step": {k: v["gpu_busy_us_per_step"] for k, v in prof.items()},
            "host_profile": prof,
            "host_op_diff_us_per_step": top,
            "seconds": time.monotonic() - t0,
        }
        out.append(entry)
        print_inproc(entry, a)
        write(a.out, "inproc", {"configs": out}, a, done=False)  # a call cut short keeps every finished config
        del loops
        if cuda:
            torch.cuda.empty_cache()
    return {"configs": out}


def host_medians(blocks: dict) -> dict:
    """Per counter of host_waits(): the median per-step value over BLOCKS (None if any block lacks it)."""
    keys = list(next(iter(blocks.values()))) if blocks else []
    return {
        k: None if any(b[k] is None for b in blocks.values()) else statistics.median(b[k] for b in blocks.values()) for k in keys
    }


def host_line(h: dict) -> str:
    def ms(v):
        return "n/a" if v is None else f"{1e3 * v:.2f} ms"

    return (
        f"training thread CPU {ms(h['cpu'])}, run-queue {ms(h['runq'])}, {h['vcsw']:.1f} blocked / {h['ivcsw']:.1f} preempted;"
        f" process CPU {ms(h['proc_cpu'])}, run-queue {ms(h['proc_runq'])} (all threads)"
    )


def spread_of(values) -> float:
    """(max - min) / median of the blocks of one arm: how far its blocks wander."""
    v = sorted(values)
    return (v[-1] - v[0]) / statistics.median(v) if v else float("nan")


def print_inproc(e: dict, a: argparse.Namespace) -> None:
    sm = e["step_ms"]
    print(
        f"\n{e['config']}: {a.rounds} rounds x {a.block_steps} steps; step ms " + "  ".join(f"{k} {v:.3f}" for k, v in sm.items())
    )
    print("  block spread (max-min)/median " + "  ".join(f"{k} {v:.1%}" for k, v in e["block_spread"].items()))
    for arm, h in e["host_per_step"].items():
        print(f"  {arm:<10} per step: {host_line(h)}")
    for k, r in e["ratios"].items():
        lo = "" if r["lo"] is None else f" [{r['lo']:.4f}-{r['hi']:.4f}, {r['kind']}]"
        print(f"  {k:<20} {r['median']:.4f}{lo}")
    h = e["host_step_us_median"]
    g = e["gpu_busy_us_per_step"]
    print(
        f"  host-side us/step (torch.profiler): bare {h['bare']:.0f}  kit {h['kit']:.0f}; GPU busy bare {g['bare']:.0f}  kit {g['kit']:.0f}"
    )
    for k, d in e["host_op_diff_us_per_step"][:6]:
        print(f"    kit-bare {d:+8.1f} us/step  {k}")


# ---- spread: fresh processes -------------------------------------------------------------------
VARIANTS = {
    "bench": {"benchmark": True, "deterministic": False, "warmup_x": 1},
    "nobench": {"benchmark": False, "deterministic": False, "warmup_x": 1},
    "bench-det": {"benchmark": True, "deterministic": True, "warmup_x": 1},
    "long": {"benchmark": True, "deterministic": False, "warmup_x": 5},
    "pinned": {"benchmark": True, "deterministic": False, "warmup_x": 1, "pin": True},
    "graph": {"benchmark": True, "deterministic": False, "warmup_x": 1, "graph": True},
    "probed": {"benchmark": True, "deterministic": False, "warmup_x": 1, "pin": True, "probe": True},
}
PROBE_WINDOW_S = 0.25
# A pure-Python loop of fixed work in a process of its own, bound to one CPU the training does not
# use: its rate over time is the host CPU's own speed, apart from torch, CUDA and the training.
PROBE_SRC = """
import json, os, sys, time
cpu, stop, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
os.sched_setaffinity(0, {cpu})
ends = []
while not os.path.exists(stop):
    acc = 0
    for i in range(20000):
        acc += i & 7
    ends.append(time.perf_counter())
open(out, "w").write(json.dumps(ends))
"""


class Probe:
    """PROBE_SRC running beside a training loop, started before it and stopped after it; a context
    manager, so that a training that raises still stops it and removes its folder."""

    def __init__(self, allowed: set[int], avoid: set[int]):
        """ALLOWED: the CPUs the process could use before it bound itself to AVOID (the training's)."""
        import tempfile

        near = set().union(*(_siblings(c) for c in avoid)) | avoid  # not even a hyperthread of the training's cores
        free = sorted(allowed - near - {0})
        if not free:  # one CPU beside the training's, or none: the probe would time the training, not the host
            raise RuntimeError(
                f"the probe needs a CPU besides the training's {sorted(avoid)} (and CPU 0); this process has {sorted(allowed)}"
            )
        self.cpu = free[len(free) // 2]
        self._tmp = tempfile.TemporaryDirectory(prefix="harness-probe-")
        self.dir = Path(self._tmp.name)
        argv = [sys.executable, "-c", PROBE_SRC, str(self.cpu), str(self.dir / "stop"), str(self.dir / "ends.json")]
        self.proc = subprocess.Popen(argv)

    def __enter__(self) -> Probe:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def stop(self) -> list[float]:
        """Its loop's end times (time.perf_counter, the host's clock); the process ended."""
        (self.dir / "stop").touch()
        self.proc.wait(timeout=30)
        return json.loads((self.dir / "ends.json").read_text())

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        self._tmp.cleanup()


def co_wander(step_ends: list[float], probe_ends: list[float], window: float = PROBE_WINDOW_S) -> dict:
    """The training's step time and the probe's time per unit of work, in WINDOW-second windows over
    the timed loop: Spearman's rho between them (near +1: when the training slowed, so did a pure
    Python loop on another CPU; the whole host's CPU speed moved, not the training's own work), and
    how far each wandered ((max - min) / median over windows)."""
    from scipy.stats import spearmanr

    if not step_ends or not probe_ends:
        return {"windows": 0}
    t0, t1 = max(step_ends[0], probe_ends[0]), min(step_ends[-1], probe_ends[-1])  # where both ran
    n = max(0, int((t1 - t0) / window))
    step_ms, unit_us = [], []
    for w in range(n):
        a, b = t0 + w * window, t0 + (w + 1) * window
        st = [e for e in step_ends if a < e <= b]
        pr = [e for e in probe_ends if a < e <= b]
        if len(st) >= 2 and len(pr) >= 2:  # the mean gap between ends within the window: not rounded to whole steps
            step_ms.append(1e3 * (st[-1] - st[0]) / (len(st) - 1))
            unit_us.append(1e6 * (pr[-1] - pr[0]) / (len(pr) - 1))
    if len(step_ms) < 4:
        return {"windows": len(step_ms)}
    rho, pv = spearmanr(step_ms, unit_us)
    return {
        "windows": len(step_ms),
        "window_s": window,
        "rho": float(rho),
        "p": float(pv),
        "step_wander": spread_of(step_ms),
        "probe_wander": spread_of(unit_us),
        "probe_unit_us_median": statistics.median(unit_us),
        "step_ms": step_ms,
        "probe_unit_us": unit_us,
    }


def pick_cores(n: int = 2) -> list[int]:
    """N CPUs to bind a process to, the same in every process: one per physical core (no two
    hyperthread siblings, so the training thread and autograd's device thread never share a
    core), from the cores NVML names as the GPU's near ones where it can say, the highest-numbered
    first (CPU 0 takes most interrupts)."""
    allowed = sorted(os.sched_getaffinity(0))
    near = set(allowed)
    with contextlib.suppress(Exception):  # no NVML, no GPU: any allowed CPU
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(int((os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0] or 0))
        words = pynvml.nvmlDeviceGetCpuAffinity(h, (max(allowed) // 64) + 1)
        mask = {64 * i + b for i, w in enumerate(words) for b in range(64) if int(w) >> b & 1}
        near = (mask & set(allowed)) or near
    picked: list[int] = []
    taken: set[int] = set()
    for cpu in sorted(near, reverse=True):
        if cpu in taken:
            continue
        picked.append(cpu)
        taken |= _siblings(cpu)
        if len(picked) == n:
            break
    return sorted(picked)


def _siblings(cpu: int) -> set[int]:
    """CPU and its hyperthread siblings ({CPU} where the kernel does not say)."""
    try:
        sib = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list").read_text().strip()
        return {int(x) for part in sib.split(",") for x in _cpu_range(part)} | {cpu}
    except (OSError, ValueError):
        return {cpu}


def _cpu_range(part: str) -> range:
    lo, _, hi = part.partition("-")
    return range(int(lo), int(hi or lo) + 1)


def thread_counters() -> dict[int, dict]:
    """Per thread of this process: CPU seconds (utime + stime, clock ticks), the CPU it last ran
    on, and how often the scheduler moved it between CPUs (None where the kernel keeps no count)."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[int, dict] = {}
    for t in Path("/proc/self/task").glob("*"):
        try:
            f = t.joinpath("stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        mig = None
        with contextlib.suppress(OSError, ValueError, StopIteration):
            line = next(x for x in t.joinpath("sched").read_text().splitlines() if x.startswith("se.nr_migrations"))
            mig = int(line.split(":")[1])
        # after the command: state is field 3, utime 14, stime 15, processor 39 (1-based in proc(5))
        out[int(t.name)] = {"cpu_s": (int(f[11]) + int(f[12])) / tick, "cpu_num": int(f[36]), "migrations": mig}
    return out


def thread_deltas(before: dict[int, dict], after: dict[int, dict], steps: int) -> dict:
    """Per step over the timed loop, from two thread_counters(): each busy thread's CPU ms (largest
    first), the CPUs they ran on, and the migrations summed over the process's threads."""
    per = []
    migs = 0
    for tid, a in after.items():
        b = before.get(tid, {"cpu_s": 0.0, "migrations": 0})
        d = a["cpu_s"] - b["cpu_s"]
        if a["migrations"] is not None and b["migrations"] is not None:
            migs += a["migrations"] - b["migrations"]
        if d > 0:
            per.append({"tid": tid, "cpu_ms_per_step": 1e3 * d / steps, "cpu_num": a["cpu_num"]})
    per.sort(key=lambda x: -x["cpu_ms_per_step"])
    known = any(a["migrations"] is not None for a in after.values())
    return {"threads": per[:4], "migrations_per_step": migs / steps if known else None}


def nvml_state() -> dict:
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(int((os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0] or 0))
        return {
            "sm_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
            "mem_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
            "temp_c": pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
            "power_w": pynvml.nvmlDeviceGetPowerUsage(h) / 1e3,
            "reasons": int(pynvml.nvmlDeviceGetCurrentClocksEventReasons(h)),
        }
    except Exception as err:  # noqa: BLE001 - provenance only: say why
        return {"error": f"{type(err).__name__}: {err}"}


def cpu_probe() -> dict:
    """This process's host speed, apart from the GPU: us per tiny torch CPU op (Python + dispatcher,
    what a launch costs before the driver) and per pure-Python loop turn, the median of 5 rounds."""
    import torch

    x = torch.ones(8)
    ops, py = [], []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(2000):
            x.add_(1.0)
        ops.append(1e6 * (time.perf_counter() - t) / 2000)
        t, acc = time.perf_counter(), 0
        for i in range(200_000):
            acc += i & 7
        py.append(1e6 * (time.perf_counter() - t) / 200_000)
    return {"torch_op_us": statistics.median(ops), "python_loop_us": statistics.median(py)}


def timed_loop(loop, spec: dict, evs: list, side: Probe | None) -> dict:
    """The child's timed steps, with the probe beside them if any: the main thread's CPU, the wall
    and the process's CPU (s), thread_counters() before the loop, and co_wander (None without a probe)."""
    if side:
        time.sleep(0.5)  # its interpreter up and looping
    th0 = thread_counters()
    ends = []
    t0, c0, p0 = time.perf_counter(), time.thread_time(), time.process_time()
    for i in range(spec["steps"]):
        if evs:
            evs[i].record()
        loop.step()
        ends.append(time.perf_counter())  # host-paced steps: the host's clock is the step's
    if evs:
        evs[-1].record()
    cpu_s = time.thread_time() - c0  # the main thread's CPU: near the wall time = the host sets the pace
    float(loop.loss_sum.item())
    elapsed = time.perf_counter() - t0
    proc_s = time.process_time() - p0
    wander = co_wander([t0, *ends], side.stop()) if side else None
    return {"cpu_s": cpu_s, "elapsed_s": elapsed, "proc_s": proc_s, "threads": th0, "wander": wander}


def child(spec: dict) -> dict:
    """One fresh process of `spread`: the bare loop, timed, with what might explain its speed."""
    t_start = time.perf_counter()
    pinned = None
    allowed = set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else set()
    if spec.get("pin") and hasattr(os, "sched_setaffinity"):  # before torch: every thread it starts inherits it
        pinned = pick_cores(2)  # two: autograd's device thread beside the training thread
        os.sched_setaffinity(0, set(pinned))
    import torch

    t_import = time.perf_counter() - t_start
    torch.backends.cudnn.benchmark = spec["benchmark"]
    torch.backends.cudnn.deterministic = spec["deterministic"]
    cuda = spec["device"] == "cuda"
    probe = cpu_probe()
    before = nvml_state() if cuda else {}
    make = Graphed if spec.get("graph") else Bare
    loop = make(spec["model"], spec["batch"], spec["size"], spec["precision"], spec["device"])
    t0 = time.perf_counter()
    loop.run(spec["warmup"] * spec["warmup_x"])
    loop.sync()
    warm_s = time.perf_counter() - t0
    evs = [torch.cuda.Event(enable_timing=True) for _ in range(spec["steps"] + 1)] if cuda else []
    loop.sync()
    side = Probe(allowed, set(pinned or [])) if spec.get("probe") else None
    with side or contextlib.nullcontext():
        t = timed_loop(loop, spec, evs, side)
    cpu_s, elapsed, proc_s, wander = t["cpu_s"], t["elapsed_s"], t["proc_s"], t["wander"]
    threads = thread_deltas(t["threads"], thread_counters(), spec["steps"])
    hp = host_profile(loop, 10)
    ops = sorted(hp["self_cpu_us_per_step"].items(), key=lambda kv: -kv[1])
    after = nvml_state() if cuda else {}
    per_step = [evs[i].elapsed_time(evs[i + 1]) for i in range(spec["steps"])] if cuda else []
    kernels: Counter[str] = Counter()
    busy_us = 0.0
    if cuda:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            loop.run(2)
            loop.sync()
        for e in prof.events():
            if e.device_type.name == "CUDA":
                kernels[e.name] += 1
                busy_us += e.time_range.elapsed_us()
    ms = torch.cuda.memory_stats() if cuda else {}
    sig = hashlib.sha1("\n".join(f"{k} {v}" for k, v in sorted(kernels.items())).encode()).hexdigest()[:12]
    import psutil

    return {
        **spec,
        "img_per_s": spec["steps"] * spec["batch"] / elapsed,
        "elapsed_s": elapsed,
        "warmup_s": warm_s,
        "import_s": t_import,
        "step_ms_events": per_step,
        "host_cpu_ms_per_step": 1e3 * cpu_s / spec["steps"],
        "process_cpu_ms_per_step": 1e3 * proc_s / spec["steps"],
        "threads": threads,
        "pinned_cpus": pinned,
        "probe": None if side is None else {"cpu": side.cpu, **(wander or {})},
        "profiled_host_us_per_step": hp["host_step_us_median"],  # torch.profiler, 10 steps: the CPU span of a step
        "profiled_self_cpu_us_per_step": sum(v for _, v in ops),
        "profiled_top_ops": {k: v for k, v in ops if v >= 1.0},  # every host op of 1 us a step or more
        "cpu_probe": probe,
        "gpu_busy_ms_per_step": busy_us / 2e3,
        "kernel_sig": sig,
        "kernels": dict(kernels),
        "nvml_before": before,
        "nvml_after": after,
        "alloc": {k: ms.get(k) for k in ("num_alloc_retries", "num_device_alloc", "segment.all.peak", "reserved_bytes.all.peak")},
        "cpu_num": psutil.Process().cpu_num(),
        "affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "pid": os.getpid(),
    }


def spread(a: argparse.Namespace) -> dict:
    model, size, batch = a.config.split(":")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    runs: list[dict] = []
    t0 = time.monotonic()
    for p in range(a.procs):
        for v in a.variants[p % len(a.variants) :] + a.variants[: p % len(a.variants)]:
            spec = {"variant": v, **VARIANTS[v], "model": model, "size": int(size), "batch": int(batch)}
            spec.update(precision=a.precision, device=a.device, steps=a.steps, warmup=a.warmup, proc=p)
            r = subprocess.run(
                [sys.executable, "-m", "lab.gpu_harness", "child", json.dumps(spec)],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
            )
            line = next((s for s in r.stdout.splitlines() if s.startswith(TAG)), None)
            if r.returncode or line is None:
                err = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
                print(f"proc {p} {v}: failed: {err}", flush=True)
                continue
            got = json.loads(line[len(TAG) :])
            runs.append(got)
            ev = got["step_ms_events"]
            th = got["threads"]
            mig = th["migrations_per_step"]
            tail = (
                f" cpu {got['host_cpu_ms_per_step']:.2f} (process {got['process_cpu_ms_per_step']:.2f}) gpu-busy"
                f" {got['gpu_busy_ms_per_step']:.2f} ms/step; cpus {sorted({t['cpu_num'] for t in th['threads'][:2]})}"
                f" migrations/step {'n/a' if mig is None else f'{mig:.2f}'};"
            )
            tail += (
                f" steps 0-20 {statistics.median(ev[:20]):.3f} ms, last half {statistics.median(ev[len(ev) // 2 :]):.3f} ms"
                if ev
                else ""
            )
            pr = got.get("probe") or {}
            if "rho" in pr:
                tail += (
                    f" probe on cpu {pr['cpu']}: {pr['windows']} windows, step vs probe rho {pr['rho']:+.2f},"
                    f" wander step {pr['step_wander']:.0%} probe {pr['probe_wander']:.0%};"
                )
            print(
                f"proc {p} {v:<9} {got['img_per_s']:>10,.0f} img/s  warm-up {got['warmup_s']:.1f} s  kernels {got['kernel_sig']}"
                f"  sm {got['nvml_before'].get('sm_mhz')}->{got['nvml_after'].get('sm_mhz')} MHz{tail}  [{time.monotonic() - t0:.0f} s]",
                flush=True,
            )
            write(a.out, out_name(a), {"runs": runs, "summary": spread_summary(runs)}, a, done=False)
    summary = spread_summary(runs)
    print(f"\n{a.config} {a.precision}, {a.steps} steps after {a.warmup} warm-up: img/s per variant over fresh processes")
    for v, d in summary.items():
        if v.startswith("_"):
            continue
        ci = "" if d["lo"] is None else f" [{d['lo']:,.0f}-{d['hi']:,.0f}, {d['kind']}]"
        print(f"  {v:<10} n={d['n']} median {d['median']:,.0f}{ci}  spread {d['spread']:.1%}  kernel choices {d['kernel_sigs']}")
        sf = d.get("slow_vs_fast")
        if sf:
            print(
                f"    slowest/fastest: step {sf['step_ratio']:.3f}, profiled host CPU {sf['self_cpu_ratio']:.3f},"
                f" per op median {sf['op_ratio_median']:.3f} (range {sf['op_ratio_range'][0]:.2f}-{sf['op_ratio_range'][1]:.2f})"
            )
    for name, c in summary.get("_img_per_s_vs", {}).items():
        print(f"  img/s vs {name:<26} Spearman rho {c['rho']:+.2f} (p {c['p']:.3f}, n {c['n']})")
    return {"runs": runs, "summary": summary}


def spread_summary(runs: list[dict]) -> dict:
    """Per variant: the median img/s with its interval, the spread (fastest / slowest - 1), the kernel
    choices seen; over every process: Spearman's rank correlation of img/s with each candidate."""
    from scipy.stats import spearmanr

    from bench.core.stats import summarize

    out: dict = {}
    cands = {
        "host_cpu_ms_per_step": lambda r: r["host_cpu_ms_per_step"],
        "process_cpu_ms_per_step": lambda r: r.get("process_cpu_ms_per_step"),
        "migrations_per_step": lambda r: (r.get("threads") or {}).get("migrations_per_step"),
        "profiled_self_cpu_us_per_step": lambda r: r.get("profiled_self_cpu_us_per_step"),
        "gpu_busy_ms_per_step": lambda r: r["gpu_busy_ms_per_step"],
        "cpu_probe_torch_op_us": lambda r: r["cpu_probe"]["torch_op_us"],
        "cpu_probe_python_loop_us": lambda r: r["cpu_probe"]["python_loop_us"],
        "sm_mhz_after": lambda r: r["nvml_after"].get("sm_mhz"),
        "warmup_s": lambda r: r["warmup_s"],
        "probe_unit_us_median": lambda r: (r.get("probe") or {}).get("probe_unit_us_median"),
    }
    if len(runs) >= 4:
        corr = {}
        for name, get in cands.items():
            pts = [(r["img_per_s"], get(r)) for r in runs if isinstance(get(r), (int, float))]
            if len(pts) >= 4 and len({v for _, v in pts}) > 1:
                rho, pv = spearmanr([a for a, _ in pts], [b for _, b in pts])
                corr[name] = {"rho": float(rho), "p": float(pv), "n": len(pts)}
        out["_img_per_s_vs"] = corr
    for v in dict.fromkeys(r["variant"] for r in runs):
        ips = [r["img_per_s"] for r in runs if r["variant"] == v]
        sigs = Counter(r["kernel_sig"] for r in runs if r["variant"] == v)
        s = summarize(ips)
        by_sig = {k: statistics.median(r["img_per_s"] for r in runs if r["variant"] == v and r["kernel_sig"] == k) for k in sigs}
        out[v] = {
            "n": len(ips),
            "median": s.median,
            "lo": s.lo,
            "hi": s.hi,
            "kind": s.kind,
            "spread": max(ips) / min(ips) - 1,
            "cv": statistics.stdev(ips) / statistics.mean(ips) if len(ips) > 1 else None,
            "kernel_sigs": dict(sigs),
            "host_cpu_ms_per_step": [r["host_cpu_ms_per_step"] for r in runs if r["variant"] == v],
            "gpu_busy_ms_per_step": [r["gpu_busy_ms_per_step"] for r in runs if r["variant"] == v],
            "img_per_s_by_sig": by_sig,
            "slow_vs_fast": slow_vs_fast([r for r in runs if r["variant"] == v]),
        }
    return out


def slow_vs_fast(runs: list[dict]) -> dict | None:
    """The slowest process of a variant against its fastest: the step's ratio, and torch.profiler's
    self CPU per step of each host op that both list, slow / fast (every op near the step's ratio:
    the whole host ran slower; a few far above it: those ops are where the time went), and the ops
    only one of them lists (1 us a step or more)."""
    have = [r for r in runs if r.get("profiled_top_ops")]
    if len(have) < 2:
        return None
    slow, fast = min(have, key=lambda r: r["img_per_s"]), max(have, key=lambda r: r["img_per_s"])
    ops = {
        k: slow["profiled_top_ops"][k] / fast["profiled_top_ops"][k]
        for k in slow["profiled_top_ops"]
        if fast["profiled_top_ops"].get(k, 0) > 0
    }
    vals = sorted(ops.values())
    return {
        "step_ratio": fast["img_per_s"] / slow["img_per_s"],
        "self_cpu_ratio": slow["profiled_self_cpu_us_per_step"] / fast["profiled_self_cpu_us_per_step"],
        "op_ratio_median": statistics.median(vals) if vals else None,
        "op_ratio_range": [vals[0], vals[-1]] if vals else None,
        "op_ratios": dict(sorted(ops.items(), key=lambda kv: -kv[1])),
        "only_slow_us": {k: v for k, v in slow["profiled_top_ops"].items() if k not in fast["profiled_top_ops"]},
        "only_fast_us": {k: v for k, v in fast["profiled_top_ops"].items() if k not in slow["profiled_top_ops"]},
    }


# ---- nvml: each call's cost ----------------------------------------------------------------------
def nvml_calls(a: argparse.Namespace) -> dict:
    import pynvml
    import torch

    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    calls = {
        "GetClockInfo(SM)": lambda: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
        "GetCurrentClocksEventReasons": lambda: pynvml.nvmlDeviceGetCurrentClocksEventReasons(h),
        "GetTemperature": lambda: pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
        "GetComputeRunningProcesses": lambda: pynvml.nvmlDeviceGetComputeRunningProcesses(h),
        "GetUtilizationRates": lambda: pynvml.nvmlDeviceGetUtilizationRates(h),
        "GetMemoryInfo": lambda: pynvml.nvmlDeviceGetMemoryInfo(h),
        "GetPowerUsage": lambda: pynvml.nvmlDeviceGetPowerUsage(h),
        "GetFieldValues(POWER_INSTANT)": lambda: pynvml.nvmlDeviceGetFieldValues(h, [pynvml.NVML_FI_DEV_POWER_INSTANT]),
        "GetTotalEnergyConsumption": lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(h),
    }
    out: dict[str, dict] = {}
    m = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    for state in ("idle", "busy"):
        for name, fn in calls.items():
            if state == "busy":
                for _ in range(1000):  # ~0.2 s of queued matrix products on an H100
                    m @ m
            ts = []
            for _ in range(50):
                t = time.perf_counter()
                try:
                    fn()
                except Exception as err:  # noqa: BLE001 - an old binding or a refused call: recorded, the rest timed
                    ts = [f"{err}"]
                    break
                ts.append(1e6 * (time.perf_counter() - t))
            torch.cuda.synchronize()
            ok = [t for t in ts if isinstance(t, float)]
            out.setdefault(name, {})[state] = {"median_us": statistics.median(ok), "max_us": max(ok)} if ok else {"error": ts[0]}
    for name, d in out.items():
        print(
            f"  {name:<32} "
            + "  ".join(
                f"{s} {v.get('median_us', float('nan')):8.1f} us (max {v.get('max_us', float('nan')):8.1f})" for s, v in d.items()
            )
        )
    return {"calls": out}


def out_name(a: argparse.Namespace) -> str:
    """The mode, and for spread its configuration: one file per configuration."""
    if a.mode != "spread":
        return a.mode
    model, _, batch = a.config.split(":")
    return f"spread-{model}-b{batch}"


# ---- the run -----------------------------------------------------------------------------------
def write(out: Path, mode: str, doc: dict, a: argparse.Namespace, done: bool = True) -> None:
    from bench.core.rows import atomic_write_text

    meta = {"command": "python -m lab.gpu_harness " + " ".join(sys.argv[1:]), "status": "ok" if done else "incomplete"}
    with contextlib.suppress(Exception):
        import torch

        meta.update(torch=torch.__version__, device=torch.cuda.get_device_name(0) if a.device == "cuda" else "cpu")
    atomic_write_text(out / f"gpu_harness-{mode}.json", json.dumps({"meta": meta, **doc}, indent=1) + "\n")


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["child"]:
        print(TAG + json.dumps(child(json.loads(argv[1]))), flush=True)
        return
    ap = _Parser(prog="python -m lab.gpu_harness", description=(__doc__ or "").splitlines()[0])
    ap.add_argument("mode", choices=("inproc", "spread", "nvml"))
    ap.add_argument("--configs", nargs="+", default=["resnet50:64:128", "mobilenet_v2:64:256", "resnet50:224:64"])
    ap.add_argument("--config", default="resnet50:64:128", help="spread: model:px:batch")
    ap.add_argument("--precision", default="bf16-cl")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--block-steps", type=int, default=30)
    ap.add_argument("--variants", nargs="+", default=["bench", "nobench"], choices=list(VARIANTS))
    ap.add_argument("--procs", type=int, default=5)
    ap.add_argument("--profile-steps", type=int, default=PROFILE_STEPS, help="inproc: steps under torch.profiler")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--step", choices=("eager", "graph"), default="eager", help="inproc: every arm's step eager or a CUDA graph")
    ap.add_argument("--out", type=Path, default=Path("results/lab"))
    a = ap.parse_args(argv)
    for spec in a.configs + [a.config]:
        parts = spec.split(":")
        if len(parts) != 3 or not parts[1].isdigit() or not (parts[2].isdigit() or parts[2] == "auto"):
            fail(f"config {spec!r}: want model:px:batch (batch a number or auto)")
    if min(a.rounds, a.block_steps, a.procs, a.steps) < 1 or a.warmup < 0:
        fail("--rounds, --block-steps, --procs and --steps must be >= 1, --warmup >= 0")
    if a.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            fail("--device cuda: torch sees no CUDA GPU here (use --device cpu)")
    if a.step == "graph" and a.device != "cuda":
        fail("--step graph needs --device cuda (a CUDA graph)")
    a.out.mkdir(parents=True, exist_ok=True)
    doc = {"inproc": inproc, "spread": spread, "nvml": nvml_calls}[a.mode](a)
    write(a.out, out_name(a), doc, a)
    print(f"wrote {a.out / f'gpu_harness-{out_name(a)}.json'}")


if __name__ == "__main__":
    main()
