"""The one scheduler: runs cells, each in its own process, and never stops a matrix.

Schedules (every one drives cells through `python -m bench cell ... --gate`, whose
protocol is described in bench/run/cell.py):
  sequential   one cell after another, all its steps at once
  interleaved  every cell started and warmed up (one at a time), then steps round-robin:
               step i of every cell before step i+1 of any, the first cell rotating, so the
               machine's noise lands on all cells alike
  per-device   cells that need a GPU spread over the device slots (one process per GPU,
               CUDA_VISIBLE_DEVICES set), in parallel; the other cells after, one at a time.
               For getting a sweep done on a multi-GPU host: parallel cells share the host's
               CPUs, so ratios between cells come from `interleaved`

A cell whose rows.jsonl says ok/skipped is reused unless rerun=True. A crash, a non-zero
exit, a kill or a timeout becomes rows.jsonl with the finished steps marked incomplete and
one error row carrying the reason (the tail of the cell's log).
"""

from __future__ import annotations

import json
import os
import queue
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from bench.core import rows as R
from bench.core.cell import Cell
from bench.core.errors import KitError
from bench.core.registry import get_study
from bench.run.cell import DONE, READY, STEP, error_row, settle_failure

SCHEDULES = ("sequential", "interleaved", "per-device")
Echo = Callable[[str], None]


@dataclass
class Outcome:
    cell: Cell
    status: str  # ok | skipped | error | reused
    seconds: float
    reason: str = ""
    warmup_s: float | None = None


def subprocess_env(extra: dict | None = None) -> dict:
    """The environment of a cell process: unbuffered, able to import this very package from
    any working directory, without the CUDA simulator unless explicitly allowed."""
    root = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH", "")
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": root + (os.pathsep + path if path else "")}
    if env.get("KIT_ALLOW_CUDASIM") != "1":
        env.pop("NUMBA_ENABLE_CUDASIM", None)
    return {**env, **(extra or {})}


def cell_argv(spec_path: Path, out: Path, data_dir: str | None) -> list[str]:
    """The argv of a cell process: the only place in the kit that builds one."""
    argv = [sys.executable, "-m", "bench", "cell", str(spec_path), "--out", str(out), "--gate"]
    return argv + (["--data-dir", str(data_dir)] if data_dir else [])


