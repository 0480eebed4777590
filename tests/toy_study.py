"""A study kept outside the kit, to prove a new study edits no kit file: it is registered by
naming this module in KIT_STUDY_MODULES (with tests/ on PYTHONPATH), and that is all."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass

from bench.core import BackendSpec, Cell, Study, register_study
from bench.core.tables import markdown


@dataclass(frozen=True)
class ToyConfig:
    steps: int = 3  # steps per cell
    crash_at: int = -1  # step that kills its own process (-9); -1: none
    raise_at: int = -1  # step that raises; -1: none
    sleep_s: float = 0.0  # seconds each step sleeps (to be interrupted)
    row_kb: int = 0  # padding per row (to fill a disk)


@dataclass
class ToyRun:
    cfg: ToyConfig
    steps: int
    warmup_s: float = 0.0
    dataset: dict = None  # type: ignore[assignment]
    closed_at: float | None = None

    def step(self, i: int) -> list[dict]:
        if i == self.cfg.crash_at:
            os.kill(os.getpid(), signal.SIGKILL)
        if i == self.cfg.raise_at:
            raise RuntimeError(f"toy failure in step {i}")
        t0 = time.time()
        time.sleep(self.cfg.sleep_s)
        pad = "x" * (1024 * self.cfg.row_kb)
        slot = os.environ.get("KIT_DEVICE_SLOT")
        return [{"step": i, "square": i * i, "slot": slot, "pid": os.getpid(), "pad": pad, "t_start": t0, "t_end": time.time()}]

    def close(self) -> list[dict]:
        self.closed_at = time.time()  # when close() began: the scheduler's gate is before it
        return []

    def system_extra(self) -> dict:
        return {"closed_at": self.closed_at}


def available() -> str | None:  # this module is also the toy's backend module
    return None


def create(cell: Cell, data) -> None:
    return None


@register_study
class Toy(Study):
    name, title, seed_doc, Config = "toy", "toy (a test study)", "999", ToyConfig
    backends = {
        "py": BackendSpec("toy_study", "cpu", about="plain Python"),
        "fake-gpu": BackendSpec("toy_study", "cuda", max_devices=2, about="plain Python, listed as a GPU backend"),
    }

    def world_size(self, cell: Cell) -> int:
        return 0  # one process whatever GPUs it names (the scheduler's slot reservation is what is tested)

    def matrix(self, platform: str, profile: str) -> list[Cell]:
        return [self.cell(b, name=f"toy-{b}") for b, s in self.backends.items() if s.platform == platform]

    def open(self, cell: Cell, ctx) -> ToyRun:
        return ToyRun(ToyConfig(**cell.params), cell.params["steps"], dataset={"name": "none", "real": True})

    def report_section(self, cells, out) -> list[str]:
        rows = [r for c in cells for r in c.ok_rows]
        return ["toy squares:", "", markdown(rows, [("backend", "backend"), ("step", "step"), ("square", "square")]), ""]
