"""mnist-cnn backends: one thin module each, `available()` and `create(cell, data)`.

Each module imports only what it needs, and only when called (numba-cpu never imports
torch; torch backends never import numba). `create` returns a Trainer.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Trainer(Protocol):
    """What the mnist-cnn protocol calls; every member is required."""

    profiles_phases: bool  # False: the loop is timed as a whole (one graph, fused steps): no profiling pass

    def sync(self) -> None:
        """Wait for the device (no-op on the CPU)."""

    def warmup(self) -> float:
        """First-call work (JIT, cuDNN autotune, compile, capture) on a real batch shape;
        leaves the weights at their initial values. Returns seconds."""

    def train_epoch(self, order: np.ndarray, timer) -> dict:
        """One epoch over ORDER (whole batches). {"train_loss", "batch_size_used", "batch_sizes_seen"}."""

    def phase_fields(self, timer) -> dict:
        """Per-phase seconds of the last epoch (data_s, forward_s, ...; None where not split)."""

    def evaluate(self) -> float:
        """Accuracy on the full test set."""

    def memory(self) -> dict:
        """Device memory fields (vram_peak_mb, ...); {} on the CPU."""

    def params(self) -> dict[str, np.ndarray]:
        """The current weights, torch names and shapes, as float32 numpy."""

    def snapshot(self) -> object:
        """Weights and optimizer state, for restore() after the profiling pass."""

    def restore(self, snap: object) -> None:
        """Put back what snapshot() took (in place where kernels hold the arrays)."""

    def compile_kind(self) -> str:
        """How first-call work was paid: cold, cache, mixed, none (row key compile_kind)."""
