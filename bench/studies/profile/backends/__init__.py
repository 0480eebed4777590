"""The profile study's backends: torch-cpu and torch-cuda (the same code; the cell names the
device). create() returns bench.studies.profile.trainer.Trainer; `Trainer` below is what the
protocol uses of it (every member required)."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Trainer(Protocol):
    model: Any  # the module a step runs (wrapped by DataParallel / DDP when the cell asks)
    facts: dict  # weights (file, sha256 or random), parameter counts

    def train_mode(self) -> None: ...
    def step(self, x: Any, y: Any) -> Any: ...
    def sync(self) -> None: ...
    def warmup(self, batches: Any) -> float: ...
    def evaluate(self, batches: Any) -> tuple: ...
