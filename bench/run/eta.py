"""The run's one ETA, over a total fixed before the first cell starts, re-estimated from the step
times the run measures.

Every cell's Estimate (Study.estimate: its steps, and the seconds its open and each step take on
the reference machine) is known up front, so the step total never moves unless a cell ends
early (an error, a sweep that stops at its OOM). What is left is, per cell:

    a cell under way        its steps left x its own measured step time, plus its close as its
                            configuration's other repeats measured it (else as a share of a step)
    a cell not yet started  what a finished repeat of its configuration took (the same work), else
                            its estimate x the pace of its study so far, else x the run's pace

    pace = (measured step seconds + B) / (estimated seconds of the same steps + B),  B = 2 % of the estimate

(steps only: an open pays one-time costs, a JIT compile or a cache filled, that its repeats do
not; a repeat's open is its twin's, capped at its estimate x the pace)

so the relative costs of cells come from the studies until the run has measured them, and the
absolute speed from this run (a loaded or a faster machine). B keeps one slow warm-up from
swinging the first minutes. A serial schedule (sequential, interleaved: one cell works at a time)
times each event from the one before it; a parallel one (per-device) has no such clock, and its
ETA is the estimates x the run's pace. Thread-safe (per-device schedule).

KIT_ETA_TRACE=FILE appends every event (JSON lines: the plan, then opened / stepped / ended with
the seconds since the start) so a run's ETA can be replayed and checked (python -m lab.eta_check).
"""

from __future__ import annotations

import json
import os
import statistics
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from bench.core.study import Estimate

CLOSE_STEP_SHARE = 0.5  # a cell's close (evaluation, summaries) before any was measured: half a step


@dataclass
class _Cell:
    plan: Estimate
    steps: int  # planned, then what the cell reported when it opened
    study: str = ""
    group: str = ""  # its configuration: the spec without the repeat (repeats of one work share it)
    units_done: float = 0.0  # estimated seconds of the work it has done
    steps_done: int = 0
    ended: bool = False
    open_s: float | None = None  # measured (serial schedules)
    step_times: list[float] = field(default_factory=list)
    close_s: float | None = None

    @property
    def units_total(self) -> float:
        if self.ended:
            return self.units_done
        return self.plan.open_s + self.steps * self.plan.step_s


def _platform(c: _Cell) -> str:
    """The platform in a pace group "<study> <platform>" (for_cells), "" where the plan named none."""
    return c.study.rsplit(" ", 1)[1] if " " in c.study else ""


def _pace_group(cell: Any) -> str:
    """Whose pace a cell not yet measured takes: its study's cells on its platform. A CPU cell whose
    steps ran 10x its estimate (the answer's int8 cell: inductor compiles in its last step) says
    nothing of the same study's GPU cells: pooled, it put two 40-s tuned cells at 12 min 19 s and
    --stop-after paused the GPU host's main job before them."""
    from bench.core.registry import get_study

    try:
        return f"{cell.study} {get_study(cell.study).platform_of(cell)}"
    except Exception:  # noqa: BLE001 - an ETA never stops a run: a study it cannot read paces alone
        return str(cell.study)


def _group(cell: Any) -> str:
    spec = dict(cell.spec())
    spec.pop("repeat", None)
    return json.dumps(spec, sort_keys=True, default=str)