@dataclass
class Child:
    """One cell process, spoken to through the gate protocol."""

    cell: Cell
    out: Path
    data_dir: str | None
    timeout_s: float
    env_extra: dict = field(default_factory=dict)
    proc: subprocess.Popen | None = None
    log: TextIO | None = None
    steps: int = 0
    done_steps: int = 0
    warmup_s: float | None = None
    active_s: float = 0.0
    started: float = 0.0
    reason: str = ""
    alive: bool = False

    @property
    def cell_dir(self) -> Path:
        return self.cell.dir(self.out)

    def start(self) -> None:
        d = self.cell_dir
        d.mkdir(parents=True, exist_ok=True)
        for stale in ("rows.jsonl", "rows.csv", "rows.partial.jsonl"):
            (d / stale).unlink(missing_ok=True)
        R.atomic_write_text(d / "cell.json", self.cell.to_json(indent=2) + "\n")
        self.log = open(d / "log.txt", "w", encoding="utf-8")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            cell_argv(d / "cell.json", self.out, self.data_dir),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            bufsize=1,
            env=subprocess_env(self.env_extra),
        )
        self.alive = True

    def _read(self, tag: str) -> Any:
        """The payload of the next protocol line with TAG (None: the child ended or ran out of time)."""
        assert self.proc and self.proc.stdout
        t0 = time.monotonic()
        try:
            while True:
                left = self.timeout_s - self.active_s - (time.monotonic() - t0)
                if left <= 0:
                    self.reason = f"timed out after {self.timeout_s:.0f} s"
                    self.kill()
                    return None
                if not select.select([self.proc.stdout], [], [], min(left, 1.0))[0]:
                    continue
                line = self.proc.stdout.readline()
                if not line:
                    return None
                if line.startswith(tag):
                    return json.loads(line[len(tag) :])
                if line.startswith(DONE):
                    return {"__done__": json.loads(line[len(DONE) :])}
        finally:
            self.active_s += time.monotonic() - t0

    def ready(self) -> bool:
        msg = self._read(READY)
        if not msg or "__done__" in msg:
            self.alive = False
            return False
        self.steps, self.warmup_s = int(msg["steps"]), msg.get("warmup_s")
        return True

    def step(self) -> list[dict] | None:
        assert self.proc and self.proc.stdin
        try:
            self.proc.stdin.write("go\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self.alive = False
            return None
        msg = self._read(STEP)
        if not msg or "__done__" in msg:
            self.alive = False
            return None
        self.done_steps += 1
        return msg["rows"]

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
        self.alive = False

    def finish(self, reason: str = "") -> Outcome:
        """Close the pipe, wait for the exit, and settle the cell's status."""
        rc = -9
        if self.proc:
            try:
                if self.proc.stdin:
                    self.proc.stdin.close()
            except OSError:
                pass
            try:
                rc = self.proc.wait(timeout=max(60.0, self.timeout_s - self.active_s))
            except subprocess.TimeoutExpired:
                self.kill()
                rc = self.proc.wait()
                self.reason = self.reason or "did not exit after its last step"
        if self.log:
            self.log.close()
        status, why = settle(self.cell_dir, self.cell, rc, self.out, self.data_dir, reason or self.reason)
        return Outcome(self.cell, status, time.monotonic() - self.started, why, self.warmup_s)


def settle(cell_dir: Path, cell: Cell, rc: int, out: Path, data_dir: str | None, reason: str = "") -> tuple[str, str]:
    """After a cell process ended: its status and reason. A crash, non-zero exit or missing
    rows.jsonl becomes an error row (reason: the given one, else the log's last lines)."""
    status = R.cell_status(cell_dir)
    if status is not None and (rc == 0 or status == "error"):
        rows = R.read_rows(cell_dir / "rows.jsonl")
        return status, next((r.get("reason") or "" for r in rows if r.get("status") in ("error", "skipped")), "")
    log = cell_dir / "log.txt"
    tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-3:] if log.exists() else []
    reason = reason or (f"exit code {rc}: " + " | ".join(tail))
    settle_failure(cell_dir, cell, reason, out, data_dir)
    return "error", reason


