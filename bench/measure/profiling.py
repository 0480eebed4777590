"""torch.profiler for the profile study (seed 004): record a few training steps, export one
gzipped Chrome/Perfetto trace per cycle, and analyse what was recorded.

    with StepProfiler("out/trace", "cuda", wait=1, warmup=1, active=3) as sp:
        for _ in range(sp.total_steps):
            train_one_step()
            sp.step()
    sp.op_table(sort_by="self_device")   # operators, from prof.key_averages()
    sp.step_breakdown()                  # per ProfilerStep#N window, from the trace's events

Times in the trace are microseconds (Chrome trace `ts`, `dur`); everything returned here is
milliseconds (`_ms`), fractions (`_share`) or MB (10^6 bytes, as bench.measure.memory).
torch is imported lazily: the report side imports only `parse_trace` and
`breakdown_from_events`, which need the standard library alone.

Event categories read from the trace (Kineto's names): `user_annotation` (CPU-side
record_function ranges: ProfilerStep#N, "enumerate(DataLoader)#...__next__"), `cpu_op`
(aten operators), `kernel`, `gpu_memcpy`, `gpu_memset` (GPU activity; `memcpy`/`memset` are
the older spellings). `gpu_user_annotation` (the GPU-side copy of an annotation) and
`cuda_runtime` (launch calls) are not GPU activity and are not counted as such.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import statistics
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench.core import bounded
from bench.core.errors import KitError

MB = 1e6
US_PER_MS = 1e3

STEP_PREFIX = "ProfilerStep#"
DATALOADER_PREFIX = "enumerate(DataLoader)#"  # torch/utils/data/dataloader.py: f"enumerate(DataLoader)#{cls}.__next__"
KERNEL_CATS = frozenset({"kernel"})
MEMCPY_CATS = frozenset({"gpu_memcpy", "memcpy"})
MEMSET_CATS = frozenset({"gpu_memset", "memset"})
GPU_ACTIVITY_CATS = KERNEL_CATS | MEMCPY_CATS | MEMSET_CATS

SORT_KEYS = ("self_device", "self_cpu")
LEVELS = ("all", "op", "kernel")  # op_table: which rows compete (see there)
DEVICE_TYPES = ("cpu", "cuda")

Interval = tuple[float, float]  # (start_us, end_us), start <= end


# ---------------------------------------------------------------------------- intervals


def _union(intervals: Iterable[Interval]) -> list[Interval]:
    """Sorted, disjoint intervals covering exactly the input's points."""
    merged: list[Interval] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def _clip(intervals: Iterable[Interval], lo: float, hi: float) -> list[Interval]:
    return [(max(s, lo), min(e, hi)) for s, e in intervals if min(e, hi) > max(s, lo)]


def _length(merged: list[Interval]) -> float:
    return sum(e - s for s, e in merged)


def _overlap(a: list[Interval], b: list[Interval]) -> float:
    """Length of the intersection of two unions (each sorted and disjoint)."""
    total, i, j = 0.0, 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


# ---------------------------------------------------------------------------- trace analysis


def parse_trace(path: str | os.PathLike[str]) -> list[dict]:
    """The `traceEvents` of a Chrome trace written by torch.profiler (.json or .json.gz)."""
    p = Path(path)
    try:
        if p.name.endswith(".gz"):
            with gzip.open(p, "rt", encoding="utf-8") as f:
                doc = json.load(f)
        else:
            with open(p, encoding="utf-8") as f:
                doc = json.load(f)
    except FileNotFoundError:
        raise KitError(f"trace {p} does not exist") from None
    except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise KitError(
            f"trace {p} is not a readable Chrome trace: {type(e).__name__}: {(str(e).splitlines() or [''])[0]}"
        ) from None
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        raise KitError(f"trace {p} has no traceEvents list")
    return events


def _complete(events: list[dict]) -> list[dict]:
    """Complete events ('ph' X) with a numeric ts and non-negative dur."""
    out = []
    for e in events:
        if e.get("ph") == "X" and isinstance(e.get("ts"), (int, float)) and isinstance(e.get("dur"), (int, float)):
            if e["dur"] < 0:
                raise KitError(f"trace event {e.get('name')!r} has a negative duration ({e['dur']} us)")
            out.append(e)
    return out


def _span(e: dict) -> Interval:
    return (float(e["ts"]), float(e["ts"]) + float(e["dur"]))