class Eta:
    def __init__(
        self,
        plans: Iterable[tuple[str, Estimate]] | Iterable[tuple[str, Estimate, str, str]],
        clock: Callable[[], float] = time.monotonic,
        serial: bool = True,
    ):
        self._cells: dict[str, _Cell] = {}
        for p in plans:
            key, plan, study, group = (*p, "", "")[:4]
            self._cells[key] = _Cell(plan, plan.steps, study=study, group=group or key)
        self._clock = clock
        self._t0 = self._last = clock()
        self._serial = serial
        self._lock = threading.Lock()
        self._trace_path = os.environ.get("KIT_ETA_TRACE") or None
        self._trace("plan", serial=serial, cells=[
            {"key": k, "study": c.study, "group": c.group, "steps": c.steps, "open_s": c.plan.open_s, "step_s": c.plan.step_s}
            for k, c in self._cells.items()
        ])  # fmt: skip

    @classmethod
    def for_cells(cls, cells: list, serial: bool = True, clock: Callable[[], float] = time.monotonic) -> Eta:
        """The ETA of CELLS (bench.core.cell.Cell), each with its study's estimate (a CPU cell's
        scaled to this host's cores: cpu_speedup)."""
        speed = cpu_speedup()
        return cls(((c.key, estimate_here(c, speed), _pace_group(c), _group(c)) for c in cells), clock, serial)

    def _trace(self, ev: str, **fields: Any) -> None:
        if not self._trace_path:
            return
        try:
            with open(self._trace_path, "a") as fh:
                fh.write(json.dumps({"t": round(self._clock() - self._t0, 3), "ev": ev, **fields}) + "\n")
        except OSError:
            self._trace_path = None  # a trace that cannot be written is not worth stopping a run for

    def _since_last(self) -> float:
        now = self._clock()
        d, self._last = now - self._last, now
        return max(d, 0.0)

    def opened(self, key: str, steps: int) -> None:
        """The cell is warm and says how many steps it takes (its open is done)."""
        with self._lock:
            c = self._cells[key]
            c.steps = steps
            c.units_done += c.plan.open_s
            c.open_s = self._since_last()
            self._trace("opened", key=key, steps=steps)

    def stepped(self, key: str) -> None:
        with self._lock:
            c = self._cells[key]
            c.steps_done += 1
            c.units_done += c.plan.step_s
            c.step_times.append(self._since_last())
            self._trace("stepped", key=key)

    def ended(self, key: str) -> None:
        """The cell is over (done, skipped, failed): whatever it did not do drops out of the total."""
        with self._lock:
            c = self._cells[key]
            c.steps, c.ended = c.steps_done, True
            c.close_s = self._since_last() if c.open_s is not None else None
            self._trace("ended", key=key)

    def snapshot(self) -> tuple[int, int, float]:
        """(steps done, steps in all, seconds left)."""
        with self._lock:
            cells = list(self._cells.values())
            steps_done = sum(c.steps_done for c in cells)
            steps = sum(max(c.steps, c.steps_done) for c in cells)
            left = self._left(cells) if self._serial else self._left_parallel(cells)
        return steps_done, steps, left

    def cost_of(self, key: str) -> float:
        """Seconds the cell KEY is expected to take from now, by the rule of the ETA (0 for one not
        in this run's plan)."""
        with self._lock:
            if key not in self._cells:
                return 0.0
            return self._left(list(self._cells.values()), only=key)

    # ---- what is left
    def _left_parallel(self, cells: list[_Cell]) -> float:
        done = sum(c.units_done for c in cells)
        total = sum(c.units_total for c in cells)
        return max(total - done, 0.0) * _pace(self._clock() - self._t0, done, total)

    def _left(self, cells: list[_Cell], only: str | None = None) -> float:
        total = sum(c.units_total for c in cells)
        target = self._cells.get(only) if only is not None else None
        measured = [c for c in cells if c.open_s is not None]
        run_pace = _pace(sum(_spent(c) for c in measured), sum(_planned(c) for c in measured), total)
        study_pace, platform_pace = {}, {}
        for s in {c.study for c in measured}:
            mine = [c for c in measured if c.study == s]
            study_pace[s] = _pace(sum(_spent(c) for c in mine), sum(_planned(c) for c in mine), total)
        for p in {_platform(c) for c in measured} - {""}:
            mine = [c for c in measured if _platform(c) == p]
            platform_pace[p] = _pace(sum(_spent(c) for c in mine), sum(_planned(c) for c in mine), total)

        def pace(c: _Cell) -> float:  # its study's on its platform, else its platform's, else the run's
            if c.study in study_pace:
                return study_pace[c.study]
            p = _platform(c)
            return platform_pace.get(p, 1.0) if p else run_pace

        by_group: dict[str, list[_Cell]] = {}
        for c in measured:
            by_group.setdefault(c.group, []).append(c)
        left = 0.0
        for c in cells:
            if c.ended or (target is not None and c is not target):
                continue
            twins = [t for t in by_group.get(c.group, []) if t is not c and t.step_times]
            if c.open_s is not None:  # under way: its own steps
                step = statistics.median(c.step_times) if c.step_times else _twin_step(twins)
                if step is None:
                    step = c.plan.step_s * pace(c)
                close = _twin_close(twins)
                left += max(c.steps - c.steps_done, 0) * step + (close if close is not None else CLOSE_STEP_SHARE * step)
            elif twins:  # a repeat of measured work
                step = _twin_step(twins) or 0.0
                close = _twin_close(twins)
                # a twin's open, but no more than the estimate at this run's pace: an open far
                # above it paid a one-time cost (numba's first compile: 11 s, its repeats 1.4 s)
                opened = min(
                    statistics.median(t.open_s for t in twins if t.open_s is not None),
                    c.plan.open_s * pace(c),
                )
                left += opened + c.steps * step + (close if close is not None else CLOSE_STEP_SHARE * step)
            else:
                left += c.units_total * pace(c)
        return left


