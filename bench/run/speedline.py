"""What a matrix prints about speed, as timm's `benchmark.py` prints it: a line per cell when it
finishes (samples/s, ms/step, parameter count) and, when the run ends, one line per configuration
sorted by throughput (fastest first, the median over its repeats); and the one warning a run
gives when other processes shared its CPUs (bench.core.noise's `cpu-shared` flag).

    finished_text(study, rows)     -> "4,177 samples/s, 122.6 ms/step, 103k params"
    sorted_lines(cells)            -> ["speed, fastest first (...)", "  mnist-cnn  torch-cpu ...  4,177 samples/s ..."]
    cpu_shared_lines(cells)        -> ["warning: 3 of 8 cells ran beside other work (cpu-shared, ...): ..."]

ms/step is one optimizer step: the batch over samples/s, or 1 / the rate where the study's unit is
a step (an MLP's full-batch iteration).
"""

from __future__ import annotations

import statistics
from typing import Any

from bench.core import noise
from bench.core.study import number, ok_rows

STEP_UNITS = ("iterations/s", "steps/s")  # one unit of these throughputs is one optimizer step


def _batch(rows: list[dict], part: str) -> float | None:
    for r in ok_rows(rows, part):
        for k in ("global_batch", "batch_size_used", "batch_size"):
            if (v := number(r.get(k))) and v > 0:
                return v
    return None


def speeds(study: Any, rows: list[dict]) -> dict[str, dict[str, float | None]]:
    """Row backend -> {"samples_per_s", "ms_per_step", "params"} of one cell's rows (None where
    its rows cannot say)."""
    out: dict[str, dict[str, float | None]] = {}
    for part, rate in study.throughput(rows).items():
        if not rate or rate <= 0:
            continue
        per = study.samples_per_unit(rows, part)
        samples = rate * per if per else None
        if study.throughput_unit in STEP_UNITS:
            ms = 1000.0 / rate
        else:
            batch = _batch(rows, part)
            ms = 1000.0 * batch / samples if batch and samples else None
        out[part] = {"samples_per_s": samples, "ms_per_step": ms, "params": study.param_count(rows, part)}
    return out


def _params(n: float | None) -> str:
    if not n:
        return "params ?"
    return f"{n / 1e6:.2f}M params" if n >= 1e6 else f"{n / 1e3:.1f}k params"


def _text(s: dict[str, float | None]) -> str:
    sps, ms = s["samples_per_s"], s["ms_per_step"]
    return ", ".join(
        [
            f"{sps:,.1f} samples/s" if sps else "samples/s ?",
            f"{ms:.2f} ms/step" if ms else "ms/step ?",
            _params(s["params"]),
        ]
    )


def finished_text(study: Any, rows: list[dict]) -> str:
    """One cell's speed for the line that says it finished ("" when its rows give none)."""
    got = speeds(study, rows)
    if len(got) == 1:
        return _text(next(iter(got.values())))
    return "; ".join(f"{part}: {_text(s)}" for part, s in got.items())


def finished_speed(cell: Any, out: Any) -> str:
    """finished_text of CELL's rows under OUT, as the scheduler's `ok` line ends ("" if unreadable)."""
    from bench.core.registry import get_study
    from bench.core.resultset import load_cell

    try:
        got = load_cell(cell.dir(out))
        return finished_text(get_study(cell.study), got.rows) if got is not None else ""
    except Exception:  # noqa: BLE001 - a line of progress never stops a run
        return ""


def sorted_lines(cells: list) -> list[str]:
    """One line per configuration and row backend of CELLS (ResultCells of one run), fastest first
    by samples/s: the median over its repeats; ⚑ where a repeat carries a noise flag."""
    from bench.core.registry import get_study
    from bench.core.resultset import group_repeats

    entries = []
    for group in group_repeats([c for c in cells if c.status == "ok"]):
        study = get_study(group[0].study)
        per_part: dict[str, list[dict[str, float | None]]] = {}
        for c in group:
            for part, s in speeds(study, c.rows).items():
                per_part.setdefault(part, []).append(s)
        label = _label(study, group[0])
        flagged = any(c.flags for c in group)
        for part, got in per_part.items():
            med = {k: _median([s[k] for s in got]) for k in ("samples_per_s", "ms_per_step", "params")}
            name = label if len(per_part) == 1 else f"{label} [{part}]"
            entries.append((med["samples_per_s"] or 0.0, group[0].study, name + (" ⚑" if flagged else ""), med, len(got)))
    if not entries:
        return []
    entries.sort(key=lambda e: -e[0])
    w_study = max(len(e[1]) for e in entries)
    w_name = max(len(e[2]) for e in entries)
    lines = ["speed, fastest first (median over repeats; samples/s, ms per optimizer step, parameters):"]
    for _, st, name, med, n in entries:
        lines.append(f"  {st:<{w_study}}  {name:<{w_name}}  {_text(med)}  (n={n})")
    return lines


def _median(vals: list[float | None]) -> float | None:
    got = [v for v in vals if v]
    return statistics.median(got) if got else None


def _label(study: Any, cell: Any) -> str:
    """The scheduler's name for CELL (Study.label of its spec), else its backend and variant."""
    import json

    from bench.core.cell import Cell
    from bench.core.errors import KitError

    try:
        return str(study.label(Cell.from_json(json.dumps(cell.spec))))
    except (KitError, TypeError, ValueError):
        return " ".join(str(cell.first.get(k) or "") for k in ("backend", "variant")).strip()


def cpu_shared_lines(cells: list) -> list[str]:
    """The run's one warning when cells carry `cpu-shared`, with the remedy; [] when none does."""
    shared = [c for c in cells if noise.cpu_shared_flag(c.flags)]
    if not shared:
        return []
    worst = max(shared, key=lambda c: noise.cpu_shared_pct(c.flags))
    return [
        f"warning: {len(shared)} of {len(cells)} cells ran beside other work (cpu-shared: others used up to "
        f"{noise.cpu_shared_pct(worst.flags):.0f}% of the CPUs, above {noise.CPU_SHARED_LIMIT:.0f}%); {noise.CPU_SHARED_REMEDY}"
    ]
