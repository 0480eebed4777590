"""The one scheduler: runs cells, each in its own process, and never stops a matrix.

Schedules (every one drives cells through `python -m bench cell ... --gate`, whose
protocol is described in bench/run/cell.py):
  sequential   one cell after another, all its steps at once
  interleaved  every cell started and warmed up (one at a time), then steps round-robin:
               step i of every cell before step i+1 of any, the first cell rotating, so the
               machine's noise lands on all cells alike
  per-device   cells that need a GPU spread over the device slots in parallel, each on GPUs
               of its own (the ones its Cell.devices name, else one free slot; CUDA_VISIBLE_DEVICES
               set); the other cells after, one at a time.
               For getting a sweep done on a multi-GPU host: parallel cells share the host's
               CPUs, so ratios between cells come from `interleaved`

A cell whose rows.jsonl says ok/skipped is reused unless rerun=True. A crash, a non-zero
exit, a kill or a timeout becomes rows.jsonl with the finished steps marked incomplete and
one error row carrying the reason (the last meaningful line of the cell's log, as one line).
"""

from __future__ import annotations

import errno
import json
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from bench.core import bounded
from bench.core import rows as R
from bench.core.cell import Cell
from bench.core.child import child_env
from bench.core.errors import KitError
from bench.core.machine import visible_gpus
from bench.core.registry import get_study
from bench.core.request import DEFAULT_TIMEOUT_S, Paths
from bench.core.text import one_line
from bench.run import warm
from bench.run.cell import DONE, READY, STEP, error_row, settle_failure
from bench.run.eta import Eta
from bench.run.speedline import finished_speed

SCHEDULES = ("sequential", "interleaved", "per-device")
Echo = Callable[[str], None]


@dataclass
class Outcome:
    cell: Cell
    status: str  # ok | skipped | error | reused
    seconds: float
    reason: str = ""
    warmup_s: float | None = None
    active_s: float | None = None  # the time the cell itself was busy (warm-up and steps), where known


def cell_argv(spec_path: Path, paths: Paths) -> list[str]:
    """The argv of a cell process: the only place in the kit that builds one (a cell forked warm,
    bench/run/warm.py, runs the same arguments after `-m bench`)."""
    argv = [sys.executable, "-m", "bench", "cell", str(spec_path), "--out", str(paths.out), "--gate"]
    return argv + (["--data-dir", str(paths.data_dir)] if paths.data_dir else [])


@dataclass
class Child:
    """One cell process, spoken to through the gate protocol."""

    cell: Cell
    paths: Paths
    timeout_s: float
    env_extra: dict = field(default_factory=dict)
    proc: subprocess.Popen | warm.WarmProc | None = None
    log: TextIO | None = None
    steps: int = 0
    done_steps: int = 0
    warmup_s: float | None = None
    active_s: float = 0.0
    started: float = 0.0
    reason: str = ""
    alive: bool = False

    @property
    def out(self) -> Path:
        return Path(self.paths.out)

    @property
    def cell_dir(self) -> Path:
        return self.cell.dir(self.out)

    def start(self) -> None:
        d = self.cell_dir
        d.mkdir(parents=True, exist_ok=True)
        if d.is_symlink() or not d.resolve().is_relative_to(self.out.resolve()):
            raise KitError(f"cell dir {d} leads outside {self.out} (a symlink?): results are never written through one")
        for stale in ("rows.jsonl", "rows.csv", "rows.partial.jsonl"):
            (d / stale).unlink(missing_ok=True)
        R.atomic_write_text(d / "cell.json", self.cell.to_json(indent=2) + "\n")
        self.log = R.open_nofollow(d / "log.txt", "w")
        self.env_extra = {**self.env_extra, "KIT_PARENT_PID": str(os.getpid())}
        self.started = time.monotonic()
        argv = cell_argv(d / "cell.json", self.paths)
        if warm.enabled() and warm.eligible(self.cell):  # forked from the run's warm process (bench/run/warm.py)
            self.proc = warm.WarmProc(argv[3:], child_env(self.env_extra), stderr=self.log)
        else:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self.log,
                text=True,
                bufsize=1,
                env=child_env(self.env_extra),
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

    def finish(self, reason: str = "", status: str = "error") -> Outcome:
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
        got, why = settle(self.cell_dir, self.cell, rc, self.paths, reason or self.reason, status)
        return Outcome(self.cell, got, time.monotonic() - self.started, why, self.warmup_s, self.active_s or None)


