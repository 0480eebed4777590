"""GPU and CPU telemetry at a fixed rate (profile study, seed 004), with time marks.

    s = TelemetrySampler(nvml_indices_for_visible(), hz=10).start()
    s.mark("timed-start"); train(); s.mark("timed-end")
    s.stop(); s.write_csv(out / "telemetry.csv"); row |= s.summary("timed-start", "timed-end")

One sample (a flat dict) every 1/hz s from a daemon thread, paced against the start time
(Event.wait to the next tick; a late tick is skipped, never made up in a burst), plus one
sample taken by the thread when it starts and one when it is stopped, so every mark made
between start() and stop() lies between two samples. Columns (t_s: monotonic s since start):

  per GPU i (NVML, nvidia-ml-py)
    gpu{i}_util_pct       nvmlDeviceGetUtilizationRates .gpu (see NVML_MEANING: one kernel at a time reads 100)
    gpu{i}_mem_util_pct   .memory: share of the sample period device memory was read or written
    gpu{i}_mem_used_mb    nvmlDeviceGetMemoryInfo .used, MB = 10^6 bytes (every process on the GPU)
    gpu{i}_temp_c         nvmlDeviceGetTemperature (GPU die)
    gpu{i}_power_w        NVML_FI_DEV_POWER_INSTANT where the driver has it, else nvmlDeviceGetPowerUsage
                          (a 1 s average on Ampere and newer, GA100 excepted); which one: power_fields
    gpu{i}_sm_mhz, gpu{i}_mem_mhz   nvmlDeviceGetClockInfo
    gpu{i}_clock_reasons  nvmlDeviceGetCurrentClocksEventReasons bits (ThrottleReasons on old bindings)
    gpu{i}_energy_mj      nvmlDeviceGetTotalEnergyConsumption: mJ since the driver loaded (Volta+);
                          once per SLOW_S (a slow call), empty in the rows between
  CPU (psutil; "tree" = this process and its descendants, e.g. DataLoader workers)
    cpu_system_pct        every logical CPU of the machine, 0-100
    cpu_process_pct       the tree, psutil's scale (100 = one core busy), from cpu_process_s deltas; a
                          process found late (the tree is listed once per SLOW_S) adds only what it
                          ran after it was found (not its whole past in one interval); the report
                          shows it as a share of every logical CPU and flags a sample above that
    cpu_process_s         the tree's CPU seconds (user + system, reaped children included)
    cpu_core_min_pct, cpu_core_max_pct   the least and most busy logical CPU
    rss_mb, threads       summed over the tree (a page shared after fork counts once per process: RSS over-counts)
    processes_system      len(psutil.pids())
    cpu_mhz               psutil.cpu_freq().current, read once per SLOW_S (empty in the rows between:
                          it reads one file per CPU); absent where unreadable
    rapl_uj               RAPL package energy, summed over packages, wraparound undone
  sample_ms               wall time this sample took, waits for the GIL included (summary():
                          sampler_cpu_pct is the thread's own CPU, start to stop; 100 = one core)

Cost (`python -m lab.sampler_cost`, a shared 2-core AMD EPYC VM, psutil 7.2.2, no GPU): a
CPU-only sample takes 150-170 us of CPU (1.5-1.7 ms a second at 10 Hz, 0.17 % of a core); a
GIL-bound loop of tiny torch ops ran 0.93-1.00x of its time without the thread (7 and 5 interleaved
runs of 2 s; noise there +-10 %): nothing to remove on the CPU side. NVML reads: a GPU's to measure.

What cannot be read is never guessed: NVML missing -> notes["gpu"]; a field NVML refuses
(Not Supported, No Permission, Function Not Found) -> notes["gpu{i}_<field>"] once, then not
asked again; a GPU whose every call fails (GPU is lost) -> notes["gpu{i}"], its earlier
samples kept; RAPL absent or root-only -> notes["rapl"]. The first sample has no CPU
percentages (nothing to compare with): None there.
"""

from __future__ import annotations

import bisect
import csv
import io
import os
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from bench.core.rows import atomic_write_text
from bench.measure.memory import MB
from bench.measure.telemetry import _GPU_POWER_CAP, _GPU_THROTTLE_BITS, _dist_version

POWER_INSTANT = "instant"
POWER_AVERAGE = "average (nvmlDeviceGetPowerUsage, 1 s window on recent GPUs)"
GPU_FIELDS = ("util_pct", "mem_util_pct", "mem_used_mb", "temp_c", "power_w", "sm_mhz", "mem_mhz", "clock_reasons", "energy_mj")
CPU_FIELDS = (
    "cpu_system_pct",
    "cpu_process_pct",
    "cpu_process_s",
    "cpu_core_min_pct",
    "cpu_core_max_pct",
    "rss_mb",
    "threads",
    "processes_system",
    "cpu_mhz",
    "rapl_uj",
)
# Read once per SLOW_S (and in the first and last sample), not every sample: the process tree
# is listed again (a scan of every /proc/PID: 2.6 ms of CPU with 185 processes on the H100
# host), cpu_mhz (one file per CPU) and gpu{i}_energy_mj (4.1 ms of CPU a call there).
SLOW_S = 1.0
LOST_AFTER = 3  # samples in a row in which every NVML call of a GPU failed: the GPU is taken as gone
POWERCAP = Path("/sys/class/powercap")
_PROC_STAT = os.path.exists("/proc/self/stat")  # Linux: per-process reads from /proc/PID/stat (one pread each)
_CLK_TCK = os.sysconf("SC_CLK_TCK") if _PROC_STAT else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if _PROC_STAT else 4096
_FIELD_VALUE = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}  # nvmlValueType_t


