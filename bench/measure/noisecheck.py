"""How noisy this host is for a comparison, before a run: `orchestrate.py noise`, and one line
at the top of every matrix.

    spread      the process-to-process spread of a fixed probe (bench/measure/noiseprobe.py):
                PROCS fresh processes one after another, each one figure; the spread is the
                standard deviation of their log (about the coefficient of variation), what a
                repeat of a cell on this host varies by
    state       what drives it: CPU frequency governor and turbo, steal time and the load over
                the probe, other processes busy on the CPU; on NVIDIA GPUs (NVML, nvidia-ml-py)
                the SM and memory clocks against their limits, persistence mode, other
                processes on the device and the clock throttle reasons
    resolves    the smallest difference a comparison of two such cells resolves at 3, 6 and 10
                repeats: the median half-width of the interval the kit prints at that many
                repeats (the range of 3, 75 %; the 95 % bootstrap interval from 6,
                bench.core.stats), and of the sequential run's 95 % confidence sequence at 10
                and 20 rounds (bench.core.seqstats), for paired repeats each drawn with this
                spread (log-normal, SIMS simulated comparisons, a fixed seed). A true difference
                smaller than that reads as undecided at that many repeats.

Standard library, numpy and scipy on the host; psutil where present; NVML only where a GPU is.
Nothing here trains or imports torch in this process.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PROCS = 10  # `orchestrate.py noise`: probe processes per device
MATRIX_PROCS = 4  # the matrix's line: a shorter look
SIMS = 200
_SEED = 20261126


# ---- state -------------------------------------------------------------------------------------
def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def cpu_state() -> dict[str, Any]:
    """Governor(s) and turbo as the kernel exposes them (None: not exposed, as in most VMs)."""
    govs = sorted({g for p in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cpufreq/scaling_governor") if (g := _read(str(p)))})
    turbo: str | None = None
    no_turbo = _read("/sys/devices/system/cpu/intel_pstate/no_turbo")
    boost = _read("/sys/devices/system/cpu/cpufreq/boost")
    if no_turbo is not None:
        turbo = "off" if no_turbo == "1" else "on"
    elif boost is not None:
        turbo = "on" if boost == "1" else "off"
    return {"governor": ",".join(govs) or None, "turbo": turbo, "cores": os.cpu_count()}


def _stat() -> list[int] | None:
    line = (_read("/proc/stat") or "").splitlines()[:1]
    parts = line[0].split() if line else []
    return [int(x) for x in parts[1:]] if parts and parts[0] == "cpu" else None


class Window:
    """Steal time, load and the other busy processes over an interval (start() ... stop())."""

    def start(self) -> Window:
        self.t0, self.stat0 = time.monotonic(), _stat()
        self.procs = None
        try:
            import psutil

            me = os.getpid()
            self.procs = {}
            for p in psutil.process_iter(["pid", "name"]):
                if p.pid != me:
                    try:
                        self.procs[p.pid] = (p, p.cpu_times())
                    except psutil.Error:
                        pass
        except ImportError:
            pass
        return self

    def stop(self, ours: set[int] | None = None) -> dict[str, Any]:
        dt = time.monotonic() - self.t0
        out: dict[str, Any] = {"window_s": round(dt, 2)}
        s1 = _stat()
        if self.stat0 and s1 and len(s1) > 7:
            d = [b - a for a, b in zip(self.stat0, s1)]
            total = sum(d[:8]) or 1
            out["steal_pct"] = round(100 * d[7] / total, 2)
            out["busy_pct"] = round(100 * (total - d[3] - d[4]) / total, 1)
        try:
            out["load1"] = round(os.getloadavg()[0], 2)
        except OSError:
            pass
        if self.procs is not None:
            import psutil

            busy = []
            skip = (ours or set()) | {os.getpid()}
            for pid, (p, t0) in self.procs.items():
                if pid in skip:
                    continue
                try:
                    t1 = p.cpu_times()
                    share = (t1.user + t1.system - t0.user - t0.system) / max(dt, 1e-6)
                    if share > 0.10:
                        busy.append((share, p.info.get("name") or str(pid)))
                except psutil.Error:
                    continue
            busy.sort(reverse=True)
            out["other_busy"] = [f"{name} {share:.0%}" for share, name in busy[:5]]
            out["other_busy_cores"] = round(sum(s for s, _ in busy), 2)
        return out


def gpu_state() -> list[dict[str, Any]] | str:
    """Per GPU: clocks against their limits, persistence mode, other processes, throttle
    reasons (NVML); a string saying why not where there is none or NVML cannot be read."""
    try:
        import pynvml  # nvidia-ml-py
    except ImportError:
        return _smi_state()
    try:
        pynvml.nvmlInit()
    except Exception as err:  # noqa: BLE001 - no driver, no GPU
        return f"no NVIDIA GPU answers NVML ({type(err).__name__})"
    from bench.measure.telemetry import _GPU_POWER_CAP, _GPU_THROTTLE_BITS

    out = []
    try:
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            g: dict[str, Any] = {"index": i, "name": str(pynvml.nvmlDeviceGetName(h))}
            nv = pynvml
            for key, fn, args in (
                ("sm_mhz", nv.nvmlDeviceGetClockInfo, (h, nv.NVML_CLOCK_SM)),
                ("sm_mhz_max", nv.nvmlDeviceGetMaxClockInfo, (h, nv.NVML_CLOCK_SM)),
                ("mem_mhz", nv.nvmlDeviceGetClockInfo, (h, nv.NVML_CLOCK_MEM)),
                ("persistence", nv.nvmlDeviceGetPersistenceMode, (h,)),
                ("processes", nv.nvmlDeviceGetComputeRunningProcesses, (h,)),
                ("temp_c", nv.nvmlDeviceGetTemperature, (h, nv.NVML_TEMPERATURE_GPU)),
            ):
                try:
                    got = fn(*args)
                    g[key] = len(got) if key == "processes" else bool(got) if key == "persistence" else got
                except Exception:  # noqa: BLE001 - a field this driver or GPU does not give
                    g[key] = None
            try:
                bits = int(pynvml.nvmlDeviceGetCurrentClocksEventReasons(h))
            except Exception:  # noqa: BLE001 - older bindings name it the throttle reasons
                try:
                    bits = int(pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(h))
                except Exception:  # noqa: BLE001
                    bits = 0
            g["throttle"] = sorted(n for b, n in _GPU_THROTTLE_BITS.items() if bits & b) + (
                ["sw-power-cap"] if bits & _GPU_POWER_CAP else []
            )
            out.append(g)
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass
    return out


def _smi_state() -> list[dict[str, Any]] | str:
    """gpu_state's fields from nvidia-smi where nvidia-ml-py is not installed (a dev venv)."""
    from bench.measure.telemetry import _GPU_POWER_CAP, _GPU_THROTTLE_BITS

    fields = "index,name,clocks.sm,clocks.max.sm,clocks.mem,persistence_mode,temperature.gpu,clocks_throttle_reasons.active,uuid"
    try:
        q = subprocess.run(
            ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=20
        )
        apps = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=gpu_uuid,pid", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.SubprocessError):
        return "no nvidia-ml-py and no nvidia-smi: no GPU state"
    if q.returncode != 0 or not q.stdout.strip():
        return "nvidia-smi lists no GPU"

    def num(s: str) -> int | None:
        try:
            return int(float(s))
        except ValueError:
            return None

    out = []
    for line in q.stdout.strip().splitlines():
        f = [x.strip() for x in line.split(",")]
        if len(f) < 9:
            continue
        try:
            bits = int(f[7], 16)
        except ValueError:
            bits = 0
        out.append(
            {
                "index": num(f[0]),
                "name": f[1],
                "sm_mhz": num(f[2]),
                "sm_mhz_max": num(f[3]),
                "mem_mhz": num(f[4]),
                "persistence": f[5].lower() == "enabled",
                "processes": None if apps.returncode else sum(x.split(",")[0].strip() == f[8] for x in apps.stdout.splitlines()),
                "temp_c": num(f[6]),
                "throttle": sorted(n for b, n in _GPU_THROTTLE_BITS.items() if bits & b)
                + (["sw-power-cap"] if bits & _GPU_POWER_CAP else []),
                "source": "nvidia-smi",
            }
        )
    return out or "nvidia-smi lists no GPU"


