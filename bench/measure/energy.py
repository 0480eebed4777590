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
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

POWERCAP = Path("/sys/class/powercap")
DOMAINS = {"cuda": "gpu", "cpu": "cpu", "mps": "soc"}  # platform -> which counters are its device's
KIND_TEXT = {"gpu": "GPU board (NVML)", "cpu": "CPU packages + DRAM (RAPL)", "soc": "Apple SoC (zeus-apple-silicon)"}


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
        self._nvml: _Nvml | None = None
        self._apple: _Apple | None = None
        if platform == "cuda":
            if not gpus:
                self.missing["gpu"] = "no NVML index for the cell's GPU (NVML missing, MIG, or an order NVML cannot map)"
            else:
                try:
                    self._nvml = _Nvml(gpus)
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
        net = gross - idle * (b.t - a.t)
        out.update(energy_gross_j=gross, energy_idle_w=idle)
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
    """The energy row fields of the window A..B (`Meter.window`), or why there are none."""
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


__all__ = ["DOMAINS", "NO_METER", "Counters", "Meter", "Reading", "delta", "fields", "idle_seconds", "read", "use"]
