"""Energy per sample from hardware counters, net of an idle baseline, for every cell's timed windows.

    meter = Meter(Counters("cuda", gpus=[0]))   # the cell entry point: before any device is touched
    meter.measure_idle(2.0)                     # idle power per counter, this process doing nothing
    use(meter)
    a = read(); <timed region, device synced>; b = read()
    row |= fields(a, b, samples, "cuda")        # energy_j_per_sample, energy_net_j, ... or the reason why not

Counters, each read through a maintained library or the kernel's own interface, never a constant:

    gpu<i>        NVIDIA: nvmlDeviceGetTotalEnergyConsumption (nvidia-ml-py), mJ since the driver
                  loaded (Volta and newer); the GPUs the cell uses (NVML indices)
    package-<n>   Linux x86: RAPL package zones of the powercap sysfs (intel-rapl:<n>, Intel and AMD
    dram-<n>      Zen), uJ, and each package's dram subzone where the kernel has one
    soc           Apple silicon: zeus-apple-silicon's AppleEnergyMonitor (IOReport, no root): CPU,
                  GPU, ANE and DRAM of the SoC in one figure, read as consecutive windows

Which counters stand for a cell's device (`DOMAINS`): its GPUs on cuda, the CPU packages and their
DRAM on cpu, the SoC on mps; a figure is formed only when every counter of that kind was read at
both ends (a sum over some packages would read as all of them). A counter that went backwards
(NVML: the driver reloaded) or wrapped (RAPL wraps at max_energy_range_uj: one wrap cannot be told
from two) makes that window's figure not measured, with the reason; a net energy at or below
zero (the idle baseline above the load) is not measured either. What no counter covers is said
(`missing`), never filled with a TDP or a fixed wattage. RAPL is machine-wide: it counts every
process on the host, which the note says.

A window too short to measure gives no figure (`window_check`, the one rule, asked by this writer and
by every reader of rows, old ones too: `row_energy`): NVML's energy counter moves about every 100 ms,
so on an H200 a 0.3 s window read 787 W, above the board's 700 W limit, and integrating polled power
instead under-counts a burst by 42 % at 1 s and 4 % at 10 s. A figure needs a counter window of at
least MIN_WINDOW_S and no more energy than the boards' power limit (nvmlDeviceGetEnforcedPowerLimit,
recorded as energy_limit_w) allows over it; otherwise the row says "too short to measure" with the
window's length, or what else is wrong, never a figure.
"""

from __future__ import annotations

import math
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

POWERCAP = Path("/sys/class/powercap")
DOMAINS = {"cuda": "gpu", "cpu": "cpu", "mps": "soc"}  # platform -> which counters are its device's
KIND_TEXT = {"gpu": "GPU board (NVML)", "cpu": "CPU packages + DRAM (RAPL)", "soc": "Apple SoC (zeus-apple-silicon)"}
MIN_WINDOW_S = 1.0  # the shortest window a figure comes from: ten of NVML's ~100 ms counter updates
TOO_SHORT = "too short to measure"
SHORT_WHY = f"NVML's energy counter moves about every 100 ms: a figure needs a window of {MIN_WINDOW_S:g} s or more"


def _line(err: BaseException) -> str:
    return f"{type(err).__name__}: {' '.join(str(err).split())}"


def _kind(domain: str) -> str:
    return "gpu" if domain.startswith("gpu") else "soc" if domain == "soc" else "cpu"


@dataclass(frozen=True)
class Reading:
    t: float  # time.monotonic() s
    joules: dict[str, float]  # counter -> J since its origin (only the counters read)
    errors: dict[str, str] = field(default_factory=dict)  # counter -> why this read failed


