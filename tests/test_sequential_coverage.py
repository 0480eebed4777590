"""Optional stopping, simulated: 1,000 sequential comparisons on synthetic noise with a known
ratio, stopped the way `--until-decided` stops (decided, narrow enough, or out of rounds).

The truth is a ratio of exactly 1.0 (per-round log ratios ~ N(0, SD)) and the claim "A faster
than B" (above 1.0): the hardest case for a stopping rule, since every round is a chance for noise
to look like a winner. The kit's confidence sequence (bench.core.seqstats) must hold the truth at
its stopping round at least at its nominal 95 % (within simulation error); the naive rule, the
fixed-n interval (bench.core.stats' range below 6 repeats, its 95 % bootstrap from 6) recomputed
after every round and stopped on as soon as it excludes 1.0 or is narrow, covers visibly less.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.core import seqstats
from bench.core.claims import FAILS, FASTER, HOLDS, decide
from bench.core.stats import MIN_CI_REPEATS, Summary

RUNS, FIRST, MAX_ROUNDS, SD, WIDTH = 1000, 3, 20, 0.05, 0.05
NOMINAL = 0.95
SE = math.sqrt(NOMINAL * (1 - NOMINAL) / RUNS)  # 0.0069: the simulation's standard error at the nominal rate


def _rounds(seed: int) -> np.ndarray:
    """RUNS x MAX_ROUNDS per-round log ratios with a true median ratio of 1.0."""
    return np.random.default_rng(seed).normal(0.0, SD, (RUNS, MAX_ROUNDS))


def _stop(lo: float | None, hi: float | None, med: float, n: int) -> bool:
    s = Summary(med, lo, hi, med, med, med, med, n, "cs")
    verdict, _ = decide(s, FASTER)
    narrow = lo is not None and hi is not None and (hi - lo) / med <= WIDTH
    return verdict in (HOLDS, FAILS) or narrow or n >= MAX_ROUNDS


def test_the_confidence_sequence_covers_at_its_nominal_rate_under_optional_stopping():
    logs = _rounds(1)
    cs_class = seqstats._cs_class()
    covered, stops = 0, []
    cs = cs_class(q=0.5, alpha=seqstats.ALPHA, t_opt=seqstats.T_OPT, intersect=True)  # its mixture: fixed before any data
    for run in logs:
        cs.fit(run)  # a fresh sequence over this run's rounds
        lo_all, hi_all = np.exp(cs.lower_), np.exp(cs.upper_)  # the sequence at every round (predictable)
        for n in range(FIRST, MAX_ROUNDS + 1):
            lo, hi = float(lo_all[n - 1]), float(hi_all[n - 1])
            lo_, hi_ = (lo, hi) if math.isfinite(lo) and math.isfinite(hi) else (None, None)
            if _stop(lo_, hi_, float(np.exp(np.median(run[:n]))), n):
                covered += lo <= 1.0 <= hi
                stops.append(n)
                break
    coverage = covered / RUNS
    assert coverage >= NOMINAL - 3 * SE, f"confidence sequence coverage {coverage:.3f} under optional stopping"
    # the interval the report prints is this sequence: paired() at a run's stopping round is the same
    run = logs[0]
    n = stops[0]
    s = seqstats.paired({i: math.exp(x) for i, x in enumerate(run[:n])}, {i: 1.0 for i in range(n)})
    cs = cs_class(q=0.5, alpha=seqstats.ALPHA, t_opt=seqstats.T_OPT, intersect=True).fit(run[:n])
    assert s.kind == "cs" and s.n == n
    if s.lo is not None:
        assert s.lo == pytest.approx(math.exp(cs.lower_[-1])) and s.hi == pytest.approx(math.exp(cs.upper_[-1]))


def _naive_intervals(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The fixed-n interval of bench.core.stats.ratio for every row of X (rounds of paired log
    ratios, B's value 1): the range of the ratios below MIN_CI_REPEATS, else its 95 % percentile
    bootstrap of median(A) / median(B), paired (scipy.stats.bootstrap, batched over the rows)."""
    from scipy.stats import bootstrap

    a, b = np.exp(x), np.ones_like(x)
    if x.shape[1] < MIN_CI_REPEATS:
        r = a / b
        return r.min(axis=1), r.max(axis=1)
    res = bootstrap(
        (a, b),
        lambda u, v, axis=-1: np.median(u, axis=axis) / np.median(v, axis=axis),
        paired=True,
        vectorized=True,
        n_resamples=999,
        method="percentile",
        axis=-1,
        random_state=np.random.default_rng(7),
    )
    return res.confidence_interval.low, res.confidence_interval.high


def test_the_naive_stop_when_the_bootstrap_is_decided_or_narrow_covers_less():
    logs = _rounds(1)
    active = np.arange(RUNS)
    covered = 0
    for n in range(FIRST, MAX_ROUNDS + 1):
        if not active.size:
            break
        lo, hi = _naive_intervals(logs[active, :n])
        med = np.exp(np.median(logs[active, :n], axis=1))
        stop = (lo > 1.0) | (hi < 1.0) | ((hi - lo) / med <= WIDTH) | (n >= MAX_ROUNDS)
        covered += int(np.sum(stop & (lo <= 1.0) & (1.0 <= hi)))
        active = active[~stop]
    naive = covered / RUNS
    assert naive < NOMINAL - 3 * SE, f"the naive rule covered {naive:.3f}: optional stopping did not show"
