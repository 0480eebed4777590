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
    too few repeats    one repeat on a side: no interval, so no verdict; or a range from two (it
                       holds the true median half the time: a coin's toss is no verdict)
    not comparable     the seed's quantity is not one we measure (the claim says why), or an absolute
                       figure of the seed's hardware measured on other hardware: ours beside the seed's
    needs the seed's hardware
                       a claim tied to the seed's hardware (`seed_hw`) that neither ran there nor on
                       the data it needs: real data alone would not judge it (the reason names the device)
    needs real data    the claim is about the data (accuracy, loss) and a side ran on synthetic data
    not measured here  no cell of the kind the claim needs (the reason names what is missing)
    not judged         the declaration does not fit these results (the line says why)

Before an interval decides, one gate (`gate`) says whether these findings can judge the claim at
all, in this order, each the reason that no other fix would remove: a quantity we do not measure
(`comparable`); an absolute figure whose claim names no hardware (not judged: a declaration fault);
the seed's hardware (`seed_hw`: off it, "not comparable" with ours beside where ours is the claim's
quantity, else "needs the seed's hardware"); real data (`Needs.real_data`).

One rule for absolute figures, in every study: a figure in a unit one machine sets (a time, a rate,
memory, a clock, power, heat, a share of its own roof: ABSOLUTE_UNITS) belongs to the hardware it
was measured on. A claim that reads one names that hardware (`seed_hw`) or says why ours cannot
judge it (`comparable`); off the seed's hardware it is "not comparable", counted apart from the
judged. A Level or Ratio that breaks the rule is refused where it is declared; a Measured claim's
findings are held to it in `gate`. A count (`exact`: parameters, array bytes) is every machine's.

A claim measured by several findings (Measured: "ResNet-50 gains most" is one ratio per other
model) holds when all hold, does not hold when any does not, and is undecided otherwise.
Deterministic figures (FLOP counts, parameters) are `exact`: their value decides alone. A value
whose interval is not from repeats but the two bounds a count allows (a roofline point's
intensity from its unfused to its compulsory bytes: Summary kind "bounds") decides the same
way, and is undecided where its bounds reach across the claim's edge.

Standard library only: the host side judges claims from rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bench.core.stats import CS_MIN_ROUNDS, MIN_CI_REPEATS, Summary
from bench.core.text import short

if TYPE_CHECKING:
    from bench.core.answers import Finding
    from bench.core.resultset import ResultCell
    from bench.core.study import Study

# a range of repeats decides from this many a side (75 %: 1 - 2^(1-n)); below, "too few repeats"
MIN_DECIDING_RANGE = 3
# An exact ratio (a count over a count: model bytes, array bytes) within this of 1x is no effect: a
# claim that one side is smaller or larger does not hold on it (dynamic int8 of ResNet-18 quantizes
# its one Linear layer: 0.9998x the fp32 model's size, which read "holds" for "compact models").
EXACT_NO_EFFECT = 0.01
HOLDS = "holds"
FAILS = "does not hold"
UNDECIDED = "undecided"
FEW = "too few repeats"
NOT_COMPARABLE = "not comparable"
NEEDS_HW = "needs the seed's hardware"
NEEDS_REAL = "needs real data"
NOT_HERE = "not measured here"
NOT_JUDGED = "not judged"
VERDICTS = (HOLDS, FAILS, UNDECIDED, FEW, NOT_COMPARABLE, NEEDS_HW, NEEDS_REAL, NOT_HERE, NOT_JUDGED)
DECIDED = (HOLDS, FAILS)
# how the report counts a seed's claims: each verdict falls in one of these
TALLY = {
    HOLDS: "judged",
    FAILS: "judged",
    UNDECIDED: "undecided",
    FEW: "undecided",
    NOT_COMPARABLE: "not comparable",
    NEEDS_HW: "needs the seed's hardware",
    NEEDS_REAL: "needs real data",
    NOT_HERE: "not measured here",
    NOT_JUDGED: "not judged",
}
# the order a tally line reads them in (every TALLY category once)
CATEGORIES = (
    "judged",
    "undecided",
    "needs real data",
    "needs the seed's hardware",
    "not measured here",
    "not comparable",
    "not judged",
)
# the units of an absolute figure: what one machine does in a time, a rate, memory, a clock, power,
# heat or a share of its own roof. A figure in one belongs to the hardware that measured it (the rule
# of the module docstring); a ratio ("x"), a share of a step or an accuracy ("%") is not one
ABSOLUTE_UNITS = frozenset(
    {"s", "ms", "h", "img/s", "samples/s", "GFLOP/s", "TFLOP/s", "GB/s", "MB", "GB", "GHz", "W", "°C", "% of roof"}
)