def rapl_zones(root: Path, dram: bool = True) -> tuple[dict[str, tuple[Path, int]], str | None]:
    """(counter -> (its energy_uj file, its wrap range in uJ), why none) for the RAPL `package-N`
    zones under ROOT (psys would count a package twice; core and uncore are parts of it) and,
    with DRAM, each package's dram subzone; every file read once, so a root-only counter is
    one reason here, never a failure later."""
    zones: dict[str, tuple[Path, int]] = {}
    for pkg in sorted(root.glob("intel-rapl:*")):
        if pkg.name.count(":") != 1:
            continue
        try:
            if not (pkg / "name").read_text().strip().startswith("package"):
                continue
            n = pkg.name.split(":")[1]
            zones[f"package-{n}"] = (pkg / "energy_uj", int((pkg / "max_energy_range_uj").read_text()))
            for sub in sorted(pkg.glob(f"intel-rapl:{n}:*")) if dram else []:
                if (sub / "name").read_text().strip() == "dram":
                    zones[f"dram-{n}"] = (sub / "energy_uj", int((sub / "max_energy_range_uj").read_text()))
        except (OSError, ValueError):
            continue
    if not zones:
        return {}, f"no RAPL package zones under {root} (not Linux on x86, or a VM or container without powercap)"
    try:
        for path, _ in zones.values():
            int(path.read_text())
    except PermissionError:
        return {}, "RAPL energy_uj is root-only here (kernels since CVE-2020-8694): CPU energy not measured"
    except (OSError, ValueError) as err:
        return {}, f"RAPL energy_uj not readable ({_line(err)}): CPU energy not measured"
    return zones, None


class _Rapl:
    """RAPL package and dram zones under ROOT (intel-rapl:<n> and its dram subzone)."""

    def __init__(self, root: Path):
        zones, self.note = rapl_zones(root)
        self.zones: dict[str, tuple[Path, float]] = {k: (p, span / 1e6) for k, (p, span) in zones.items()}  # J

    def read(self, out: dict[str, float], errors: dict[str, str]) -> None:
        for name, (path, _) in self.zones.items():
            try:
                out[name] = int(path.read_text()) / 1e6
            except (OSError, ValueError) as err:
                errors[name] = _line(err)


class _Nvml:
    """The cell's GPUs by NVML index (nvidia-ml-py)."""

    def __init__(self, gpus: list[int]):
        import pynvml  # nvidia-ml-py

        self.nv = pynvml
        pynvml.nvmlInit()
        self.handles = {f"gpu{i}": pynvml.nvmlDeviceGetHandleByIndex(i) for i in gpus}
        for h in self.handles.values():
            pynvml.nvmlDeviceGetTotalEnergyConsumption(h)  # refused (pre-Volta, no permission): raise now
        self.limits_w: dict[str, float] = {}  # counter -> the board's enforced power limit, W (where NVML gives it)
        for name, h in self.handles.items():
            try:
                limit = pynvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1e3  # mW
            except Exception:  # noqa: BLE001 - NVMLError (not supported, no permission): that bound is not checked
                continue
            if isinstance(limit, float) and math.isfinite(limit) and limit > 0:
                self.limits_w[name] = limit

    def read(self, out: dict[str, float], errors: dict[str, str]) -> None:
        for name, h in self.handles.items():
            try:
                out[name] = self.nv.nvmlDeviceGetTotalEnergyConsumption(h) / 1e3  # mJ
            except Exception as err:  # noqa: BLE001 - NVMLError and its subclasses: this read is missing
                errors[name] = _line(err)


class _Apple:
    """zeus-apple-silicon: consecutive windows summed into one counter of the SoC."""

    def __init__(self) -> None:
        from zeus_apple_silicon import AppleEnergyMonitor

        self.mon = AppleEnergyMonitor()
        self.total = 0.0
        self.k = 0
        self.mon.begin_window("kit0")

    def read(self, out: dict[str, float], errors: dict[str, str]) -> None:
        try:
            m = self.mon.end_window(f"kit{self.k}")
            self.k += 1
            self.mon.begin_window(f"kit{self.k}")
            parts = (getattr(m, a, None) for a in ("cpu_total_mj", "gpu_mj", "ane_mj", "dram_mj"))
            self.total += sum(float(p) for p in parts if isinstance(p, (int, float))) / 1e3
            out["soc"] = self.total
        except Exception as err:  # noqa: BLE001 - the monitor's own error: this read is missing
            errors["soc"] = _line(err)


def _version(dist: str) -> str | None:
    try:
        from importlib.metadata import version

        return version(dist)
    except Exception:  # noqa: BLE001 - not installed as a distribution
        return None


