"""A seed's claims as data, and the one rule set that judges them.

Every statement a seed makes about its results that a measurement can check is a `Claim`,
declared by its study beside the cells it needs (`Study.claims`): the seed's words and
figure, where it says it, what it needs (real data, GPUs), and a rule that measures it from
cells:

    Ratio(a, b)      median(A) / median(B) of a per-repeat metric (the study's throughput by
                     default): "GPU over CPU", "batch 128 over 64"; a comparison of two sides
    Level(side)      the median over repeats of one side's metric: "final test accuracy 97 %"
    Measured(fn)     anything else, computed by the study (`fn(study, cells)` returns Findings
                     built with bench.core.answers' sides and pairs); the verdict is still
                     decided here

and an `Expect`: the region of the value where the claim holds (above 1x, 10-50x, < 20 s).

One policy decides every verdict (`decide`), from the value's interval (bench.core.stats: a
95 % bootstrap interval from MIN_CI_REPEATS repeats, below that the range of the repeats; for a
comparison whose rounds were added until it was decided, the 95 % confidence sequence of
bench.core.seqstats, which stays valid whenever the run stopped):

    holds              the whole interval inside the claim's region
    does not hold      the whole interval outside it
    undecided          the interval straddles the region's edge (a range of 3 holds the true
                       median with probability 75 %: more repeats decide it)
    too few repeats    one repeat on a side: no interval, so no verdict
    not comparable     the seed's quantity is not one we measure (the claim says why)
    needs real data    the claim is about the data (accuracy, loss) and a side ran on synthetic data
    not measured here  no cell of the kind the claim needs (the reason names what is missing)
    not judged         the declaration does not fit these results (the line says why)

A claim measured by several findings (Measured: "ResNet-50 gains most" is one ratio per other
model) holds when all hold, does not hold when any does not, and is undecided otherwise.
Deterministic figures (FLOP counts, parameters) are `exact`: their value decides alone. A value
whose interval is not from repeats but the two bounds a count allows (a roofline point's
intensity from its unfused to its compulsory bytes: Summary kind "bounds") decides the same
way, and is undecided where its bounds reach across the claim's edge.

Standard library only: the host side judges claims from rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bench.core.stats import CS_MIN_ROUNDS, MIN_CI_REPEATS, Summary

if TYPE_CHECKING:
    from bench.core.answers import Finding
    from bench.core.resultset import ResultCell
    from bench.core.study import Study

HOLDS = "holds"
FAILS = "does not hold"
UNDECIDED = "undecided"
FEW = "too few repeats"
NOT_COMPARABLE = "not comparable"
NEEDS_REAL = "needs real data"
NOT_HERE = "not measured here"
NOT_JUDGED = "not judged"
VERDICTS = (HOLDS, FAILS, UNDECIDED, FEW, NOT_COMPARABLE, NEEDS_REAL, NOT_HERE, NOT_JUDGED)
DECIDED = (HOLDS, FAILS)
# how the report counts a seed's claims: each verdict falls in one of these
TALLY = {
    HOLDS: "judged",
    FAILS: "judged",
    UNDECIDED: "undecided",
    FEW: "undecided",
    NOT_COMPARABLE: "not comparable",
    NEEDS_REAL: "needs real data",
    NOT_HERE: "not measured here",
    NOT_JUDGED: "not judged",
}

# params that never make two workloads different: how many threads or loader workers a
# host gave, which devices by index, and the file checksum (the dataset name stays)
ALWAYS_FREE = ("threads", "num_workers", "devices", "dataset_sha256")
# params that set how much work a cell does (epochs, step caps, warm-up, sweep and profiler
# settings), not what one step computes: a rate does not depend on them, so a claim about a
# rate may let them differ (a reduced CPU protocol beside the GPU's full one); a pair whose
# sides differ in one says so
WORK_AMOUNT = (
    "epochs",
    "max_steps",
    "max_train_batches",
    "max_val_batches",
    "max_eval_batches",
    "warmup_steps",
    "warmup_batches",
    "idle_s",
    "overhead_blocks",
    "overhead_steps",
    "prof_wait",
    "prof_active",
    "prof_warmup",
    "roof_sizes",
    "sweep_batches",
    "sweep_max_batch",
    "sweep_min_batch",
    "sweep_mem_fraction",
    "synthetic_train_per_class",
    "synthetic_val_per_class",
    "trials",
    "calib_batches",
    "latency_calls",
    "latency_warmup",
    "n_train",
    "n_test",
)
# the work a cell trains: how many images, steps, epochs and search trials. A pair is the same work on
# both sides or no pair at all (DESIGN, "same work on both sides"): whatever a claim lets differ, these
# and the data (its name, and whether real) must agree, except where the claim compares them itself.
# A side that cannot afford the seed's setup makes both sides smaller, never one.
TRAINED_WORK = ("epochs", "max_steps", "max_train_batches", "n_train", "synthetic_train_per_class", "trials", "limit_train")
# a speed claim holds for the same shapes whatever the images show: the dataset may differ
# between its sides (MNIST beside the embedded digits, a synthetic tree beside the real one),
# and the pair says so
SPEED_FREE = (*WORK_AMOUNT, "dataset")


@dataclass(frozen=True)
class Expect:
    """Where the claim holds: LO < value < HI (either end open)."""

    lo: float | None = None
    hi: float | None = None
    text: str = ""  # how a reader says it: "above 1x", "10-50x", "below 20 s"

    def place(self, lo: float, hi: float) -> str:
        """'in', 'out' or 'across': where the interval [LO, HI] lies against the region."""
        below_lo = self.lo is not None and hi <= self.lo
        above_hi = self.hi is not None and lo >= self.hi
        if below_lo or above_hi:
            return "out"
        inside = (self.lo is None or lo > self.lo) and (self.hi is None or hi < self.hi)
        return "in" if inside else "across"


def above(x: float, text: str = "") -> Expect:
    return Expect(lo=x, text=text or f"above {x:g}")


def below(x: float, text: str = "") -> Expect:
    return Expect(hi=x, text=text or f"below {x:g}")


def between(lo: float, hi: float, text: str = "") -> Expect:
    return Expect(lo=lo, hi=hi, text=text or f"{lo:g} to {hi:g}")


FASTER = above(1.0, "first side faster (above 1x)")


@dataclass(frozen=True)
class Needs:
    """What a claim needs before its verdict can mean anything."""

    real_data: bool = False  # about the data's content (accuracy, loss, decode cost): synthetic data cannot judge it
    gpus: int = 0  # cells on this many GPUs (2: the seed's two-GPU run)
    what: str = ""  # a device the claim is tied to, for the reason line ("the seed's RTX A6000")


Metric = Callable[[list[dict], str], "float | None"]  # (a cell's rows, its row backend) -> one value per repeat


@dataclass(frozen=True)
class Ratio:
    """median over repeats of A's METRIC over B's; the sides are sets of facets (bench.core.answers.facets)."""

    a: dict[str, Any]
    b: dict[str, Any]
    metric: Metric | None = None  # None: the study's throughput (Study.throughput, larger = faster)
    unit: str = "x"
    free: tuple[str, ...] = ()  # params that may differ between the sides besides a's and b's keys
    across: str = ""  # what a pair may span: "hosts" | "host" | "run"; "": hosts where the sides' platforms differ, else host


@dataclass(frozen=True)
class Level:
    """One side's METRIC: the median over its repeats."""

    side: dict[str, Any]
    metric: Metric
    unit: str = ""
    free: tuple[str, ...] = WORK_AMOUNT  # params whose values do not tell two answers apart