# ---- the probe ---------------------------------------------------------------------------------
def probe(kind: str, procs: int) -> tuple[list[float], str]:
    """PROCS fresh processes of the probe, one after another: (their figures, "" or why none)."""
    from bench.core.child import child_env

    values: list[float] = []
    why = ""
    for _ in range(procs):
        try:
            r = subprocess.run(
                [sys.executable, "-m", "bench.measure.noiseprobe", kind],
                capture_output=True,
                text=True,
                timeout=120,
                env=child_env(),
            )
            got: dict[str, Any] = (
                json.loads(r.stdout.strip().splitlines()[-1]) if r.stdout.strip() else {"error": r.stderr.strip()[-200:]}
            )
        except (OSError, subprocess.SubprocessError, ValueError) as err:
            got = {"error": f"{type(err).__name__}: {err}"}
        v = got.get("per_s") if isinstance(got, dict) else None
        if isinstance(v, (int, float)) and math.isfinite(v) and v > 0:
            values.append(float(v))
        else:
            why = str(got.get("error") or "no figure")
            break
    return values, why


def spread(values: list[float]) -> float | None:
    """Standard deviation of the log figures (about the CV for small spreads); None below 2."""
    if len(values) < 2:
        return None
    return statistics.stdev(math.log(v) for v in values)


