"""What mnist-cnn's report, seed table, claims, plots and Study hooks read from result cells: the
one place its rows become numbers (host side: standard library only; every value read through
bench.core.tables' num/nums, as result dirs come from other hosts).

A cell is one repeat (a fresh process) of one configuration; its ok rows are one per epoch. Each
figure below is a function of a repeat's epoch rows (`epochs`), so the report's Table I, the
seed table beside it, the claims' metrics and the figures read one value for one question.

    epoch_rows(rows, part)  the ok rows of an epoch (its number a number; of row backend PART where
                            given), ordered by epoch number, never by the order they were written
    epochs(c)               a cell's epoch rows
    final_acc(ep)           the test accuracy of the highest epoch (a fraction): "final"
    best_acc(ep)            the best test accuracy over the epochs (a fraction)
    TABLE1                  seed 000's Table I, its seven columns: (key, header, figure of ep)
    THROUGHPUT              the per-repeat throughput figures beside them (median, min, max over epochs)
    figures(c)              every per-repeat figure of a cell, by key (Table I's, the throughput
                            spread, the compile time, the epoch count)
    over_repeats(per)       a configuration's figures from its repeats': the median over them, the
                            peak VRAM their max
    throughput(rows)        row backend -> the repeat's median throughput (Study.throughput: what
                            compare, verify and the claims' speed ratios read)
    accuracy(rows, part)    the repeat's final accuracy (Study.accuracy: compare and verify)
    metric(f)               a per-repeat figure as a claims metric: (rows, part) -> value
    per_epoch(group, key)   a configuration's KEY after each epoch: median, min and max over repeats
    accuracy_curve(group)   the same for test accuracy, in percent (Fig. 1's accuracy panel)
    TABLE1_NEEDS            the row keys Table I reads (check_rows holds every epoch row to them)
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable

from bench.core.resultset import ResultCell as Cell
from bench.core.tables import num, nums

Figure = Callable[[list[dict]], float | None]  # a repeat's epoch rows -> one value, None where unmeasured

EPOCH, ACC = "epoch", "test_acc"
TABLE1_NEEDS = ("epoch_s", "samples_per_s", ACC, "rss_mean_mb")  # what Table I reads (and divides by)


# ---- the rows --------------------------------------------------------------------------------
def epoch_rows(rows: Iterable[dict], part: str | None = None) -> list[dict]:
    """The ok rows whose epoch is a number (bench.core.tables.num), of row backend PART where
    given, ordered by epoch number (stable: rows of one epoch keep their order), so that no
    figure depends on the order the rows were written in."""
    got = [
        r
        for r in rows
        if isinstance(r, dict)
        and r.get("status") == "ok"
        and num(r, EPOCH) is not None
        and (part is None or str(r.get("backend")) == part)
    ]
    return sorted(got, key=lambda r: num(r, EPOCH) or 0)


def epochs(c: Cell) -> list[dict]:
    """Cell C's epoch rows (epoch_rows): check_rows holds each to Table I's measurements."""
    return epoch_rows(c.rows)


# ---- accuracy --------------------------------------------------------------------------------
def final_acc(ep: list[dict]) -> float | None:
    """The test accuracy of the highest epoch among EP's rows that have one (a fraction): the
    accuracy training ended with, whatever order the rows came in (at one epoch twice, the
    larger: bench.core.study.last's rule)."""
    got = [(e, v) for r in ep if (e := num(r, EPOCH)) is not None and (v := num(r, ACC)) is not None]
    return max(got)[1] if got else None


def best_acc(ep: list[dict]) -> float | None:
    """The best test accuracy over EP's epochs (a fraction)."""
    v = nums(ep, ACC)
    return max(v) if v else None


def _pct(v: float | None) -> float | None:
    return None if v is None else 100 * v


def final_test_acc_pct(ep: list[dict]) -> float | None:
    """Table I's "Final Test Acc (%)": final_acc in percent."""
    return _pct(final_acc(ep))


def max_test_acc_pct(ep: list[dict]) -> float | None:
    """Table I's "Max Test Acc (%)": best_acc in percent."""
    return _pct(best_acc(ep))


# ---- time, throughput, memory ------------------------------------------------------------------
def _of(name: str, key: str, agg: Callable[[list[float]], float]) -> Figure:
    """The figure NAME: AGG of KEY over a repeat's epoch rows, None where none has a number."""

    def figure(ep: list[dict]) -> float | None:
        v = nums(ep, key)
        return agg(v) if v else None

    figure.__name__ = figure.__qualname__ = name
    return figure


avg_epoch_s = _of("avg_epoch_s", "epoch_s", statistics.fmean)  # the mean epoch time
total_train_s = _of("total_train_s", "epoch_s", sum)  # the epochs' times summed
avg_samples_per_s = _of("avg_samples_per_s", "samples_per_s", statistics.fmean)  # the seed's "Avg Throughput": mean over epochs
median_samples_per_s = _of("median_samples_per_s", "samples_per_s", statistics.median)  # the kit's per-repeat throughput
min_samples_per_s = _of("min_samples_per_s", "samples_per_s", min)
max_samples_per_s = _of("max_samples_per_s", "samples_per_s", max)
avg_rss_mb = _of("avg_rss_mb", "rss_mean_mb", statistics.fmean)  # the process's mean RSS over the epochs' means
max_vram_mb = _of("max_vram_mb", "vram_peak_mb", max)  # the allocator's peak (None: no GPU memory read)


def compile_s(ep: list[dict]) -> float | None:
    """The compile/JIT time the first epoch's row carries."""
    return num(ep[0], "compile_s") if ep else None


def n_epochs(ep: list[dict]) -> int:
    return len(ep)


TABLE1: tuple[tuple[str, str, Figure], ...] = (  # seed 000's Table I: (key, header, figure)
    ("avg_epoch_s", "Avg Epoch Time (s)", avg_epoch_s),
    ("total_train_s", "Total Train Time (s)", total_train_s),
    ("avg_samples_per_s", "Avg Throughput (samples/s)", avg_samples_per_s),
    ("final_test_acc_pct", "Final Test Acc (%)", final_test_acc_pct),
    ("max_test_acc_pct", "Max Test Acc (%)", max_test_acc_pct),
    ("avg_rss_mb", "Avg Proc RAM (MB)", avg_rss_mb),
    ("max_vram_mb", "Max GPU VRAM (MB)", max_vram_mb),
)
THROUGHPUT: tuple[tuple[str, Figure], ...] = (
    ("median_samples_per_s", median_samples_per_s),
    ("min_samples_per_s", min_samples_per_s),
    ("max_samples_per_s", max_samples_per_s),
)


def figures(c: Cell) -> dict[str, float | None]:
    """Every per-repeat figure of cell C by key: Table I's seven, the throughput's median, min and
    max over epochs, the compile time and the number of epochs."""
    ep = epochs(c)
    out: dict[str, float | None] = {k: f(ep) for k, _, f in TABLE1}
    out.update({k: f(ep) for k, f in THROUGHPUT})
    out["compile_s"] = compile_s(ep)
    out["epochs"] = n_epochs(ep)
    return out


def over_repeats(per: list[dict[str, float | None]]) -> dict[str, float | None]:
    """A configuration's figures from PER (figures() of each repeat): of every key the median over
    the repeats that have it, of the peak VRAM the max; None where no repeat has one."""
    out: dict[str, float | None] = {}
    for k in dict.fromkeys(k for p in per for k in p):
        vals = [v for p in per if (v := p.get(k)) is not None]
        out[k] = (max(vals) if k == "max_vram_mb" else statistics.median(vals)) if vals else None
    return out


# ---- what the Study hooks and the claims read ----------------------------------------------------
def throughput(rows: list[dict]) -> dict[str, float]:
    """Row backend -> the median throughput over its epochs (one cell: one repeat)."""
    parts = dict.fromkeys(str(r.get("backend")) for r in epoch_rows(rows))
    return {p: v for p in parts if (v := median_samples_per_s(epoch_rows(rows, p))) is not None}


def accuracy(rows: list[dict], part: str) -> float | None:
    """Row backend PART's final accuracy (final_acc, a fraction)."""
    return final_acc(epoch_rows(rows, part))


def metric(f: Figure) -> Callable[[list[dict], str], float | None]:
    """F as a claims metric (bench.core.claims: a cell's rows and a row backend -> a value)."""

    def m(rows: list[dict], part: str) -> float | None:
        return f(epoch_rows(rows, part))

    m.__name__ = m.__qualname__ = getattr(f, "__name__", "metric")
    return m


# ---- per epoch (Fig. 1) ------------------------------------------------------------------------
def per_epoch(group: list[Cell], key: str, scale: float = 1.0) -> tuple[list[int], list[float], list[float], list[float]]:
    """KEY after each epoch over a configuration's repeats GROUP: (epochs, median, min, max)."""
    by: dict[int, list[float]] = {}
    for c in group:
        for r in epochs(c):
            e, v = num(r, EPOCH), num(r, key)
            if e is not None and v is not None:
                by.setdefault(int(e), []).append(v * scale)
    xs = sorted(by)
    return xs, [statistics.median(by[x]) for x in xs], [min(by[x]) for x in xs], [max(by[x]) for x in xs]


def accuracy_curve(group: list[Cell]) -> tuple[list[int], list[float], list[float], list[float]]:
    """Test accuracy (%) after each epoch over GROUP's repeats (per_epoch)."""
    return per_epoch(group, ACC, 100)
