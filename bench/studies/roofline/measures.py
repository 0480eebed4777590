"""What roofline's claims measure: per-repeat metrics read from a cell's rows, and the findings
the claims rest on (bench.core.answers' sides and pairs; never a verdict: bench.core.claims
decides every one).

Metrics, `(rows, part) -> value | None`, one value per repeat:

    train_ips, val_ips      img/s of the training / validation pass (scenario A)
    gpu_util, cpu_util      NVML's GPU busy %, psutil's all-CPU % over the training pass
    train_roof_pct          the training pass's % of its roof (at the compulsory intensity)
    val_roof_pct            the same for the validation pass
    compute_roof, bw_roof   the measured roofs the cell's points were held against (GFLOP/s, GB/s)
    params_at(classes)      the parameter count with a CLASSES-way head (the seed built 1,000)
    sweep_gain(hi, lo)      a sweep's img/s at batch HI over batch LO
    sweep_climb             a sweep's highest achieved FLOP/s over its smallest batch's
    nan_passes              1 when the training pass's loss was not finite, else 0

Findings, split by device (`on`: the claim answers for each device, or pair of devices, that
ran it) unless said; every builder returns a callable `(study, cells) -> [Finding]` that
`measured(...)` joins into a claim's rule:

    rule(what, Ratio | Level)   the engine's ratio or level findings, named WHAT (or one answer)
    gain(what, r1, r2)          ratio 1 over ratio 2 of the same runs (a ratio of speedups:
                                per repeat A1/A2 over B1/B2, so the engine's interval carries)
    bar(what, side)             a training point's intensity over its device's ridge, as its
                                bounds: from the unfused bytes to the compulsory bytes (kind
                                "bounds": which roof binds depends on the traffic the run moved,
                                which lies between)
    ai_order(what, x, y)        model X's intensity over Y's at batch 128 in one run, as bounds
                                (at the unfused bytes, at the compulsory bytes); one answer
    nan_count(what, side)       the training passes with a non-finite loss (a count)
    per_config(side, metric)    a level per configuration that ran, named by model and precision
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bench.core import answers as A
from bench.core import stats
from bench.core.claims import Expect, Level, Measured, Metric, Ratio
from bench.core.study import number
from bench.core.tables import quotient
from bench.studies.roofline.readout import POINT_PHASES, at_batch, median, phase_rows

if TYPE_CHECKING:
    from bench.core.resultset import ResultCell
    from bench.core.study import Study

Part = Callable[["Study", "list[ResultCell]"], "list[A.Finding]"]
AI_BATCH = (
    128  # the batch the models' intensities are compared at (the seed's; SqueezeNet1.1's A cells run 64: its sweep has 128)
)
# each model's classifier input features: a head of N classes holds N x (in + 1) parameters
# (torchvision's Linear heads; SqueezeNet1.1's is a 1x1 convolution, the same count)
HEAD_IN = {"resnet18": 512, "mobilenet_v2": 1280, "resnet50": 2048, "squeezenet1_1": 512}


# ---- metrics ------------------------------------------------------------------------------
def _median_of(phase: str, key: str, scale: float = 1.0) -> Metric:
    def metric(rows: list[dict], part: str) -> float | None:
        return median(phase_rows(rows, phase), key, scale)

    return metric


train_ips = _median_of("train", "img_per_s")
val_ips = _median_of("val", "img_per_s")
gpu_util = _median_of("train", "gpu_util_pct")
cpu_util = _median_of("train", "cpu_util_system_pct")
train_roof_pct = _median_of("train", "roof_fraction", 100)
val_roof_pct = _median_of("val", "roof_fraction", 100)


def _first(rows: list[dict], key: str) -> float | None:
    return next((v for p in POINT_PHASES for r in phase_rows(rows, p) if (v := number(r.get(key)))), None)


def compute_roof(rows: list[dict], part: str) -> float | None:
    v = _first(rows, "roof_compute_flop_per_s")
    return v / 1e9 if v else None


def bw_roof(rows: list[dict], part: str) -> float | None:
    v = _first(rows, "roof_bandwidth_b_per_s")
    return v / 1e9 if v else None


def params_at(classes: int) -> Metric:
    def metric(rows: list[dict], part: str) -> float | None:
        for r in rows:
            n, nc, head = number(r.get("n_params")), number(r.get("num_classes")), HEAD_IN.get(str(r.get("model")))
            if n and nc and head:
                return n + (classes - nc) * (head + 1)
        return None

    return metric


def _sweep(rows: list[dict], key: str) -> dict[float, float]:
    return {b: v for r in phase_rows(rows, "sweep") if (b := number(r.get("batch_size"))) and (v := number(r.get(key)))}


def sweep_gain(hi: int, lo: int) -> Metric:
    def metric(rows: list[dict], part: str) -> float | None:
        ips = _sweep(rows, "img_per_s")
        return quotient(ips[hi], ips[lo]) if hi in ips and lo in ips else None

    return metric


def sweep_climb(rows: list[dict], part: str) -> float | None:
    flops = _sweep(rows, "achieved_flop_per_s")
    return quotient(max(flops.values()), flops[min(flops)]) if len(flops) > 1 else None


def nan_passes(rows: list[dict], part: str) -> float | None:
    got = [r.get("loss_finite") for r in phase_rows(rows, "train")]
    return float(any(v is False for v in got)) if got else None


def _over_ridge(key: str, batch: int | None = None) -> Metric:
    """A training point's intensity (KEY) over its ridge: at BATCH (train or sweep), else the pass's."""

    def metric(rows: list[dict], part: str) -> float | None:
        r = at_batch(rows, batch) if batch else next(iter(phase_rows(rows, "train")), None)
        ai, ridge = (number(r.get(key)), number(r.get("ridge_flops_per_byte"))) if r else (None, None)
        return quotient(ai, ridge) if ai and ridge else None

    return metric


def _ai(key: str, batch: int) -> Metric:
    def metric(rows: list[dict], part: str) -> float | None:
        r = at_batch(rows, batch)
        return number(r.get(key)) if r else None

    return metric


# ---- findings -------------------------------------------------------------------------------
def on(*sides: A.Side) -> dict[str, str]:
    """The split that answers per device (or pair of devices): the devices its sides ran on."""
    return {"device": " / ".join(dict.fromkeys(s.first.device for s in sides))}


def measured(*parts: Part, required: tuple[str, ...] | None = None) -> Measured:
    """A claim's rule: every PART's findings; REQUIRED: the `what`s each answer needs (None:
    every part's, as they are named by `rule`, `gain`, `bar`, `ai_order`)."""

    def measure(study: Study, cells: list[ResultCell]) -> list[A.Finding]:
        return [f for p in parts for f in p(study, cells)]

    names = tuple(dict.fromkeys(getattr(p, "what", "") for p in parts)) if required is None else required
    return Measured(measure, tuple(n for n in names if n))


def _named(what: str, fn: Part) -> Part:
    fn.what = what  # type: ignore[attr-defined]
    return fn


def rule(what: str, r: Ratio | Level, expect: Expect | None = None, exact: bool = False, per_device: bool = True) -> Part:
    """R's findings named WHAT, per device (PER_DEVICE False: one answer, the best finding
    wherever it ran: a count that no device changes)."""

    def part(study: Study, cells: list[ResultCell]) -> list[A.Finding]:
        got = A.ratio_findings(study, cells, r) if isinstance(r, Ratio) else A.level_findings(study, cells, r)
        for f in got:
            f.what, f.expect, f.exact, f.split = what, expect, exact, on(*f.sides) if per_device else {}
        return got

    return _named(what, part)


def gain(what: str, r1: Ratio, r2: Ratio, expect: Expect | None = None) -> Part:
    """R1's ratio over R2's, where both pair the same two runs and backends: per repeat A1/A2
    (one run: paired by repeat) over B1/B2, by bench.core.stats.ratio (paired by repeat only
    where all four sides ran in one run)."""

    def part(study: Study, cells: list[ResultCell]) -> list[A.Finding]:
        out = []
        second = A.ratio_findings(study, cells, r2)
        for f1 in A.ratio_findings(study, cells, r1):
            a1, b1 = f1.sides
            for f2 in second:
                a2, b2 = f2.sides
                if (a1.run, a1.part, b1.run, b1.part) != (a2.run, a2.part, b2.run, b2.part):
                    continue
                # a ratio per repeat where it is one (a side's 0 or a tiny divisor forms none: bench.core.tables.quotient)
                x = {r: q for r in a1.per if (q := quotient(a1.per[r], a2.per.get(r))) is not None and q >= 0}
                y = {r: q for r in b1.per if (q := quotient(b1.per[r], b2.per.get(r))) is not None and q > 0}
                if x and y:
                    value = stats.ratio(x, y, paired=None if a1.run == b1.run else False)
                    out.append(
                        A.Finding(value, (a1, b1, a2, b2), max(f1.rank, f2.rank), what, "x", expect=expect, split=on(a1, b1))
                    )
        return out

    return _named(what, part)


def nan_count(what: str, side: dict[str, Any], expect: Expect) -> Part:
    """SIDE's training passes whose loss was not finite, counted over its repeats (a count: it
    decides alone, one pass is enough)."""

    def part(study: Study, cells: list[ResultCell]) -> list[A.Finding]:
        got = A.level_findings(study, cells, Level(side, nan_passes, "non-finite passes"))
        for f in got:
            f.value = stats.summarize([sum(f.sides[0].per.values())])
            f.what, f.expect, f.exact, f.split = what, expect, True, on(*f.sides)
        return got

    return _named(what, part)


def per_config(side: dict[str, Any], metric: Metric, unit: str, expect: Expect | None = None) -> Part:
    """SIDE's level per configuration that ran (each named by its model and precision), per device."""

    def part(study: Study, cells: list[ResultCell]) -> list[A.Finding]:
        got = A.level_findings(study, cells, Level(side, metric, unit))
        for f in got:
            s = f.sides[0]
            f.what, f.expect, f.split = f"{s.facets.get('model')} {s.facets.get('variant')}", expect, on(s)
        return got

    return part


def _bounds(at: float, one: float, other: float) -> stats.Summary:
    lo, hi = min(one, other), max(one, other)
    return stats.Summary(at, lo, hi, lo, hi, lo, hi, 1, "bounds")


def bar(what: str, side: dict[str, Any], expect: Expect) -> Part:
    """SIDE's training point against its ridge: AI / ridge from the unfused to the compulsory
    bytes (the value shown: at the compulsory bytes, where the report's marker and % of roof sit)."""
    high, low = _over_ridge("ai_high_flops_per_byte"), _over_ridge("ai_low_flops_per_byte")

    def part(study: Study, cells: list[ResultCell]) -> list[A.Finding]:
        out = []
        for s in A.sides(study, cells, side, high):
            lows = [v for c in s.cells if (v := low(c.rows, s.part)) is not None]
            if lows:
                at = statistics.median(s.per.values())
                value = _bounds(at, statistics.median(lows), at)
                out.append(A.Finding(value, (s,), 0, what, "x", expect=expect, split=on(s)))
        return out

    return _named(what, part)


def ai_order(what: str, x: str, y: str, expect: Expect, precision: str = "fp32") -> Part:
    """Model X's training intensity over model Y's at AI_BATCH on one device and run, at the
    unfused bytes and at the compulsory bytes: the two readings are its bounds (the value
    shown: at the compulsory bytes). One answer, from the device with the most repeats: counts
    are the same work on every device (they differ in the third digit where a device's kernels
    dispatch other ops)."""
    high, low = _ai("ai_high_flops_per_byte", AI_BATCH), _ai("ai_low_flops_per_byte", AI_BATCH)

    def part(study: Study, cells: list[ResultCell]) -> list[A.Finding]:
        def points(model: str) -> dict[tuple[str, str], tuple[A.Side, float, float]]:
            out: dict[tuple[str, str], tuple[A.Side, float, float]] = {}
            for s in A.sides(study, cells, {"model": model, "variant": precision}, high):
                lows = [v for c in s.cells if (v := low(c.rows, s.part)) is not None]
                if lows:
                    out.setdefault((s.run, s.part), (s, statistics.median(lows), statistics.median(s.per.values())))
            return out

        ys = points(y)
        out = []
        for key, (sx, lx, hx) in points(x).items():
            if key in ys:
                sy, ly, hy = ys[key]
                at, one = quotient(hx, hy), quotient(lx, ly)
                if at is not None and one is not None:  # intensities of 0 (or a divisor past reach) form no ratio
                    out.append(A.Finding(_bounds(at, one, at), (sx, sy), 0, what, "x", expect=expect))
        return out

    return _named(what, part)


__all__ = [
    "AI_BATCH",
    "Part",
    "HEAD_IN",
    "ai_order",
    "bar",
    "bw_roof",
    "compute_roof",
    "cpu_util",
    "gain",
    "gpu_util",
    "measured",
    "nan_count",
    "nan_passes",
    "on",
    "params_at",
    "per_config",
    "rule",
    "sweep_climb",
    "sweep_gain",
    "train_ips",
    "train_roof_pct",
    "val_ips",
    "val_roof_pct",
]
