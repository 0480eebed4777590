"""Speed baselines: what `verify` holds a cell's speed to, on its own machine class.

A cell's speed figures are the study's (`Study.speed`: its throughput, and a latency or an
energy per sample where it measures one), one value per repeat. They are comparable only
between cells of one *speed class*:

  machine class  what the cell ran on, told by what it is, never by hostname: the CPU model and
                 the cores the cell could use (system.json `cpu_model`, `cpu_affinity`), and for
                 a GPU cell the GPU's name and how many it used (`world_size`, else its devices);
                 where the CPU's name names no model (`generic_cpu`: a VM's "AMD EPYC"), also its
                 microarchitecture and vector ISA (`cpu_arch`), when the cell recorded them;
  environment    what times the work besides the hardware: the runtime (native or container)
                 and the versions of the timing libraries (bench.core.provenance.TIMING_LIBS).
                 The image's content tag is left out: it changes with every edit of bench/.

A baseline entry records, per metric, every repeat's value, their median and their spread,
and the tolerance that spread gives (the rule, defined once here):

  spread     (max - min) / median over the repeats; with one repeat, the same over that
             repeat's timed steps (its epochs or runs: `Study.timed_values`), and the entry says so
  tolerance  max(FLOOR, 1 + SPREAD_K x spread, max / min), a factor: a cell fails when it is
             slower than the baseline's median by more than it (throughput below median /
             tolerance; a latency or an energy per sample above median x tolerance). The last
             term keeps every repeat the baseline was made of inside its own tolerance.

FLOOR (1.3) and SPREAD_K (2) were set before CI's repeated smokes were held to them (docs/METHODS.md
"Speed checks and history" says how those fared). The max / min term is there because on CI's
shared 2-core VM two smokes of one cell differed by up to 8x, and with two repeats 1 + 2 x
spread is below the ratio of their own values. A
cell faster than the baseline by more than its tolerance passes with a note (the baseline may
be stale). A cell of another class is never held to it: its line says that no speed baseline
exists for its class.
"""

from __future__ import annotations

import json
import re
import statistics
from typing import Any

from bench.core.errors import KitError
from bench.core.provenance import TIMING_LIBS
from bench.core.resultset import ResultCell
from bench.core.study import Speed, number

FLOOR = 1.3  # the smallest tolerance factor: no baseline is tighter than 30 %
SPREAD_K = 2.0  # tolerance = 1 + SPREAD_K x the baseline's relative spread (at least FLOOR)


def _study(name: str):
    from bench.core.registry import studies

    return studies().get(name)


# ---------------------------------------------------------------------------- classes
def generic_cpu(name: object) -> bool:
    """Whether a CPU model NAME names no model ("AMD EPYC", "Intel(R) Xeon(R) Processor @ 2.80GHz": a VM
    that hides it): machines of one such name differ in what they run. CI's 2-core "AMD EPYC" VMs
    are a Zen 3 (family 25 model 1, AVX2) on one draw and another EPYC on the next: the container
    smoke's MobileNetV2 loss read 2.3368 against the ci-smoke entry's 2.3483 (0.49 %, its same-class
    band 0.20 %), and its speeds 1.7-3.3x below the entry's, the same image and commit (2026-11-30)."""
    if not isinstance(name, str):
        return False
    return not re.search(r"\d", re.sub(r"@\s*[\d.]+\s*[GM]Hz", "", name))


