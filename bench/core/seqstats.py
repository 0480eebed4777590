"""The anytime-valid interval of a comparison whose repeats were added until it was decided.

`--until-decided` (bench/run/sequential.py) looks at a comparison after every round and stops
when its verdict is decided, its interval is narrow enough, or time runs out. Re-running the
fixed-n bootstrap (bench.core.stats) after each round and stopping when it excludes the claim's
edge inflates the error: every look is another chance for noise to cross the edge
(tests/test_sequential_coverage.py measures by how much). A *confidence sequence* is a sequence
of intervals that holds the truth at every round at once, with probability 95 %, so it stays
valid at whatever round a data-dependent rule stops.

Which one, and why:
- The statistic is the **median of the per-round ratios** A_i / B_i. The sequential scheduler
  runs both sides of a comparison in every round (fresh processes, side by side), so round i of
  A and of B shared the machine's state: the ratio of one round is the unit, as the fixed-n
  report pairs repeat i with repeat i. The fixed-n report's ratio of the two medians and the
  median of paired ratios agree wherever the round-to-round noise is symmetric; the report
  says which it printed.
- The sequence is Howard & Ramdas's confidence sequence for a quantile ("Sequential estimation
  of quantiles with applications to A/B-testing and best-arm identification", Bernoulli 28(3),
  2022): the count of rounds at or below the true median is a sum of Bernoulli(1/2) steps, a
  one-sided normal-mixture boundary at 2.5 % on each side holds it for all rounds at once
  (Ville's inequality on a nonnegative supermartingale), and order statistics turn that into
  [X_(lo), X_(hi)]. It assumes only that the rounds are independent draws of one distribution
  (what the bootstrap assumes too): no normality, no bounds, outliers cost nothing but their rank.
  Implemented by `ville.QuantileCS` (numpy + scipy only), computed on the log ratios in the
  order the rounds ran, as the running intersection.
- Its price: at 95 % it is unbounded until MIN_ROUNDS rounds (the Bernoulli count needs that
  many before any order statistic can be excluded), then [min, max] of the rounds, then it
  narrows. Cheap cells afford that; a comparison that needs more than its budget says so.

T_OPT (the rounds at which the boundary is tightest) is fixed here, before any data: a mixture
tuned on the data it judges would not be a confidence sequence.

`record_of(root)` reads a results dir's sequential.json (the run's plan and why each comparison
stopped) as untrusted input; `swap` gives a same-run ratio finding of such a run this interval
instead of the fixed-n one, so every table of the report judges it by the one valid method.
"""

from __future__ import annotations

import functools
import math
import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.core.stats import CONFIDENCE, CS_MIN_ROUNDS, Summary

if TYPE_CHECKING:
    from bench.core.answers import Finding

ALPHA = 1 - CONFIDENCE
T_OPT = 12  # rounds where the mixture boundary is tightest: 10-20 is what cheap cells afford
METHOD = (
    "95% confidence sequence of the median per-round ratio (Howard & Ramdas 2022, ville.QuantileCS): "
    "valid at every round, whenever the run stopped"
)
FIXED_METHOD = (
    "a fixed number of rounds a comparison (--fixed-rounds: no verdict stopped one early), then the fixed-n figure: "
    "95% percentile bootstrap from 6 rounds (scipy.stats.bootstrap), the range below"
)
RECORD = "sequential.json"  # in a results dir: what --until-decided planned and why each comparison stopped


@functools.lru_cache(maxsize=1)
def _cs_class() -> Any:
    try:
        from ville import QuantileCS
    except ImportError as err:  # a checkout whose environment predates the lock that added it
        from bench.core.errors import KitError

        raise KitError(
            "the anytime-valid interval needs the ville package (requirements/*.txt): "
            "bash scripts/setup.sh installs it, or pip install ville==0.1.0"
        ) from err
    return QuantileCS


@functools.lru_cache(maxsize=1)
def _cs() -> Any:
    """The one sequence object: its mixture is fixed at construction (T_OPT, ALPHA), and `fit`
    starts it afresh on each stream, so one instance serves every comparison (one thread)."""
    return _cs_class()(q=0.5, alpha=ALPHA, t_opt=T_OPT, intersect=True)


