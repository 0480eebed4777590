"""Reading cifar-opt's result cells for the report: names, per-repeat values, forms.

A group is the repeats of one configuration on one host (bench.core.resultset.group_repeats);
each repeat is one of the seed's 3 seeds. Values per repeat are a dict repeat -> value, what
bench.core.stats takes. Host side: standard library only.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

from bench.core import stats
from bench.core.resultset import ResultCell as Cell
from bench.core.tables import num, nums

SEED_N_TRAIN = 5000  # the seed's training subsample (images per epoch)
PLATFORM = {"torch-cpu": "cpu", "torch-cuda": "cuda", "torch-mps": "mps"}
GPU_PLATFORMS = ("cuda", "mps")
SEED_NAMES = {
    ("cpu", "default"): "CPU Default",
    ("cpu", "quant-dynamic"): "CPU Quantized: the seed's dynamic (Linear only)",
    ("cpu", "optuna"): "CPU Tuned (Optuna)",
    ("cpu", "int8"): "CPU Quantized: int8 PT2E static [kit]",
    ("cpu", "compile"): "CPU compile [kit]",
    ("cuda", "default"): "GPU Default",
    ("cuda", "amp"): "GPU AMP (fp16)",
    ("cuda", "optuna"): "GPU Tuned (Optuna)",
    ("cuda", "tuned"): "GPU tuned: bf16+cl+compile+graphs [kit]",
    ("mps", "default"): "MPS Default",
    ("mps", "optuna"): "MPS Tuned (Optuna)",
}


def platform(c: Cell) -> str:
    return PLATFORM.get(str(c.first.get("backend")), "?")


def param(c: Cell, key: str, default=None):
    """A parameter of the cell's spec (cell.json), else of its first row, else DEFAULT."""
    v = (c.spec.get("params") or {}).get(key)
    return c.first.get(key, default) if v is None else v


def model(c: Cell) -> str:
    return str(c.first.get("model") or param(c, "model"))


def label(c: Cell) -> str:
    r = c.first
    v = str(r.get("variant"))
    name = SEED_NAMES.get((platform(c), v), f"{platform(c).upper()} {v} [kit]")
    extra = []
    pipe = next((x.get("pipeline") for x in c.rows if x.get("pipeline")), "loader")
    if pipe != "loader":
        extra.append(f"pipeline {pipe}")
    bs = (c.spec.get("params") or {}).get("batch_size")
    if bs and bs != 32 and v != "optuna":
        extra.append(f"batch {bs}")
    return name + (f" ({', '.join(extra)})" if extra else "")


def rows(c: Cell, phase: str) -> list[dict]:
    return [r for r in c.rows if r.get("phase") == phase and r.get("status") == "ok"]


def per_repeat(
    group: list[Cell], phase: str, key: str, agg: Callable = statistics.median, form: str | None = None
) -> dict[int, float]:
    out = {}
    for c in group:
        vals = nums((r for r in rows(c, phase) if form is None or r.get("form") == form), key)
        if vals:
            out[c.repeat] = float(agg(vals))
    return out


def last(vals: list) -> float:
    return float(vals[-1])


def med(d: dict[int, float], scale: float = 1.0) -> float | None:
    return statistics.median(d.values()) * scale if d else None


def ci(d: dict[int, float], f: str = "{:.2f}", scale: float = 1.0) -> str:
    if not d:
        return ""
    s = stats.summarize([v * scale for v in d.values()])
    return f"{f.format(s.median)} [{s.interval(f)}]" if s.lo is not None else f.format(s.median)


def where(c: Cell) -> str:
    return f"{c.first.get('host')} · {c.device}"


def forms(g: list[Cell]) -> list[str]:
    seen: list[str] = []
    for c in g:
        for r in rows(c, "inference"):
            if isinstance(r.get("form"), str) and r["form"] not in seen:
                seen.append(r["form"])
    return seen


def n_train(g: list[Cell]) -> int | None:
    """Images a training epoch of the group saw (the rows' n_train: this rank's share under DDP)."""
    vals = [int(v) for c in g for r in rows(c, "epoch") if (v := num(r, "n_train")) is not None and v == int(v) and v >= 0]
    return max(vals) if vals else None


def real_data(g: list[Cell]) -> bool:
    return all(bool(c.first.get("dataset_real")) for c in g)


def run_labels(g: list[Cell]) -> set[str]:
    return {c.run_label for c in g}


def ratio_text(r: stats.Summary, f: str = "{:.2f}") -> str:
    """'12.30x [11.02–13.40]' (a 95% CI), '12.30x [11.02–13.40, range of 3]', or '12.30x (one seed: no interval)'."""
    if r.lo is None or r.hi is None:
        return f"{f.format(r.median)}x (one seed: no interval)"
    return f"{f.format(r.median)}x{r.bracket(f)}"