# params that never make two workloads different: how many threads or loader workers a
# host gave, which devices by index, and the file checksum (the dataset name stays)
ALWAYS_FREE = ("threads", "num_workers", "devices", "dataset_sha256")
# The params that set how much work a cell does (epochs, step caps, warm-up, sweep and profiler
# settings), not what one step computes, are each study's: marked on its Config's fields
# (bench.core.study.work_params; Study.work_amount, Study.trained_params). A rate does not depend on
# them, so a claim about a rate may let them differ (a reduced CPU protocol beside the GPU's full
# one); a pair whose sides differ in one says so. The work a cell trains (its fields marked
# "trained": images, steps, epochs, search trials) is the same on both sides or no pair at all
# (DESIGN, "same work on both sides"): whatever a claim lets differ, it and the data (its name, and
# whether real) must agree, except where the claim compares them itself. A side that cannot afford
# the seed's setup makes both sides smaller, never one. A speed claim's workload is its shapes and
# work: a study's speed claims let its work and the dataset's name differ (a pair still forms only
# on equal data: answers.unlike). What the data adds to a rate is in the ratio, never the model's
# alone: through a loader of synthetic JPEGs the loader's decode cost is in it (a pipeline that
# keeps its batch on the device, synthetic-gpu, leaves the model's own speed)


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


def quality(metric: Metric) -> Metric:
    """Mark METRIC as a measure of how well a side learned (an accuracy, a loss, a gap between
    curves): it depends on how much the side trained, so no trained-work param (Study.trained_params:
    epochs, steps, images, trials) is free for it, whatever a claim's `free` says: a 3-epoch side never pairs
    with, or stands beside, a 10-epoch one (bench.core.answers reads the mark). The other work-amount
    params (latency calls, calibration batches, held-out images) stay as free as the claim says."""
    metric.quality = True  # type: ignore[attr-defined]
    return metric


def is_quality(metric: Metric | None) -> bool:
    return bool(getattr(metric, "quality", False))


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
    # params whose values do not tell two answers apart; None: the study's work (Study.work_amount)
    free: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Measured:
    """A study's own measurement: FN(study, cells) -> Findings (bench.core.answers builds them)."""

    fn: Callable[[Study, list[ResultCell]], list[Finding]]
    conditions: tuple[str, ...] = ()  # the findings' `what`s it needs, all of them (a missing one: not measured here)
    sides: tuple[dict, ...] = ()  # the kinds of cell FN reads, where declared: "not measured here" names the missing
    rules: tuple = ()  # its conditions' Ratios and Levels (answers.conditions): why two sides formed no pair


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

    def __post_init__(self) -> None:
        """A Level or Ratio in an absolute unit is refused here, where it is declared, unless it names
        the seed's hardware or why ours cannot judge it (a Measured claim's units are its findings':
        `gate` holds them to the same rule)."""
        if not isinstance(self.rule, Measured):
            fault = unplaced(self, (self.rule.unit,))
            if fault:
                raise ValueError(fault)

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
    free: tuple[str, ...] = (),
    headline: bool = True,
    **kw: Any,
) -> Claim:
    """A speed comparison: A's throughput over B's, the claim that A is faster (or KW's expect). FREE:
    the params that may differ between the sides; a study passes its work and "dataset" (module
    comment above)."""
    return Claim(id, text, where, Ratio(a, b, free=free), seed=seed, seed_text=seed_text, headline=headline, **kw)


def unplaced(claim: Claim, units: Iterable[str]) -> str:
    """Why CLAIM may not judge figures in UNITS ('' where it may): an absolute figure (ABSOLUTE_UNITS)
    belongs to the seed's hardware, so the claim names it (`seed_hw`) or says why ours cannot judge
    it (`comparable`)."""
    absolute = sorted({u for u in units if u in ABSOLUTE_UNITS})
    if not absolute or claim.seed_hw or claim.comparable:
        return ""
    return (
        f"{claim.id}: an absolute figure ({', '.join(absolute)}) belongs to the hardware that measured it: declare "
        "seed_hw (the seed's devices, where it is judged) or comparable (why ours cannot judge it)"
    )