def settle(cell_dir: Path, cell: Cell, rc: int, paths: Paths, reason: str = "", status: str = "error") -> tuple[str, str]:
    """After a cell process ended: its status and reason. A crash, non-zero exit or missing
    rows.jsonl becomes a row with STATUS (error, or interrupted) and the reason (the given
    one, else the log's last lines); the finished steps are kept, marked incomplete."""
    have = R.cell_status(cell_dir)
    if have is not None and (rc == 0 or have in ("error", "interrupted")):
        rows = R.read_rows(cell_dir / "rows.jsonl")
        why = next((r.get("reason") or "" for r in rows if r.get("status") in ("error", "skipped", "interrupted")), "")
        return have, why
    tail = bounded.tail(cell_dir / "log.txt")  # a log of any length: its last 64 kB
    reason = reason or f"exit code {rc}" + (f": {one_line(tail)}" if one_line(tail) else "")
    settle_failure(cell_dir, cell, reason, paths, status)
    return status, reason


class Interrupted(Exception):
    """Ctrl-C during a matrix: every running cell was stopped and settled as interrupted."""

    def __init__(self, outcomes: list):
        super().__init__("interrupted")
        self.outcomes = outcomes


class Paused(Exception):
    """The run's --stop-after came: no cell or round was started that would end past it; every
    finished cell is kept, none was stopped, and the same command again resumes."""

    def __init__(self, outcomes: list):
        super().__init__("paused")
        self.outcomes = outcomes


def predates(cell: Cell, cell_dir: Path) -> list:
    """The fixes (bench.core.fixes) that the finished cell in CELL_DIR predates: its numbers would
    change if made now, so a run never reuses it (its system.json says when and from which commit
    it was made; one that cannot be read predates nothing it can name)."""
    from bench.core import fixes

    if not any((not f.studies or cell.study in f.studies) and cell.repeat >= f.min_repeat for f in fixes.FIXES):
        return []
    from bench.core.resultset import json_file

    system = json_file(cell_dir / "system.json")  # bounded; {} where it is not a JSON object
    return fixes.missing_for(cell.study, cell.repeat, system) if system else []


def disk_full(err: BaseException) -> bool:
    return isinstance(err, OSError) and err.errno == errno.ENOSPC


def fmt_seconds(s: float) -> str:
    """12 s, 3 min 05 s, 1 h 02 min: an ETA a person reads at a glance."""
    s = max(int(round(s)), 0)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


