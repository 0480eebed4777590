"""Seed 001's Table 5 needs each backend's memory alone: measured in a fresh spawned process."""

from __future__ import annotations

import importlib
import multiprocessing

from bench.core.cell import Cell
from bench.studies.mlp_scratch import runner


def _memory_child(module: str, cell: str, X, y, Xv, yv, cfg: dict) -> dict:
    backend = importlib.import_module(module).create(Cell.from_json(cell), None)
    return backend.memory(X, y, Xv, yv, runner.RunConfig(**cfg))


def memory_isolated(module: str, cell: Cell, X, y, Xv, yv, cfg: runner.RunConfig) -> dict:
    """memory_breakdown of the backend that MODULE (its BackendSpec.module) creates for CELL,
    in a fresh spawned process, so RSS and the CuPy pool hold this backend alone (not the
    timing runs, nor CuPy's libraries for the NumPy column)."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(_memory_child, (module, cell.to_json(), X, y, Xv, yv, runner.config_dict(cfg)))