def _busy(gpu_events: list[dict], cats: frozenset[str], lo: float, hi: float) -> list[Interval]:
    """Union of the GPU events of categories `cats`, clipped to [lo, hi]."""
    return _union(_clip((_span(e) for e in gpu_events if e.get("cat") in cats), lo, hi))


def _step_number(name: str) -> int:
    tail = name[len(STEP_PREFIX) :]
    return int(tail) if tail.isdigit() else -1


METHOD_COMMON = {
    "step_ms": "duration of the CPU-side ProfilerStep#N annotation (cat user_annotation): wall time between two step() calls",
    "dataloader_ms": f"union of the step thread's '{DATALOADER_PREFIX}...__next__' annotations inside the step window: time the "
    "training loop waited for a batch",
}
METHOD_GPU = {
    "kernel_ms": "union of 'kernel' events clipped to the step's CPU window, all GPU streams (and devices) merged, so "
    "concurrent kernels are counted once; GPU work launched in the step that runs after its window ends is not counted",
    "memcpy_ms": "union of 'gpu_memcpy' events clipped to the step window",
    "memset_ms": "union of 'gpu_memset' events clipped to the step window",
    "gpu_busy_ms": "union of kernel, memcpy and memset events clipped to the step window",
    "idle_ms": "step_ms - gpu_busy_ms: wall time in the step with no GPU activity",
    "kernel_count": "'kernel' events that start inside the step's CPU window, every stream and device (a step that "
    "runs cuDNN's benchmark search again launches each candidate algorithm's kernels too)",
    "cpu_op_ms": "union of 'cpu_op' events of the step's process (all threads, so the autograd thread too) clipped to "
    "the step window, minus the part inside DataLoader annotations; nested ops are inside their parent, so this is "
    "the time covered by top-level ops",
}
METHOD_CPU = {
    "compute_ms": "union of 'cpu_op' events of the step's process (all threads) clipped to the step window, minus the part "
    "inside DataLoader annotations (collate ops count as data loading); equals the time covered by top-level ops",
    "other_ms": "step_ms - compute_ms - dataloader_ms: Python, profiler and loop overhead outside any operator",
}
GPU_FIELDS = ("step_ms", "kernel_ms", "memcpy_ms", "memset_ms", "gpu_busy_ms", "idle_ms", "dataloader_ms", "cpu_op_ms")
CPU_FIELDS = ("step_ms", "compute_ms", "dataloader_ms", "other_ms")


def _steps_from_events(events: list[dict], gpu: bool | None) -> tuple[bool, list[dict]]:
    """Per-step figures of one trace; `gpu` None means: GPU if the trace has any GPU activity."""
    complete = _complete(events)
    steps = [e for e in complete if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith(STEP_PREFIX)]
    if not steps:
        raise KitError("trace has no ProfilerStep#N annotations: were step() calls made inside the profiler's active steps?")
    gpu_events = [e for e in complete if e.get("cat") in GPU_ACTIVITY_CATS]
    is_gpu = bool(gpu_events) if gpu is None else gpu
    cpu_ops = [e for e in complete if e.get("cat") == "cpu_op"]
    loader = [e for e in complete if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith(DATALOADER_PREFIX)]

    rows = []
    for st in sorted(steps, key=lambda e: float(e["ts"])):
        lo, hi = _span(st)
        step_us = hi - lo
        pid, tid = st.get("pid"), st.get("tid")
        loader_u = _union(_clip((_span(e) for e in loader if e.get("pid") == pid and e.get("tid") == tid), lo, hi))
        ops_u = _union(_clip((_span(e) for e in cpu_ops if e.get("pid") == pid), lo, hi))
        ops_us = _length(ops_u) - _overlap(ops_u, loader_u)
        loader_us = _length(loader_u)
        row: dict[str, Any] = {"step": str(st["name"]), "step_number": _step_number(str(st["name"]))}
        if is_gpu:
            all_u = _busy(gpu_events, GPU_ACTIVITY_CATS, lo, hi)
            row.update(
                step_ms=step_us / US_PER_MS,
                kernel_ms=_length(_busy(gpu_events, KERNEL_CATS, lo, hi)) / US_PER_MS,
                memcpy_ms=_length(_busy(gpu_events, MEMCPY_CATS, lo, hi)) / US_PER_MS,
                memset_ms=_length(_busy(gpu_events, MEMSET_CATS, lo, hi)) / US_PER_MS,
                gpu_busy_ms=_length(all_u) / US_PER_MS,
                idle_ms=(step_us - _length(all_u)) / US_PER_MS,
                dataloader_ms=loader_us / US_PER_MS,
                cpu_op_ms=ops_us / US_PER_MS,
                kernel_count=sum(1 for e in gpu_events if e.get("cat") in KERNEL_CATS and lo <= float(e["ts"]) < hi),
            )
        else:
            row.update(
                step_ms=step_us / US_PER_MS,
                compute_ms=ops_us / US_PER_MS,
                dataloader_ms=loader_us / US_PER_MS,
                other_ms=(step_us - ops_us - loader_us) / US_PER_MS,
            )
        rows.append(row)
    return is_gpu, rows


