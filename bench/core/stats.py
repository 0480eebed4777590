"""Medians with 95 % bootstrap intervals, for one cell and for the ratio of two cells.

The unit of resampling is a repeat (one fresh process): steps within one process share its
warm caches, clocks and memory layout, so they are not independent draws; repeats are.
Each repeat contributes its median over timed steps; intervals come from
`scipy.stats.bootstrap` (percentile method: BCa needs more points than the usual 3-5
repeats) with a fixed random state, so a report re-rendered from the same rows prints the
same intervals. A ratio of two cells pairs repeat i of A with repeat i of B when both have
the same repeats (an interleaved run ran them side by side, so they shared the machine's
noise), and resamples them independently otherwise.

How many repeats a 95 % interval needs (MIN_CI_REPEATS = 6), derived: a percentile
bootstrap of a median only ever returns values between the smallest and the largest repeat,
and [min, max] of n independent repeats holds the true median with probability 1 - 2^(1-n)
(each repeat falls below the median with probability 1/2; the interval misses only when all
fall on one side): 50 % at n=2, 75 % at 3, 87.5 % at 4, 93.75 % at 5, 96.9 % at 6. Below 6
repeats no method built on the repeats alone can be a 95 % interval, so the summary gives
the range of the repeats instead and says so (`kind` "range", `coverage` its exact confidence
for the median: a distribution-free order-statistic interval, e.g. Conover, *Practical
Nonparametric Statistics*, 3rd ed., sec. 3.2). A ratio's range is the range of its paired
per-repeat ratios, or, unpaired, min(A)/max(B) to max(A)/min(B): a verdict from a range needs
every pair (or the two ranges) on one side of 1.0.

With a single repeat there is no interval: the summary says so instead of inventing one.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass

from bench.core.text import short

CONFIDENCE = 0.95
MIN_CI_REPEATS = 6  # fewer: the range of the repeats, called the range (module docstring)
# a sequential run's 95 % confidence sequence (bench.core.seqstats) is unbounded below this many
# rounds (tests/test_seqstats.py checks it against the sequence itself)
CS_MIN_ROUNDS = 10
# how reports name the interval they print beside a median or a ratio
INTERVAL_TEXT = f"a 95% bootstrap interval from {MIN_CI_REPEATS} repeats, below that the range of the repeats"
# which method made an interval, by Summary.kind (Summary.method; report.json's `method`)
METHODS = {
    "ci": "95% percentile bootstrap over the repeats (scipy.stats.bootstrap): a fixed number of repeats",
    "range": "the range of the repeats, or of the paired per-repeat ratios (below 6 repeats; its confidence is 1 - 2^(1-n))",
    "bounds": "the two bounds a count allows",
    "none": "one repeat: no interval",
    "cs": "95% confidence sequence of the median per-round ratio (Howard & Ramdas 2022, ville.QuantileCS): "
    "valid at whatever round --until-decided stopped",
}
RESAMPLES = 9999
_SEED = 20261122


@dataclass(frozen=True)
class Summary:
    median: float
    lo: float | None  # the 95 % interval of the median (None: fewer than 2 repeats)
    hi: float | None
    q1: float
    q3: float
    min: float
    max: float
    n: int  # repeats
    # "ci": 95 % bootstrap interval; "range": min-max of the repeats (n < MIN_CI_REPEATS); "none";
    # "cs": a sequential run's 95 % confidence sequence (bench.core.seqstats; lo/hi None while unbounded)
    kind: str = "ci"
    # an unpaired ratio's range (min(A)/max(B) to max(A)/min(B)): the repeats of each side; () otherwise
    sides_n: tuple[int, ...] = ()

    @property
    def coverage(self) -> float | None:
        """The interval's confidence for the true median (of a ratio: the ratio of the two true
        medians): 0.95; 1 - 2^(1-n) for a range of n repeats (or of n paired per-repeat ratios);
        for an unpaired ratio's range at least the product of its two sides' (both medians inside
        their ranges puts the ratio inside); 1.0 for the two bounds a count allows."""
        if self.kind == "none" or self.lo is None:
            return None
        if self.kind == "bounds":
            return 1.0
        if self.kind == "range":
            if self.sides_n:
                out = 1.0
                for n in self.sides_n:
                    out *= range_coverage(n)
                return out
            return range_coverage(self.n)
        return CONFIDENCE

    @property
    def tag(self) -> str:
        """What the interval is, for a label: '95% CI', 'range of 3: 75%', 'unpaired ranges of 3 / 3: at
        least 56%', '95% CS', 'bounds', 'n=1, no interval'."""
        if self.kind == "cs":
            return "95% CS" if self.lo is not None else f"95% CS, unbounded below {CS_MIN_ROUNDS} rounds"
        if self.lo is None or self.hi is None:
            return f"n={self.n}, no interval"
        if self.kind == "bounds":
            return "bounds"
        if self.kind == "range":
            pct = math.floor((self.coverage or 0.0) * 100 + 1e-9)  # never above the coverage (74.85 %: 74 %, not 75)
            if self.sides_n:
                return f"unpaired ranges of {' / '.join(map(str, self.sides_n))}: at least {pct}%"
            return f"range of {self.n}: {pct}%"
        return "95% CI"

    @property
    def method(self) -> str:
        """How the interval was made, in one sentence (report.json's `method`)."""
        if self.kind == "range" and self.sides_n:
            return (
                "the unpaired ranges of the two sides' repeats, min(A)/max(B) to max(A)/min(B); its confidence is "
                "at least the product of each side's 1 - 2^(1-n)"
            )
        return METHODS.get(self.kind, self.kind)

    def interval(self, fmt: str | Callable[[float], str] = "{:,.0f}") -> str:
        """'lo–hi' for a 95 % interval, 'lo–hi (range of 3)' for a range, 'lo–hi (95% CS)' for a
        sequential run's confidence sequence, 'n=1, no interval'."""
        if self.kind == "cs" and (self.lo is None or self.hi is None):
            return f"unbounded (95% CS, {self.n} rounds)"
        if self.lo is None or self.hi is None:
            return "n=1, no interval"
        text = f"{_fmt(fmt, self.lo)}–{_fmt(fmt, self.hi)}"
        if self.kind == "cs":
            return f"{text} (95% CS, {self.n} rounds)"
        return text if self.kind == "ci" else f"{text} ({self.range_text})"

    def bracket(self, fmt: str | Callable[[float], str] = short) -> str:
        """' [lo–hi]' for a 95 % interval, ' [lo–hi, range of 3]' for a range, ' [lo–hi, 95% CS]' for
        a confidence sequence, '' without one."""
        if self.kind == "cs" and (self.lo is None or self.hi is None):
            return " [unbounded, 95% CS]"
        if self.lo is None or self.hi is None:
            return ""
        inner = f"{_fmt(fmt, self.lo)}–{_fmt(fmt, self.hi)}"
        if self.kind == "cs":
            return f" [{inner}, 95% CS]"
        return f" [{inner}]" if self.kind == "ci" else f" [{inner}, {self.range_text}]"

    @property
    def range_text(self) -> str:
        """What a non-95 % interval is: 'range of 3', 'unpaired ranges of 3 / 10' (a ratio of two
        sides' ranges, not a range of 3 paired ratios), 'bounds'."""
        if self.kind == "bounds":
            return "bounds"
        if self.sides_n:
            return f"unpaired ranges of {' / '.join(map(str, self.sides_n))}"
        return f"range of {self.n}"


