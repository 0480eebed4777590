"""What seed 002's claims read from cifar-opt's result cells (claims.py declares the claims):
one figure per repeat from a cell's rows (the `Metric`s of bench.core.claims: median epoch time
per the seed's 5,000 images, the last test accuracy, peak memory, batch-1 p50 latency per
deployment form, and the int8 form beside the fp32 form it came from), and `per_model`, a claim
of several conditions answered per model. Standard library only: the host side judges claims.
"""

from __future__ import annotations

import json
import statistics

from bench.core import answers, stats
from bench.core.answers import Finding
from bench.core.claims import Expect, Level, Measured, Metric, Ratio, quality
from bench.core.resultset import ResultCell
from bench.core.study import Study, number
from bench.core.tables import quotient
from bench.studies.cifar_opt.readout import SEED_N_TRAIN

QUANTIZED = {  # variant -> (its int8 form, the fp32 form it came from)
    "int8": ("int8-pt2e", "fp32-compiled"),
    "quant-dynamic": ("int8-dynamic", "fp32-eager"),
}


# ---- per-repeat figures, from one cell's rows --------------------------------------------------
def _rows(rows: list[dict], part: str, phase: str) -> list[dict]:
    return [r for r in rows if r.get("status") == "ok" and r.get("phase") == phase and str(r.get("backend")) == part]


def _epochs(rows: list[dict], part: str) -> list[dict]:
    return sorted(_rows(rows, part, "epoch"), key=lambda r: number(r.get("epoch")) or 0)


def _max(rows: list[dict], part: str, key: str) -> float | None:
    v = [x for r in _epochs(rows, part) if (x := number(r.get(key))) is not None]
    return max(v) if v else None


def seed_epoch_s(rows: list[dict], part: str) -> float | None:
    """Median epoch time per SEED_N_TRAIN images (an epoch of N images scaled by SEED_N_TRAIN / N)."""
    v = []
    for r in _epochs(rows, part):
        s, n = number(r.get("epoch_s")), number(r.get("n_train"))
        if s is not None and (n is None or n >= 1):  # an image count below 1 counts nothing to scale by
            v.append(s * SEED_N_TRAIN / n if n else s)
    return statistics.median(v) if v else None


@quality
def final_acc_pct(rows: list[dict], part: str) -> float | None:
    v = [x for r in _epochs(rows, part) if (x := number(r.get("test_acc"))) is not None]
    return 100 * v[-1] if v else None


def peak_rss_mb(rows: list[dict], part: str) -> float | None:
    return _max(rows, part, "rss_peak_mb")


def heap_mb(rows: list[dict], part: str) -> float | None:
    return _max(rows, part, "python_heap_peak_mb")


def gpu_alloc_mb(rows: list[dict], part: str) -> float | None:
    return _max(rows, part, "gpu_alloc_peak_mb")


def _forms(rows: list[dict], part: str) -> dict[str, dict]:
    return {str(r.get("form")): r for r in _rows(rows, part, "inference")}


def _p50(r: dict | None) -> float | None:
    return number(r.get("latency_p50_ms")) if r else None


def eager_ms(rows: list[dict], part: str) -> float | None:
    """Batch-1 p50 of the cell's eager form (fp32-eager on a CPU, eager-fp32 or eager-fp16 on a GPU)."""
    return next((_p50(r) for f, r in _forms(rows, part).items() if "eager" in f), None)


def slowest_ms(rows: list[dict], part: str) -> float | None:
    v = [x for r in _forms(rows, part).values() if (x := _p50(r)) is not None]
    return max(v) if v else None


def fastest_ms(rows: list[dict], part: str) -> float | None:
    v = [x for r in _forms(rows, part).values() if (x := _p50(r)) is not None]
    return min(v) if v else None


def _quant_forms(rows: list[dict], part: str) -> tuple[dict, dict] | None:
    """(int8 form row, fp32 form row) of a Quantized cell, else None."""
    forms = _forms(rows, part)
    pair = next((p for p in QUANTIZED.values() if p[0] in forms and p[1] in forms), None)
    return (forms[pair[0]], forms[pair[1]]) if pair else None