def machine_class(cell: ResultCell) -> dict:
    """{'cpu', 'cores', 'gpu', 'gpus'} of CELL, and 'cpu_arch' where the CPU's name is generic and
    system.json records its microarchitecture (`bench.core.machine.cpu_arch`); a generic name without
    it (a cell from before it was recorded) is a class of its own, never matched to a recorded one.
    KitError (one line) when system.json does not say."""
    sysinfo = cell.system or {}
    cpu = sysinfo.get("cpu_model")
    cores = number(sysinfo.get("cpu_affinity")) or number(sysinfo.get("cpu_logical_cores"))
    if not isinstance(cpu, str) or not cpu.strip() or not cores:
        raise KitError(f"{cell.dir}: machine class unknown (system.json lacks cpu_model or cpu_affinity)")
    out: dict[str, Any] = {"cpu": cpu.strip(), "cores": int(cores), "gpu": None, "gpus": 0}
    arch = sysinfo.get("cpu_arch")
    if generic_cpu(out["cpu"]) and isinstance(arch, str) and arch.strip():
        out["cpu_arch"] = arch.strip()
    s = _study(cell.study)
    backend = str(cell.first.get("backend") or cell.spec.get("backend") or "")
    platform = s.backends[backend].platform if s is not None and backend in s.backends else "cpu"
    if platform != "cpu":
        g = sysinfo.get("gpu")
        gpu: dict = g if isinstance(g, dict) else {}
        out["gpu"] = str(gpu.get("name") or cell.device)
        world = max((int(w) for r in cell.rows if (w := number(r.get("world_size")))), default=0)
        out["gpus"] = world or len(cell.spec.get("devices") or []) or 1
    return out


def machine_class_or_none(cell: ResultCell) -> dict | None:
    try:
        return machine_class(cell)
    except KitError:
        return None


def environment(cell: ResultCell) -> dict:
    """{'runtime', 'libraries'} of CELL: native or container, and the timing libraries' versions."""
    got = cell.system.get("libraries")
    libs: dict = got if isinstance(got, dict) else {}
    return {
        "runtime": str(cell.system.get("runtime") or "native"),
        "libraries": {k: str(libs[k]) for k in TIMING_LIBS if isinstance(libs.get(k), str)},
    }


def key(d: dict | None) -> str:
    return json.dumps(d or {}, sort_keys=True)


def class_label(mc: dict) -> str:
    arch = f" ({mc['cpu_arch']})" if mc.get("cpu_arch") else ""
    cpu = f"{mc.get('cpu')}{arch}, {mc.get('cores')} cores"
    return f"{mc.get('gpus')}x {mc.get('gpu')} ({cpu})" if mc.get("gpu") else cpu


def env_label(env: dict) -> str:
    libs = env.get("libraries") or {}
    shown = [f"{k} {libs[k]}" for k in ("torch", "numba", "numpy", "cupy-cuda12x", "cupy-cuda13x") if k in libs]
    return ", ".join([str(env.get("runtime"))] + shown)


# ---------------------------------------------------------------------------- figures
def figures(cell: ResultCell, part: str) -> dict[str, Speed]:
    """Metric -> CELL's speed figure for PART (the study's Study.speed)."""
    s = _study(cell.study)
    return s.speed(cell.ok_rows, part) if s is not None else {}


def step_times(cell: ResultCell, part: str) -> list[float]:
    """CELL's timed steps' seconds for PART (Study.timed_values)."""
    s = _study(cell.study)
    return [v for v in (s.timed_values(cell.ok_rows).get(part, []) if s else []) if v > 0]


def tolerance(values: list[float], floor: float = FLOOR) -> float:
    """The rule above, over VALUES (the repeats' figures, or one repeat's step times); FLOOR is
    the set's (`verify --make-baseline --speed-floor`, default FLOOR)."""
    spread = (max(values) - min(values)) / statistics.median(values)
    return round(max(floor, 1.0 + SPREAD_K * spread, max(values) / min(values)), 3)


def quiet_values(cells: list[ResultCell], part: str) -> tuple[dict[str, tuple[Speed, list[float]]], list[ResultCell]]:
    """(metric -> (its first figure, every value), the repeats used) over CELLS, the repeats of
    one configuration that ran alone (a cpu-shared repeat left out)."""
    got: dict[str, tuple[Speed, list[float]]] = {}
    quiet = [c for c in cells if not cpu_shared(c)]
    for c in quiet:
        for name, sp in figures(c, part).items():
            got.setdefault(name, (sp, []))[1].append(sp.value)
    return got, quiet


