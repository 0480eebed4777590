"""tally: a toy study a newcomer adds under bench/studies/ (tests/test_newcomer.py copies this
package into a copy of the kit and runs the fast suite there). Each step sums the squares of
`n` integers in plain Python; backend `loop` adds them one at a time, `builtin` calls sum()."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from bench.core import BackendSpec, Cell, Study, register_study
from bench.core.claims import faster
from bench.core.tables import markdown


@runtime_checkable
class Summer(Protocol):
    def total(self, n: int) -> int: ...


@dataclass(frozen=True)
class TallyConfig:
    steps: int = 3  # timed steps per cell
    n: int = 20_000  # integers summed per step


@dataclass
class TallyRun:
    summer: Summer
    cfg: TallyConfig
    steps: int
    warmup_s: float = 0.0
    dataset: dict | None = None

    def step(self, i: int) -> list[dict]:
        t0 = time.perf_counter()
        total = self.summer.total(self.cfg.n)
        return [{"step": i, "step_s": time.perf_counter() - t0, "total": total}]

    def close(self) -> list[dict]:
        return []

    def system_extra(self) -> dict:
        return {}


_B = "bench.studies.tally."


@register_study
class Tally(Study):
    name, title, seed_doc, Config = "tally", "tally (a newcomer's toy study)", "", TallyConfig
    timing_key = "step_s"
    trainer_protocol = Summer
    backends = {
        "loop": BackendSpec(_B + "loop", "cpu", about="a Python for loop", family="numpy"),
        "builtin": BackendSpec(_B + "builtin", "cpu", about="sum() over a generator", family="numpy"),
    }
    claims = (faster("builtin-over-loop", "sum() beats a for loop", {"backend": "builtin"}, {"backend": "loop"}, "toy"),)

    def matrix(self, platform: str, profile: str) -> list[Cell]:
        return [self.cell(b, name=f"tally-{b}") for b, s in self.backends.items() if s.platform == platform]

    def open(self, cell: Cell, ctx) -> TallyRun:
        cfg = TallyConfig(**cell.params)
        summer = self.load_backend(cell.backend).create(cell, None)
        return TallyRun(summer, cfg, cfg.steps, dataset={"name": "none", "real": True})

    def report_section(self, cells, out) -> list[str]:
        rows = [r for c in cells for r in c.ok_rows]
        return ["tally totals:", "", markdown(rows, [("backend", "backend"), ("step", "step"), ("total", "total")]), ""]
