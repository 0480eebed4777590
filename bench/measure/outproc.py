"""Samplers in a process of their own, so that the process being measured runs no sampler thread.

A sampler thread in the training process wakes up to read (RSS every 10 ms, NVML every 0.1 s,
psutil and NVML every 0.5 s) and each wake-up takes the GIL from the training thread. At
host-paced GPU steps of 20-30 ms that was 2-3 GIL hand-offs a step (lab/gpu_harness's host
counters on an H100: the training thread blocked 2.8-2.9 times a step with the kit's sampler
threads, 1.0 without them and 1.0 with them here; results/reference/H100-80GB-HBM3-harness/).
Here the reading happens in a child process: it reads the parent's /proc/PID/statm, NVML for
the parent's GPU, or psutil, every INTERVAL s
until its stdin becomes readable (the parent's stop, or EOF when the parent dies), then prints
what it read as one JSON line and exits. The parent's cost is the child's start (before the
clock: start() returns when the child's first reading is in) and one write and one read at stop.

    p = ChildSampler("rss", os.getpid(), 0.01).start(); work(); got = p.stop()  # {"values": [...]}

Kinds: "rss" (bytes, from /proc/PID/statm: Linux only; started with -S, the standard library
alone), "nvml" (pairs [utilisation %, SM MHz] of the GPU chosen as bench.measure.telemetry's
_Nvml chooses it: CUDA_VISIBLE_DEVICES' first entry, else 0, from the inherited environment) and
"telemetry" (bench.measure.telemetry.Telemetry's samples, taken by its sample() in the child for
process PID; EXTRA: gpu 0/1, the run's root PID, the parent's start on CLOCK_MONOTONIC, one clock
for every process of the host; the answer carries its notes too).
A child that cannot start, read or answer raises ChildSamplerError with its one-line reason;
the callers (memory.RSSSampler, usage.GpuUsage, telemetry.Telemetry) then fall back to a thread
and say so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

READY_TIMEOUT_S = 20.0  # nvidia-ml-py's import and nvmlInit can take seconds on a busy host
STOP_TIMEOUT_S = 10.0

_CHILD = r"""
import json, os, select, sys
kind, pid, interval = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
notes = {}
if kind == "rss":
    page = os.sysconf("SC_PAGE_SIZE")
    fd = os.open(f"/proc/{pid}/statm", os.O_RDONLY)
    def read():
        return int(os.pread(fd, 128, 0).split()[1]) * page
elif kind == "telemetry":
    from bench.measure.telemetry import Telemetry
    t = Telemetry(gpu=sys.argv[4] == "1", interval_s=interval, run_root=int(sys.argv[5]), process=False, pid=pid)
    t._t0 = float(sys.argv[6])
    read, notes = t.sample, t.notes
else:
    import pynvml as nv
    nv.nvmlInit()
    first = (os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0].strip() or "0"
    h = nv.nvmlDeviceGetHandleByUUID(first) if first.startswith("GPU-") else nv.nvmlDeviceGetHandleByIndex(int(first))
    def read():
        return [int(nv.nvmlDeviceGetUtilizationRates(h).gpu), int(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM))]
values, error = [read()], None
sys.stdout.write("ready\n")
sys.stdout.flush()
while not select.select([sys.stdin], [], [], interval)[0]:
    try:
        values.append(read())
    except Exception as err:
        error = f"{type(err).__name__}: {' '.join(str(err).split())}"
        sys.stdin.readline()
        break
if error is None and kind == "rss":
    values.append(read())
sys.stdout.write(json.dumps({"values": values, "error": error, "notes": notes}) + "\n")
"""


class ChildSamplerError(RuntimeError):
    """The sampler process could not start, read or answer (one line: why)."""


class ChildSampler:
    """KIND ("rss" or "nvml") read every INTERVAL_S seconds for process PID by a child process."""

    def __init__(self, kind: str, pid: int, interval_s: float, extra: tuple[str, ...] = ()):
        if kind not in ("rss", "nvml", "telemetry"):
            raise ValueError(f"kind must be 'rss', 'nvml' or 'telemetry', not {kind!r}")
        if not interval_s > 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s!r}")
        self.kind, self.pid, self.interval_s, self.extra = kind, int(pid), float(interval_s), tuple(extra)
        self._proc: subprocess.Popen[str] | None = None

    def start(self) -> ChildSampler:
        flags = ["-S"] if self.kind == "rss" else []  # NVML needs site-packages; RSS the standard library only
        cmd = [sys.executable, *flags, "-c", _CHILD, self.kind, str(self.pid), repr(self.interval_s), *self.extra]
        root = str(Path(__file__).resolve().parents[2])  # the tree this bench package is in: the child imports it
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
        try:
            self._proc = subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, close_fds=True, env=env
            )
        except OSError as err:
            raise ChildSamplerError(f"the {self.kind} sampler process did not start ({err})") from err
        line = self._readline(READY_TIMEOUT_S)
        if line != "ready":
            self._kill()
            raise ChildSamplerError(f"the {self.kind} sampler process did not start: {self._why(line)}")
        return self

    def stop(self) -> dict[str, Any]:
        """The child's readings: {"values": [...], "error": None or its one-line reason, "notes": {...}}."""
        p = self._proc
        if p is None:
            raise ChildSamplerError(f"the {self.kind} sampler process was never started")
        self._proc = None
        try:
            assert p.stdin is not None
            p.stdin.write("stop\n")
            p.stdin.flush()
        except OSError:
            pass  # it died: what it said, if anything, is on stdout and stderr
        line = self._readline(STOP_TIMEOUT_S, p)
        try:
            got = json.loads(line or "")
            if not isinstance(got, dict) or not isinstance(got.get("values"), list):
                raise ValueError("not a JSON object with values")
        except ValueError as err:
            self._kill(p)
            raise ChildSamplerError(f"the {self.kind} sampler process gave no readings: {self._why(line, p)}") from err
        p.wait(timeout=STOP_TIMEOUT_S)
        p.stdin.close()  # type: ignore[union-attr]
        p.stdout.close()  # type: ignore[union-attr]
        p.stderr.close()  # type: ignore[union-attr]
        return got

    def _readline(self, timeout_s: float, p: subprocess.Popen[str] | None = None) -> str | None:
        import select

        p = p or self._proc
        assert p is not None and p.stdout is not None
        if not select.select([p.stdout], [], [], timeout_s)[0]:
            return None
        return p.stdout.readline().strip() or None

    def _why(self, line: str | None, p: subprocess.Popen[str] | None = None) -> str:
        p = p or self._proc
        if line is not None:
            return f"it said {line[:200]!r}"
        if p is None:
            return "no process"
        self._kill(p)
        err = (p.stderr.read() if p.stderr else "").strip().splitlines()
        return err[-1] if err else f"no answer within {READY_TIMEOUT_S:.0f} s"

    def _kill(self, p: subprocess.Popen[str] | None = None) -> None:
        p = p or self._proc
        if p is not None and p.poll() is None:
            p.kill()
            p.wait(timeout=STOP_TIMEOUT_S)