def record(cells: list[ResultCell], part: str, floor: float = FLOOR) -> tuple[dict, list[str]]:
    """(metric -> its baseline record, why a metric got none) over the repeats CELLS of one
    configuration, environment and machine class."""
    got, quiet = quiet_values(cells, part)
    if cells and not quiet:
        return {}, [f"every repeat ran beside other work ({cpu_shared(cells[0])}): no speed to hold others to"]
    out, skipped = {}, []
    for name, (sp, values) in sorted(got.items()):
        med = statistics.median(values)
        rec: dict[str, Any] = {"unit": sp.unit, "higher_is_better": sp.higher_is_better, "values": values}
        over, steps = (values, "repeats") if len(values) >= 2 else (step_times(quiet[0], part), "")
        if len(over) < 2:
            skipped.append(f"{name}: one repeat of one timed step, no spread")
            continue
        spread = (max(over) - min(over)) / statistics.median(over)
        rec.update(
            median=med,
            spread=round(spread, 6),
            spread_from=steps or f"{len(over)} timed steps of one repeat",
            tolerance=tolerance(over, floor),
        )
        if floor != FLOOR:
            rec["floor"] = floor
        out[name] = rec
    return out, skipped


# ---------------------------------------------------------------------------- checking
def cpu_shared(cell: ResultCell) -> str:
    """Why CELL's times are not its machine's alone ("" when they are): other processes (or a
    VM's steal) took more than bench.core.noise.CPU_SHARED_LIMIT of the CPUs while it ran (its
    `cpu-shared` flag). Such a cell's speed says how busy the machine was, not how fast the code
    is: it is neither passed nor failed against a baseline, and its line says so."""
    from bench.core.noise import cpu_shared_flag, cpu_shared_pct

    f = cpu_shared_flag(cell.flags)
    return (
        f"other processes used {cpu_shared_pct(f):.0f}% of the CPUs while it ran ({f}); rerun it on a quiet machine" if f else ""
    )


def slower_by(value: float, rec: dict) -> float:
    """How many times slower VALUE is than the baseline's median (< 1: faster)."""
    med = float(rec["median"])
    return med / value if rec.get("higher_is_better", True) else value / med


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"


def median_figures(cells: list[ResultCell], part: str) -> tuple[dict[str, Speed], int]:
    """(metric -> the median over CELLS' figures, how many repeats it is of): CELLS as
    `quiet_values` takes them, each metric over the repeats that have it."""
    got, quiet = quiet_values(cells, part)
    return {n: sp._replace(value=statistics.median(v)) for n, (sp, v) in got.items()}, len(quiet)


def check(
    cell: ResultCell, part: str, entries: list[dict], repeats: list[ResultCell] | None = None
) -> tuple[list[str], list[str]]:
    """(failures, what passed or why nothing was checked) of CELL's speed for PART against the
    entries of its configuration that hold a speed record (any set, environment or class).
    REPEATS (CELL and the other repeats of its configuration, `verify --speed median`): the
    median over the repeats that ran alone is held to the baseline's median instead of CELL's
    own figure, with the same tolerance."""
    try:
        mc = machine_class(cell)
    except KitError as err:
        return [], [f"no speed check: {err}".replace(f"{cell.dir}: ", "")]
    have = figures(cell, part)
    if not have:  # nothing timed to hold (roofline's batch sweep: img/s per batch size only)
        return [], []
    of = ""
    if repeats and len(repeats) > 1:
        own = key(environment(cell))
        same = [r for r in repeats if key(machine_class_or_none(r)) == key(mc) and key(environment(r)) == own]
        have, n = median_figures(same, part)
        if not n:
            return [], [f"speed not judged: every repeat of this configuration ran beside other work ({cpu_shared(cell)})"]
        of = f" (median of {n} repeats)"
    elif shared := cpu_shared(cell):
        return [], [f"speed not judged: {shared}"]
    env = environment(cell)
    mine = [
        e for e in entries if e.get("speed") and key(e.get("machine_class")) == key(mc) and key(e.get("environment")) == key(env)
    ]
    if not mine:
        return _cross_class(mc, env, have, of, entries)
    why, info = [], []
    for e in mine:
        tag = f"[{e['set']}]"
        for name, rec in sorted(e["speed"].items()):
            sp = have.get(name)
            if sp is None:
                why.append(f"no {name} to hold to the speed baseline {tag}")
                continue
            f, tol = slower_by(sp.value, rec), float(rec["tolerance"])
            what = f"{name} {_fmt(sp.value)} {rec['unit']}{of} vs baseline {_fmt(float(rec['median']))}"
            if f > tol:
                why.append(f"{what}: {f:.2f}x slower, beyond the tolerance {tol:.2f}x {tag}")
            elif 1 / f > tol:
                info.append(f"{what}: {1 / f:.2f}x faster, beyond the tolerance {tol:.2f}x (a stale baseline?) {tag}")
            else:
                info.append(f"{name} {1 / f:.2f}x the baseline's speed{of} (tolerance {tol:.2f}x)")
    return why, info


