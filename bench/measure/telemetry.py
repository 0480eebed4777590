"""What the machine did while a cell ran: CPU clocks and throttling, who else used the CPUs (the
machine's busy share, this run's, other processes'; the load average), and on NVIDIA GPUs the
SM clock, throttle reasons and other processes on the device (NVML via nvidia-ml-py).

A child process (a thread where it cannot start) reads these every `interval_s` between
`start()` and `stop()`, so the cell's process runs no sampler thread; `summary()` is a flat dict
kept in system.json and read by bench.core.noise for the row flags. Every
source is optional: what cannot be read is recorded as unavailable with the reason, never
guessed.

Cost (`python -m lab.sampler_cost` on a shared 2-core AMD EPYC VM, psutil 7.2.2, 91 processes): a
sample reads psutil.cpu_freq() (here /proc/cpuinfo: 39.8 us of CPU; where cpufreq is in sysfs, one
file per logical CPU) and, on a GPU, NVML (not measured on this CPU host). Which of the GPU's
processes are this run's (_ours) takes a scan of every /proc/PID: 1,550 us of CPU a call here,
growing with the host's process count (read by a thread in the cell's process, every file read
was a GIL release the training thread paid for).
So a PID is judged once, at first sight (a sibling cell that starts later is a new PID, judged
then): the scan runs when a new process appears on the GPU, never every sample (NVML lists the
cell itself, so a scan per sample would cost 3.1 ms a second at 2 Hz).
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from pathlib import Path
from typing import Any

# NVML clock-event (throttle) reason bits that mean the GPU ran slower than it could for a
# reason outside the workload (nvml.h: nvmlClocksEventReason*). GPU idle and the application
# clock setting are not throttling; SW power cap is kept apart (it fires under normal load).
_GPU_THROTTLE_BITS = {
    0x0000000000000008: "hw-slowdown",
    0x0000000000000020: "sw-thermal",
    0x0000000000000040: "hw-thermal",
    0x0000000000000080: "hw-power-brake",
}
_GPU_POWER_CAP = 0x0000000000000004


def _thermal_throttle_count() -> int | None:
    """Sum of the kernel's per-CPU thermal throttle counters (x86 Linux), None when unreadable."""
    total, seen = 0, False
    for p in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/thermal_throttle/*_throttle_count"):
        try:
            total += int(p.read_text().strip())
            seen = True
        except (OSError, ValueError):
            continue
    return total if seen else None


class _Nvml:
    """The one GPU this process uses (CUDA_VISIBLE_DEVICES' first entry, else index 0)."""

    def __init__(self) -> None:
        import pynvml  # nvidia-ml-py

        self.nv = pynvml
        pynvml.nvmlInit()
        first = (os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0].strip() or "0"
        self.handle = (
            pynvml.nvmlDeviceGetHandleByUUID(first) if first.startswith("GPU-") else pynvml.nvmlDeviceGetHandleByIndex(int(first))
        )
        self.version = getattr(pynvml, "__version__", None) or _dist_version("nvidia-ml-py")

    def sample(self) -> dict:
        nv, h = self.nv, self.handle
        out: dict[str, Any] = {"sm_mhz": nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)}
        try:
            out["reasons"] = int(nv.nvmlDeviceGetCurrentClocksEventReasons(h))
        except (AttributeError, nv.NVMLError):
            out["reasons"] = int(nv.nvmlDeviceGetCurrentClocksThrottleReasons(h))
        try:
            out["temp_c"] = nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)
        except nv.NVMLError:
            pass
        try:
            out["pids"] = [p.pid for p in nv.nvmlDeviceGetComputeRunningProcesses(h)]
        except nv.NVMLError:
            out["pids"] = None
        return out

    def max_sm_mhz(self) -> int | None:
        try:
            return int(self.nv.nvmlDeviceGetMaxClockInfo(self.handle, self.nv.NVML_CLOCK_SM))
        except self.nv.NVMLError:
            return None


def _dist_version(name: str) -> str | None:
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:  # noqa: BLE001 - not installed as a distribution
        return None


def _ours(pids: list[int], pid: int | None = None) -> set[int]:
    """PIDs that belong to this run: process PID (default this one), its parent's other children
    (the sibling cells of an interleaved matrix, idle while they wait) and the parent itself. In a
    container NVML reports host PIDs, which match none of these: then nothing is excluded
    and the summary says the check could not tell."""
    import psutil

    me = psutil.Process(pid)
    mine = {me.pid}
    try:
        parent = me.parent()
        if parent is not None:
            mine.add(parent.pid)
            mine |= {c.pid for c in parent.children(recursive=True)}
    except psutil.Error:
        pass
    return mine


def _cell_cpus() -> list[int]:
    """The logical CPUs this process may run on (a Slurm task bound to one core: that core)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def _cpu_seconds(cpus: list[int] | None = None) -> tuple[float, float]:
    """(busy, total) CPU seconds since boot of the logical CPUS (default: every one), as psutil
    counts them (idle and iowait idle; a VM's steal busy: another guest had the core; guest time
    is inside user)."""
    import psutil

    per = psutil.cpu_times(percpu=True)
    busy = total = 0.0
    for i, t in enumerate(per):
        if cpus is not None and i not in cpus:
            continue
        all_ = sum(t) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)
        total += all_
        busy += all_ - t.idle - getattr(t, "iowait", 0.0)
    return busy, total


def _tree_seconds(root: int) -> float:
    """CPU seconds of ROOT and its descendants (reaped children included: a finished DataLoader
    worker's time is in its parent's children times)."""
    import psutil

    total = 0.0
    try:
        top = psutil.Process(root)
        procs = [top, *top.children(recursive=True)]
    except psutil.Error:
        return 0.0
    for p in procs:
        try:
            c = p.cpu_times()
        except psutil.Error:
            continue
        total += c.user + c.system + getattr(c, "children_user", 0.0) + getattr(c, "children_system", 0.0)
    return total


def _load() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):  # Windows, or no /proc/loadavg
        return None


class CpuShare:
    """Who used the cell's CPUs between start() and stop(): those CPUs (the logical CPUs the cell
    may run on: every one, or a Slurm task's bound core), this run (RUN_ROOT's process tree: the
    matrix that started the cell and its cells, or the cell alone), and the rest, other processes'
    share of those CPUs, which bench.core.noise flags above CPU_SHARED_LIMIT. A task on another
    core (a Slurm array's neighbour) is not counted: it does not take the cell's CPU. Two readings
    of cumulative counters, so nothing is sampled in between."""

    def __init__(self, run_root: int) -> None:
        self.run_root = run_root
        self.cpus = _cell_cpus()
        self.load_start = _load()
        self._t0 = (_cpu_seconds(self.cpus), _tree_seconds(run_root))

    def stop(self) -> None:
        if not hasattr(self, "_t1"):
            self._t1 = (_cpu_seconds(self.cpus), _tree_seconds(self.run_root))
            self.load_end = _load()

    def summary(self) -> dict[str, Any]:
        self.stop()
        ((b0, n0), r0), ((b1, n1), r1) = self._t0, self._t1
        total = n1 - n0
        out: dict[str, Any] = {
            "cpu_logical": os.cpu_count(),
            "cpu_share_cpus": len(self.cpus),
            "load_1m_start": None,
            "load_1m_end": None,
        }
        if self.load_start:
            out["load_1m_start"] = self.load_start[0]
        if self.load_end:
            out["load_1m_end"] = self.load_end[0]
        if total <= 0:
            out["note_cpu_share"] = "the CPU counters did not advance: no share measured"
            return out
        system, run = max(0.0, b1 - b0) / total, max(0.0, r1 - r0) / total
        out.update(
            cpu_system_pct=round(100 * min(system, 1.0), 1),
            cpu_run_pct=round(100 * min(run, 1.0), 1),
            cpu_others_pct=round(100 * min(max(0.0, system - run), 1.0), 1),
        )
        return out


class Telemetry:
    """The module docstring's readings every INTERVAL_S between start() and stop(), for the cell
    process PID (default this one). PROCESS: taken by a child process (bench.measure.outproc), so
    the measured process runs no sampler thread; a thread here where the child cannot start
    (`how` says which ran, `notes["sampler"]` why)."""

    def __init__(
        self, gpu: bool, interval_s: float = 0.5, run_root: int | None = None, process: bool = True, pid: int | None = None
    ):
        self.interval_s = interval_s
        self.samples: list[dict] = []
        self.notes: dict[str, str] = {}
        self.process = process
        self.how = ""
        self._pid = pid if pid is not None else os.getpid()
        self._child: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml: _Nvml | None = None
        self._ours: dict[int, bool] = {}  # NVML's PIDs judged so far: this run's or not
        self._throttle0 = _thermal_throttle_count()
        self._run_root = run_root if run_root is not None else os.getpid()
        self._share: CpuShare | None = None
        if gpu:
            try:
                self._nvml = _Nvml()
            except ImportError:
                self.notes["gpu"] = "nvidia-ml-py not installed: GPU clocks and throttling not sampled"
            except Exception as err:  # noqa: BLE001 - NVML missing or no permission: say so, run on
                self.notes["gpu"] = f"NVML unavailable ({type(err).__name__}: {err}): GPU clocks and throttling not sampled"

    def start(self) -> Telemetry:
        self._t0 = time.monotonic()
        try:
            self._share = CpuShare(self._run_root)
        except Exception as err:  # noqa: BLE001 - psutil cannot read the counters here: say so, run on
            self._share = None
            self.notes["cpu_share"] = f"CPU share not measured ({type(err).__name__}: {err})"
        if self.process:
            from bench.measure.outproc import ChildSampler, ChildSamplerError

            extra = ("1" if self._nvml is not None else "0", str(self._run_root), repr(self._t0))
            try:
                self._child = ChildSampler("telemetry", self._pid, self.interval_s, extra).start()
                self.how = "a child process"
                return self
            except ChildSamplerError as err:
                self._child = None
                self.how = "a thread"
                self.notes["sampler"] = f"read by a thread: {err}"
        else:
            self.how = "a thread"
        self._thread = threading.Thread(target=self._loop, name="telemetry", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._child is not None:
            from bench.measure.outproc import ChildSamplerError

            child, self._child = self._child, None
            try:
                got = child.stop()
                self.samples = [s for s in got["values"] if isinstance(s, dict)]
                self.notes.update({str(k): str(v) for k, v in (got.get("notes") or {}).items() if k not in self.notes})
            except (ChildSamplerError, AttributeError, TypeError) as err:
                self.notes["sampler"] = f"the child's samples were lost: {err}"
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._throttle1 = _thermal_throttle_count()
        if self._share is not None:
            self._share.stop()

    def sample(self) -> dict[str, Any]:
        """One reading now (t: seconds since start())."""
        import psutil

        s: dict[str, Any] = {"t": time.monotonic() - self._t0}
        try:
            f = psutil.cpu_freq()
            if f and f.current:
                s["cpu_mhz"] = float(f.current)
        except (OSError, NotImplementedError, AttributeError):
            pass
        if self._nvml is not None:
            try:
                s.update(self._nvml.sample())
            except Exception as err:  # noqa: BLE001 - keep what we have, note the failure once
                self.notes.setdefault("gpu_sample", f"{type(err).__name__}: {err}")
            # which of them are this run's, judged at first sight: a sibling cell that ends later is still ours
            if s.get("pids"):
                new = [p for p in s["pids"] if p not in self._ours]
                if new:  # the process scan only for a PID not judged before (see the module docstring)
                    mine = _ours(new, self._pid)
                    self._ours.update({p: p in mine for p in new})
                s["ours"] = sorted(p for p in s["pids"] if self._ours[p])
        return s

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.samples.append(self.sample())
            self._stop.wait(self.interval_s)

    def summary(self) -> dict:
        out: dict[str, Any] = {
            "samples": len(self.samples),
            "interval_s": self.interval_s,
            **{f"note_{k}": v for k, v in self.notes.items()},
        }
        if self._share is not None:
            out.update(self._share.summary())
        cpu = [s["cpu_mhz"] for s in self.samples if "cpu_mhz" in s]
        if cpu:
            out.update(cpu_mhz_min=min(cpu), cpu_mhz_median=statistics.median(cpu), cpu_mhz_max=max(cpu))
        else:
            out["note_cpu_freq"] = "CPU frequency not readable here (common in VMs and containers)"
        t1 = getattr(self, "_throttle1", None)
        if self._throttle0 is not None and t1 is not None:
            out["cpu_thermal_throttle_events"] = t1 - self._throttle0
        else:
            out["note_cpu_throttle"] = "no thermal_throttle counters in /sys (not x86 Linux, or a VM)"
        if self._nvml is not None:
            sm = [s["sm_mhz"] for s in self.samples if "sm_mhz" in s]
            if sm:
                out.update(gpu_sm_mhz_min=min(sm), gpu_sm_mhz_median=statistics.median(sm), gpu_sm_mhz_max=max(sm))
            out["gpu_sm_mhz_limit"] = self._nvml.max_sm_mhz()
            out["nvml_version"] = self._nvml.version
            reasons = 0
            for s in self.samples:
                reasons |= int(s.get("reasons", 0))
            out["gpu_throttle"] = sorted(name for bit, name in _GPU_THROTTLE_BITS.items() if reasons & bit)
            out["gpu_power_capped"] = bool(reasons & _GPU_POWER_CAP)
            temps = [s["temp_c"] for s in self.samples if "temp_c" in s]
            if temps:
                out["gpu_temp_c_max"] = max(temps)
            seen = {p for s in self.samples for p in (s.get("pids") or [])}
            if any(s.get("pids") is None for s in self.samples):
                out["note_gpu_processes"] = "NVML did not list the GPU's processes"
            mine = {p for s in self.samples for p in s.get("ours", [])}
            out["gpu_other_processes"] = len(seen - mine)
            if seen and not (seen & mine):
                out["note_gpu_processes"] = (
                    "NVML's PIDs are not this PID namespace's (a container?): other processes not told apart"
                )
                out["gpu_other_processes"] = None
        return out


__all__ = ["CpuShare", "Telemetry"]