class Counters:
    """Every energy counter this process can read for PLATFORM's device (and the host's CPU)."""

    def __init__(self, platform: str, gpus: list[int] | None = None, rapl_root: Path = POWERCAP):
        self.platform = platform
        self.missing: dict[str, str] = {}  # kind -> why it has no counter here
        self.sources: dict[str, str] = {}  # kind -> what read it (library and version)
        self.spans: dict[str, float] = {}  # counter -> its wrap range in J (RAPL)
        self.limits_w: dict[str, float] = {}  # counter -> its board's power limit in W (NVML), where known
        self._nvml: _Nvml | None = None
        self._apple: _Apple | None = None
        if platform == "cuda":
            if not gpus:
                self.missing["gpu"] = "no NVML index for the cell's GPU (NVML missing, MIG, or an order NVML cannot map)"
            else:
                try:
                    self._nvml = _Nvml(gpus)
                    self.limits_w.update(self._nvml.limits_w)
                    self.sources["gpu"] = f"nvmlDeviceGetTotalEnergyConsumption (nvidia-ml-py {_version('nvidia-ml-py')})"
                except ImportError:
                    self.missing["gpu"] = "nvidia-ml-py not installed: GPU energy not measured"
                except Exception as err:  # noqa: BLE001 - NVML refused (pre-Volta GPU, no permission, no driver)
                    self.missing["gpu"] = f"NVML energy counter unavailable ({_line(err)})"
        if platform == "mps":
            try:
                self._apple = _Apple()
                self.sources["soc"] = f"AppleEnergyMonitor (zeus-apple-silicon {_version('zeus-apple-silicon')})"
            except ImportError:
                self.missing["soc"] = "zeus-apple-silicon not installed: Apple SoC energy not measured"
            except Exception as err:  # noqa: BLE001 - IOReport refused
                self.missing["soc"] = f"zeus-apple-silicon unavailable ({_line(err)})"
        self._rapl = _Rapl(rapl_root)
        if self._rapl.note:
            self.missing["cpu"] = self._rapl.note
        else:
            self.sources["cpu"] = f"RAPL powercap sysfs ({', '.join(self._rapl.zones)}; machine-wide)"
            self.spans.update({k: span for k, (_, span) in self._rapl.zones.items()})

    @property
    def any(self) -> bool:
        return bool(self.sources)

    def read(self) -> Reading:
        out: dict[str, float] = {}
        errors: dict[str, str] = {}
        t = time.monotonic()
        if self._nvml is not None:
            self._nvml.read(out, errors)
        if self._apple is not None:
            self._apple.read(out, errors)
        self._rapl.read(out, errors)
        return Reading(t, out, errors)


def delta(a: Reading, b: Reading, name: str) -> tuple[float | None, str | None]:
    """(J counter NAME rose between A and B, None) or (None, why not)."""
    why = b.errors.get(name) or a.errors.get(name)
    if why:
        return None, f"{name}: read failed ({why})"
    if name not in a.joules or name not in b.joules:
        return None, f"{name}: not read at both ends of the window"
    d = b.joules[name] - a.joules[name]
    if d < 0:
        if name.startswith(("package", "dram")):
            return None, f"{name}: the RAPL counter wrapped ({a.joules[name]:.3f} J then {b.joules[name]:.3f} J)"
        return None, f"{name}: the counter went backwards ({a.joules[name]:.3f} J then {b.joules[name]:.3f} J)"
    return d, None