def _line(err: BaseException) -> str:
    return f"{type(err).__name__}: {' '.join(str(err).split())}"


def _nvml() -> Any:
    """pynvml, initialised (NVML counts nvmlInit calls; each user shuts down once)."""
    import pynvml  # nvidia-ml-py

    pynvml.nvmlInit()
    return pynvml


def nvml_indices_for_visible() -> list[int]:
    """NVML indices of the GPUs CUDA_VISIBLE_DEVICES lets this process see (every GPU when unset).

    Entries are indices or GPU- UUIDs (a unique prefix is matched); as in CUDA, an invalid
    entry hides itself and every later one. NVML numbers GPUs in PCI bus order, CUDA fastest
    first unless CUDA_DEVICE_ORDER=PCI_BUS_ID, so integer entries are refused where the two
    orders can differ (GPUs of different models). Raises RuntimeError with a one-line reason
    when NVML is missing or the mapping cannot be told; the caller records it.
    """
    try:
        nv = _nvml()
    except ImportError as err:
        raise RuntimeError("nvidia-ml-py not installed: GPUs not mapped to NVML indices") from err
    except Exception as err:  # noqa: BLE001 - NVML library missing, driver not loaded, no permission
        raise RuntimeError(f"NVML unavailable ({_line(err)}): GPUs not mapped to NVML indices") from err
    try:
        n = int(nv.nvmlDeviceGetCount())
        env = os.environ.get("CUDA_VISIBLE_DEVICES")
        if env is None:
            return list(range(n))
        handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
        uuids = [str(nv.nvmlDeviceGetUUID(h)) for h in handles]
        out: list[int] = []
        by_index = False
        for entry in (e.strip() for e in env.split(",")):
            if entry.startswith("MIG-"):
                raise RuntimeError(
                    f"CUDA_VISIBLE_DEVICES={env}: MIG instances are not sampled (NVML has no utilisation per instance)"
                )
            if entry.startswith("GPU-"):
                hits = [i for i, u in enumerate(uuids) if u.startswith(entry)]
                if len(hits) != 1:
                    break
                index = hits[0]
            else:
                try:
                    index = int(entry)
                except ValueError:
                    break
                if not 0 <= index < n:
                    break
                by_index = True
            if index not in out:
                out.append(index)
        if by_index and os.environ.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID":
            names = {str(nv.nvmlDeviceGetName(h)) for h in handles}
            if len(names) > 1:
                raise RuntimeError(
                    f"CUDA_VISIBLE_DEVICES={env} gives indices, the GPUs differ ({', '.join(sorted(names))}) and "
                    "CUDA_DEVICE_ORDER is not PCI_BUS_ID: CUDA's order may not be NVML's; set it, or give GPU UUIDs"
                )
        return out
    finally:
        nv.nvmlShutdown()