def _fmt(fmt: str | Callable[[float], str], v: float) -> str:
    """V by FMT: a format string, or a function such as text.short (3 significant digits, never 1e+03)."""
    return fmt(v) if callable(fmt) else fmt.format(v)


def range_coverage(n: int) -> float:
    """Probability that [min, max] of N independent repeats holds the true median."""
    return 1.0 - 2.0 ** (1 - n)


def _kind(n: int) -> str:
    return "none" if n < 2 else ("range" if n < MIN_CI_REPEATS else "ci")


def _quartiles(v: list[float]) -> tuple[float, float]:
    if len(v) < 2:
        return v[0], v[0]
    q = statistics.quantiles(v, n=4, method="inclusive")
    return q[0], q[2]


def _bootstrap(data: tuple, statistic, paired: bool) -> tuple[float, float]:
    import numpy as np
    from scipy.stats import bootstrap

    res = bootstrap(
        data,
        statistic,
        paired=paired,
        vectorized=True,
        confidence_level=CONFIDENCE,
        n_resamples=RESAMPLES,
        method="percentile",
        random_state=np.random.default_rng(_SEED),
    )
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return lo, hi


def summarize(values: list[float]) -> Summary:
    """Median of VALUES (one per repeat) with its 95 % bootstrap interval, IQR and range."""
    v = [float(x) for x in values]
    if not v:
        raise ValueError("no values to summarise")
    med = statistics.median(v)
    q1, q3 = _quartiles(v)
    lo = hi = None
    kind = _kind(len(v))
    if kind == "range" or (kind == "ci" and max(v) == min(v)):
        lo, hi = min(v), max(v)
    elif kind == "ci":
        import numpy as np

        lo, hi = _bootstrap((np.asarray(v),), lambda x, axis=-1: np.median(x, axis=axis), paired=False)
    return Summary(med, lo, hi, q1, q3, min(v), max(v), len(v), kind)