class Scheduler:
    def __init__(
        self,
        paths: Paths,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        rerun: bool = False,
        echo: Echo | None = None,
        devices: list[str] | None = None,
        progress: Callable[[int, int, float], None] | None = None,
    ):
        """Runs cells under PATHS.out, their data in PATHS.data_dir. progress(done, total, seconds
        left) is called after every step (a TTY bar); plain lines go to echo either way, with the
        same ETA (bench.run.eta)."""
        self.paths, self.timeout_s, self.rerun = Paths(Path(paths.out), paths.data_dir), timeout_s, rerun
        self.out = self.paths.out
        self.echo: Echo = echo or (lambda s: print(s, file=sys.stderr, flush=True))
        self.devices = devices or []
        self.progress = progress
        self._lock = threading.Lock()
        self._children: list[Child] = []  # every child started, for Ctrl-C and a full disk
        self._done: dict[int, Outcome] = {}  # id(child) -> its outcome
        self._stopping = False
        self._repeats = 1  # distinct repeats in the run (labels say which one when > 1)
        self._eta = Eta([])  # the run's cells' estimates, made in run()
        self.stop_at: float | None = None  # time.monotonic() past which no cell or round is started (--stop-after)
        self.stop_by = "--stop-after"  # what set stop_at: "--budget" for the cells after the rounds (matrix._in_budget)
        self.then_s = 0.0  # seconds planned after this run() call (the answer's later parts): the ETA adds them

    # ---- helpers
    def _say(self, msg: str) -> None:
        with self._lock:
            self.echo(msg)

    def _label(self, cell: Cell) -> str:
        label = get_study(cell.study).label(cell)
        return label + (f" r{cell.repeat}" if self._repeats > 1 else "")

    def _child(self, cell: Cell, env: dict | None = None) -> Child:
        child = Child(cell, self.paths, self.timeout_s, env_extra=env or {})
        with self._lock:
            self._children.append(child)
        return child

    def _ready(self, child: Child) -> bool:
        """Wait for CHILD's open; say so and count it in the ETA."""
        if not child.ready():
            return False
        self._eta.opened(child.cell.key, child.steps)
        self._say(f"ready   {self._label(child.cell)} (warm-up {child.warmup_s or 0:.2f} s, {child.steps} steps)")
        return True

    def _report_step(self, child: Child, rows: list[dict]) -> None:
        self._eta.stepped(child.cell.key)
        line = get_study(child.cell.study).progress_line(rows)
        done, total, left = self._eta.snapshot()
        left += self.then_s
        eta = f"  [{done}/{total} steps, eta {fmt_seconds(left)}]"
        self._say(f"step {child.done_steps:>2}/{child.steps} {self._label(child.cell):<40} {line}{eta}")
        if self.progress is not None:
            self.progress(done, total, left)

    def _finish(self, child: Child) -> Outcome:
        """Settle CHILD once (also when Ctrl-C already stopped it) and say how it ended."""
        with self._lock:
            if id(child) in self._done:
                return self._done[id(child)]
        status = "interrupted" if self._stopping else "error"
        outcome = child.finish("interrupted (Ctrl-C)" if self._stopping else "", status)
        self._eta.ended(child.cell.key)
        with self._lock:
            self._done[id(child)] = outcome
        mark = {"ok": "ok     ", "skipped": "skipped", "error": "error  "}.get(outcome.status, outcome.status)
        speed = finished_speed(child.cell, self.out) if outcome.status == "ok" else ""
        self._say(
            f"{mark} {self._label(child.cell)} ({outcome.seconds:.1f} s)"
            + (f": {outcome.reason}" if outcome.reason else "")
            + (f": {speed}" if speed else "")
        )
        return outcome

    def _drive(self, child: Child) -> Outcome:
        """Start CHILD and run all its steps (sequential and per-device)."""
        child.start()
        if self._ready(child):
            while child.alive and child.done_steps < child.steps:
                rows = child.step()
                if rows is None:
                    break
                self._report_step(child, rows)
        return self._finish(child)

    def _stop_all(self) -> list[Outcome]:
        """Kill every running cell and settle each as interrupted."""
        self._stopping = True
        for child in list(self._children):
            child.kill()
        return [self._finish(c) for c in list(self._children) if c.proc is not None]

    # ---- schedules
    def run(self, cells: list[Cell], schedule: str = "sequential") -> list[Outcome]:
        """Run CELLS; outcomes in the matrix's order. Ctrl-C raises Interrupted (every cell
        settled); a full disk raises KitError (one line) after stopping the others."""
        if schedule not in SCHEDULES:
            raise KitError(f"unknown schedule {schedule!r}: choose {', '.join(SCHEDULES)}")
        # labels name the repeat once the run has more than one (a later round of --until-decided too)
        self._repeats = max(self._repeats, len({c.repeat for c in cells}), 2 if any(c.repeat for c in cells) else 1)
        todo, outcomes = [], []
        for cell in cells:
            d = cell.dir(self.out)
            held = d / "cell.json"
            if R.is_regular(held):  # the id hashes the spec: a different spec here was edited or moved in
                try:
                    other = Cell.load(held)
                except KitError:
                    other = None
                if other is None or other.key != cell.key:
                    raise KitError(
                        f"{d} holds another cell's spec (cell.json differs from this cell's): "
                        "it was edited or moved in; move it away, then run again"
                    )
            status = R.cell_status(d)
            stale = predates(cell, d) if status == "ok" and not self.rerun else []
            if stale:  # made before a fix that changes its numbers: never reused, said once
                fx = stale[0]
                self._say(f"rerun   {self._label(cell)}: made before {fx.short} ({fx.what})")
            if status in ("ok", "skipped") and not self.rerun and not stale:
                outcomes.append(Outcome(cell, "reused", 0.0, f"already {status}"))
                self._say(f"reused  {self._label(cell)} ({cell.id})")
            else:
                todo.append(cell)
        runner = {"sequential": self._sequential, "interleaved": self._interleaved, "per-device": self._per_device}[schedule]
        self._eta = Eta.for_cells(todo, serial=schedule != "per-device")  # the total, fixed before any cell starts
        done = list(outcomes)
        try:
            # repeats in rounds: every cell's repeat 0 (under SCHEDULE), then every cell's repeat 1, ...
            # so the repeats of one cell are spread over the run, not bunched together
            for r in sorted({c.repeat for c in todo}):
                done += runner([c for c in todo if c.repeat == r])
        except Paused as p:
            raise Paused(done + p.outcomes) from None
        except KeyboardInterrupt:
            raise Interrupted(outcomes + self._stop_all()) from None
        except OSError as err:
            if not disk_full(err):
                raise
            self._stopping = True
            for child in self._children:
                child.kill()
            raise KitError(
                f"disk full writing results under {self.out} ({err.filename or 'a results file'}): "
                "finished cells are intact, the running ones are listed as interrupted; "
                "free space and run the same command again to resume"
            ) from None
        order = {id(c): i for i, c in enumerate(cells)}
        return sorted(done, key=lambda o: order.get(id(o.cell), len(cells)))  # in the matrix's order

    def fits(self, seconds: float) -> bool:
        """Whether work expected to take SECONDS ends before --stop-after (always, without one)."""
        return self.stop_at is None or time.monotonic() + seconds <= self.stop_at

    def _pause_unless_fits(self, cells: list[Cell], done: list[Outcome]) -> None:
        """Raise Paused (DONE kept) when CELLS, by the run's ETA, would end past --stop-after."""
        if self.stop_at is None or not cells:
            return
        need = sum(self._eta.cost_of(c.key) for c in cells)
        if not self.fits(need):
            left = max(self.stop_at - time.monotonic(), 0.0)
            self._say(
                f"not run --budget: {len(cells)} cell(s) need ~{fmt_seconds(need)}, {fmt_seconds(left)} of the budget left "
                f"({', '.join(self._label(c) for c in cells)}; a bigger --budget runs them)"
                if self.stop_by == "--budget"
                else f"paused  --stop-after: {len(cells)} cell(s) need ~{fmt_seconds(need)}, {fmt_seconds(left)} left; "
                "the same command again resumes"
            )
            raise Paused(done)

    def _sequential(self, cells: list[Cell]) -> list[Outcome]:
        out: list[Outcome] = []
        later: list[Cell] = []  # --stop-after: cells that would end past it; the ones after still run if they fit
        for cell in cells:
            if self.stop_at is not None and not self.fits(self._eta.cost_of(cell.key)):
                later.append(cell)
                continue
            out.append(self._drive(self._child(cell)))
        self._pause_unless_fits(later, out)
        return out

    def _interleaved(self, cells: list[Cell]) -> list[Outcome]:
        self._pause_unless_fits(cells, [])  # a round is one unit: all its cells, or none
        live: list[Child] = []
        out: list[Outcome] = []
        for cell in cells:  # warm-ups one at a time
            child = self._child(cell)
            child.start()
            if self._ready(child):
                live.append(child)
            else:
                out.append(self._finish(child))
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
        return out + [self._finish(child) for child in live]

    def _per_device(self, cells: list[Cell]) -> list[Outcome]:
        gpu = [c for c in cells if get_study(c.study).platform_of(c) == "cuda"]
        host = [c for c in cells if c not in gpu]
        slots = self.devices or visible_gpus()
        if not (gpu and slots):
            return self._sequential(gpu + host)
        return self._on_slots(gpu, slots) + self._sequential(host)

    def _on_slots(self, cells: list[Cell], slots: list[str]) -> list[Outcome]:
        """Every cell on GPUs of its own: the ones it names (Cell.devices), else any one free
        slot. Cells start in the matrix's order, each when all of its GPUs are free, so no two
        cells ever share a GPU and a many-GPU cell is never starved by one-GPU cells after it.
        A cell naming a GPU outside SLOTS starts at once with no binding: it skips itself with
        the reason."""
        free, pending = list(slots), list(cells)
        cond = threading.Condition()
        out: list[Outcome] = []
        failures: list[BaseException] = []
        threads: list[threading.Thread] = []

        def run(cell: Cell, got: list[str]) -> None:
            env = {"CUDA_VISIBLE_DEVICES": ",".join(got), "KIT_DEVICE_SLOT": ",".join(got)} if got else {}
            try:
                o = self._drive(self._child(cell, env))
                with self._lock:
                    out.append(o)
            except Exception as err:  # noqa: BLE001 - handed to the main thread (disk full, symlinks)
                failures.append(err)
            finally:
                with cond:
                    free.extend(got)
                    cond.notify_all()

        with cond:
            while pending and not failures and not self._stopping:
                cell = pending[0]
                want = [d for d in cell.devices if d != "cpu"]
                if want and not set(want) <= set(slots):
                    got: list[str] = []
                elif want:
                    got = want if set(want) <= set(free) else []
                    if not got:
                        cond.wait(timeout=0.5)
                        continue
                elif free:
                    got = [min(free, key=slots.index)]
                else:
                    cond.wait(timeout=0.5)
                    continue
                for d in got:
                    free.remove(d)
                pending.pop(0)
                t = threading.Thread(target=run, args=(cell, got), name=f"slot-{','.join(got) or 'none'}", daemon=True)
                t.start()
                threads.append(t)
        for t in threads:
            while t.is_alive():
                t.join(timeout=0.5)
        if failures:
            raise failures[0]
        return out


__all__ = ["SCHEDULES", "Outcome", "Paused", "Scheduler", "cell_argv", "error_row", "settle"]