class _Gpu:
    """One NVML device: its cached handle and the reads it answers (refused ones dropped at probe)."""

    def __init__(self, nv: Any, index: int, notes: dict[str, str]):
        self.nv, self.index, self.notes = nv, index, notes
        self.prefix = p = f"gpu{index}_"
        self.handle = h = nv.nvmlDeviceGetHandleByIndex(index)
        self.lost = False
        self._failing = 0
        self._refused = tuple(
            c
            for c in (
                getattr(nv, n, None) for n in ("NVMLError_NotSupported", "NVMLError_NoPermission", "NVMLError_FunctionNotFound")
            )
            if c
        )
        self._gone = getattr(nv, "NVMLError_GpuIsLost", None)
        k_util, k_mutil, k_mem, k_temp, k_power, k_sm, k_mmhz, k_reasons, k_energy = (p + f for f in GPU_FIELDS)

        def util(s: dict) -> None:
            u = nv.nvmlDeviceGetUtilizationRates(h)
            s[k_util], s[k_mutil] = u.gpu, u.memory

        def mem(s: dict) -> None:
            s[k_mem] = nv.nvmlDeviceGetMemoryInfo(h).used / MB

        def temp(s: dict) -> None:
            s[k_temp] = nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)

        fi = (nv.NVML_FI_DEV_POWER_INSTANT,) if hasattr(nv, "NVML_FI_DEV_POWER_INSTANT") else None

        def power_instant(s: dict) -> None:
            v = nv.nvmlDeviceGetFieldValues(h, fi)[0]
            if v.nvmlReturn != 0:  # each field carries its own status; the call itself succeeds
                raise nv.NVMLError(v.nvmlReturn)
            s[k_power] = getattr(v.value, _FIELD_VALUE[v.valueType]) / 1000  # mW

        def power_average(s: dict) -> None:
            s[k_power] = nv.nvmlDeviceGetPowerUsage(h) / 1000  # mW

        def clocks(s: dict) -> None:
            s[k_sm] = nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)
            s[k_mmhz] = nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM)

        def reasons_event(s: dict) -> None:
            s[k_reasons] = int(nv.nvmlDeviceGetCurrentClocksEventReasons(h))

        def reasons_throttle(s: dict) -> None:  # the older, deprecated name of the same call
            s[k_reasons] = int(nv.nvmlDeviceGetCurrentClocksThrottleReasons(h))

        def energy(s: dict) -> None:
            s[k_energy] = nv.nvmlDeviceGetTotalEnergyConsumption(h)  # mJ

        self.power_field: str | None = None
        scratch: dict[str, Any] = {}
        reads: list[tuple[str, Callable[[dict], None], bool]] = []  # (field, read, slow: only once per SLOW_S)
        for name, fn in (("util_pct", util), ("mem_used_mb", mem), ("temp_c", temp)):
            if self._probe(name, fn, scratch):
                reads.append((name, fn, False))
        try:
            if fi is None:
                raise AttributeError("nvidia-ml-py too old for NVML_FI_DEV_POWER_INSTANT")
            power_instant(scratch)
            if scratch[k_power] <= 0:
                raise ValueError(f"reads {scratch[k_power]} W")
            reads.append(("power_w", power_instant, False))
            self.power_field = POWER_INSTANT
        except (nv.NVMLError, AttributeError, KeyError, ValueError) as err:
            notes[p + "power_instant"] = f"NVML_FI_DEV_POWER_INSTANT not usable ({_line(err)}): average power read instead"
            if self._probe("power_w", power_average, scratch):
                reads.append(("power_w", power_average, False))
                self.power_field = POWER_AVERAGE
        if self._probe("sm_mhz", clocks, scratch):
            reads.append(("sm_mhz", clocks, False))
        try:
            reasons_event(scratch)
            reads.append(("clock_reasons", reasons_event, False))
        except (AttributeError, *self._refused):
            if self._probe("clock_reasons", reasons_throttle, scratch):
                reads.append(("clock_reasons", reasons_throttle, False))
        except nv.NVMLError:
            reads.append(("clock_reasons", reasons_event, False))  # not a refusal: the loop decides
        if self._probe("energy_mj", energy, scratch):
            # a counter, and a slow one: 4.1 ms of CPU a call on an H100 with driver 580.159 (the
            # other reads here take 1-6 us), so once per SLOW_S; summary() interpolates at the marks
            reads.append(("energy_mj", energy, True))
        self.reads = reads

    def _probe(self, name: str, fn: Callable[[dict], None], scratch: dict) -> bool:
        """False (and a note) when NVML refuses this read here; other errors are left to the loop."""
        try:
            fn(scratch)
        except (AttributeError, *self._refused) as err:
            self.notes[self.prefix + name] = f"NVML refuses it here ({_line(err)}): not sampled"
            return False
        except self.nv.NVMLError:
            pass
        return True

    def read(self, s: dict, t_s: float, slow: bool) -> None:
        tried, failed, last = 0, 0, None
        for name, fn, slow_read in self.reads:
            if slow_read and not slow:
                continue
            tried += 1
            try:
                fn(s)
            except self._refused as err:  # refused mid-run (permissions changed): drop the field, say so once
                self.notes[self.prefix + name] = f"NVML refused it at t={t_s:.1f} s ({_line(err)}): no longer sampled"
                self.reads = [r for r in self.reads if r[0] != name]  # the loop goes on over the old list
            except Exception as err:  # noqa: BLE001 - one failing field never stops the others
                failed, last = failed + 1, err
                if self._gone is not None and isinstance(err, self._gone):
                    break
                self.notes.setdefault(self.prefix + name, f"failed at t={t_s:.1f} s ({_line(err)}): missing in that sample")
        self._failing = self._failing + 1 if failed and failed == tried else 0
        if last is not None and (self._failing >= LOST_AFTER or (self._gone is not None and isinstance(last, self._gone))):
            self.lost = True
            self.notes[self.prefix.rstrip("_")] = (
                f"every NVML call failed from t={t_s:.1f} s ({_line(last)}): GPU {self.index} no longer sampled, earlier samples kept"
            )


class _Rapl:
    """CPU package energy from the powercap sysfs (Intel, and AMD Zen on recent kernels): the
    `package-N` zones only (psys would count the package twice; core/uncore/dram are parts)."""

    def __init__(self, root: Path = POWERCAP):
        from bench.measure.energy import rapl_zones

        zones, self.note = rapl_zones(root, dram=False)
        self.zones: list[tuple[Path, int]] = list(zones.values())  # (energy_uj path, max_energy_range_uj)
        self._last: list[int] = [self._raw(p) for p, _ in self.zones]
        self._wraps: list[int] = [0] * len(self.zones)

    @staticmethod
    def _raw(path: Path) -> int:
        with open(path, "rb") as fh:
            return int(fh.read())

    def read(self) -> int | None:
        """Package energy in uJ summed over packages, each counter unwrapped (it wraps at
        max_energy_range_uj, ~262 kJ: minutes at full load, so sample more often than that)."""
        if not self.zones:
            return None
        total = 0
        for k, (path, span) in enumerate(self.zones):
            raw = self._raw(path)
            if raw < self._last[k]:
                self._wraps[k] += 1
            self._last[k] = raw
            total += raw + self._wraps[k] * span
        return total


