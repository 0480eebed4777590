"""Seed 001's Table 5 needs each variant's memory alone: measured in a fresh spawned process."""

from __future__ import annotations

import multiprocessing

from bench.studies.mlp_scratch import runner


def _memory_child(variant: str, X, y, Xv, yv, cfg: dict) -> dict:
    return runner.memory_breakdown(variant, X, y, Xv, yv, runner.RunConfig(**cfg))


def memory_isolated(variant: str, X, y, Xv, yv, cfg: runner.RunConfig) -> dict:
    """memory_breakdown in a fresh spawned process, so RSS and the CuPy pool hold this
    variant alone (not the timing runs, nor CuPy's libraries for the NumPy column)."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(_memory_child, (variant, X, y, Xv, yv, runner.config_dict(cfg)))