class Scheduler:
    def __init__(
        self,
        out: Path,
        data_dir: str | None = None,
        timeout_s: float = 3600,
        rerun: bool = False,
        echo: Echo | None = None,
        devices: list[str] | None = None,
        progress: Any = None,
    ):
        self.out, self.data_dir, self.timeout_s, self.rerun = Path(out), data_dir, timeout_s, rerun
        self.echo: Echo = echo or (lambda s: print(s, file=sys.stderr, flush=True))
        self.devices = devices or []
        self.progress = progress
        self._lock = threading.Lock()

    # ---- helpers
    def _say(self, msg: str) -> None:
        with self._lock:
            self.echo(msg)

    def _label(self, cell: Cell) -> str:
        return get_study(cell.study).label(cell)

    def _child(self, cell: Cell, env: dict | None = None) -> Child:
        return Child(cell, self.out, self.data_dir, self.timeout_s, env_extra=env or {})

    def _report_step(self, child: Child, rows: list[dict]) -> None:
        line = get_study(child.cell.study).progress_line(rows)
        self._say(f"step {child.done_steps:>2}/{child.steps} {self._label(child.cell):<40} {line}")

    def _end(self, child: Child, outcome: Outcome) -> Outcome:
        mark = {"ok": "ok     ", "skipped": "skipped", "error": "error  "}.get(outcome.status, outcome.status)
        self._say(
            f"{mark} {self._label(child.cell)} ({outcome.seconds:.1f} s)" + (f": {outcome.reason}" if outcome.reason else "")
        )
        return outcome

    def _drive(self, child: Child) -> Outcome:
        """Start CHILD and run all its steps (sequential and per-device)."""
        child.start()
        if child.ready():
            self._say(f"ready   {self._label(child.cell)} (warm-up {child.warmup_s or 0:.2f} s, {child.steps} steps)")
            while child.alive and child.done_steps < child.steps:
                rows = child.step()
                if rows is None:
                    break
                self._report_step(child, rows)
        return self._end(child, child.finish())

    # ---- schedules
    def run(self, cells: list[Cell], schedule: str = "sequential") -> list[Outcome]:
        if schedule not in SCHEDULES:
            raise KitError(f"unknown schedule {schedule!r}: choose {', '.join(SCHEDULES)}")
        todo, outcomes = [], []
        for cell in cells:
            status = R.cell_status(cell.dir(self.out))
            if status in ("ok", "skipped") and not self.rerun:
                outcomes.append(Outcome(cell, "reused", 0.0, f"already {status}"))
                self._say(f"reused  {self._label(cell)} ({cell.id})")
            else:
                todo.append(cell)
        runner = {"sequential": self._sequential, "interleaved": self._interleaved, "per-device": self._per_device}[schedule]
        done = outcomes + runner(todo)
        order = {id(c): i for i, c in enumerate(cells)}
        return sorted(done, key=lambda o: order.get(id(o.cell), len(cells)))  # in the matrix's order

    def _sequential(self, cells: list[Cell]) -> list[Outcome]:
        out = []
        for cell in cells:
            child = self._child(cell)
            try:
                out.append(self._drive(child))
            except KeyboardInterrupt:
                child.kill()
                child.finish("interrupted (Ctrl-C)")
                raise
        return out

    def _interleaved(self, cells: list[Cell]) -> list[Outcome]:
        live: list[Child] = []
        out: list[Outcome] = []
        try:
            for cell in cells:  # warm-ups one at a time
                child = self._child(cell)
                child.start()
                if child.ready():
                    self._say(f"ready   {self._label(cell)} (warm-up {child.warmup_s or 0:.2f} s, {child.steps} steps)")
                    live.append(child)
                else:
                    out.append(self._end(child, child.finish()))
            rounds = max((c.steps for c in live), default=0)
            for i in range(rounds):
                k = i % max(len(live), 1)
                for child in live[k:] + live[:k]:
                    if not child.alive or child.done_steps >= child.steps:
                        continue
                    rows = child.step()
                    if rows is None:
                        self._say(f"error   {self._label(child.cell)} died in step {i + 1}")
                        continue
                    self._report_step(child, rows)
            for child in live:
                out.append(self._end(child, child.finish()))
        except KeyboardInterrupt:
            for child in live:
                child.kill()
                child.finish("interrupted (Ctrl-C)")
            raise
        return out

    def _per_device(self, cells: list[Cell]) -> list[Outcome]:
        gpu = [c for c in cells if get_study(c.study).platform_of(c) == "cuda"]
        host = [c for c in cells if c not in gpu]
        slots = self.devices or visible_gpus()
        out: list[Outcome] = []
        if gpu and slots:
            work: queue.Queue[Cell] = queue.Queue()
            for c in gpu:
                work.put(c)
            lock = threading.Lock()
            children: list[Child] = []

            def worker(slot: str) -> None:
                while True:
                    try:
                        cell = work.get_nowait()
                    except queue.Empty:
                        return
                    child = self._child(cell, {"CUDA_VISIBLE_DEVICES": slot, "KIT_DEVICE_SLOT": slot})
                    with lock:
                        children.append(child)
                    o = self._drive(child)
                    with lock:
                        out.append(o)

            threads = [threading.Thread(target=worker, args=(s,), name=f"slot-{s}", daemon=True) for s in slots]
            for t in threads:
                t.start()
            try:
                while any(t.is_alive() for t in threads):
                    for t in threads:
                        t.join(timeout=0.5)
            except KeyboardInterrupt:
                for ch in children:
                    ch.kill()
                raise
        else:
            host = gpu + host
        return out + self._sequential(host)


def visible_gpus() -> list[str]:
    """GPU indices this process may use: CUDA_VISIBLE_DEVICES, else what nvidia-smi lists."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [d.strip() for d in env.split(",") if d.strip() and d.strip() != "-1"]
    from bench.core.provenance import nvidia_smi_gpus

    return [g["index"] for g in nvidia_smi_gpus()]


__all__ = ["SCHEDULES", "Outcome", "Scheduler", "cell_argv", "error_row", "settle", "subprocess_env", "visible_gpus"]