def _busy_total(t: Any) -> tuple[float, float]:
    """Busy and total time of one psutil cpu_times() tuple, as psutil.cpu_percent counts them
    (Linux: guest time is already inside user/nice; iowait is idle)."""
    total = sum(t) - getattr(t, "guest", 0) - getattr(t, "guest_nice", 0)
    return total - t.idle - getattr(t, "iowait", 0), total


class _Cores:
    """(busy, total) per logical CPU. Linux: /proc/stat kept open and re-read with one pread
    (its cpuN lines: user nice system idle iowait irq softirq steal guest guest_nice, in
    ticks), counted as _busy_total counts psutil's tuples; elsewhere psutil.cpu_times."""

    def __init__(self) -> None:
        self.fd: int | None = None
        if _PROC_STAT:
            try:
                self.fd = os.open("/proc/stat", os.O_RDONLY)
            except OSError:
                self.fd = None

    def read(self) -> list[tuple[float, float]]:
        if self.fd is None:
            return [_busy_total(c) for c in psutil.cpu_times(percpu=True)]
        out: list[tuple[float, float]] = []
        for line in os.pread(self.fd, 1 << 20, 0).splitlines():
            if line.startswith(b"cpu") and line[3:4].isdigit():
                v = [int(x) for x in line.split()[1:]]
                v += [0] * (10 - len(v))  # old kernels lack steal/guest/guest_nice
                total = sum(v) - v[8] - v[9]
                out.append((total - v[3] - v[4], total))
        return out

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class _Proc:
    """One process of the tree. On Linux its /proc/PID/stat stays open and is re-read with
    one pread (one GIL release; psutil's cpu_times + memory_info + num_threads open, read and
    close three files, and each release can cost the sampler a 5 ms switch interval when the
    training thread holds the GIL); a reaped process's fd reads ESRCH, never another PID's."""

    def __init__(self, proc: psutil.Process):
        self.proc = proc
        self.fd: int | None = None
        if _PROC_STAT:
            try:
                self.fd = os.open(f"/proc/{proc.pid}/stat", os.O_RDONLY)
            except OSError:
                self.fd = None

    def read(self) -> tuple[float, int, int]:
        """CPU seconds (user + system + reaped children's), RSS bytes, threads."""
        if self.fd is not None:
            raw = os.pread(self.fd, 4096, 0)
            f = raw[raw.rindex(b")") + 2 :].split()  # fields from `state` on (proc(5)); comm may hold spaces
            return (int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])) / _CLK_TCK, int(f[21]) * _PAGE, int(f[17])
        c = self.proc.cpu_times()
        return c.user + c.system + c.children_user + c.children_system, self.proc.memory_info().rss, self.proc.num_threads()

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class _Cpu:
    """psutil readings, with baselines kept here: psutil.cpu_percent(interval=None) compares
    with the previous call made by the same thread (psutil 7: _last_cpu_times[thread id]),
    so a prime made in the caller's thread would not count for the sampler thread. The first
    sample (taken by the sampler thread in start()) is the prime; its percentages are None.
    System and per-core shares come from one read of the per-CPU times (_Cores), counted
    as psutil counts them. The tree's CPU comes from cumulative CPU times, not
    Process.cpu_percent: nothing to prime per worker, and a worker is counted from its
    first instant even when it is found up to SLOW_S late."""

    def __init__(self, notes: dict[str, str]):
        self.notes = notes
        self.me = psutil.Process()
        self.cores = _Cores()
        self.tree: dict[int, _Proc] = {self.me.pid: _Proc(self.me)}
        self._prev_t: float | None = None
        self._prev_cpu_s = 0.0
        self._prev_pids: set[int] = set()  # the processes read in the previous sample
        self._prev_cores: list[tuple[float, float]] = []
        self.freq = True
        try:
            f = psutil.cpu_freq()
            if not (f and f.current):
                raise ValueError("psutil.cpu_freq() gave nothing")
        except (OSError, NotImplementedError, AttributeError, ValueError) as err:
            self.freq = False
            notes["cpu_mhz"] = f"CPU frequency not readable here ({_line(err)}; common in VMs and containers)"
        self.rapl = _Rapl()
        if self.rapl.note:
            notes["rapl"] = self.rapl.note

    def _refresh(self, s: dict, t_s: float) -> None:
        """Once per SLOW_S: list the tree again (a scan of every /proc/PID) and read the clock."""
        try:
            pids = {self.me.pid: self.me, **{c.pid: c for c in self.me.children(recursive=True)}}
        except psutil.Error as err:
            self.notes.setdefault("cpu_tree", f"children not listed at t={t_s:.1f} s ({_line(err)}): the last list kept")
            pids = {pid: p.proc for pid, p in self.tree.items()}
        for pid in [pid for pid in self.tree if pid not in pids]:
            self.tree.pop(pid).close()
        for pid, proc in pids.items():
            if pid not in self.tree:
                self.tree[pid] = _Proc(proc)
        if self.freq:
            try:
                f = psutil.cpu_freq()
                s["cpu_mhz"] = float(f.current) if f and f.current else None
            except (OSError, NotImplementedError, AttributeError) as err:
                self.notes.setdefault("cpu_mhz", f"failed at t={t_s:.1f} s ({_line(err)})")

    def read(self, s: dict, t_s: float, slow: bool) -> None:
        cores = self.cores.read()
        prev_t, prev_cores = self._prev_t, self._prev_cores
        if prev_t is not None and len(prev_cores) == len(cores):
            pct = [100 * max(0.0, b1 - b0) / (t1 - t0) if t1 > t0 else 0.0 for (b0, t0), (b1, t1) in zip(prev_cores, cores)]
            busy = sum(max(0.0, b1 - b0) for (b0, _), (b1, _) in zip(prev_cores, cores))
            total = sum(max(0.0, t1 - t0) for (_, t0), (_, t1) in zip(prev_cores, cores))
            s["cpu_system_pct"] = 100 * busy / total if total > 0 else 0.0
        else:
            pct = []
            s["cpu_system_pct"] = None
        if slow:
            self._refresh(s, t_s)
        cpu_s, rss, threads, gone, backlog, pids = 0.0, 0, 0, [], 0.0, set()
        for pid, p in self.tree.items():
            try:  # a worker that exited and was reaped is in its parent's children times now
                c, r, n = p.read()
            except (OSError, ValueError, IndexError, psutil.Error):
                if pid != self.me.pid:
                    gone.append(pid)
                continue
            cpu_s, rss, threads = cpu_s + c, rss + r, threads + n
            pids.add(pid)
            if prev_t is not None and pid not in self._prev_pids:
                backlog += c  # found now (up to SLOW_S late): its CPU so far ran before this interval
        for pid in gone:
            self.tree.pop(pid).close()
        # The share of this interval leaves out a newly found process's CPU before it was found:
        # 8 DataLoader workers found 1 s late read as 8 s of CPU in a 0.1 s interval (8,000 %, on
        # 16 cores) otherwise. cpu_process_s (the counter windows are cut from) keeps it. An
        # orphan reaped by init takes its CPU time with it: never a negative share.
        s["cpu_process_pct"] = (
            100 * max(0.0, cpu_s - backlog - self._prev_cpu_s) / (t_s - prev_t) if prev_t is not None and t_s > prev_t else None
        )
        s["cpu_process_s"] = cpu_s
        s["cpu_core_min_pct"] = min(pct) if pct else None
        s["cpu_core_max_pct"] = max(pct) if pct else None
        s["rss_mb"] = rss / MB
        s["threads"] = threads
        s["processes_system"] = len(psutil.pids())
        self._prev_t, self._prev_cpu_s, self._prev_cores, self._prev_pids = t_s, cpu_s, cores, pids
        if self.rapl.zones:
            try:
                s["rapl_uj"] = self.rapl.read()
            except (OSError, ValueError) as err:
                self.notes.setdefault("rapl", f"RAPL read failed at t={t_s:.1f} s ({_line(err)}): missing in that sample")
        else:
            s["rapl_uj"] = None

    def close(self) -> None:
        self.cores.close()
        for p in self.tree.values():
            p.close()


