"""A study with one comparison that is clear from its first rounds, for `--until-decided`
(tests/test_sequential.py): backend `fast` sleeps FAST_S a step, `slow` SLOW_S, so fast / slow
is about SLOW_S / FAST_S. Registered by naming this module in KIT_STUDY_MODULES (tests/ on
PYTHONPATH). `fail_repeat=K` makes the slow cell's repeat K raise (a failure in a later round)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from bench.core import BackendSpec, Cell, Study, register_study
from bench.core.claims import Claim, Ratio, between, faster


@dataclass(frozen=True)
class SeqConfig:
    steps: int = 3  # timed steps per cell
    fast_s: float = 0.01  # seconds a fast step sleeps
    slow_s: float = 0.03  # seconds a slow step sleeps
    fail_repeat: int = -1  # the slow cell's repeat that raises; -1: none


@dataclass
class SeqRun:
    cell: Cell
    steps: int
    warmup_s: float = 0.0
    dataset: dict = None  # type: ignore[assignment]

    def step(self, i: int) -> list[dict]:
        p = self.cell.params
        if self.cell.backend == "slow" and self.cell.repeat == p["fail_repeat"]:
            raise RuntimeError(f"seq failure in repeat {self.cell.repeat}")
        t0 = time.perf_counter()
        time.sleep(p["fast_s"] if self.cell.backend == "fast" else p["slow_s"])
        return [{"step": i, "step_s": time.perf_counter() - t0}]

    def close(self) -> list[dict]:
        return []

    def system_extra(self) -> dict:
        return {}


def available() -> str | None:  # this module is also the backends' module
    return None


def create(cell: Cell, data) -> None:
    return None


@register_study
class Seq(Study):
    name, title, seed_doc, Config = "seq", "seq (a test study)", "998", SeqConfig
    timing_key = "step_s"
    backends = {"fast": BackendSpec("seq_study", "cpu"), "slow": BackendSpec("seq_study", "cpu")}
    claims = (
        faster("fast-over-slow", "fast over slow", {"backend": "fast"}, {"backend": "slow"}, "the test", headline=True),
        Claim(
            "fast-near-slow",
            "fast within 10 % of slow (it is not: a decided 'does not hold')",
            "the test",
            Ratio({"backend": "fast"}, {"backend": "slow"}),
            between(0.9, 1.1),
        ),
    )

    def matrix(self, platform: str, profile: str) -> list[Cell]:
        return [self.cell(b, name=f"seq-{b}") for b, s in self.backends.items() if s.platform == platform]

    def open(self, cell: Cell, ctx) -> SeqRun:
        return SeqRun(cell, cell.params["steps"], dataset={"name": "none", "real": True})

    def report_section(self, cells, out) -> list[str]:
        return [f"{len(cells)} seq cells", ""]