@dataclass(frozen=True)
class Measured:
    """A study's own measurement: FN(study, cells) -> Findings (bench.core.answers builds them)."""

    fn: Callable[[Study, list[ResultCell]], list[Finding]]
    conditions: tuple[str, ...] = ()  # the findings' `what`s it needs, all of them (a missing one: not measured here)


@dataclass(frozen=True)
class Claim:
    id: str  # unique in its study: "gpu-over-cpu-torch"
    text: str  # the seed's statement, shortened
    where: str  # where the seed makes it: "Table I", "Sec. V"
    rule: Ratio | Level | Measured
    expect: Expect | None = None  # None on a Ratio: FASTER
    seed: float | tuple[float, float] | None = None  # the seed's own figure in the rule's unit (or its range)
    seed_text: str = ""  # how the seed put it ("71,758 / 30,501 samples/s", "~10x")
    needs: Needs = field(default_factory=Needs)
    headline: bool = False  # a row of the report's first table
    comparable: str = ""  # set: why our measurement cannot judge the seed's figure (verdict "not comparable")
    # the hardware an absolute figure belongs to (substrings of a device name, "RTX 4060"): on
    # other hardware the verdict is "not comparable", with our value beside the seed's
    seed_hw: tuple[str, ...] = ()
    kit: bool = False  # the kit's own question beside the seed's (its tuned setups): shown, not counted as the seed's

    note: str = ""  # one line the reader needs beside the verdict ("post-training quantization: expect 1.0x")

    @property
    def region(self) -> Expect:
        return self.expect or FASTER

    @property
    def unit(self) -> str:
        return "" if isinstance(self.rule, Measured) else self.rule.unit