class TelemetrySampler:
    """Samples the NVML devices GPUS (None or [] = none) and, with CPU, the machine and this
    process tree, HZ times a second between start() and stop(). See the module docstring."""

    def __init__(self, gpus: list[int] | None, hz: float = 10.0, cpu: bool = True):
        if not hz > 0:
            raise ValueError(f"hz must be > 0, got {hz!r}")
        self.hz = float(hz)
        self.gpus_asked = list(gpus or [])
        self.samples: list[dict] = []
        self.marks: list[tuple[float, str]] = []
        self.notes: dict[str, str] = {}
        self.power_fields: dict[int, str | None] = {}
        self.nvml_driver: str | None = None
        self._gpus: list[_Gpu] = []
        self._nv: Any = None
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0: float | None = None
        self._slow_due = 0.0
        self.sampler_cpu_s: float | None = None  # the sampler thread's own CPU time, start to stop
        if self.gpus_asked:
            self._open_gpus()
        self._cpu = _Cpu(self.notes) if cpu else None

    def _open_gpus(self) -> None:
        try:
            self._nv = _nvml()
        except ImportError:
            self.notes["gpu"] = "nvidia-ml-py not installed: GPU not sampled"
            return
        except Exception as err:  # noqa: BLE001 - no library, no driver, no permission: one line, CPU goes on
            self.notes["gpu"] = f"NVML unavailable ({_line(err)}): GPU not sampled"
            return
        try:
            self.nvml_driver = str(self._nv.nvmlSystemGetDriverVersion())
        except Exception:  # noqa: BLE001 - provenance only
            pass
        for i in self.gpus_asked:
            try:
                g = _Gpu(self._nv, i, self.notes)
            except Exception as err:  # noqa: BLE001 - a bad index or a lost GPU: say which, sample the rest
                self.notes[f"gpu{i}"] = f"not opened ({_line(err)}): GPU {i} not sampled"
                continue
            self._gpus.append(g)
            self.power_fields[i] = g.power_field

    @property
    def gpus(self) -> list[int]:
        """The NVML indices actually sampled (opened), lost ones included."""
        return [g.index for g in self._gpus]

    def start(self) -> TelemetrySampler:
        if self._thread is not None:
            raise RuntimeError("TelemetrySampler.start() called twice: make a new sampler")
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._loop, name="telemetry-sampler", daemon=True)
        self._thread.start()
        self._ready.wait(timeout=5)  # the first sample is in: a mark made now lies after it
        return self

    def mark(self, label: str, at_monotonic: float | None = None) -> None:
        """A time marker now, or at AT_MONOTONIC (a time.monotonic() reading: CLOCK_MONOTONIC is one
        clock for every process of the host, so another process's times can mark this sampler)."""
        if self._t0 is None:
            raise RuntimeError(f"mark({label!r}) before start(): marks are seconds since start")
        self.marks.append(((time.monotonic() if at_monotonic is None else at_monotonic) - self._t0, label))

    def settle(self) -> None:
        """Have the sampler take a full reading (the slow counters too: energy, process tree) now and
        wait for it, so a window that just ended has counter readings on both sides (summary()
        interpolates the counters at the marks; without a reading after the end it has none)."""
        if self._thread is None or self._stop.is_set():
            return
        n = len(self.samples)
        self._slow_due = 0.0
        t_end = time.monotonic() + 2.5 / self.hz + 0.5
        while len(self.samples) < n + 2 and time.monotonic() < t_end:  # +2: one in flight may have been a fast one
            time.sleep(0.005)

    def window(self, t0_monotonic: float, t1_monotonic: float, label: str = "window") -> dict[str, Any]:
        """summary() between two time.monotonic() readings (marked as LABEL-start and LABEL-end)."""
        self.settle()
        self.mark(f"{label}-start", t0_monotonic)
        self.mark(f"{label}-end", t1_monotonic)
        return self.summary(f"{label}-start", f"{label}-end")

    def stop(self) -> None:
        if self._thread is None or self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(timeout=10)
        if self._thread.is_alive():
            self.notes["sampler"] = "the sampler thread did not end within 10 s of stop()"
        if self._nv is not None:
            try:
                self._nv.nvmlShutdown()
            except Exception:  # noqa: BLE001 - shutting down: nothing left to save
                pass
            self._nv = None
        if self._cpu is not None:
            self._cpu.close()

    def _sample(self, last: bool = False) -> None:
        t = time.monotonic()
        t_s = t - self._t0  # type: ignore[operator]
        s: dict[str, Any] = {"t_s": t_s}
        slow = last or t_s >= self._slow_due  # the first and the last sample read everything
        if slow:
            self._slow_due = t_s + SLOW_S
        for g in self._gpus:
            if not g.lost:
                try:
                    g.read(s, t_s, slow)
                except Exception as err:  # noqa: BLE001 - a bug here must not end the thread
                    self.notes.setdefault(f"gpu{g.index}_sample", f"sample failed at t={t_s:.1f} s ({_line(err)})")
        if self._cpu is not None:
            try:
                self._cpu.read(s, t_s, slow)
            except Exception as err:  # noqa: BLE001 - keep sampling the GPUs, say why once
                self.notes.setdefault("cpu", f"CPU sample failed at t={t_s:.1f} s ({_line(err)})")
        s["sample_ms"] = (time.monotonic() - t) * 1e3
        self.samples.append(s)

    def _loop(self) -> None:
        period, t0, k = 1.0 / self.hz, self._t0, 0
        assert t0 is not None
        cpu0 = time.thread_time()
        self._sample()
        self._ready.set()
        while True:
            k += 1
            now = time.monotonic()
            if t0 + k * period < now:  # late (a long sample, a busy GIL): skip the missed ticks
                k = int((now - t0) / period) + 1
            if self._stop.wait(t0 + k * period - now):
                break
            self._sample()
        self._sample(last=True)  # at stop: a mark made before stop() lies before it
        self.sampler_cpu_s = time.thread_time() - cpu0

    # ---- output -----------------------------------------------------------------------------

    def columns(self) -> list[str]:
        cols = ["t_s"] + [f"gpu{g.index}_{f}" for g in self._gpus for f in GPU_FIELDS]
        if self._cpu is not None:
            cols += CPU_FIELDS
        return [*cols, "sample_ms", "marks"]

    def write_csv(self, path: str | os.PathLike[str]) -> None:
        """One row per sample; `marks` holds the marks made since the previous sample as
        label@t_s; an empty cell is a value not read. Temp file beside PATH, then renamed."""
        cols = self.columns()
        samples, marks = list(self.samples), sorted(self.marks)
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(cols)
        m = 0
        for s in samples:
            here = []
            while m < len(marks) and marks[m][0] <= s["t_s"]:
                here.append(f"{marks[m][1]}@{marks[m][0]:.4f}")
                m += 1
            row = dict(s, marks=";".join(here))
            w.writerow(["" if row.get(c) is None else _cell(row[c]) for c in cols])
        atomic_write_text(Path(path), buf.getvalue())

    def _window(self, start_mark: str | None, end_mark: str | None) -> tuple[float, float]:
        samples = self.samples
        if not samples:
            raise ValueError("no samples: summary() needs start() first")
        a = self._mark_time(start_mark, float("-inf")) if start_mark else samples[0]["t_s"]
        b = self._mark_time(end_mark, a) if end_mark else samples[-1]["t_s"]
        if b < a:
            raise ValueError(
                f"window ends (t={b:.3f} s) before it starts (t={a:.3f} s): mark {start_mark!r} after the last sample?"
            )
        return a, b

    def _mark_time(self, label: str, after: float) -> float:
        for t, name in sorted(self.marks):
            if name == label and t >= after:
                return t
        raise ValueError(
            f"no mark {label!r} at or after t={after:.3f} s (marks: {', '.join(n for _, n in self.marks) or 'none'})"
        )

    def summary(self, start_mark: str | None = None, end_mark: str | None = None) -> dict[str, Any]:
        """Flat dict over the window between the two marks (first sample / last sample when
        None). Counters (GPU energy, read once per SLOW_S; RAPL; the tree's CPU seconds) are
        read at the marks by linear interpolation between the readings around them."""
        a, b = self._window(start_mark, end_mark)
        win = [s for s in self.samples if a <= s["t_s"] <= b]
        span = win[-1]["t_s"] - win[0]["t_s"] if len(win) > 1 else 0.0
        out: dict[str, Any] = {
            "window_s": b - a,
            "window_start_mark": start_mark,
            "window_end_mark": end_mark,
            "samples": len(win),
            "hz_target": self.hz,
            "achieved_hz": (len(win) - 1) / span if span > 0 else None,
            "sample_ms_mean": _mean(win, "sample_ms"),
            "sample_ms_max": _max(win, "sample_ms"),
            # the sampler thread's CPU over the whole run (100 = one core): what it took from the work
            "sampler_cpu_pct": self._sampler_cpu_pct(),
            "nvml_version": _dist_version("nvidia-ml-py"),
            "nvml_driver": self.nvml_driver,
            "psutil_version": psutil.__version__,
        }
        if self._gpus:
            from bench.measure.usage import NVML_MEANING

            out["gpu_util_meaning"] = NVML_MEANING
        for g in self._gpus:
            out.update(self._gpu_summary(g.index, win, a, b))
        if self._cpu is not None:
            out.update(self._cpu_summary(win, a, b))
        out.update({f"note_{k}": v for k, v in sorted(self.notes.items())})
        return out

    def _sampler_cpu_pct(self) -> float | None:
        if self.sampler_cpu_s is None or len(self.samples) < 2:
            return None
        run_s = self.samples[-1]["t_s"] - self.samples[0]["t_s"]
        return 100 * self.sampler_cpu_s / run_s if run_s > 0 else None

    def _gpu_summary(self, i: int, win: list[dict], a: float, b: float) -> dict[str, Any]:
        p = f"gpu{i}_"
        field = self.power_fields.get(i)
        out: dict[str, Any] = {
            p + "util_pct_mean": _mean(win, p + "util_pct"),
            p + "util_pct_max": _max(win, p + "util_pct"),
            p + "mem_util_pct_mean": _mean(win, p + "mem_util_pct"),
            p + "mem_used_mb_max": _max(win, p + "mem_used_mb"),
            p + "temp_c_max": _max(win, p + "temp_c"),
            p + "power_w_mean": _mean(win, p + "power_w"),
            p + "power_w_max": _max(win, p + "power_w"),
            p + "power_field": field,
            p + "sm_mhz_median": _median(win, p + "sm_mhz"),
            p + "sm_mhz_min": _min(win, p + "sm_mhz"),
            p + "mem_mhz_median": _median(win, p + "mem_mhz"),
        }
        delta = _counter_delta(self.samples, p + "energy_mj", a, b)
        if delta is not None:
            out[p + "energy_j"], out[p + "energy_source"] = delta / 1e3, "counter (nvmlDeviceGetTotalEnergyConsumption)"
        else:
            ts, vs = _series(self.samples, p + "power_w")
            integral = _integral(ts, vs, a, b)
            inside = _vals(win, p + "power_w")
            if integral is not None:
                out[p + "energy_j"] = integral
                out[p + "energy_source"] = f"trapezoid integral of {field} power samples (no energy counter over the window)"
            elif inside and b > a:  # no reading after the window's end (settle() timed out): what was read, said so
                out[p + "energy_j"] = statistics.fmean(inside) * (b - a)
                out[p + "energy_source"] = (
                    f"mean of the window's {len(inside)} {field} power samples x its {b - a:.2f} s "
                    "(no counter or power reading after its end)"
                )
            else:
                out[p + "energy_j"] = None
                out[p + "energy_source"] = "none: no energy counter and no power samples over the window"
        reasons = [int(s[p + "clock_reasons"]) for s in win if s.get(p + "clock_reasons") is not None]
        seen = 0
        for r in reasons:
            seen |= r
        names = [n for bit, n in _GPU_THROTTLE_BITS.items() if seen & bit] + (["sw-power-cap"] if seen & _GPU_POWER_CAP else [])
        out[p + "clock_reasons_seen"] = (",".join(names) or "none") if reasons else None
        throttle = sum(_GPU_THROTTLE_BITS)
        out[p + "throttled_frac"] = sum(1 for r in reasons if r & throttle) / len(reasons) if reasons else None
        out[p + "power_capped_frac"] = sum(1 for r in reasons if r & _GPU_POWER_CAP) / len(reasons) if reasons else None
        return out

    def _cpu_summary(self, win: list[dict], a: float, b: float) -> dict[str, Any]:
        cpu_s = _counter_delta(self.samples, "cpu_process_s", a, b)
        rapl = _counter_delta(self.samples, "rapl_uj", a, b)
        note = None
        if rapl is None:
            note = self.notes.get("rapl") or "RAPL counter did not cover the window"
        return {
            "cpu_system_pct_mean": _mean(win, "cpu_system_pct"),
            "cpu_process_pct_mean": cpu_s / (b - a) * 100 if cpu_s is not None and b > a else None,
            "cpu_process_pct_max": _max(win, "cpu_process_pct"),
            "cpu_core_min_pct_mean": _mean(win, "cpu_core_min_pct"),
            "cpu_core_max_pct_mean": _mean(win, "cpu_core_max_pct"),
            "rss_mb_max": _max(win, "rss_mb"),
            "threads_max": _max(win, "threads"),
            "processes_system_max": _max(win, "processes_system"),
            "cpu_mhz_median": _median(win, "cpu_mhz"),
            "cpu_energy_j": rapl / 1e6 if rapl is not None else None,
            "cpu_energy_note": note,
        }