def _summarise(is_gpu: bool, steps: list[dict]) -> dict:
    fields = GPU_FIELDS if is_gpu else CPU_FIELDS
    out: dict[str, Any] = {"kind": "gpu" if is_gpu else "cpu", "n_steps": len(steps), "steps": steps}
    for f in fields:
        out[f"mean_{f}"] = statistics.fmean(s[f] for s in steps)
    if is_gpu:
        out["mean_kernel_count"] = statistics.fmean(s["kernel_count"] for s in steps)
    step_ms = out["mean_step_ms"]
    for f in fields[1:]:
        # share of step time = sum over steps of the figure / sum of step times (= ratio of the means)
        out[f"{f.removesuffix('_ms')}_share"] = out[f"mean_{f}"] / step_ms if step_ms > 0 else 0.0
    method = dict(METHOD_COMMON, **(METHOD_GPU if is_gpu else METHOD_CPU))
    method["mean_*"] = "arithmetic mean over the active steps of every exported cycle; '*_share' = mean figure / mean step_ms"
    out["method"] = method
    return out


def breakdown_from_events(events: list[dict], gpu: bool | None = None) -> dict:
    """Where each profiled step's wall time went, from one trace's events (pure; see the module doc).

    Returns {'kind': 'gpu'|'cpu', 'n_steps', 'steps': [per-step dicts], 'mean_<field>',
    '<field>_share', 'method': {field: how it was computed}}. GPU fields: step_ms, kernel_ms,
    memcpy_ms, memset_ms, gpu_busy_ms, idle_ms, dataloader_ms, cpu_op_ms, and kernel_count (with
    its mean_kernel_count; no share). CPU fields: step_ms,
    compute_ms, dataloader_ms, other_ms. `gpu=None` decides from the events (any kernel,
    memcpy or memset event means GPU); StepProfiler passes its device type instead.
    """
    is_gpu, steps = _steps_from_events(events, gpu)
    return _summarise(is_gpu, steps)


# ---------------------------------------------------------------------------- the profiler


def _check_writable(trace_dir: Path) -> None:
    """Create `trace_dir` and write a probe file in it, or raise KitError naming it (before any step runs)."""
    try:
        trace_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=trace_dir, prefix=".write-probe-"):
            pass
    except OSError as e:
        reason = e.strerror or type(e).__name__
        raise KitError(f"trace dir {trace_dir} cannot be created or written ({reason}): pass a writable directory") from None


