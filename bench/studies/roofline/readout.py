"""How roofline's rows are read, by the report and the claims alike (standard library only).

A scenario-A cell writes one `train` and one `val` row (one pass each, timed as a whole); a
scenario-B cell one `sweep` row per batch size and a `sweep_end`. Every row carries the cell's
counts (parameters, FLOPs per image), and every point row (train, val, sweep) its arithmetic
intensity at both bounds (`ai_low_flops_per_byte`: FLOPs over the unfused op-by-op bytes;
`ai_high_flops_per_byte`: over the compulsory bytes), the roofs it was held against and its
`ridge_flops_per_byte`. Rows are untrusted: every number goes through `number`.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

from bench.core.study import number
from bench.studies.roofline.config import DEVICE

if TYPE_CHECKING:
    from bench.core.resultset import ResultCell

POINT_PHASES = ("train", "val", "sweep")


def phase_rows(rows: list[dict], phase: str) -> list[dict]:
    """The ok rows of PHASE."""
    return [r for r in rows if r.get("phase") == phase and r.get("status") == "ok"]


def cell_rows(c: ResultCell, phase: str) -> list[dict]:
    return phase_rows(c.rows, phase)


def median(rows: list[dict], key: str, scale: float = 1.0) -> float | None:
    """The median of ROWS' KEY (numbers only), times SCALE; None when no row has one."""
    vals = [v for r in rows if (v := number(r.get(key))) is not None]
    return statistics.median(vals) * scale if vals else None


def at_batch(rows: list[dict], batch: int, phases: tuple[str, ...] = ("train", "sweep")) -> dict | None:
    """The first ok training point at BATCH images (a scenario-A pass or a sweep size)."""
    return next((r for p in phases for r in phase_rows(rows, p) if number(r.get("batch_size")) == batch), None)


def params(c: ResultCell) -> dict:
    """A cell's configuration as its rows (else its spec) say: model, scenario, pipeline,
    precision, step (eager | cuda-graph; rows before it: eager), platform (cpu | cuda | mps) and
    the scenario-A batch; `precision_step` the precision as tables show it (`bf16-cl graph`)."""
    first = next((r for r in c.rows if r.get("model")), c.first)
    spec = c.spec.get("params") or {}
    precision = first.get("precision") or c.first.get("variant")
    step = first.get("step") or spec.get("step") or "eager"
    return {
        "model": first.get("model") or spec.get("model"),
        "scenario": first.get("scenario") or spec.get("scenario"),
        "pipeline": first.get("pipeline"),
        "precision": precision,
        "step": step,
        "precision_step": precision_step(precision, step),
        "platform": DEVICE.get(str(c.first.get("backend")), "?"),
        "batch": spec.get("batch_size"),
    }


def precision_step(precision: object, step: object) -> str:
    """'bf16-cl' for an eager cell, 'bf16-cl graph' for one whose step was a CUDA graph."""
    return f"{precision} graph" if step == "cuda-graph" else str(precision)


__all__ = ["POINT_PHASES", "at_batch", "cell_rows", "median", "params", "phase_rows", "precision_step"]
