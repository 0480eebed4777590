"""Medians with 95 % bootstrap intervals, for one cell and for the ratio of two cells.

The unit of resampling is a repeat (one fresh process): steps within one process share its
warm caches, clocks and memory layout, so they are not independent draws; repeats are.
Each repeat contributes its median over timed steps; intervals come from
`scipy.stats.bootstrap` (percentile method: BCa needs more points than the usual 3-5
repeats) with a fixed random state, so a report re-rendered from the same rows prints the
same intervals. A ratio of two cells pairs repeat i of A with repeat i of B when both have
the same repeats (an interleaved run ran them side by side, so they shared the machine's
noise), and resamples them independently otherwise.

With a single repeat there is no interval: the summary says so instead of inventing one.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

CONFIDENCE = 0.95
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

    def interval(self, fmt: str = "{:,.0f}") -> str:
        if self.lo is None or self.hi is None:
            return "n=1, no interval"
        return f"{fmt.format(self.lo)}–{fmt.format(self.hi)}"


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
    if len(v) >= 2:
        import numpy as np

        if max(v) == min(v):
            lo = hi = med
        else:
            lo, hi = _bootstrap((np.asarray(v),), lambda x, axis=-1: np.median(x, axis=axis), paired=False)
    return Summary(med, lo, hi, q1, q3, min(v), max(v), len(v))


def ratio(a: dict[int, float], b: dict[int, float], paired: bool | None = None) -> Summary:
    """median(A) / median(B) with a 95 % interval; A and B map repeat -> value (larger = faster
    for throughputs). Paired by repeat when both hold the same repeats, unless PAIRED is False
    (two runs, e.g. two hosts: repeat i of one shared nothing with repeat i of the other)."""
    import numpy as np

    if not a or not b:
        raise ValueError("a ratio needs values on both sides")
    av, bv = [float(a[k]) for k in sorted(a)], [float(b[k]) for k in sorted(b)]
    paired = sorted(a) == sorted(b) and len(a) >= 2 and paired is not False
    med = statistics.median(av) / statistics.median(bv)
    if paired:
        per = [x / y for x, y in zip(av, bv)]
        q1, q3 = _quartiles(per)
        lo_v, hi_v = min(per), max(per)
    else:
        q1 = q3 = lo_v = hi_v = med
    lo = hi = None
    if len(av) >= 2 and len(bv) >= 2:

        def stat(x, y, axis=-1):
            return np.median(x, axis=axis) / np.median(y, axis=axis)

        if len(set(av)) == 1 and len(set(bv)) == 1:
            lo = hi = med
        else:
            lo, hi = _bootstrap((np.asarray(av), np.asarray(bv)), stat, paired=paired)
    return Summary(med, lo, hi, q1, q3, lo_v, hi_v, min(len(av), len(bv)))


def geomean(ratios: list[float]) -> Summary:
    """Geometric mean of RATIOS (one per configuration, each > 0) with a 95 % interval from
    `scipy.stats.bootstrap` over the ratios themselves (percentile method, the configurations
    resampled: how much B differs from A across this set of configurations, not within one;
    the statistic is the mean of the log ratios, exponentiated). No interval below 2 ratios."""
    import math

    v = [float(x) for x in ratios]
    if not v or min(v) <= 0:
        raise ValueError("a geometric mean needs positive ratios")
    logs = [math.log(x) for x in v]
    gm = math.exp(statistics.fmean(logs))
    q1, q3 = _quartiles(v)
    lo = hi = None
    if len(v) >= 2:
        import numpy as np

        if max(v) == min(v):
            lo = hi = gm
        else:
            llo, lhi = _bootstrap((np.asarray(logs),), lambda x, axis=-1: np.mean(x, axis=axis), paired=False)
            lo, hi = math.exp(llo), math.exp(lhi)
    return Summary(gm, lo, hi, q1, q3, min(v), max(v), len(v))


def verdict(r: Summary, a: str, b: str) -> str:
    """Which side is faster, or "no clear winner" when the interval holds 1.0 (or is missing)."""
    if r.lo is None or r.hi is None:
        return "one repeat: no verdict (run --repeats 3)"
    if r.lo > 1.0:
        return f"{a} faster"
    if r.hi < 1.0:
        return f"{b} faster"
    return "no clear winner"


__all__ = ["CONFIDENCE", "Summary", "geomean", "ratio", "summarize", "verdict"]