def int8_drop_pts(rows: list[dict], part: str) -> float | None:
    """Test accuracy of the fp32 form minus the int8 form's, in points (one trained model, one test set)."""
    got = _quant_forms(rows, part)
    return number(got[0].get("acc_drop_pts")) if got else None


def int8_size_mb(rows: list[dict], part: str) -> float | None:
    got = _quant_forms(rows, part)
    return number(got[0].get("model_size_mb")) if got else None


def int8_size_ratio(rows: list[dict], part: str) -> float | None:
    got = _quant_forms(rows, part)
    a, b = (number(got[0].get("model_size_mb")), number(got[1].get("model_size_mb"))) if got else (None, None)
    return quotient(a, b) if a and b else None


def int8_speedup(rows: list[dict], part: str) -> float | None:
    """The fp32 form's batch-1 p50 over the int8 form's (above 1: int8 answers sooner)."""
    got = _quant_forms(rows, part)
    a, b = (_p50(got[0]), _p50(got[1])) if got else (None, None)
    return quotient(b, a) if a and b else None


def quantized(metric: Metric) -> Metric:
    """METRIC on a Quantized cell's rows only (a side {"backend": "torch-cpu"} then matches int8
    and quant-dynamic cells, each a workload of its own)."""

    def only(rows: list[dict], part: str) -> float | None:
        return metric(rows, part) if _quant_forms(rows, part) else None

    return only


# ---- claims made of several conditions, answered per model -------------------------------------
Item = tuple[str, Ratio | Level, Expect | None]


def difference(a: dict[int, float], b: dict[int, float], paired: bool) -> stats.Summary:
    """median(A) - median(B) over repeats, or paired by repeat the median of the differences
    (bench.core.stats.summarize: its interval or range); unpaired, the range min(A) - max(B) to
    max(A) - min(B), whatever the repeats (bench.core.stats has no interval of a difference)."""
    if paired and sorted(a) == sorted(b):
        return stats.summarize([a[k] - b[k] for k in sorted(a)])
    med = statistics.median(a.values()) - statistics.median(b.values())
    n = min(len(a), len(b))
    if n < 2:
        return stats.Summary(med, None, None, med, med, med, med, n, "none")
    lo, hi = min(a.values()) - max(b.values()), max(a.values()) - min(b.values())
    return stats.Summary(med, lo, hi, med, med, lo, hi, n, "range")


def per_model(*items: Item, need: bool = True, exact: bool = False, minus: bool = False) -> Measured:
    """A claim of several conditions (as bench.core.answers.conditions), answered per model, per
    configuration where an item's sides do not name the variant (a side {"backend": "torch-cpu"}
    with a `quantized` metric: int8 and quant-dynamic), and per host where one model's
    conditions ran on several. NEED: every condition is required (a missing one: not measured
    here); else the claim is judged on those that ran (the seed's "across Zaratan, P100 and Mac
    GPU"). EXACT: deterministic figures (a model's size). MINUS: a Ratio's two sides give a
    difference A - B (points), not A / B."""

    def measure(study: Study, cells: list[ResultCell]) -> list[Finding]:
        out: list[Finding] = []
        for what, rule, expect in items:
            if isinstance(rule, Ratio):
                got = answers.ratio_findings(study, cells, rule)
                named = "variant" in rule.a and "variant" in rule.b
            else:
                got = answers.level_findings(study, cells, rule)
                named = "variant" in rule.side
            for f in got:
                f.what, f.expect, f.exact = what, expect, exact
                f.split = {"model": f.sides[0].facets.get("model")}
                if not named:
                    f.split["variant"] = f.sides[0].facets.get("variant")
                if minus:
                    f.value = difference(f.sides[0].per, f.sides[1].per, paired=f.rank == 0)
                    f.unit = "pts"
            out += got
        scopes: dict[str, set] = {}
        for f in out:
            scopes.setdefault(json.dumps(f.split, sort_keys=True), set()).add(f.scope)
        for f in out:
            if len(scopes[json.dumps(f.split, sort_keys=True)]) > 1:
                f.split = {**f.split, "on": f.scope_label}
        return out

    return Measured(measure, tuple(w for w, _, _ in items) if need else ())
