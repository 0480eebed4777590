"""CPU and GPU utilisation over one timed region.

CPU (psutil): `cpu_percent(interval=None)` compares with the previous call; the first call
after import has nothing to compare with and returns a meaningless 0.0 (the seed's many
"0 %" CPU figures look like that). So `CpuUsage` primes both counters when made and again at
`start()`, and `stop()` reads them once: the mean over the region. Two figures:
    cpu_util_system_pct   every logical CPU of the machine, 0-100 (DataLoader workers count
                          here, and so does any other job on the machine)
    cpu_util_process_pct  this process's threads, psutil's scale (100 = one core busy)

GPU (NVML, nvidia-ml-py): `nvmlDeviceGetUtilizationRates(h).gpu` and the SM clock every
`interval_s`, read by a child process (bench.measure.outproc: the measured process runs no
sampler thread), or by a thread here where the child cannot start (GpuUsage.how says which).
NVML's utilisation is the percentage of the driver's sample period (1/6 s to 1 s by GPU) during
which ONE OR MORE KERNELS were running: one tiny kernel at a time reads 100 %. It is not
occupancy, SM activity or a fraction of peak FLOP/s (the roofline fraction is that). Without NVML
the fields are None and `gpu_util_note` says why.
"""

from __future__ import annotations

import os
import statistics
import threading
from typing import Any

NVML_MEANING = "NVML utilisation: share of time one or more kernels ran (not occupancy, not a fraction of peak)"


class CpuUsage:
    def __init__(self) -> None:
        import psutil

        self.psutil = psutil
        self.proc = psutil.Process()
        self.primed = self._read()  # the first call: returns a meaningless 0.0, sets the baseline

    def _read(self) -> tuple[float, float]:
        return float(self.psutil.cpu_percent(interval=None)), float(self.proc.cpu_percent(interval=None))

    def start(self) -> None:
        self._read()  # the region starts here

    def stop(self) -> dict[str, float]:
        system, process = self._read()
        return {"cpu_util_system_pct": system, "cpu_util_process_pct": process}


class GpuUsage:
    """NVML sampler for the GPU this process uses; None fields and a note where NVML is missing."""

    def __init__(self, enabled: bool, interval_s: float = 0.1, process: bool = True):
        self.interval_s = interval_s
        self.process = process
        self.how = ""
        self.note: str | None = None
        self.nvml: Any = None
        self.samples: list[tuple[int, int]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._child: Any = None
        if not enabled:
            self.note = "no NVIDIA GPU in this cell: GPU utilisation not sampled"
            return
        try:
            from bench.measure.telemetry import _Nvml

            self.nvml = _Nvml()
        except ImportError:
            self.note = "nvidia-ml-py not installed: GPU utilisation not sampled"
        except Exception as err:  # noqa: BLE001 - NVML missing or no permission: one line, run on
            self.note = f"NVML unavailable ({type(err).__name__}: {' '.join(str(err).split())}): GPU utilisation not sampled"

    def _loop(self) -> None:
        nv, h = self.nvml.nv, self.nvml.handle
        while not self._stop.is_set():
            try:
                util = nv.nvmlDeviceGetUtilizationRates(h).gpu
                sm = nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)
                self.samples.append((int(util), int(sm)))
            except Exception as err:  # noqa: BLE001 - keep what we have, say why once
                self.note = self.note or f"NVML sample failed: {type(err).__name__}: {err}"
                return
            self._stop.wait(self.interval_s)

    def start(self) -> None:
        self.samples = []
        if self.nvml is None:
            return
        if self.process:
            from bench.measure.outproc import ChildSampler, ChildSamplerError

            try:
                self._child = ChildSampler("nvml", os.getpid(), self.interval_s).start()
                self.how = "a child process"
                return
            except ChildSamplerError as err:
                self._child = None
                self.how = f"a thread ({err})"
        else:
            self.how = "a thread"
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="gpu-usage", daemon=True)
        self._thread.start()

    def _stop_child(self) -> None:
        from bench.measure.outproc import ChildSamplerError

        child, self._child = self._child, None
        try:
            got = child.stop()
            self.samples = [(int(u), int(sm)) for u, sm in got["values"]]
            if got.get("error"):
                self.note = self.note or f"NVML sample failed: {got['error']}"
        except (ChildSamplerError, TypeError, ValueError) as err:
            self.note = self.note or f"NVML samples lost: {err}"

    def stop(self) -> dict[str, Any]:
        if self._child is not None:
            self._stop_child()
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=5)
            self._thread = None
        util = [u for u, _ in self.samples]
        sm = [s for _, s in self.samples]
        return {
            "gpu_util_pct": statistics.mean(util) if util else None,
            "gpu_util_samples": len(util),
            "gpu_sm_mhz_median": statistics.median(sm) if sm else None,
            "gpu_util_note": self.note if not util else NVML_MEANING,
        }