# Study.estimate gives a CPU cell's seconds on the 2-core AMD EPYC; a host with more cores runs the
# studies' CPU work faster, up to about the 16-core Xeon's 3.7x that the kit measured (mnist-cnn
# torch-cpu resident, results/reference/H100-80GB-HBM3 against cpu-2core-epyc). The run's own pace
# corrects the rest once its first steps are measured.
MOST_CPU_SPEEDUP = 3.7


def cpu_speedup() -> float:
    """How much faster than the 2-core EPYC this host runs a study's CPU cells, by its cores."""
    from bench.core.machine import usable_cores

    return max(1.0, min(usable_cores() / 2, MOST_CPU_SPEEDUP))


def estimate_here(cell: Any, speed: float | None = None) -> Estimate:
    """CELL's study estimate on this host: a CPU cell's scaled by SPEED (default: cpu_speedup())."""
    from bench.core.registry import get_study

    study = get_study(cell.study)
    e = study.estimate(cell)
    speed = cpu_speedup() if speed is None else speed
    if speed == 1.0 or study.platform_of(cell) != "cpu":
        return e
    serial = min(max(e.serial_s, 0.0), e.open_s + e.steps * e.step_s)  # kept whole: the cores do not shorten it
    return Estimate(steps=e.steps, open_s=e.open_s / speed + serial * (1 - 1 / speed), step_s=e.step_s / speed, serial_s=serial)


def estimate_s(cell: Any, speed: float | None = None) -> float:
    """CELL's whole estimate on this host in seconds (estimate_here: its open and every step)."""
    e = estimate_here(cell, speed)
    return e.open_s + e.steps * e.step_s


def _planned(c: _Cell) -> float:
    """The estimated seconds of the steps C has done (the pace is the steps': an open pays
    one-time costs, a JIT compile or a cache filled, that its repeats do not)."""
    return c.steps_done * c.plan.step_s


def _spent(c: _Cell) -> float:
    return sum(c.step_times)


def _pace(spent: float, planned: float, total: float) -> float:
    b = 0.02 * total
    return (spent + b) / (planned + b) if total > 0 else 1.0


def _twin_step(twins: list[_Cell]) -> float | None:
    steps = [s for t in twins for s in t.step_times]
    return statistics.median(steps) if steps else None


def _twin_close(twins: list[_Cell]) -> float | None:
    closes = [t.close_s for t in twins if t.close_s is not None and t.ended]
    return statistics.median(closes) if closes else None