def paired_rounds(a: dict[int, float], b: dict[int, float]) -> list[float]:
    """A's value over B's for every round both hold, in round order (throughputs: > 0)."""
    rounds = sorted(set(a) & set(b))
    out = []
    for r in rounds:
        x, y = float(a[r]), float(b[r])
        if not (x > 0 and y > 0 and math.isfinite(x) and math.isfinite(y)):
            raise ValueError(f"round {r}: a ratio needs positive finite values, got {x} / {y}")
        q = x / y
        if not (q > 0 and math.isfinite(q)):  # 1e48 / 1e-260: no ratio a log can take
            raise ValueError(f"round {r}: the ratio {x} / {y} is not a positive finite number")
        out.append(q)
    return out


def paired(a: dict[int, float], b: dict[int, float]) -> Summary:
    """The median of the per-round ratios A/B with its 95 % confidence sequence at the last
    round (module docstring). lo/hi are None while the sequence is unbounded (fewer rounds than
    MIN_ROUNDS); the kind is "cs" either way."""
    ratios = paired_rounds(a, b)
    if not ratios:
        raise ValueError("a paired ratio needs rounds that both sides ran")
    cs = _cs().fit([math.log(r) for r in ratios])
    lo, hi = cs.interval()
    ok = math.isfinite(lo) and math.isfinite(hi)
    q = statistics.quantiles(ratios, n=4, method="inclusive") if len(ratios) > 1 else [ratios[0]] * 3
    return Summary(
        statistics.median(ratios),
        math.exp(lo) if ok else None,
        math.exp(hi) if ok else None,
        q[0],
        q[2],
        min(ratios),
        max(ratios),
        len(ratios),
        "cs",
    )


def pair_figure(a: dict[int, float], b: dict[int, float], sequential: bool) -> Summary:
    """The one figure of A over B, two sides of one run (repeat -> value): in a SEQUENTIAL run (its
    results dir holds a trusted sequential.json) the median per-round ratio with its 95% confidence
    sequence, else the ratio of the medians paired by repeat (stats.ratio). The claims (swap) and
    every study table of the same comparison read it, so one report prints one figure for it."""
    from bench.core import stats

    if sequential:
        try:
            return paired(a, b)
        except ValueError:
            pass
    return stats.ratio(a, b)


def sequential_root(root: Path) -> bool:
    """Whether results dir ROOT is a sequential run's (a sequential.json the kit can trust, of the
    confidence sequence: a --fixed-rounds run's figures are the fixed-n ones)."""
    got = _record(root)
    return got is not None and not got[0]


def min_rounds() -> int:
    """The first round at which the 95 % sequence is bounded (stats.CS_MIN_ROUNDS says it to
    code that must not import ville)."""
    cs = _cs().fit([float(i % 7) for i in range(60)])
    bounded = [i for i, (lo, hi) in enumerate(zip(cs.lower_, cs.upper_), 1) if math.isfinite(lo) and math.isfinite(hi)]
    return bounded[0]


def width(s: Summary) -> float | None:
    """The interval's width relative to its median ((hi - lo) / median), None without one."""
    if s.lo is None or s.hi is None or not s.median:
        return None
    return (s.hi - s.lo) / abs(s.median)


# ---- the record a sequential run leaves, read back as untrusted input -------------------------
def _model() -> Any:
    from pydantic import BaseModel, ConfigDict, Field

    class Stop(BaseModel):
        model_config = ConfigDict(extra="ignore")
        study: str = Field(max_length=200)
        claim: str = Field(max_length=200)
        what: str = Field(default="", max_length=500)
        cells: list[str] = Field(max_length=2, min_length=2)  # the two sides' names (seqstats.side_names)
        rounds: int = Field(ge=0, le=10_000)
        stopped: str = Field(max_length=40)  # decided | width | budget | max-repeats | failed | interrupted | open
        why: str = Field(default="", max_length=1000)
        seconds: float = Field(ge=0, le=1e9)
        at_s: float | None = Field(default=None, ge=0, le=1e9)  # seconds into the run when it stopped

    class Record(BaseModel):
        model_config = ConfigDict(extra="ignore")
        method: str = Field(max_length=1000)
        fixed: bool = False  # --fixed-rounds: the fixed-n figure stands (no sequence to swap in)
        confidence: float = Field(gt=0, lt=1)
        comparisons: list[Stop] = Field(max_length=10_000)

    return Record


