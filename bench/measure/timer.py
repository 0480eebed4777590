"""Timing that cannot go negative silently.

`PhaseTimer` accumulates wall time per named phase. A `sync` callable (e.g.
torch.cuda.synchronize) is called before each clock read, so asynchronous device work is
charged to the phase that launched it. Every duration is asserted non-negative.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from contextlib import contextmanager


def _noop() -> None:
    return None


def checked_duration(start: float, end: float) -> float:
    d = end - start
    if d < 0:
        raise AssertionError(f"negative duration {d!r} s (start {start}, end {end}): clock pair reversed?")
    return d


class NullTimer:
    """The timer of a timed epoch: phases cost nothing and record nothing. Phase splits come
    from a separate profiling pass (mnist-cnn's protocol), never from the loop that produces
    epoch_s; backends that keep their own per-step events check `enabled`."""

    enabled = False

    @contextmanager
    def phase(self, name: str):
        yield

    def as_fields(self, suffix: str = "_s") -> dict[str, float]:
        return {}


class PhaseTimer:
    """Seconds per phase; `with t.phase("forward"): ...`."""

    enabled = True

    def __init__(self, sync: Callable[[], None] | None = None):
        self.sync = sync or _noop
        self.totals: dict[str, float] = defaultdict(float)
        self.counts: dict[str, int] = defaultdict(int)

    @contextmanager
    def phase(self, name: str):
        self.sync()
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.sync()
            self.totals[name] += checked_duration(t0, time.perf_counter())
            self.counts[name] += 1

    def as_fields(self, suffix: str = "_s") -> dict[str, float]:
        return {f"{k}{suffix}": v for k, v in self.totals.items()}


@contextmanager
def stopwatch(sync: Callable[[], None] | None = None):
    """`with stopwatch() as sw: ...` then `sw.seconds`."""
    sync = sync or _noop

    class _SW:
        seconds = 0.0

    sw = _SW()
    sync()
    t0 = time.perf_counter()
    try:
        yield sw
    finally:
        sync()
        sw.seconds = checked_duration(t0, time.perf_counter())


class EventPhaseTimer:
    """Per-phase device time from CUDA events, with no host sync inside the loop.

    Each `phase()` records a start/end event pair on the current stream; `totals()` syncs
    once (at the end of the epoch) and sums elapsed times. Seconds, non-negative checked.
    """

    def __init__(self, torch_mod):
        self.torch = torch_mod
        self.pairs: dict[str, list] = defaultdict(list)

    @contextmanager
    def phase(self, name: str):
        start = self.torch.cuda.Event(enable_timing=True)
        end = self.torch.cuda.Event(enable_timing=True)
        start.record()
        try:
            yield
        finally:
            end.record()
            self.pairs[name].append((start, end))

    def totals(self) -> dict[str, float]:
        self.torch.cuda.synchronize()
        out = {}
        for name, pairs in self.pairs.items():
            ms = [s.elapsed_time(e) for s, e in pairs]
            if min(ms, default=0.0) < 0:
                raise AssertionError(f"negative CUDA event time in phase {name}: {min(ms)} ms")
            out[name] = sum(ms) / 1e3
        return out

    def as_fields(self, suffix: str = "_s") -> dict[str, float]:
        return {f"{k}{suffix}": v for k, v in self.totals().items()}