def _cell(v: Any) -> str:
    return str(round(v, 4)) if isinstance(v, float) else str(v)


def _vals(win: list[dict], key: str) -> list[float]:
    return [s[key] for s in win if s.get(key) is not None]


def _mean(win: list[dict], key: str) -> float | None:
    v = _vals(win, key)
    return statistics.fmean(v) if v else None


def _median(win: list[dict], key: str) -> float | None:
    v = _vals(win, key)
    return statistics.median(v) if v else None


def _max(win: list[dict], key: str) -> float | None:
    v = _vals(win, key)
    return max(v) if v else None


def _min(win: list[dict], key: str) -> float | None:
    v = _vals(win, key)
    return min(v) if v else None


def _series(samples: list[dict], key: str) -> tuple[list[float], list[float]]:
    pts = [(s["t_s"], float(s[key])) for s in samples if s.get(key) is not None]
    return [t for t, _ in pts], [v for _, v in pts]


def _at(ts: list[float], vs: list[float], t: float) -> float | None:
    """VS linearly interpolated at T; None outside the sampled span (nothing extrapolated)."""
    if not ts or t < ts[0] or t > ts[-1]:
        return None
    k = bisect.bisect_left(ts, t)
    if ts[k] == t:
        return vs[k]
    t0, t1 = ts[k - 1], ts[k]
    return vs[k - 1] + (vs[k] - vs[k - 1]) * (t - t0) / (t1 - t0)


