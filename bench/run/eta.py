"""The run's one ETA, over a total fixed before the first cell starts.

Every cell's Estimate (Study.estimate: its steps, and the seconds its open and each step take on
the reference machine) is known up front, so the step total never moves unless a cell ends
early (an error, a sweep that stops at its OOM), and the estimate of the time left is

    left = (estimated seconds still to do) x pace
    pace = (elapsed + B) / (estimated seconds done + B),   B = 2 % of the whole estimate

At the start pace is 1 (the estimates alone); as work is done it becomes the run's own
measured speed relative to the reference machine (a loaded or a faster machine), so the
relative costs of the cells come from the studies and the absolute speed from this run.
B keeps one slow warm-up from swinging the first minutes. Thread-safe (per-device schedule).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from bench.core.study import Estimate


@dataclass
class _Cell:
    plan: Estimate
    steps: int  # planned, then what the cell reported when it opened
    units_done: float = 0.0  # estimated seconds of the work it has done
    steps_done: int = 0
    ended: bool = False

    @property
    def units_total(self) -> float:
        if self.ended:
            return self.units_done
        return self.plan.open_s + self.steps * self.plan.step_s


class Eta:
    def __init__(self, plans: Iterable[tuple[str, Estimate]], clock: Callable[[], float] = time.monotonic):
        self._cells = {key: _Cell(p, p.steps) for key, p in plans}
        self._clock = clock
        self._t0 = clock()
        self._lock = threading.Lock()

    def opened(self, key: str, steps: int) -> None:
        """The cell is warm and says how many steps it takes (its open is done)."""
        with self._lock:
            c = self._cells[key]
            c.steps = steps
            c.units_done += c.plan.open_s

    def stepped(self, key: str) -> None:
        with self._lock:
            c = self._cells[key]
            c.steps_done += 1
            c.units_done += c.plan.step_s

    def ended(self, key: str) -> None:
        """The cell is over (done, skipped, failed): whatever it did not do drops out of the total."""
        with self._lock:
            c = self._cells[key]
            c.steps, c.ended = c.steps_done, True

    def snapshot(self) -> tuple[int, int, float]:
        """(steps done, steps in all, seconds left)."""
        with self._lock:
            cells = list(self._cells.values())
            done = sum(c.units_done for c in cells)
            total = sum(c.units_total for c in cells)
            steps_done = sum(c.steps_done for c in cells)
            steps = sum(max(c.steps, c.steps_done) for c in cells)
        elapsed = self._clock() - self._t0
        b = 0.02 * total
        pace = (elapsed + b) / (done + b) if total > 0 else 1.0
        return steps_done, steps, max(total - done, 0.0) * pace
