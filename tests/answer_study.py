"""A study with one GPU-over-CPU comparison and a known answer, for the main job's answer-first
plan on a CPU-only test machine (tests/test_answer_plan.py): backend `cpu-side` (platform cpu)
sleeps SLOW_S a step, `gpu-side` (platform cuda, plain Python: a fake GPU that a fake nvidia-smi
lists) FAST_S (`gpu-late` too, as a cell with a one-time compile would: Study.deferred), so gpu over cpu is about SLOW_S / FAST_S. Its answer profile trains the same
`epochs` on both platforms; its default gives the GPU twice the CPU's (the seeds' way), which
never pairs. Registered by naming this module in KIT_STUDY_MODULES (tests/ on PYTHONPATH)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from bench.core import BackendSpec, Cell, Study, register_study
from bench.core.claims import faster
from bench.core.study import ANSWER_PROFILES, free_work


@dataclass(frozen=True)
class AnsConfig:
    epochs: int = field(default=2, metadata={"work": "trained"})  # timed steps per cell (the trained work)
    fast_s: float = 0.01  # seconds a GPU step sleeps
    slow_s: float = 0.04  # seconds a CPU step sleeps
    dataset: str = "none"


@dataclass
class AnsRun:
    cell: Cell
    steps: int
    warmup_s: float = 0.0
    dataset: dict = None  # type: ignore[assignment]

    def step(self, i: int) -> list[dict]:
        p = self.cell.params
        t0 = time.perf_counter()
        time.sleep(p["fast_s"] if self.cell.backend == "gpu-side" else p["slow_s"])
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
class Ans(Study):
    name, title, seed_doc, Config = "ans", "ans (a test study)", "997", AnsConfig
    profiles = ANSWER_PROFILES
    timing_key = "step_s"
    backends = {
        "cpu-side": BackendSpec("answer_study", "cpu"),
        "gpu-side": BackendSpec("answer_study", "cuda"),
        "gpu-late": BackendSpec("answer_study", "cuda"),  # a one-time compile (deferred): after the rounds
    }
    claims = (
        faster(
            "gpu-over-cpu",
            "GPU over CPU",
            {"backend": "gpu-side"},
            {"backend": "cpu-side"},
            "the test",
            headline=True,
            free=(*free_work(AnsConfig), "dataset"),
        ),
    )

    def matrix(self, platform: str, profile: str) -> list[Cell]:
        epochs = 4 if (platform == "cuda" and profile == "default") else 2
        return [self.cell(b, name=b, epochs=epochs) for b, s in self.backends.items() if s.platform == platform]

    def deferred(self, cell: Cell) -> bool:
        return cell.backend == "gpu-late"

    def world_size(self, cell: Cell) -> int:
        return 0  # one process, whatever the platform

    def open(self, cell: Cell, ctx) -> AnsRun:
        return AnsRun(cell, cell.params["epochs"], dataset={"name": "none", "real": True})

    def report_section(self, cells, out) -> list[str]:
        return [f"{len(cells)} ans cell(s)", ""]