def _cross_class(mc: dict, env: dict, have: dict[str, Speed], of: str, entries: list[dict]) -> tuple[list[str], list[str]]:
    """A class with no speed entry of its own (CI landed on a VM type no baseline was made on) held
    to the entries of the other CPU classes of its configuration (same cores, no GPU, same
    environment): each metric to the slowest class's median, at that entry's tolerance times the
    gap measured between the classes (the largest median over the smallest: 1.13-2.04x between a
    2-core EPYC and a 2-core Xeon in ci-smoke), so a machine as far from the slowest class as the
    classes are from each other passes, and one slower by more fails. Needs two classes: one alone
    measures no gap."""
    none = [f"no speed baseline for this class ({class_label(mc)}; {env_label(env)})"]
    if mc.get("gpu"):
        return [], none
    peers = [
        e
        for e in entries
        if e.get("speed")
        and isinstance(e.get("machine_class"), dict)
        and not e["machine_class"].get("gpu")
        and e["machine_class"].get("cores") == mc.get("cores")
        and key(e.get("environment")) == key(env)
    ]
    classes = {key(e["machine_class"]) for e in peers}
    if len(classes) < 2:
        return [], none
    why, info = [], []
    for name, sp in sorted(have.items()):
        recs = [(e, e["speed"][name]) for e in peers if isinstance(e["speed"].get(name), dict)]
        if len({key(e["machine_class"]) for e, _ in recs}) < 2:
            info.append(f"{name}: {none[0]}: fewer than two other classes hold it")
            continue
        meds = [float(r["median"]) for _, r in recs]
        if min(meds) <= 0:
            info.append(f"{name}: {none[0]}: another class's median is not above 0")
            continue
        higher = recs[0][1].get("higher_is_better", True)
        e, rec = (min if higher else max)(recs, key=lambda er: float(er[1]["median"]))  # the slowest class's
        gap = max(meds) / min(meds)
        tol = float(rec["tolerance"]) * gap
        f = slower_by(sp.value, rec)
        what = (
            f"{name} {_fmt(sp.value)} {rec['unit']}{of} held cross-class (no entry for {class_label(mc)}) to the slowest "
            f"of {len({key(x['machine_class']) for x, _ in recs})} classes, {class_label(e['machine_class'])} "
            f"{_fmt(float(rec['median']))}, at its tolerance x the gap between the classes {gap:.2f}x = {tol:.2f}x [{e['set']}]"
        )
        if f > tol:
            why.append(f"{what}: {f:.2f}x slower, beyond the tolerance {tol:.2f}x")  # the gate's recheck reads this
        else:
            info.append(f"{what}: {1 / f:.2f}x its speed")
    return why, info


__all__ = [
    "FLOOR",
    "SPREAD_K",
    "check",
    "cpu_shared",
    "class_label",
    "env_label",
    "environment",
    "generic_cpu",
    "machine_class",
    "median_figures",
    "record",
    "tolerance",
]