def side_names(finding: Finding) -> tuple[str, ...]:
    """How the record names a comparison's sides (one workload of a claim from another)."""
    return tuple(s.describe({}, device=False).split(" [")[0] for s in finding.sides)


def record_of(root: Path) -> dict[tuple[str, str, str, tuple[str, ...]], dict] | None:
    """(study, claim id, what, side names) -> that comparison's stop, from ROOT/sequential.json; None when ROOT
    holds none (a fixed-n run) or one that cannot be trusted (then the fixed-n interval stands,
    which is what a reader of the rows alone would compute)."""
    got = _record(root)
    return None if got is None else got[1]


def _record(root: Path) -> tuple[bool, dict[tuple[str, str, str, tuple[str, ...]], dict]] | None:
    """(whether the run gave fixed rounds, record_of's map) from ROOT/sequential.json; None as record_of."""
    from bench.core.resultset import json_file

    raw = json_file(root / RECORD)
    if not raw:
        return None
    try:
        rec = _model().model_validate(raw)
    except Exception:  # noqa: BLE001 - pydantic's ValidationError: an untrusted file that is not ours
        return None
    return rec.fixed, {(c.study, c.claim, c.what, tuple(c.cells)): c.model_dump() for c in rec.comparisons}


def _root(finding: Finding) -> Path | None:
    roots = {c.dir.parent.parent.resolve() for s in finding.sides for c in s.cells}
    return roots.pop() if len(roots) == 1 else None


def swap(study: str, claim_id: str, found: list[Finding]) -> list[Finding]:
    """FOUND with the anytime-valid interval for every same-run ratio finding of a sequential run
    (a results dir holding sequential.json), and that comparison's stop on it."""
    records: dict[Path, tuple[bool, dict] | None] = {}
    for f in found:
        if not f.of_ratio or f.rank != 0 or len(f.sides) != 2:
            continue
        root = _root(f)
        if root is not None and root not in records:
            records[root] = _record(root)
        got = records.get(root) if root is not None else None
        if got is None:
            continue
        fixed, rec = got
        if not fixed:  # --fixed-rounds: the fixed-n figure already is this comparison's one
            try:
                f.value = paired(f.sides[0].per, f.sides[1].per)
            except (
                ValueError
            ):  # a side measured 0 (an accuracy of nothing learned), or no round both ran: the fixed-n figure stays
                continue
        stop = rec.get((study, claim_id, f.what, side_names(f)))
        f.stop = stop_text(stop) if stop else "not planned by the sequential run (its repeats came with the others')"
    return found


def _took(seconds: float) -> str:
    s = round(float(seconds))
    return f"{s} s" if s < 60 else f"{s // 60} min {s % 60:02d} s"


def stop_text(stop: dict) -> str:
    """'12 rounds, stopped decided 9 min 41 s into the run (its cells: 6 min 02 s)' for the report
    and the closing note: the time from the run's start to its stop, and its cells' share of it
    (an added round's wall time split over the cells in it)."""
    why = f" ({stop['why']})" if stop.get("why") else ""
    at = f" {_took(stop['at_s'])} into the run" if stop.get("at_s") is not None else ""
    return f"{stop['rounds']} rounds, stopped {stop['stopped']}{at} (its cells: {_took(stop['seconds'])}){why}"


__all__ = [
    "ALPHA",
    "CS_MIN_ROUNDS",
    "FIXED_METHOD",
    "METHOD",
    "RECORD",
    "T_OPT",
    "min_rounds",
    "pair_figure",
    "paired",
    "record_of",
    "sequential_root",
    "stop_text",
    "swap",
    "width",
]