class StepProfiler:
    """torch.profiler over `total_steps` training steps with schedule(wait, warmup, active, repeat).

    The caller runs `total_steps` steps inside the `with` block and calls `step()` after each.
    Every cycle's trace is written to trace_dir/trace_<k>.json.gz (k = 0, 1, ... per cycle).
    Profiling adds overhead: never time a benchmark inside this block (DESIGN: "Profiling and
    per-phase instrumentation never run inside the timed loop").
    """

    def __init__(
        self,
        trace_dir: str | os.PathLike[str],
        device_type: str,
        wait: int = 1,
        warmup: int = 1,
        active: int = 3,
        repeat: int = 1,
        record_shapes: bool = True,
        profile_memory: bool = True,
        with_stack: bool = False,
    ):
        if device_type not in DEVICE_TYPES:
            raise KitError(f"profiling supports device_type {' or '.join(DEVICE_TYPES)}, got {device_type!r}")
        for name, value, least in (("wait", wait, 0), ("warmup", warmup, 0), ("active", active, 1), ("repeat", repeat, 1)):
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise KitError(f"profiler schedule {name} must be an integer >= {least}, got {value!r}")
        self.trace_dir = Path(trace_dir)
        self.device_type = device_type
        self.wait, self.warmup, self.active, self.repeat = wait, warmup, active, repeat
        self.record_shapes, self.profile_memory, self.with_stack = record_shapes, profile_memory, with_stack
        _check_writable(self.trace_dir)
        if device_type == "cuda":
            import torch

            if not torch.cuda.is_available():
                raise KitError("profiling device_type 'cuda' asked for, but torch sees no CUDA device")
        self.trace_paths: list[Path] = []  # one per exported cycle, in order
        self._prof: Any = None
        self._steps_done = 0

    @property
    def total_steps(self) -> int:
        """How many step() calls the caller must make for every cycle to be recorded and exported."""
        return (self.wait + self.warmup + self.active) * self.repeat

    def __enter__(self) -> StepProfiler:
        from torch.profiler import ProfilerActivity, profile, schedule

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.device_type == "cuda" else [])
        self._prof = profile(
            activities=activities,
            schedule=schedule(wait=self.wait, warmup=self.warmup, active=self.active, repeat=self.repeat),
            on_trace_ready=self._export,
            record_shapes=self.record_shapes,
            profile_memory=self.profile_memory,
            with_stack=self.with_stack,
            acc_events=True,  # key_averages() then covers every cycle, not only the last one
        )
        self._prof.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._prof is not None:
            self._prof.__exit__(*exc)

    def step(self) -> None:
        """Mark the end of one training step (torch.profiler's step())."""
        if self._prof is None:
            raise KitError("StepProfiler.step() called outside its `with` block")
        self._prof.step()
        self._steps_done += 1

    def _export(self, prof: Any) -> None:
        """on_trace_ready: this cycle's trace -> trace_<k>.json.gz (json written, gzipped, then removed)."""
        k = len(self.trace_paths)
        final = self.trace_dir / f"trace_{k}.json.gz"
        raw = self.trace_dir / f".trace_{k}.tmp.json"
        partial = self.trace_dir / f".trace_{k}.json.gz.tmp"
        try:
            prof.export_chrome_trace(str(raw))
            with open(raw, "rb") as src, gzip.open(partial, "wb", compresslevel=6) as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            os.replace(partial, final)
        except OSError as e:
            raise KitError(f"could not write trace {final}: {e.strerror or type(e).__name__}") from None
        finally:
            for p in (raw, partial):
                p.unlink(missing_ok=True)
        self.trace_paths.append(final)

    def _recorded(self, what: str) -> Any:
        if self._prof is None or not self.trace_paths:
            raise KitError(
                f"{what}: nothing recorded yet; make total_steps={self.total_steps} step() calls inside the `with` block first"
            )
        return self._prof

    def op_table(
        self, sort_by: str = "self_device", k: int = 15, group_by_input_shape: bool = False, level: str = "all"
    ) -> list[dict]:
        """The top `k` rows of prof.key_averages() over the active steps of every recorded cycle.

        `level` says which rows compete: `op` the CPU-side rows (aten operators, runtime calls
        such as cudaLaunchKernel; annotations such as ProfilerStep* left out), `kernel` the
        device-side rows (kernels, memcpy, memset), `all` both. An operator's self device time
        is its kernels' time, so `all` sorted by self_device counts that time twice (the
        operator and its kernel): a table or chart of one level does not.

        Row keys: name, calls, self_cpu_ms, cpu_total_ms, self_device_ms, device_total_ms,
        self_cpu_share (of all self CPU time), self_device_share (of all device-side time, as
        torch's own table: kernel/memcpy/memset rows sum to 1, an operator row's share is that of
        the kernels it launched itself), cpu_memory_mb and device_memory_mb (self: allocated
        minus freed inside the op, may be negative), input_shapes ('' unless grouped by input
        shape), device_type ('cpu' for operators and annotations, 'cuda' for GPU activity),
        sorted_by (the key actually used) and sort_note (why it differs from `sort_by`, or '').
        GPU-side copies of annotations (ProfilerStep*, Optimizer.step#... on the GPU timeline)
        are left out: they are ranges, not GPU work, and would top a self_device sort.
        """
        if sort_by not in SORT_KEYS:
            raise KitError(f"op_table sort_by must be one of {', '.join(SORT_KEYS)}, got {sort_by!r}")
        if k < 1:
            raise KitError(f"op_table k must be >= 1, got {k}")
        if group_by_input_shape and not self.record_shapes:
            raise KitError("op_table group_by_input_shape needs StepProfiler(record_shapes=True)")
        if level not in LEVELS:
            raise KitError(f"op_table level must be one of {', '.join(LEVELS)}, got {level!r}")
        prof = self._recorded("op_table")
        from torch.autograd import DeviceType

        avgs = [
            a
            for a in prof.key_averages(group_by_input_shape=group_by_input_shape)
            if a.device_type == DeviceType.CPU or not a.is_user_annotation
        ]
        total_self_cpu_us = sum(a.self_cpu_time_total for a in avgs)
        # the denominator of torch's own "Self CUDA %": device-side rows only (an op row's self
        # device time is its kernels' time, which the kernel rows already hold)
        total_self_device_us = sum(a.self_device_time_total for a in avgs if a.device_type != DeviceType.CPU)
        if level == "op":
            avgs = [a for a in avgs if a.device_type == DeviceType.CPU and not a.is_user_annotation]
        elif level == "kernel":
            avgs = [a for a in avgs if a.device_type != DeviceType.CPU]
        used, note = sort_by, ""
        if sort_by == "self_device" and total_self_device_us <= 0:
            used = "self_cpu"
            note = (
                "sorted by self_cpu: no device time was recorded (CPU-only run)"
                if self.device_type == "cpu"
                else "sorted by self_cpu: the CUDA run recorded no device time (was CUPTI available?)"
            )
        rows = []
        for a in avgs:
            rows.append(
                {
                    "name": a.key,
                    "calls": a.count,
                    "self_cpu_ms": a.self_cpu_time_total / US_PER_MS,
                    "cpu_total_ms": a.cpu_time_total / US_PER_MS,
                    "self_device_ms": a.self_device_time_total / US_PER_MS,
                    "device_total_ms": a.device_time_total / US_PER_MS,
                    "self_cpu_share": a.self_cpu_time_total / total_self_cpu_us if total_self_cpu_us > 0 else 0.0,
                    "self_device_share": a.self_device_time_total / total_self_device_us if total_self_device_us > 0 else 0.0,
                    "cpu_memory_mb": a.self_cpu_memory_usage / MB,
                    "device_memory_mb": a.self_device_memory_usage / MB,
                    "input_shapes": str(a.input_shapes) if group_by_input_shape and a.input_shapes else "",
                    "device_type": "cpu" if a.device_type == DeviceType.CPU else self.device_type,
                    "sorted_by": used,
                    "sort_note": note,
                    "level": level,
                }
            )
        rows.sort(key=lambda r: r[f"{used}_ms"], reverse=True)
        return rows[:k]

    def step_breakdown(self) -> dict:
        """breakdown_from_events over the active steps of every exported cycle (see there for the keys)."""
        self._recorded("step_breakdown")
        is_gpu = self.device_type == "cuda"
        steps: list[dict] = []
        for path in self.trace_paths:
            _, cycle_steps = _steps_from_events(parse_trace(path), gpu=is_gpu)
            steps.extend(cycle_steps)
        out = _summarise(is_gpu, steps)
        out["traces"] = [str(p) for p in self.trace_paths]
        return out


DROPPED = ".dropped.json"  # beside a trace a committed reference does not keep: its digest and size


def dropped(path: Path) -> dict | None:
    """The record `PATH.dropped.json` leaves where a committed reference dropped the trace PATH
    (`orchestrate.py reference-reports --drop-traces`): {"sha256": 64 hex, "bytes": n, "why": ...}; None where
    there is none or it is not such a record."""
    import json
    import re

    stub = path.with_name(path.name + DROPPED)
    try:
        got = json.loads(bounded.read_bytes(stub, bounded.Caps(file_bytes=4096, out_bytes=4096)).decode("utf-8"))
    except (KitError, OSError, ValueError):
        return None
    ok = (
        isinstance(got, dict)
        and isinstance(got.get("sha256"), str)
        and re.fullmatch(r"[0-9a-f]{64}", got["sha256"]) is not None
        and isinstance(got.get("bytes"), int)
        and not isinstance(got.get("bytes"), bool)
        and got["bytes"] > 0
    )
    return got if ok else None