def gate(claim: Claim, best: Sequence[Finding]) -> tuple[str, str] | None:
    """(verdict, why) where CLAIM cannot be judged on the findings BEST rest on, by the one gate of
    the module docstring; None where their intervals decide (`decide`)."""
    if claim.comparable:
        return NOT_COMPARABLE, claim.comparable
    fault = unplaced(claim, [f.unit for f in best if not f.exact])
    if fault:
        return NOT_JUDGED, fault
    synthetic = sorted({s.data[0] for f in best for s in f.sides if not s.data[1]}) if claim.needs.real_data else []
    if claim.seed_hw:
        devices = sorted({s.device for f in best for s in f.sides})
        if not all(any(h.lower() in d.lower() for h in claim.seed_hw) for d in devices):
            if synthetic:
                seed = claim.needs.what or f"the seed's {' / '.join(claim.seed_hw)}"
                return NEEDS_HW, f"needs {seed}: ours ran on {', '.join(devices)}, on {', '.join(synthetic)} (synthetic)"
            return NOT_COMPARABLE, f"the seed's figure is for {' / '.join(claim.seed_hw)}; ours ran on {', '.join(devices)}"
    if synthetic:
        return NEEDS_REAL, f"ran on {', '.join(synthetic)} (synthetic): the claim is about the real data"
    return None


def decide(value: Summary, expect: Expect, exact: bool = False) -> tuple[str, str]:
    """(verdict, why) for VALUE against EXPECT by the one policy (module docstring)."""
    if exact:
        lo = hi = value.median
        if 1.0 in (expect.lo, expect.hi) and abs(value.median - 1.0) < EXACT_NO_EFFECT:
            return FAILS, (
                f"{value.median:.4g}x: within {EXACT_NO_EFFECT:.0%} of 1x, no effect either way ({expect.text or 'the claim'})"
            )
    elif value.kind == "cs" and (value.lo is None or value.hi is None):
        return UNDECIDED, f"{value.n} rounds: the 95% confidence sequence is unbounded below {CS_MIN_ROUNDS} rounds"
    elif value.lo is None or value.hi is None:
        return FEW, f"n={value.n}: one repeat a side gives no interval; rerun with --repeats 3"
    elif value.kind == "range" and min(value.sides_n or (value.n,)) < MIN_DECIDING_RANGE:
        return FEW, (
            f"n={min(value.sides_n or (value.n,))} a side: a range of fewer than {MIN_DECIDING_RANGE} repeats holds the true "
            f"median at most half the time; rerun with --repeats {MIN_DECIDING_RANGE} or more"
        )
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
    for v in (NOT_JUDGED, NEEDS_REAL, NOT_COMPARABLE, NEEDS_HW, FEW, UNDECIDED, NOT_HERE):
        if v in verdicts:
            return v
    return UNDECIDED


def versus_seed(value: Summary, seed: float | tuple[float, float] | None) -> str:
    """Where the seed's figure (or range) sits against our interval."""
    if seed is None:
        return "seed gave no figure"
    lo_s, hi_s = seed if isinstance(seed, tuple) else (seed, seed)
    mid = (lo_s * hi_s) ** 0.5 if lo_s > 0 and hi_s > 0 else (lo_s + hi_s) / 2
    times = f"{short(value.median / mid, 2)}x the seed's" if mid else "the seed's is 0"
    if value.lo is None or value.hi is None:
        return f"ours {times} (one repeat)"
    if value.lo <= hi_s and lo_s <= value.hi:
        return "agrees: the seed's figure is inside our interval"
    return f"differs: ours {times}"


__all__ = [
    "ABSOLUTE_UNITS",
    "ALWAYS_FREE",
    "CATEGORIES",
    "DECIDED",
    "FAILS",
    "FASTER",
    "FEW",
    "HOLDS",
    "NEEDS_HW",
    "NEEDS_REAL",
    "NOT_COMPARABLE",
    "NOT_HERE",
    "NOT_JUDGED",
    "TALLY",
    "UNDECIDED",
    "VERDICTS",
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
    "gate",
    "unplaced",
    "versus_seed",
]
