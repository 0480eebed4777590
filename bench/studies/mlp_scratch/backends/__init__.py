"""mlp-scratch backends: numpy (net.py on NumPy, the reference), cupy (the seed's code on
CuPy) and cupy-tuned (tuned_cupy.py's kernels).

A backend is one module (here, or anywhere importable) plus one BackendSpec in
MlpScratch.backends, which is the only list of them. The module has `available()` and
`create(cell, data) -> runner.Backend` (its name, array module, whether that is a device,
and four hooks); `data` is unused (each call brings its arrays). The methods protocol.py
calls are the Trainer protocol below, which runner.Backend gives.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from bench.core.cell import Cell
from bench.studies.mlp_scratch import net, runner


@runtime_checkable
class Trainer(Protocol):
    """What protocol.py calls on a created backend; every method is required. Each returns
    runner.py's dict: check_against_numpy, plain_run, breakdown_run, memory_breakdown."""

    def check(self, reference: Any, X, y, steps: int, cfg: runner.RunConfig) -> dict: ...  # reference: the study's NumPy backend

    def plain(self, X, y, X_val, y_val, cfg: runner.RunConfig) -> dict: ...

    def breakdown(self, X, y, cfg: runner.RunConfig, iterations: int) -> dict: ...

    def memory(self, X, y, X_val, y_val, cfg: runner.RunConfig) -> dict: ...


def make(name: str, cell: Cell | None = None) -> runner.Backend:
    """The registry's backend NAME, created for CELL (default: a cell of that backend alone).
    MLPInputError for a name the registry lacks; BackendUnavailable where it cannot run."""
    from bench.studies.mlp_scratch import MlpScratch

    if name not in MlpScratch.backends:
        raise net.MLPInputError(f"unknown variant {name!r}: choose one of {', '.join(MlpScratch.backends)}")
    study = MlpScratch()
    return study.load_backend(name).create(cell or study.cell(name), None)
