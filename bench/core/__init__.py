"""The study-agnostic core: Cell, Study and backend registries, rows, provenance."""

from bench.core.cell import Cell
from bench.core.errors import KitError
from bench.core.registry import get_study, register_study, studies
from bench.core.study import BackendSpec, RunContext, StepRun, Study

__all__ = ["BackendSpec", "Cell", "KitError", "RunContext", "StepRun", "Study", "get_study", "register_study", "studies"]