def _counter_delta(samples: list[dict], key: str, a: float, b: float) -> float | None:
    ts, vs = _series(samples, key)
    va, vb = _at(ts, vs, a), _at(ts, vs, b)
    return vb - va if va is not None and vb is not None else None


def _integral(ts: list[float], vs: list[float], a: float, b: float) -> float | None:
    """Trapezoid integral of VS over [A, B] (interpolated ends); None where samples do not cover it."""
    va, vb = _at(ts, vs, a), _at(ts, vs, b)
    if va is None or vb is None:
        return None
    pts = [(a, va)] + [(t, v) for t, v in zip(ts, vs) if a < t < b] + [(b, vb)]
    return sum((t1 - t0) * (v0 + v1) / 2 for (t0, v0), (t1, v1) in zip(pts, pts[1:]))


def idle_baseline(gpus: list[int] | None, seconds: float = 3.0, hz: float = 10.0) -> dict[str, Any]:
    """Idle power before a run: per GPU from its energy counter over SECONDS (else the mean of
    its power samples), the CPU packages from RAPL where readable. "Idle" is this process
    doing nothing; the util means say whether anything else was running."""
    s = TelemetrySampler(gpus, hz=hz, cpu=True).start()
    time.sleep(seconds)
    s.stop()
    summ = s.summary()
    w = summ["window_s"]
    out: dict[str, Any] = {"idle_s": w, "idle_samples": summ["samples"]}
    for i in s.gpus:
        p = f"gpu{i}_"
        e, src = summ[p + "energy_j"], summ[p + "energy_source"]
        if e is not None and src.startswith("counter") and w > 0:
            out[p + "idle_power_w"], out[p + "idle_power_source"] = e / w, f"energy counter delta over {w:.2f} s"
        elif summ[p + "power_w_mean"] is not None:
            out[p + "idle_power_w"] = summ[p + "power_w_mean"]
            out[p + "idle_power_source"] = f"mean of {summ['samples']} power samples ({summ[p + 'power_field']})"
        else:
            out[p + "idle_power_w"], out[p + "idle_power_source"] = None, "no energy counter and no power samples"
        out[p + "idle_util_pct_mean"] = summ[p + "util_pct_mean"]
    cpu_e = summ.get("cpu_energy_j")
    out["cpu_idle_power_w"] = cpu_e / w if cpu_e is not None and w > 0 else None
    out["cpu_idle_power_note"] = None if out["cpu_idle_power_w"] is not None else summ.get("cpu_energy_note")
    out["cpu_idle_system_pct_mean"] = summ.get("cpu_system_pct_mean")
    out.update({k: v for k, v in summ.items() if k.startswith("note_")})
    return out


__all__ = [
    "GPU_FIELDS",
    "CPU_FIELDS",
    "POWER_AVERAGE",
    "POWER_INSTANT",
    "TelemetrySampler",
    "idle_baseline",
    "nvml_indices_for_visible",
]
