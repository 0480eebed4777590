"""Noise and validity flags: what a reader must know before trusting a cell's timings.

Every row of a cell carries the same `flags` string (";"-joined, "" when clean), computed
once when the cell ends from its own timed steps and the telemetry sampled meanwhile:

    noisy(cv=23%)         coefficient of variation of the timed steps above CV_LIMIT
    outlier(epoch 1=2.1x) a timed step above OUTLIER_X times the median (kept, not dropped)
    cpu-throttled         the kernel counted thermal throttle events during the cell
    gpu-throttled(...)    NVML reported hardware slowdown, thermal or power-brake throttling
    gpu-shared(n)         n processes outside this run held the GPU during the cell
    cpu-shared(38%)       processes outside this run used more than CPU_SHARED_LIMIT of the machine's
                          logical CPUs during the cell (bench.measure.telemetry.CpuShare)

A flagged cell is marked in every table of the report (see `mark`).
"""

from __future__ import annotations

import statistics

CV_LIMIT = 0.10  # 10 %: above this a median of the steps is not a stable figure
OUTLIER_X = 1.5  # a step this many times the median is an outlier
MIN_STEPS = 3  # fewer timed steps than this: no CV or outlier verdict
# Other processes' share of every logical CPU, over the cell, above which its times are not this
# machine's alone: 10 %. A quiet 2-core VM's own daemons took 0-3 % here; one CPU hog beside a cell
# on 2 cores takes about 50 %, other engineers' work at load 4-6 took 60-100 %.
CPU_SHARED_LIMIT = 10.0
CPU_SHARED_REMEDY = (
    "other processes used the CPUs while cells ran (cpu-shared): their times are slower and noisier than this "
    "machine's; stop the other work (top shows it) and rerun those cells with --rerun, or run on a quiet machine"
)


def step_flags(values: list[float], unit: str = "step") -> list[str]:
    """Flags from one cell's timed values (epoch seconds, run seconds: larger = slower)."""
    vals = [float(v) for v in values if v is not None and v == v and v > 0]
    if len(vals) < MIN_STEPS:
        return []
    med = statistics.median(vals)
    flags = []
    cv = statistics.stdev(vals) / statistics.fmean(vals)
    if cv > CV_LIMIT:
        flags.append(f"noisy(cv={cv:.0%})")
    worst = max(range(len(vals)), key=lambda i: vals[i])
    if vals[worst] > OUTLIER_X * med:
        flags.append(f"outlier({unit} {worst + 1}={vals[worst] / med:.1f}x)")
    return flags


def telemetry_flags(t: dict) -> list[str]:
    flags = []
    if (t.get("cpu_thermal_throttle_events") or 0) > 0:
        flags.append(f"cpu-throttled({t['cpu_thermal_throttle_events']} events)")
    if t.get("gpu_throttle"):
        flags.append(f"gpu-throttled({','.join(t['gpu_throttle'])})")
    if (t.get("gpu_other_processes") or 0) > 0:
        flags.append(f"gpu-shared({t['gpu_other_processes']})")
    others = t.get("cpu_others_pct")
    if isinstance(others, int | float) and others > CPU_SHARED_LIMIT:
        flags.append(f"cpu-shared({others:.0f}%)")
    return flags


def cpu_shared_flag(flags: str | None) -> str:
    """The `cpu-shared(N%)` flag in FLAGS (a cell's ";"-joined flags), "" when there is none."""
    for f in (flags or "").split(";"):
        if "cpu-shared(" in f:
            return "cpu-shared(" + f.split("cpu-shared(", 1)[1]
    return ""


def cpu_shared_pct(flags: str | None) -> float:
    """Other processes' share of the CPUs that FLAGS' cpu-shared flag records, 0.0 when none."""
    try:
        return float(cpu_shared_flag(flags)[len("cpu-shared(") :].rstrip(")%") or 0.0)
    except ValueError:
        return 0.0


def cell_flags(timed: dict[str, list[float]], telemetry: dict | None, unit: str = "step") -> str:
    """The flags string for every row of a cell; TIMED maps a row backend to its timed values."""
    flags: list[str] = []
    for part, vals in timed.items():
        for f in step_flags(vals, unit):
            flags.append(f if len(timed) == 1 else f"{part}:{f}")
    flags += telemetry_flags(telemetry or {})
    return ";".join(flags)


def mark(label: str, flags: str | None) -> str:
    """A table label with the cell's flags, so no table shows a flagged figure unmarked."""
    return f"{label} ⚑" if flags else label


__all__ = [
    "CPU_SHARED_LIMIT",
    "CPU_SHARED_REMEDY",
    "CV_LIMIT",
    "MIN_STEPS",
    "OUTLIER_X",
    "cell_flags",
    "mark",
    "step_flags",
    "telemetry_flags",
]