def difference(a: dict[int, float], b: dict[int, float], paired: bool) -> Summary:
    """median(A) - median(B) over repeats, or paired by repeat the median of the differences
    (summarize: its interval or range); unpaired, the range min(A) - max(B) to
    max(A) - min(B), whatever the repeats (no interval of an unpaired difference here)."""
    if paired and sorted(a) == sorted(b):
        return summarize([a[k] - b[k] for k in sorted(a)])
    m = statistics.median(a.values()) - statistics.median(b.values())
    n = min(len(a), len(b))
    if n < 2:
        return Summary(m, None, None, m, m, m, m, n, "none")
    lo, hi = min(a.values()) - max(b.values()), max(a.values()) - min(b.values())
    return Summary(m, lo, hi, m, m, lo, hi, n, "range")


def ratio(a: dict[int, float], b: dict[int, float], paired: bool | None = None) -> Summary:
    """median(A) / median(B) with a 95 % interval (a range below MIN_CI_REPEATS on either side);
    A and B map repeat -> value (larger = faster for throughputs). Paired by repeat when both hold the same repeats, unless PAIRED is False
    (two runs, e.g. two hosts: repeat i of one shared nothing with repeat i of the other)."""
    import numpy as np

    if not a or not b:
        raise ValueError("a ratio needs values on both sides")
    av, bv = [float(a[k]) for k in sorted(a)], [float(b[k]) for k in sorted(b)]
    if min(bv) <= 0 or min(av) < 0:  # a zero below divides nothing (a GPU idle in every sample: 0 %)
        raise ValueError("a ratio needs values above 0 below the line and none below 0 above it")
    paired = sorted(a) == sorted(b) and len(a) >= 2 and paired is not False
    med = statistics.median(av) / statistics.median(bv)
    if paired:
        per = [x / y for x, y in zip(av, bv)]
        q1, q3 = _quartiles(per)
        lo_v, hi_v = min(per), max(per)
    else:
        q1 = q3 = lo_v = hi_v = med
    lo = hi = None
    n = min(len(av), len(bv))
    kind = _kind(n)
    sides_n: tuple[int, ...] = ()
    if kind == "range":
        lo, hi = (lo_v, hi_v) if paired else (min(av) / max(bv), max(av) / min(bv))
        sides_n = () if paired else (len(av), len(bv))
    elif kind == "ci":

        def stat(x, y, axis=-1):
            return np.median(x, axis=axis) / np.median(y, axis=axis)

        if len(set(av)) == 1 and len(set(bv)) == 1:
            lo = hi = med
        else:
            lo, hi = _bootstrap((np.asarray(av), np.asarray(bv)), stat, paired=paired)
    return Summary(med, lo, hi, q1, q3, lo_v, hi_v, n, kind, sides_n)


def geomean(ratios: list[float]) -> Summary:
    """Geometric mean of RATIOS (one per configuration, each > 0) with a 95 % interval from
        `scipy.stats.bootstrap` over the ratios themselves (percentile method, the configurations
        resampled: how much B differs from A across this set of configurations, not within one;
        the statistic is the mean of the log ratios, exponentiated); the range of the ratios below
    MIN_CI_REPEATS of them, no interval below 2."""
    import math

    v = [float(x) for x in ratios]
    if not v or min(v) <= 0:
        raise ValueError("a geometric mean needs positive ratios")
    logs = [math.log(x) for x in v]
    gm = math.exp(statistics.fmean(logs))
    q1, q3 = _quartiles(v)
    lo = hi = None
    kind = _kind(len(v))
    if kind == "range" or (kind == "ci" and max(v) == min(v)):
        lo, hi = min(v), max(v)
    elif kind == "ci":
        import numpy as np

        llo, lhi = _bootstrap((np.asarray(logs),), lambda x, axis=-1: np.mean(x, axis=axis), paired=False)
        lo, hi = math.exp(llo), math.exp(lhi)
    return Summary(gm, lo, hi, q1, q3, min(v), max(v), len(v), kind)


def verdict(r: Summary, a: str, b: str) -> str:
    """Which side is faster, or "no clear winner" when the interval (or range) holds 1.0; with a
    range that holds it, also that n is too small for an interval."""
    if r.lo is None or r.hi is None:
        return "one repeat: no verdict (run --repeats 3)"
    if r.lo > 1.0:
        return f"{a} faster"
    if r.hi < 1.0:
        return f"{b} faster"
    return undecided(r, "no clear winner")


def undecided(r: Summary, what: str) -> str:
    """WHAT, plus why a range cannot say more: 'no clear winner (range holds 1.0; n=3, too few for
    a 95% CI: 6)'."""
    if r.kind != "range":
        return what
    return f"{what} (range holds 1.0; n={r.n}, too few for a 95% CI: {MIN_CI_REPEATS})"


__all__ = [
    "CONFIDENCE",
    "CS_MIN_ROUNDS",
    "INTERVAL_TEXT",
    "METHODS",
    "MIN_CI_REPEATS",
    "Summary",
    "geomean",
    "range_coverage",
    "ratio",
    "summarize",
    "undecided",
    "verdict",
]