def _finite(v: Any) -> float | None:
    """V as a float when it is a real, finite number (not a bool): rows are read as untrusted input."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def short_text(lo: float, hi: float, n: int = 1) -> str:
    """'too short to measure: a 0.60 s window (...)', or for N windows 'N windows of 0.57-0.60 s'."""
    a, b = f"{lo:.2f}", f"{hi:.2f}"
    span = f"a {a} s window" if n == 1 else f"{n} windows of " + (f"{a}-{b} s" if a != b else f"{a} s each")
    return f"{TOO_SHORT}: {span} ({SHORT_WHY})"


def window_check(window_s: Any, joules: Any, limit_w: Any) -> str | None:
    """Why a counter window of WINDOW_S s over which the counters rose JOULES J gives no energy figure,
    or None when it may give one. The one rule, asked by the writer (Meter.window) and by the readers
    of rows old and new (row_energy):

        WINDOW_S not a length      its length is not recorded: too short cannot be ruled out
        WINDOW_S < MIN_WINDOW_S    too short to measure, with its length
        JOULES > LIMIT_W x WINDOW  more than the boards' power limit allows: a counter behind its load

    JOULES is the gross energy (the net where only that is recorded: below the gross, so a net above
    the bound is a gross above it); LIMIT_W the boards' power limit in W, None where it is not known
    (a CPU or SoC counter, NVML without the limit): then only the length is checked."""
    w = _finite(window_s)
    if w is None:
        return "the window's length is not recorded (rows made before the kit recorded it): too short cannot be ruled out"
    if w < 0:
        return f"the window's length ({w:.3g} s) is not a length"
    if w < MIN_WINDOW_S:
        return short_text(w, w)
    j, limit = _finite(joules), _finite(limit_w)
    if j is not None and limit is not None and limit > 0 and j > limit * w:
        return (
            f"above the power limit: {j / w:,.0f} W over its {w:.2f} s window against the boards' {limit:,.0f} W "
            "(a counter that lagged its load)"
        )
    return None


# ---- reading a window's energy back from a row, old rows too -------------------------------------
# Where rows keep one window's energy, first match wins: the kit's fields (Meter.window), then the
# profile study's own sampler's, whose rows before the kit's fields carried only these.
PER_SAMPLE_KEYS = ("energy_j_per_sample", "j_per_img")  # J per sample, net of the idle baseline
# every figure a row derives per sample from one window's energy: the above, samples per J, and the
# profile's per GPU ("gpu0_j_per_img"): where the window gives no figure, none of them is one
DERIVED_PER_SAMPLE = re.compile(r"(energy_j_per_sample|j_per_img|img_per_j|gpu\d{1,3}_(j_per_img|img_per_j))")


def per_sample_keys(row: dict) -> list[str]:
    """ROW's keys that hold a per-sample energy figure of its window (DERIVED_PER_SAMPLE)."""
    return [k for k in row if isinstance(k, str) and DERIVED_PER_SAMPLE.fullmatch(k)]


WINDOW_KEYS = ("energy_window_s", "telemetry_window_s")  # s
GROSS_KEYS = {"gpu": ("energy_gross_j", "gpu_energy_j"), "cpu": ("energy_gross_j", "cpu_energy_j"), "soc": ("energy_gross_j",)}
NET_KEYS = ("energy_net_j",)
NOTE_KEYS = {"gpu": ("energy_note", "gpu_energy_note"), "cpu": ("energy_note", "cpu_energy_note"), "soc": ("energy_note",)}
SOURCE_KEY = "energy_source"  # the profile's: "GPU (NVML energy counter)", "GPU (NVML power samples: ...)", "CPU ..."
GPU_SOURCE = re.compile(r"gpu\d{1,3}_energy_source")  # the profile's per GPU: "counter (...)", "trapezoid integral ..."
GPU_GROSS = re.compile(r"gpu\d{1,3}_energy_j")


@dataclass(frozen=True)
class RowEnergy:
    """One timed window's energy as a row recorded it, under window_check: the figure or why none."""

    j_per_sample: float | None  # net J per sample; None: see why
    why: str = ""  # why no figure ("" with one)
    domain: str = ""  # what the counters cover (KIND_TEXT), "" where the row does not say
    window_s: float | None = None
    carried: bool = False  # the row carries energy fields at all (a phase without a timed window does not)


def _first(row: dict, keys: tuple[str, ...]) -> tuple[str | None, Any]:
    key = next((k for k in keys if k in row), None)
    return key, row.get(key) if key else None


def power_limit_w(system: Any) -> float | None:
    """The board's power limit system.json's gpu info records (NVML's `power_limit_w`, nvidia-smi's
    `power_limit`: '700.00 W'), or None: for rows made before the kit recorded energy_limit_w. It is the
    first GPU nvidia-smi lists, which is the cell's on every host the kit has run on."""
    gpu = system.get("gpu") if isinstance(system, dict) else None
    if not isinstance(gpu, dict):
        return None
    for key in ("power_limit_w", "power_limit"):
        v = gpu.get(key)
        if isinstance(v, str):
            m = re.fullmatch(r"\s*([0-9]{1,6}(?:\.[0-9]{1,6})?)\s*W?\s*", v[:40])
            v = float(m.group(1)) if m else None
        f = _finite(v)
        if f is not None and f > 0:
            return f
    return None