def resolves(sd: float, ns: tuple[int, ...] = (3, 6, 10), rounds: tuple[int, ...] = (10, 20)) -> dict[str, float | None]:
    """The median half-width, as a fraction of the ratio, of the interval the kit prints for two
    cells whose repeats vary by SD (log scale): 'n3' the range of 3, 'n6' and 'n10' the 95 %
    bootstrap interval (bench.core.stats' method: scipy.stats.bootstrap, percentile, paired),
    'cs10' and 'cs20' the sequential 95 % confidence sequence (None where it is unbounded)."""
    import numpy as np
    from scipy.stats import bootstrap

    from bench.core.stats import MIN_CI_REPEATS

    rng = np.random.default_rng(_SEED)
    out: dict[str, float | None] = {}
    for n in ns:
        a = np.exp(rng.normal(0.0, sd, (SIMS, n)))
        b = np.exp(rng.normal(0.0, sd, (SIMS, n)))
        if n < MIN_CI_REPEATS:
            r = a / b
            half = (r.max(axis=1) - r.min(axis=1)) / 2
        else:
            res = bootstrap(
                (a, b),
                lambda x, y, axis=-1: np.median(x, axis=axis) / np.median(y, axis=axis),
                paired=True,
                vectorized=True,
                n_resamples=999,
                method="percentile",
                axis=-1,
                random_state=rng,
            )
            half = (res.confidence_interval.high - res.confidence_interval.low) / 2
        out[f"n{n}"] = float(np.median(half))
    try:
        from bench.core import seqstats

        for k in rounds:
            halves = []
            for _ in range(SIMS // 2):
                d = rng.normal(0.0, sd * math.sqrt(2), k)
                s = seqstats.paired({i: math.exp(x) for i, x in enumerate(d)}, {i: 1.0 for i in range(k)})
                halves.append(math.inf if s.lo is None or s.hi is None else (s.hi - s.lo) / 2)
            med = float(np.median(halves))
            out[f"cs{k}"] = med if math.isfinite(med) else None
    except Exception:  # noqa: BLE001 - without ville the fixed-n figures still stand
        pass
    return out


# ---- the check ---------------------------------------------------------------------------------
def check(procs: int = PROCS, gpu: bool = True) -> dict[str, Any]:
    """The whole check: state, the CPU probe's spread and, where a GPU is, the GPU probe's."""
    out: dict[str, Any] = {"cpu": cpu_state(), "procs": procs}
    w = Window().start()
    values, why = probe("cpu", procs)
    out["window"] = w.stop()
    out["probes"] = {"cpu": _probe_out(values, why)}
    g = gpu_state() if gpu else "not asked"
    out["gpus"] = g
    if gpu and isinstance(g, list) and g:
        gv, gwhy = probe("gpu", procs)
        out["probes"]["gpu"] = _probe_out(gv, gwhy)
    return out


def _probe_out(values: list[float], why: str) -> dict[str, Any]:
    sd = spread(values)
    return {
        "values": [round(v, 3) for v in values],
        "spread": sd,
        "resolves": resolves(sd) if sd is not None else {},
        "why": why,
    }


def _pct(x: float | None) -> str:
    if x is None:
        return "– (unbounded)"
    return f"±{100 * x:.1f}%" if x <= 1 else f"more than {1 + x:.0f}x either way"


def probe_text(name: str, p: dict) -> str:
    if p.get("spread") is None:
        return f"{name} probe: {p.get('why') or 'fewer than 2 processes'}"
    r = p["resolves"]
    seq = f"; sequential 95% CS {_pct(r.get('cs10'))} at 10 rounds, {_pct(r.get('cs20'))} at 20" if "cs10" in r else ""
    return (
        f"{name} probe spread {100 * p['spread']:.1f}% over {len(p['values'])} processes: resolves "
        f"{_pct(r.get('n3'))} at 3 repeats (range, 75%), {_pct(r.get('n6'))} at 6, {_pct(r.get('n10'))} at 10 (95% CI)" + seq
    )


def state_text(d: dict) -> str:
    c, w = d["cpu"], d.get("window", {})
    bits = [f"{c['cores']} cores", f"governor {c['governor'] or 'not exposed'}", f"turbo {c['turbo'] or 'not exposed'}"]
    if "steal_pct" in w:
        bits.append(f"steal {w['steal_pct']:.1f}%")
    if "load1" in w:
        bits.append(f"load {w['load1']:.1f}")
    if w.get("other_busy"):
        bits.append(f"other processes busy {w['other_busy_cores']:.1f} cores ({', '.join(w['other_busy'][:3])})")
    elif "other_busy" in w:
        bits.append("no other process busy")
    g = d.get("gpus")
    if isinstance(g, list):
        for x in g:
            thr = ",".join(x.get("throttle") or []) or "none"
            bits.append(
                f"GPU{x['index']} {x['name']}: SM {x.get('sm_mhz')}/{x.get('sm_mhz_max')} MHz, persistence "
                f"{'on' if x.get('persistence') else 'off'}, {x.get('processes')} other processes, throttle {thr}"
            )
    elif isinstance(g, str) and g != "not asked":
        bits.append(g)
    return "; ".join(bits)


def lines(d: dict) -> list[str]:
    out = [f"state: {state_text(d)}"]
    out += [probe_text(k.upper(), p) for k, p in d["probes"].items()]
    return out


def matrix_line(repeated: bool, platforms: list[str]) -> str:
    """The matrix's first line: the state, and the CPU probe's spread where the run repeats a cell."""
    d: dict[str, Any] = {"cpu": cpu_state()}
    w = Window().start()
    if repeated:
        values, why = probe("cpu", MATRIX_PROCS)
        d["probes"] = {"cpu": _probe_out(values, why)}
    else:
        time.sleep(0.2)
    d["window"] = w.stop()
    d["gpus"] = gpu_state() if "cuda" in platforms else "not asked"
    text = f"noise: {state_text(d)}"
    if repeated:
        text += "; " + probe_text("CPU", d["probes"]["cpu"])
    else:
        text += "; spread not probed (one repeat a cell: nothing is compared)"
    return text + " (orchestrate.py noise: the full check)"


__all__ = ["PROCS", "Window", "check", "cpu_state", "gpu_state", "lines", "matrix_line", "probe", "resolves", "spread"]