def faster(
    id: str,
    text: str,
    a: dict[str, Any],
    b: dict[str, Any],
    where: str,
    seed: float | tuple[float, float] | None = None,
    seed_text: str = "",
    free: tuple[str, ...] = SPEED_FREE,
    headline: bool = True,
    **kw: Any,
) -> Claim:
    """A speed comparison: A's throughput over B's, the claim that A is faster (or KW's expect)."""
    return Claim(id, text, where, Ratio(a, b, free=free), seed=seed, seed_text=seed_text, headline=headline, **kw)


def decide(value: Summary, expect: Expect, exact: bool = False) -> tuple[str, str]:
    """(verdict, why) for VALUE against EXPECT by the one policy (module docstring)."""
    if exact:
        lo = hi = value.median
    elif value.kind == "cs" and (value.lo is None or value.hi is None):
        return UNDECIDED, f"{value.n} rounds: the 95% confidence sequence is unbounded below {CS_MIN_ROUNDS} rounds"
    elif value.lo is None or value.hi is None:
        return FEW, f"n={value.n}: one repeat a side gives no interval; rerun with --repeats 3"
    else:
        lo, hi = value.lo, value.hi
    where = expect.place(lo, hi)
    if where == "in":
        return HOLDS, ""
    if where == "out":
        return FAILS, ""
    if value.kind == "bounds":
        return UNDECIDED, f"its bounds reach across {expect.text}"
    if value.kind == "cs":
        return UNDECIDED, f"the 95% confidence sequence after {value.n} rounds reaches across {expect.text}"
    if value.kind == "range":
        return UNDECIDED, (
            f"the range of {value.n} repeats reaches across {expect.text}; {MIN_CI_REPEATS} repeats give a 95% interval"
        )
    return UNDECIDED, f"the 95% interval reaches across {expect.text}"


def combine(verdicts: list[str]) -> str:
    """One verdict from several conditions' (module docstring)."""
    if not verdicts:
        return NOT_HERE
    if FAILS in verdicts:
        return FAILS
    if all(v == HOLDS for v in verdicts):
        return HOLDS
    for v in (NOT_JUDGED, NEEDS_REAL, NOT_COMPARABLE, FEW, UNDECIDED, NOT_HERE):
        if v in verdicts:
            return v
    return UNDECIDED


def versus_seed(value: Summary, seed: float | tuple[float, float] | None) -> str:
    """Where the seed's figure (or range) sits against our interval."""
    if seed is None:
        return "seed gave no figure"
    lo_s, hi_s = seed if isinstance(seed, tuple) else (seed, seed)
    mid = (lo_s * hi_s) ** 0.5 if lo_s > 0 and hi_s > 0 else (lo_s + hi_s) / 2
    times = f"{value.median / mid:.2g}x the seed's" if mid else "the seed's is 0"
    if value.lo is None or value.hi is None:
        return f"ours {times} (one repeat)"
    if value.lo <= hi_s and lo_s <= value.hi:
        return "agrees: the seed's figure is inside our interval"
    return f"differs: ours {times}"


__all__ = [
    "ALWAYS_FREE",
    "DECIDED",
    "FAILS",
    "FASTER",
    "FEW",
    "HOLDS",
    "NEEDS_REAL",
    "NOT_COMPARABLE",
    "NOT_HERE",
    "NOT_JUDGED",
    "SPEED_FREE",
    "TALLY",
    "TRAINED_WORK",
    "UNDECIDED",
    "VERDICTS",
    "WORK_AMOUNT",
    "Claim",
    "Expect",
    "Level",
    "Measured",
    "Metric",
    "Needs",
    "Ratio",
    "above",
    "below",
    "between",
    "combine",
    "decide",
    "faster",
    "versus_seed",
]