def row_energy(row: Any, system: Any = None, gpus: int = 1, platform: str | None = None) -> RowEnergy:
    """The energy of the window ROW recorded (any study's, any age; untrusted: a missing or garbage field
    is a reason, never a crash), judged by window_check as the writer judges it today: a figure only from
    an energy counter (not polled power, which under-counts a burst) over a window of at least
    MIN_WINDOW_S, within the power limit (the row's energy_limit_w, else SYSTEM's GPU power limit x
    GPUS, the GPUs the window covers). PLATFORM: the part's (DOMAINS), for a row that names no domain."""
    if not isinstance(row, dict):
        return RowEnergy(None)
    source = str(row[SOURCE_KEY]) if isinstance(row.get(SOURCE_KEY), str) else ""
    domain = str(row["energy_domain"]) if isinstance(row.get("energy_domain"), str) else ""
    if not domain and source[:3] in ("GPU", "CPU"):
        domain = KIND_TEXT["gpu" if source.startswith("GPU") else "cpu"]
    named = next((k for k, text in KIND_TEXT.items() if domain == text), None)
    kind = named or ("gpu" if domain.startswith("GPU") else "cpu" if domain else DOMAINS.get(str(platform), "cpu"))
    window = _finite(_first(row, WINDOW_KEYS)[1])
    key, value = _first(row, PER_SAMPLE_KEYS)
    carried = key is not None or any(k in row for k in NOTE_KEYS[kind])
    j = _finite(value)
    if j is None or j <= 0:
        note = next((row[k] for k in NOTE_KEYS[kind] if isinstance(row.get(k), str) and row[k]), "")
        note = " ".join(note[:500].split()).removeprefix("not measured: ")
        return RowEnergy(None, note or ("no figure recorded" if carried else ""), domain, window, carried)
    polled = [v for k, v in row.items() if isinstance(k, str) and GPU_SOURCE.fullmatch(k) and not str(v).startswith("counter")]
    if kind == "gpu" and (polled or "power samples" in source):
        how = " ".join(str(polled[0] if polled else source)[:200].split())
        return RowEnergy(None, f"not from the energy counter ({how}): polled power under-counts a burst", domain, window, True)
    gross = next((g for k in GROSS_KEYS[kind] if (g := _finite(row.get(k))) is not None), None)
    joules = gross if gross is not None else _finite(_first(row, NET_KEYS)[1])
    limit = _finite(row.get("energy_limit_w"))
    if limit is None and kind == "gpu" and (board := power_limit_w(system)) is not None:
        n = sum(1 for k in row if isinstance(k, str) and GPU_GROSS.fullmatch(k)) or (
            gpus if isinstance(gpus, int) and gpus > 0 else 1
        )
        limit = board * n
    bad = window_check(window, joules, limit)
    return RowEnergy(None, bad, domain, window, True) if bad else RowEnergy(j, "", domain, window, True)


def why_none(got: list[RowEnergy]) -> str:
    """Why windows GOT (rows that carry energy fields) give no figure, in one line: the too-short ones
    as one clause with their lengths, every other reason once."""
    short = sorted(e.window_s for e in got if e.why.startswith(TOO_SHORT) and e.window_s is not None)
    rest = [e.why for e in got if e.why and not e.why.startswith(TOO_SHORT)]
    parts = [short_text(short[0], short[-1], len(short))] if short else []
    return "; ".join(dict.fromkeys(parts + rest))


