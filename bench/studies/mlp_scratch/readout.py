"""What mlp-scratch's report, summary, claims and Study hooks read from result cells: the one
place its rows become numbers (host side: standard library only; every value read through
bench.core.tables' num/nums/quotient, every summary and ratio through bench.core.stats, as result
dirs come from other hosts).

A cell is one repeat (a fresh process) of one configuration; every backend it names ('+'-joined,
a part) ran side by side in it (protocol.py). Its ok rows, per part and phase:

    plain        one per timed run, numbered by `plain_run` (Table 3's times, the final accuracies)
    op           one per op of the synced breakdown run (Table 4), placed by the net's op order
    memory       one (Table 5)
    convergence  one per recorded `iteration` (Fig. 3, the loss curve, the fig3 claim)

Every selection below orders them by their own number (or op), never by where they stand in the
file, and every figure is a median, a sum or a lookup by that number: a cell's rows in any order
read the same figures (tests/test_mlp_readout.py).

    rows(rs, part, phase)        the ok rows of PART (any part: None) and PHASE, in their own order
    variants(c)                  the parts with a plain run, in the cell's order
    plain_median(rs, part, key)  one repeat's median of a time over its plain runs (above 0)
    per_repeat(group, part, key) repeat -> that median (Table 3's totals; the summary)
    rate(key)                    1 / plain_median, a claims metric (Table 3's t3-* claims)
    speedup(group, part, key)    the reference's per-repeat figure over PART's, paired by repeat
    pooled(group, part, key)     the median over every repeat's plain runs (Table 3's per-iteration,
                                 forward and backward columns, its accuracies; the summary)
    pooled_speedup(...)          the reference's pooled figure over PART's (Table 3's ms columns)
    summary(group, part)         the figures a matrix's end prints for PART (RunFigures)
    op_ms / op_rate / op_names / op_per_repeat / op_median / op_speedup / matmul_lead
                                 Table 4 and the t4-* and matmul-gains-most claims
    memory_row / memory_mb / memory_metric / memory(c)
                                 Table 5 and the t5-* claims
    curve(group, part, key) / has_curve / curve_gap_pts / curve_agrees
                                 Fig. 3, the fig3-convergence claim, the equivalence check
    throughput / samples_per_unit / accuracy / loss_curve / out_of_order / progress
                                 the Study hooks (compare, verify, the live progress line)
    blas(group) / dtype(c)       what the report's heading and Fig. 3's labels name
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from bench.core import stats
from bench.core.resultset import ResultCell as Cell
from bench.core.study import curve as _xy_curve
from bench.core.tables import finite, num, nums, quotient

Metric = Callable[[list[dict], str], "float | None"]  # bench.core.claims.Metric: (a cell's rows, a part) -> value

# ---- the row fields read here (protocol.py and runner.py write them) ----------------------------
TOTAL = "total_s"  # Table 3: the timed training steps of one plain run (s); the study's timing_key
WHOLE = "loop_wall_s"  # Table 3: the whole training loop with its records (s), the seed's "entire process"
TOTALS = (TOTAL, WHOLE)
PER_ITER = "per_iter_median_ms"  # a plain run's median time per iteration
FORWARD = "forward_median_ms"
BACKWARD = "backward_median_ms"  # backward + update
STEP_TIMES = (PER_ITER, FORWARD, BACKWARD)  # Table 3's ms columns
_ITER_MIN, _ITER_MAX = "per_iter_min_ms", "per_iter_max_ms"
TRAIN_FINAL, VAL_FINAL = "final_train_acc", "final_val_acc"  # a plain run's accuracies at its end (fractions)
ITERATIONS, N_TRAIN = "iterations", "n_train"  # the cell's work: steps, and samples per (full-batch) step
STEP = "iteration"  # a convergence row's own number: Fig. 3's x axis
ACCURACIES = ("train_acc", "val_acc")  # a convergence row's two accuracies (fractions): Fig. 3's panels
VAL_ACC = ACCURACIES[1]
LOSS = "loss"
_AGREES = "agrees_with_numpy"  # a convergence row: its curve within runner.CURVE_TOL of the reference's
OP, OP_MS = "op", "op_ms_per_iter"
_PLAIN_RUN = "plain_run"
_BLAS = "blas"
# the ops of the synced breakdown run, in the order a step runs them: net.OPS, then the tuned
# variant's two (tuned_cupy.py); an op named nowhere here sorts after them, by name
OPS = ("matmul", "relu", "softmax", "gradient", "update", "forward_fused", "backward_update")
MATMUL, OTHER_OPS = "matmul", ("relu", "softmax", "gradient")  # Table 4's four rows of the seed
# Table 5: the memory row's components (runner.MEMORY_PARTS, in its order: they add up to its total;
# tests/test_mlp_readout.py holds the two equal), then what was also read, each with the label the
# report prints
PARAMS, INPUT, ACTIVATIONS, GRADIENTS = "params_bytes", "input_bytes", "activations_bytes", "gradients_bytes"
OTHER, OVERHEAD, MEMORY_TOTAL = "other_bytes", "framework_overhead_bytes", "memory_total_bytes"
MEMORY_LABELS = {
    PARAMS: "Model parameters",
    INPUT: "Input data",
    ACTIVATIONS: "Intermediate activations",
    GRADIENTS: "Gradient storage",
    OTHER: "Other arrays (tuned: record buffers)",
    OVERHEAD: "Framework overhead",
}
MEMORY_ALSO = {
    "pool_used_bytes": "CuPy pool in use",
    "pool_total_bytes": "CuPy pool held",
    "rss_start_bytes": "process RSS at start",
    "rss_bytes": "process RSS",
    "device_used_start_bytes": "GPU memory in use at start (CUDA context + anyone else)",
    "device_used_bytes": "GPU memory in use (CUDA context + anyone else)",
}
MB = 1e6  # Table 5's unit: 10^6 bytes

_NUMBERED = {"plain": _PLAIN_RUN, "convergence": STEP}  # each phase's own number


def _study() -> Any:
    """The registered mlp-scratch study, found through the registry (this module sits below the
    package's __init__, which imports it: an import of the package here would be a cycle)."""
    from bench.core.registry import get_study

    return get_study("mlp-scratch")


def reference() -> str:
    """The part every speedup and curve compares with (MlpScratch.reference(): the registry's)."""
    return _study().reference()


# ---- the rows --------------------------------------------------------------------------------
def _place(phase: str) -> Callable[[dict], tuple]:
    """The sort key of PHASE's rows: their own number (none last), an op its place in OPS."""
    if phase == "op":
        return lambda r: (OPS.index(r[OP]) if r.get(OP) in OPS else len(OPS), str(r.get(OP)))
    key = _NUMBERED.get(phase)
    if key is None:
        return lambda r: ()

    def number(r: dict) -> tuple:
        n = num(r, key)
        return (n is None, n or 0)

    return number


def rows(rs: Iterable[dict], part: str | None, phase: str) -> list[dict]:
    """The ok rows of PHASE of row backend PART (any part where None), ordered by their own
    number (plain_run, iteration; an op by OPS; stable where two share one)."""
    got = [
        r
        for r in rs
        if isinstance(r, dict)
        and r.get("phase") == phase
        and r.get("status") == "ok"
        and (part is None or str(r.get("backend")) == part)
    ]
    return sorted(got, key=_place(phase))


def _group_rows(group: list[Cell], part: str | None, phase: str) -> list[dict]:
    return [r for c in group for r in rows(c.rows, part, phase)]


def _part_order(c: Cell) -> Callable[[str], tuple]:
    """The cell's own order of its parts: its spec's backend ('+'-joined, the order protocol.py ran
    them in), else the registry's; a part named in neither after them, by name."""
    named = [p for p in str(c.spec.get("backend") or "").split("+") if p]
    if not named:
        named = list(_study().backends)
    return lambda p: (named.index(p) if p in named else len(named), p)


def variants(c: Cell) -> list[str]:
    """The parts of cell C with an ok plain run, in the cell's order (not its rows')."""
    return sorted({str(r.get("backend")) for r in rows(c.rows, None, "plain")}, key=_part_order(c))


# ---- Table 3: the plain runs' times and accuracies ------------------------------------------------
def plain_median(rs: list[dict], part: str, key: str) -> float | None:
    """The median of KEY (a time) over one repeat's plain runs of PART, the values above 0 only: a
    time of 0 measured nothing, and every speedup divides by it."""
    vals = [v for v in nums(rows(rs, part, "plain"), key) if v > 0]
    return statistics.median(vals) if vals else None


def per_repeat(group: list[Cell], part: str, key: str) -> dict[int, float]:
    """Repeat -> plain_median of KEY (what bench.core.stats takes), over the configuration's repeats."""
    out = {}
    for c in group:
        if (m := plain_median(c.rows, part, key)) is not None:
            out[c.repeat] = m
    return out


def rate(key: str) -> Metric:
    """1 / plain_median of KEY (ms): a claims metric, larger is faster."""

    def metric(rs: list[dict], part: str) -> float | None:
        m = plain_median(rs, part, key)
        return 1 / m if m else None

    return metric


def speedup(group: list[Cell], part: str, key: str = TOTAL, ref: str | None = None) -> stats.Summary | None:
    """The reference's per-repeat KEY over PART's (a speedup: above 1, PART is faster), paired by
    repeat (stats.ratio); None where a side has no figure or the ratio is not finite."""
    base, mine = per_repeat(group, ref or reference(), key), per_repeat(group, part, key)
    return finite(stats.ratio(base, mine)) if base and mine else None


def pooled(group: list[Cell], part: str, key: str) -> float | None:
    """The median of KEY over every repeat's plain runs of PART, pooled (Table 3's per-iteration,
    forward and backward columns and its final accuracies)."""
    vals = nums(_group_rows(group, part, "plain"), key)
    return statistics.median(vals) if vals else None


def pooled_speedup(group: list[Cell], part: str, key: str, ref: str | None = None) -> float | None:
    """The reference's pooled KEY over PART's (quotient: None where it cannot be formed)."""
    return quotient(pooled(group, ref or reference(), key), pooled(group, part, key))


@dataclass(frozen=True)
class RunFigures:
    """What a matrix prints at its end for one part of one configuration."""

    total: stats.Summary  # the timed steps' time (s): median over repeats with its interval
    per_iter_ms: float | None  # pooled median time per iteration
    final_val_acc: float | None  # pooled median final validation accuracy (a fraction)
    speed: stats.Summary | None  # the reference's total over this part's (None: the reference itself)

    def data(self) -> dict:
        """The summary's JSON entry for these figures."""
        return {
            TOTAL: self.total.median,
            f"{TOTAL}_ci": [self.total.lo, self.total.hi],
            "per_iter_ms": self.per_iter_ms,
            VAL_FINAL: self.final_val_acc,
        }


def summary(group: list[Cell], part: str, ref: str | None = None) -> RunFigures | None:
    """PART's RunFigures over the configuration's repeats; None where it has no timed total."""
    total = per_repeat(group, part, TOTAL)
    if not total:
        return None
    ref = ref or reference()
    return RunFigures(
        stats.summarize(list(total.values())),
        pooled(group, part, PER_ITER),
        pooled(group, part, VAL_FINAL),
        speedup(group, part, TOTAL, ref) if part != ref else None,
    )


# ---- Table 4: the synced op run -------------------------------------------------------------------
def op_ms(rs: list[dict], part: str, op: str) -> float | None:
    """OP's ms per iteration in one repeat's synced op run of PART, where above 0 (the median,
    should a repeat hold the op twice)."""
    vals = [v for v in nums((r for r in rows(rs, part, "op") if r.get(OP) == op), OP_MS) if v > 0]
    return statistics.median(vals) if vals else None


def op_rate(op: str) -> Metric:
    """1 / OP's ms per iteration: a claims metric, larger is faster."""

    def metric(rs: list[dict], part: str) -> float | None:
        ms = op_ms(rs, part, op)
        return 1 / ms if ms else None

    return metric


def op_names(group: list[Cell]) -> list[str]:
    """The ops any part timed in the configuration, in OPS order."""
    got = {str(r.get(OP)) for r in _group_rows(group, None, "op") if (v := num(r, OP_MS)) is not None and v > 0}
    return sorted(got, key=lambda o: (OPS.index(o) if o in OPS else len(OPS), o))


def op_per_repeat(group: list[Cell], part: str, op: str) -> dict[int, float]:
    """Repeat -> op_ms of PART's OP."""
    out = {}
    for c in group:
        if (m := op_ms(c.rows, part, op)) is not None:
            out[c.repeat] = m
    return out


def op_median(group: list[Cell], part: str, op: str) -> float | None:
    """The median over repeats of PART's OP ms per iteration (Table 4's cell)."""
    per = op_per_repeat(group, part, op)
    return statistics.median(per.values()) if per else None


def op_speedup(group: list[Cell], part: str, op: str, ref: str | None = None) -> stats.Summary | None:
    """PART's OP rate over the reference's, paired by repeat (stats.ratio of the per-repeat rates:
    what the t4-* claims read); None where a side has no figure or the ratio is not finite."""
    base, mine = op_per_repeat(group, ref or reference(), op), op_per_repeat(group, part, op)
    if not base or not mine:
        return None
    return finite(stats.ratio({k: 1 / x for k, x in mine.items()}, {k: 1 / x for k, x in base.items()}))


def matmul_lead(rs: list[dict], part: str, ref: str) -> float | None:
    """The matmul's speedup over REF (one repeat's op run) over the largest of Table 4's other
    ops' speedups: above 1, the matmul gains most."""

    def gain(op: str) -> float | None:
        return quotient(op_ms(rs, ref, op), op_ms(rs, part, op))

    mm, gains = gain(MATMUL), [gain(op) for op in OTHER_OPS]
    others = [g for g in gains if g is not None]
    return quotient(mm, max(others)) if mm and len(others) == len(gains) else None


# ---- Table 5: the memory row ----------------------------------------------------------------------
def memory_row(rs: list[dict], part: str) -> dict | None:
    """PART's memory row of one repeat (protocol.py writes one), None where it has none."""
    got = rows(rs, part, "memory")
    return got[0] if got else None


def one_definition(row: dict) -> bool:
    """Whether ROW was written under the one overhead definition (it has memory_total_bytes; older
    rows defined the overhead per column)."""
    return num(row, MEMORY_TOTAL) is not None


def memory_mb(rs: list[dict], part: str, key: str) -> float | None:
    """KEY of PART's memory row in MB (10^6 bytes); the overhead only from a row of the one
    definition."""
    r = memory_row(rs, part)
    if r is None or (key == OVERHEAD and not one_definition(r)):
        return None
    v = num(r, key)
    return v / MB if v is not None else None


def memory_metric(key: str) -> Metric:
    """memory_mb of KEY as a claims metric."""

    def metric(rs: list[dict], part: str) -> float | None:
        return memory_mb(rs, part, key)

    return metric


@dataclass(frozen=True)
class MemoryTable:
    """Table 5 of one repeat, in MB, a column per part (None: not read)."""

    parts: list[str]
    rows: list[tuple[str, list[float | None]]]  # (label, per part): the components, adding up to total
    total: list[float | None]
    also: list[tuple[str, list[float | None]]]  # (label, per part): read too, not in the total
    one_definition: bool  # every column under the one overhead definition


def memory(c: Cell) -> MemoryTable:
    """Cell C's Table 5: each part's components (the tuned variant's other arrays only where some
    part has them), its total (memory_total_bytes; for older rows the sum of the components),
    then what was also read."""
    vs = sorted({str(r.get("backend")) for r in rows(c.rows, None, "memory")}, key=_part_order(c))
    mem = [r for v in vs if (r := memory_row(c.rows, v)) is not None]
    keys = [k for k in MEMORY_LABELS if k != OTHER or any(num(r, k) for r in mem)]

    def mb(v: float | None) -> float | None:
        return v / MB if v is not None else None

    totals = []
    for r in mem:
        t = num(r, MEMORY_TOTAL)
        if t is None:
            parts = [x for k in keys if (x := num(r, k)) is not None]
            t = sum(parts) if parts else None
        totals.append(mb(t))
    return MemoryTable(
        vs,
        [(MEMORY_LABELS[k], [mb(num(r, k)) for r in mem]) for k in keys],
        totals,
        [(label, [mb(num(r, k)) for r in mem]) for k, label in MEMORY_ALSO.items() if any(num(r, k) is not None for r in mem)],
        all(one_definition(r) for r in mem),
    )


# ---- Fig. 3: the convergence rows -----------------------------------------------------------------
def curve(group: list[Cell], part: str, key: str) -> dict[int, tuple[float, float, float]]:
    """Iteration -> (median, min, max) over the configuration's repeats of KEY (an accuracy, a
    fraction) x 100, by iteration."""
    by: dict[int, list[float]] = {}
    for r in _group_rows(group, part, "convergence"):
        if (i := num(r, STEP)) is not None and (x := num(r, key)) is not None:
            by.setdefault(int(i), []).append(100 * x)
    return {i: (statistics.median(x), min(x), max(x)) for i, x in sorted(by.items())}


def has_curve(group: list[Cell], part: str) -> bool:
    """Whether PART has a validation curve (Fig. 3 draws a series only then)."""
    return bool(curve(group, part, VAL_ACC))


def curve_gap_pts(rs: list[dict], part: str, ref: str) -> float | None:
    """The largest |accuracy - REF's| (training or validation, percentage points) over the
    recorded iterations both curves of one repeat share; None for REF itself."""
    if part == ref:
        return None
    base = {i: r for r in rows(rs, ref, "convergence") if (i := num(r, STEP)) is not None}
    gaps = [
        100 * abs(a - b)
        for r in rows(rs, part, "convergence")
        if (i := num(r, STEP)) is not None and (o := base.get(i)) is not None
        for k in ACCURACIES
        if (a := num(r, k)) is not None and (b := num(o, k)) is not None
    ]
    return max(gaps) if gaps else None


def curve_agrees(rs: list[dict], part: str) -> bool | None:
    """Whether PART's convergence curve agreed with the reference's at every point (as the cell
    judged it, runner.compare_curves); None where it has no curve."""
    conv = rows(rs, part, "convergence")
    return all(r.get(_AGREES) is True for r in conv) if conv else None


# ---- the Study hooks --------------------------------------------------------------------------------
def throughput(rs: list[dict]) -> dict[str, float]:
    """Part -> the median over its plain runs of iterations / total_s: a count of at least one
    over a time above 0, where the quotient is finite."""
    by: dict[str, list[float]] = {}
    for r in rows(rs, None, "plain"):
        t, n = num(r, TOTAL), num(r, ITERATIONS)
        if t and n and n >= 1 and (v := quotient(n, t)):
            by.setdefault(str(r.get("backend")), []).append(v)
    return {p: statistics.median(v) for p, v in by.items()}


def samples_per_unit(rs: list[dict], part: str) -> float | None:
    """The samples one iteration passes (full-batch: the training set, its plain runs' n_train)."""
    n = [v for v in nums(rows(rs, part, "plain"), N_TRAIN) if v]
    return float(n[0]) if n else None


def accuracy(rs: list[dict], part: str) -> tuple[str, float] | None:
    """(its name, the median final validation accuracy over PART's plain runs)."""
    vals = nums(rows(rs, part, "plain"), VAL_FINAL)
    return (VAL_FINAL, statistics.median(vals)) if vals else None


def loss_curve(rs: list[dict], part: str):
    """PART's loss per recorded iteration (bench.core.study.curve)."""
    return _xy_curve(rows(rs, part, "convergence"), STEP, LOSS)


def out_of_order(rs: list[dict]) -> list[str]:
    """The parts of plain runs whose per-iteration min <= median <= max does not hold."""
    return [
        str(r.get("backend"))
        for r in rows(rs, None, "plain")
        if (lo := num(r, _ITER_MIN)) is not None
        and (md := num(r, PER_ITER)) is not None
        and (hi := num(r, _ITER_MAX)) is not None
        and not lo <= md <= hi
    ]


def progress(rs: list[dict]) -> list[tuple[str, float]]:
    """(part, median ms per iteration) of the plain runs among RS, for the live progress line."""
    return [(str(r.get("backend")), v) for r in rows(rs, None, "plain") if (v := num(r, PER_ITER)) is not None]


# ---- what the headings and labels name -----------------------------------------------------------
def blas(group: list[Cell]) -> list[str]:
    """Every BLAS text the configuration's plain runs name (threadpoolctl's), sorted."""
    return sorted({str(r[_BLAS]) for r in _group_rows(group, None, "plain") if r.get(_BLAS)})


def dtype(c: Cell) -> str:
    """The dtype cell C trained in."""
    return str(next((r.get("dtype") for r in c.rows if r.get("dtype")), "?"))
