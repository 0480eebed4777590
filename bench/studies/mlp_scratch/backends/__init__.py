"""mlp-scratch backends: numpy, cupy (the seed's code on CuPy) and cupy-tuned.

Each module has `available()` and `create(cell, data) -> Variant`; a Variant runs the
study's phases for one array backend through runner.py (which imports CuPy only when a
CuPy variant is asked for).
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.studies.mlp_scratch import runner


@dataclass
class Variant:
    """One array backend of the study; every method returns plain dicts (runner.py's keys)."""

    name: str  # numpy | cupy | cupy-tuned

    def check(self, X, y, steps: int, cfg: runner.RunConfig) -> dict:
        return runner.check_against_numpy(self.name, X, y, steps, cfg)

    def plain(self, X, y, Xv, yv, cfg: runner.RunConfig) -> dict:
        return runner.plain_run(self.name, X, y, Xv, yv, cfg)

    def breakdown(self, X, y, cfg: runner.RunConfig, iterations: int) -> dict:
        return runner.breakdown_run(self.name, X, y, cfg, iterations)

    def memory(self, X, y, Xv, yv, cfg: runner.RunConfig) -> dict:
        from bench.studies.mlp_scratch.memory import memory_isolated

        return memory_isolated(self.name, X, y, Xv, yv, cfg)