class Meter:
    """COUNTERS with the idle power of each, for net energy over windows of one cell."""

    def __init__(self, counters: Counters):
        self.counters = counters
        self.idle_w: dict[str, float] = {}
        self.idle_note: str | None = "no idle baseline measured"
        self.idle_s = 0.0

    def measure_idle(self, seconds: float) -> None:
        """Idle power per counter over SECONDS of this process doing nothing (before the work)."""
        if not self.counters.any or seconds <= 0:
            self.idle_note = "no counter here" if not self.counters.any else "idle baseline off (KIT_IDLE_S=0)"
            return
        a = self.counters.read()
        time.sleep(seconds)
        b = self.counters.read()
        w = b.t - a.t
        self.idle_s = w
        why = []
        for name in sorted(set(a.joules) | set(a.errors) | set(b.errors)):
            d, err = delta(a, b, name)
            if d is None:
                why.append(str(err))
            else:
                self.idle_w[name] = d / w
        self.idle_note = "; ".join(why) or None

    def read(self) -> Reading:
        return self.counters.read()

    def window(self, a: Reading, b: Reading, samples: float, platform: str) -> dict[str, Any]:
        """Row fields for the window A..B that trained SAMPLES on PLATFORM's device."""
        kind = DOMAINS.get(platform, "cpu")
        out: dict[str, Any] = {
            "energy_window_s": b.t - a.t,
            "energy_domain": KIND_TEXT[kind],
            "energy_gross_j": None,
            "energy_net_j": None,
            "energy_idle_w": None,
            "energy_limit_w": None,
            "energy_j_per_sample": None,
            "energy_note": None,
        }
        if kind in self.counters.missing:
            out["energy_note"] = f"not measured: {self.counters.missing[kind]}"
            return out
        names = sorted({n for n in (*a.joules, *a.errors, *b.errors) if _kind(n) == kind})
        if not names:
            out["energy_note"] = f"not measured: no {KIND_TEXT[kind]} counter was read"
            return out
        gross, idle, why = 0.0, 0.0, []
        for n in names:
            d, err = delta(a, b, n)
            if d is None:
                why.append(str(err))
                continue
            gross += d
            if n in self.idle_w:
                idle += self.idle_w[n]
            else:
                why.append(f"{n}: no idle baseline ({self.idle_note})")
        if why:
            out["energy_note"] = "not measured: " + "; ".join(why)
            return out
        limits = [self.counters.limits_w.get(n) for n in names]
        limit = sum(x for x in limits if x is not None) if limits and None not in limits else None
        net = gross - idle * (b.t - a.t)
        out.update(energy_gross_j=gross, energy_idle_w=idle, energy_limit_w=limit)
        bad = window_check(b.t - a.t, gross, limit)
        if bad:  # the rule for every window (window_check): no figure from it, its length and gross kept
            out["energy_note"] = bad
            return out
        if net <= 0:
            out["energy_note"] = (
                f"not measured: the idle baseline ({idle:.1f} W) is at or above the load "
                f"({gross / max(b.t - a.t, 1e-9):.1f} W) over this window"
            )
            return out
        out["energy_net_j"] = net
        if samples > 0:
            out["energy_j_per_sample"] = net / samples
        if kind == "cpu":
            out["energy_note"] = "RAPL is machine-wide: other processes on this host are counted too"
        return out

    def describe(self) -> dict[str, Any]:
        """What system.json records: the counters, their library, the idle baseline, what is missing."""
        return {
            "sources": self.counters.sources,
            "missing": self.counters.missing,
            "limits_w": self.counters.limits_w,
            "idle_w": self.idle_w,
            "idle_s": self.idle_s,
            "idle_note": self.idle_note,
        }


# ---- the process's meter (set by the cell entry point; none in a rank of torchrun or a bare open())
_CURRENT: Meter | None = None
NO_METER = "not measured: no energy meter in this process (a rank under torchrun, or the study opened outside a cell)"


def use(meter: Meter | None) -> None:
    global _CURRENT
    _CURRENT = meter


def read() -> Reading | None:
    """A reading of every counter of the process's meter, or None without one. Call it after the
    device is synced, outside the timed region."""
    return _CURRENT.read() if _CURRENT is not None else None


def fields(a: Reading | None, b: Reading | None, samples: float, platform: str) -> dict[str, Any]:
    """The energy row fields of the window A..B (`Meter.window`: a figure only where window_check
    allows one), or why there are none."""
    if _CURRENT is None or a is None or b is None:
        return {"energy_j_per_sample": None, "energy_net_j": None, "energy_note": NO_METER}
    return _CURRENT.window(a, b, samples, platform)


def idle_seconds() -> float:
    """KIT_IDLE_S (default 2 s): how long the idle baseline waits where a counter exists."""
    from bench.core.errors import KitError

    raw = os.environ.get("KIT_IDLE_S", "2")
    try:
        v = float(raw)
    except ValueError:
        raise KitError(f"KIT_IDLE_S={raw!r}: give the idle baseline's seconds as a number (0 turns it off)") from None
    if not 0 <= v < 600:
        raise KitError(f"KIT_IDLE_S={raw!r}: the idle baseline takes 0 to 600 s")
    return v


__all__ = [
    "DOMAINS",
    "MIN_WINDOW_S",
    "NO_METER",
    "TOO_SHORT",
    "Counters",
    "Meter",
    "Reading",
    "RowEnergy",
    "delta",
    "fields",
    "idle_seconds",
    "power_limit_w",
    "read",
    "row_energy",
    "short_text",
    "use",
    "why_none",
    "window_check",
]
