"""What roofline's report, summary, claims and Study hooks read from result cells: the one place
its rows become numbers (host side: standard library only, beside bench.core; every value read
through bench.core.study.number or bench.core.tables.num, every division through quotient, as
result dirs come from other hosts).

A cell is one repeat (a fresh process) of one configuration on one device. Its ok rows, by phase:

    train, val   scenario A: one each, the training and the validation pass, each timed whole
    sweep        scenario B: one per batch size of the sweep
    sweep_end    scenario B: one, where and why the sweep ended

Every row carries the cell's counts (parameters, FLOPs per image) and the roofs it was held
against; every point row (train, val, sweep) its arithmetic intensity at both bounds
(`ai_low_flops_per_byte`: FLOPs over the unfused op-by-op bytes; `ai_high_flops_per_byte`: over
the compulsory bytes) and its `ridge_flops_per_byte`. Every selection below orders a phase's rows
by their own number, the batch size (`rows` and `phase_rows`; every phase in PHASES order), never
by where they stand in the file, and every figure is a median, a count or a lookup by batch: a
cell's rows in any order read the same figures (tests/test_roofline_readout.py).

    phase_rows / cell_rows / ordered / points / at_batch / median / params / precision_step
                                  the rows, in their own order, and a cell's configuration
    ips / pooled / pooled_ips / perf
                                  a pass's img/s (a rate above 0), the medians of Tables 3-5 (perf_table)
    counts(c)                     Tables 1-2: parameters, FLOPs per image, intensity (complexity_table)
    loader_gap                    the loader's img/s over synthetic-gpu's (gap_table)
    sweep / sweep_ends            Table 6: the sweep's medians per batch, host-paced or not; its ends
    speedup / threads             Table 8: one device's per-repeat img/s over another's
    roof_value / roof_compute / roof_bandwidth / roof_gflops / roof_load
                                  system.json's measured roofs (the roofs table; rows that predate
                                  the row roof fields)
    row_roofs / plot_points / intensities
                                  what the roofline figures draw: a cell's roofs, its points, the x span
    train_ips ... nan_passes      the claims' per-repeat metrics ((rows, part) -> value)
    gain / bar / ai_order / nan_count / per_config
                                  the derived findings the claims rest on (bench.core.answers'
                                  Parts; never a verdict: bench.core.claims decides every one)
    throughput / accuracy / loss_curve / above_roof / flops_off / miscounted / progress / missing
                                  the Study hooks (compare, verify, invariants, the progress line, check_rows)

The claims' metrics, one value per repeat:

    train_ips, val_ips      img/s of the training / validation pass (scenario A)
    gpu_util, cpu_util      NVML's GPU busy %, psutil's all-CPU % over the training pass
    train_roof_pct          the training pass's % of its roof (at the compulsory intensity)
    val_roof_pct            the same for the validation pass
    compute_roof, bw_roof   the measured roofs the cell's points were held against (GFLOP/s, GB/s)
    params_at(classes)      the parameter count with a CLASSES-way head (the seed built 1,000)
    sweep_gain(hi, lo)      a sweep's img/s at batch HI over batch LO
    sweep_climb             a sweep's highest achieved FLOP/s over its smallest batch's
    nan_passes              1 when the training pass's loss was not finite, else 0

Findings, split by device (`answers.device_split`: the claim answers for each device, or pair of
devices, that ran it) unless said. A claim's rule is `answers.conditions(...)` (the one rule
language): its (what, Ratio | Level, expect) conditions with `by_device=True`, and these derived
parts, each a callable `(study, cells) -> [Finding]` named by `answers.named_part`:

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
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bench.core import answers as A
from bench.core import stats
from bench.core.claims import Expect, Level, Metric, Ratio
from bench.core.study import curve, last, number, numbers_missing
from bench.core.tables import num, quotient
from bench.studies.roofline.config import DEVICE
from bench.studies.roofline.roofmath import host_floor

if TYPE_CHECKING:
    from bench.core.resultset import ResultCell
    from bench.core.study import Study

# ---- the row fields read here (protocol.py and roofmath.roof_fields write them) ----------------
TRAIN, VAL, SWEEP, SWEEP_END = "train", "val", "sweep", "sweep_end"
PHASES = (TRAIN, VAL, SWEEP, SWEEP_END)
POINT_PHASES = (TRAIN, VAL, SWEEP)  # the measured points: one pass, or one batch of the sweep
BATCH = "batch_size"  # a point's own number: the images of one step (per device)
IPS = "img_per_s"  # the whole world's images over the timed pass
FLOP_S = "achieved_flop_per_s"  # one device's
AI_LOW, AI_HIGH = "ai_low_flops_per_byte", "ai_high_flops_per_byte"  # FLOPs over unfused / compulsory bytes
RIDGE = "ridge_flops_per_byte"
ROOF_FRACTION = "roof_fraction"  # achieved over attainable at AI_HIGH (a fraction)
ROOF_COMPUTE, ROOF_BANDWIDTH = "roof_compute_flop_per_s", "roof_bandwidth_b_per_s"
ROOF_COMPUTE_NAME, ROOF_BANDWIDTH_NAME = "roof_compute_name", "roof_bandwidth_name"
PASS_S = "epoch_s"  # a scenario-A pass's seconds (the study's timing_key)
STEPS = "steps"
GPU_UTIL, SM_MHZ = "gpu_util_pct", "gpu_sm_mhz_median"
CPU_SYSTEM, CPU_PROCESS = "cpu_util_system_pct", "cpu_util_process_pct"
GPU_MEM, RSS_MEM = "gpu_alloc_peak_mb", "rss_peak_mb"
N_PARAMS, N_CLASSES = "n_params", "num_classes"
FWD_FLOPS, TRAIN_FLOPS = "forward_flops_per_sample", "train_flops_per_sample"
COUNTED_FLOPS, FLOPS_WHY = "train_counted_flops_per_sample", "train_flops_why"
WORLD = "world_size"
THREADS = "threads"
LOSS, LOSS_FINITE, VAL_ACC = "train_loss", "loss_finite", "val_acc"
STOP, STOP_REASON, STOP_BATCH = "sweep_stop", "sweep_stop_reason", "sweep_stop_batch"
POINT_NEEDS = (IPS, FLOP_S, AI_LOW, AI_HIGH)  # what every point must hold as a number (check_rows)
# system.json's measured roofs (bench.measure.roofs): compute per precision, bandwidth
COMPUTE_ROOFS, BANDWIDTH_ROOFS = ("gemm", "conv"), ("copy", "triad")

Part = A.Part
AI_BATCH = (
    128  # the batch the models' intensities are compared at (the seed's; SqueezeNet1.1's A cells run 64: its sweep has 128)
)
# each model's classifier input features: a head of N classes holds N x (in + 1) parameters
# (torchvision's Linear heads; SqueezeNet1.1's is a 1x1 convolution, the same count)
HEAD_IN = {"resnet18": 512, "mobilenet_v2": 1280, "resnet50": 2048, "squeezenet1_1": 512}


# ---- the rows --------------------------------------------------------------------------------
def _batch(r: dict) -> tuple:
    """A row's place within its phase: its batch size (none last)."""
    b = number(r.get(BATCH))
    return (b is None, b or 0)


def _place(r: dict) -> tuple:
    """A row's place in a cell: its phase (PHASES order, another after them, by name), then its batch."""
    phase = r.get("phase")
    return (PHASES.index(phase) if phase in PHASES else len(PHASES), str(phase), *_batch(r))


def ordered(rows: Iterable[dict]) -> list[dict]:
    """Every row (ok first), by phase and batch size: a cell's own order, not its file's (stable
    where two rows share a place)."""
    got = [r for r in rows if isinstance(r, dict)]
    return sorted(got, key=lambda r: (r.get("status") != "ok", *_place(r)))


def phase_rows(rows: Iterable[dict], phase: str, part: str | None = None) -> list[dict]:
    """The ok rows of PHASE (of row backend PART where given), by batch size."""
    got = [
        r
        for r in rows
        if isinstance(r, dict)
        and r.get("phase") == phase
        and r.get("status") == "ok"
        and (part is None or str(r.get("backend")) == part)
    ]
    return sorted(got, key=_batch)


def cell_rows(c: ResultCell, phase: str) -> list[dict]:
    return phase_rows(c.rows, phase)


def points(rows: Iterable[dict]) -> list[dict]:
    """The ok point rows (train, val, sweep), in that order, each phase by batch size."""
    rows = list(rows)
    return [r for p in POINT_PHASES for r in phase_rows(rows, p)]


def median(rows: list[dict], key: str, scale: float = 1.0) -> float | None:
    """The median of ROWS' KEY (numbers only), times SCALE; None when no row has one."""
    vals = [v for r in rows if (v := number(r.get(key))) is not None]
    return statistics.median(vals) * scale if vals else None


def at_batch(rows: list[dict], batch: int, phases: tuple[str, ...] = (TRAIN, SWEEP)) -> dict | None:
    """The first ok training point at BATCH images (a scenario-A pass or a sweep size)."""
    return next((r for p in phases for r in phase_rows(rows, p) if number(r.get(BATCH)) == batch), None)


def params(c: ResultCell) -> dict:
    """A cell's configuration as its rows (else its spec) say: model, scenario, pipeline,
    precision, step (eager | cuda-graph; rows before it: eager), platform (cpu | cuda | mps) and
    the scenario-A batch; `precision_step` the precision as tables show it (`bf16-cl graph`)."""
    first = next((r for r in ordered(c.rows) if r.get("model")), c.first)
    spec = c.spec.get("params") or {}
    precision = first.get("precision") or c.first.get("variant")
    step = first.get("step") or spec.get("step") or "eager"
    return {
        "model": first.get("model") or spec.get("model"),
        "scenario": first.get("scenario") or spec.get("scenario"),
        "pipeline": first.get("pipeline"),
        "precision": precision,
        "step": step,
        "precision_step": precision_step(precision, step),
        "platform": DEVICE.get(str(c.first.get("backend")), "?"),
        "batch": spec.get("batch_size"),
    }


def precision_step(precision: object, step: object) -> str:
    """'bf16-cl' for an eager cell, 'bf16-cl graph' for one whose step was a CUDA graph."""
    return f"{precision} graph" if step == "cuda-graph" else str(precision)


# ---- Tables 3-5: a configuration's passes ------------------------------------------------------
def _rates(rows: Iterable[dict]) -> list[float]:
    """The img/s of ROWS above 0 (a rate of 0 measured nothing, and a speedup divides by it)."""
    return [v for r in rows if (v := number(r.get(IPS))) is not None and v > 0]


def ips(rows: list[dict], phase: str, part: str | None = None) -> float | None:
    """One repeat's img/s of PHASE's pass: the median over its rows (of PART), above 0 only."""
    vals = _rates(phase_rows(rows, phase, part))
    return statistics.median(vals) if vals else None


def _group_rows(group: list[ResultCell], phase: str) -> list[dict]:
    return [r for c in group for r in cell_rows(c, phase)]


def pooled(group: list[ResultCell], phase: str, key: str, scale: float = 1.0) -> float | None:
    """The median of KEY over every repeat's PHASE rows, pooled, times SCALE."""
    return median(_group_rows(group, phase), key, scale)


def pooled_ips(group: list[ResultCell], phase: str) -> float | None:
    """The median img/s of PHASE over every repeat's rows, pooled, above 0 only."""
    vals = _rates(_group_rows(group, phase))
    return statistics.median(vals) if vals else None


@dataclass(frozen=True)
class PassFigures:
    """A scenario-A configuration's medians over its repeats (seed Tables 3, 4 and 5)."""

    train_ips: float | None
    val_ips: float | None
    tf_train: float | None  # TFLOP/s achieved, one device's
    tf_val: float | None
    roof_pct: float | None  # the training pass's % of its roof
    gpu_mb: float | None  # peak GPU memory allocated (None: no GPU)
    rss_mb: float | None  # the process's peak RSS
    train_s: float | None  # the passes' seconds
    val_s: float | None
    train_steps: float | None
    val_steps: float | None
    gpu_util: float | None  # NVML busy %
    sm_mhz: float | None
    cpu_system: float | None  # psutil: all CPUs
    cpu_process: float | None  # this process (100 = one core)

    def projected(self, images: int) -> tuple[float | None, float | None]:
        """IMAGES (the seed's epoch) at the training and the validation img/s: seconds."""
        return quotient(images, self.train_ips), quotient(images, self.val_ips)


def perf(group: list[ResultCell]) -> PassFigures:
    """A configuration's PassFigures (perf_table's row)."""

    def med(phase: str, key: str, scale: float = 1.0) -> float | None:
        return pooled(group, phase, key, scale)

    return PassFigures(
        pooled_ips(group, TRAIN),
        pooled_ips(group, VAL),
        med(TRAIN, FLOP_S, 1e-12),
        med(VAL, FLOP_S, 1e-12),
        med(TRAIN, ROOF_FRACTION, 100),
        med(TRAIN, GPU_MEM),
        med(TRAIN, RSS_MEM),
        med(TRAIN, PASS_S),
        med(VAL, PASS_S),
        med(TRAIN, STEPS),
        med(VAL, STEPS),
        med(TRAIN, GPU_UTIL),
        med(TRAIN, SM_MHZ),
        med(TRAIN, CPU_SYSTEM),
        med(TRAIN, CPU_PROCESS),
    )


def loader_gap(loader: float | None, synthetic: float | None) -> float | None:
    """The loader's training img/s over synthetic-gpu's (gap_table): below 1, the loader costs."""
    return quotient(loader, synthetic) if loader and synthetic else None


# ---- Tables 1-2: a cell's counts ---------------------------------------------------------------
@dataclass(frozen=True)
class Counts:
    """What a cell counted: its model's parameters, FLOPs per image and training intensity."""

    model: str
    params_m: float | None  # millions
    fwd_gflop: float | None  # forward GFLOP per image
    train_gflop: float | None  # training GFLOP per image (forward, backward, update)
    why: object  # which count was used (counter | analytic), as the row says
    ai_low: float | None  # the training intensity at the unfused bytes (FLOP/B)
    ai_high: float | None  # at the compulsory bytes
    batch: object  # the batch those intensities are at, as the row says


def counts(c: ResultCell) -> Counts | None:
    """Cell C's counts from its training pass, else its sweep's smallest batch (None: neither)."""
    rows = cell_rows(c, TRAIN) or cell_rows(c, SWEEP)
    if not rows:
        return None
    r = rows[0]
    n, fwd, train = num(r, N_PARAMS), num(r, FWD_FLOPS), num(r, TRAIN_FLOPS)
    return Counts(
        str(r.get("model")),
        None if n is None else n / 1e6,
        None if fwd is None else fwd / 1e9,
        None if train is None else train / 1e9,
        r.get(FLOPS_WHY),
        num(r, AI_LOW),
        num(r, AI_HIGH),
        r.get(BATCH),
    )


# ---- Table 6: the batch sweep ------------------------------------------------------------------
@dataclass(frozen=True)
class SweepPoint:
    """One batch of a configuration's sweep: the medians over its repeats' points at that batch."""

    batch: float
    n: int  # the points (one per repeat that reached the batch)
    ips: float | None
    gflops: float | None
    ai_low: float | None
    ai_high: float | None
    roof_pct: float | None
    mem_mb: float | None  # peak GPU memory allocated, else the process's peak RSS
    nan: bool  # a point's training loss was not finite
    paced: bool  # host-paced (or launch-paced): roofmath.host_floor


def sweep(group: list[ResultCell]) -> list[SweepPoint]:
    """The configuration's sweep by batch, each batch's medians over its repeats; `paced` where
    the step (ms, from the median img/s) stayed on the floor of its smallest batches."""
    by: dict[float, list[dict]] = {}
    for r in _group_rows(group, SWEEP):
        b = number(r.get(BATCH))
        if b:
            by.setdefault(b, []).append(r)
    step_ms = [(b, 1e3 * b / v) for b, rows in sorted(by.items()) if (v := median(rows, IPS))]
    floor = host_floor(step_ms)
    paced_to = floor["host_paced_up_to"] if floor else None
    timed = {b for b, _ in step_ms}  # a batch with no img/s is not marked
    return [
        SweepPoint(
            b,
            len(rows),
            median(rows, IPS),
            median(rows, FLOP_S, 1e-9),
            median(rows, AI_LOW),
            median(rows, AI_HIGH),
            median(rows, ROOF_FRACTION, 100),
            median(rows, GPU_MEM) or median(rows, RSS_MEM),
            any(r.get(LOSS_FINITE) is False for r in rows),
            paced_to is not None and b <= paced_to and b in timed,
        )
        for b, rows in sorted(by.items())
    ]


@dataclass(frozen=True)
class SweepEnd:
    """Where and why one repeat's sweep ended, as its sweep_end row says."""

    stop: object  # oom | memory-bound | max-batch
    reason: object  # one line
    batch: object  # the batch it stopped at (None: it reached the largest)


def sweep_ends(rows: list[dict]) -> list[SweepEnd]:
    """The sweep_end rows among ROWS (one a repeat)."""
    return [SweepEnd(r.get(STOP), r.get(STOP_REASON), r.get(STOP_BATCH)) for r in phase_rows(rows, SWEEP_END)]


# ---- Table 8: one device over another ----------------------------------------------------------
def speedup(a: dict[int, float], b: dict[int, float], same_run: bool) -> stats.Summary:
    """A's per-repeat img/s over B's (bench.core.stats.ratio), paired by repeat only where both
    sides ran in one run."""
    return stats.ratio(a, b, paired=None if same_run else False)


def threads(c: ResultCell) -> object:
    """The torch threads cell C's training pass ran with, as its row says."""
    return next((r.get(THREADS) for r in cell_rows(c, TRAIN)), None)


# ---- system.json's measured roofs (Table 7) ----------------------------------------------------
def roof_value(r: dict, name: str) -> float | None:
    """system.json's roof NAME (FLOP/s or B/s), where its value is a number above 0."""
    roofs = r.get("roofs")
    v = num(roofs.get(name), "value") if isinstance(roofs, dict) else None
    return float(v) if v is not None and v > 0 else None


def roof_compute(r: dict, prec: str) -> float | None:
    """The compute roof of precision PREC (fp32 | tf32 | bf16): the best of GEMM and conv."""
    vals = [v for v in (roof_value(r, f"{k}_{prec}") for k in COMPUTE_ROOFS) if v]
    return max(vals) if vals else None


def roof_bandwidth(r: dict) -> float | None:
    """The bandwidth roof: the best of copy and triad."""
    vals = [v for v in (roof_value(r, k) for k in BANDWIDTH_ROOFS) if v]
    return max(vals) if vals else None


def roof_gflops(r: dict, prec: str | None) -> float | None:
    """PREC's compute roof in GFLOP/s (None: the bandwidth roof in GB/s); None where unmeasured."""
    v = roof_compute(r, prec) if prec else roof_bandwidth(r)
    return (v or 0) / 1e9 or None


def roof_load(r: dict) -> float | None:
    """The 1-minute load average before the roofs were measured."""
    return num(r.get("conditions"), "load_avg_1m_before")


# ---- the roofline figures ----------------------------------------------------------------------
def row_roofs(c: ResultCell) -> tuple[str, float, str, float] | None:
    """(compute roof's name, FLOP/s, bandwidth roof's name, B/s) that cell C's points were held
    against, from its first point (in its own order) that names both above 0; None where none
    does (rows that predate the fields)."""
    for r in points(c.rows):
        comp, bw = number(r.get(ROOF_COMPUTE)), number(r.get(ROOF_BANDWIDTH))
        if comp and bw and comp > 0 and bw > 0:
            return str(r.get(ROOF_COMPUTE_NAME) or "compute"), comp, str(r.get(ROOF_BANDWIDTH_NAME) or "bandwidth"), bw
    return None


@dataclass(frozen=True)
class Point:
    """One measured point to draw: its batch (as the row says), intensity bounds and FLOP/s."""

    batch: object
    ai_low: float
    ai_high: float
    flop_s: float

    @property
    def label(self) -> str:
        return f"b{self.batch}"


def plot_points(c: ResultCell, phase: str) -> list[Point]:
    """Cell C's PHASE points whose intensities and FLOP/s are numbers, by batch."""
    return [
        Point(r.get(BATCH), lo, hi, y)
        for r in cell_rows(c, phase)
        if (lo := number(r.get(AI_LOW))) is not None
        and (hi := number(r.get(AI_HIGH))) is not None
        and (y := number(r.get(FLOP_S))) is not None
    ]


def intensities(cells: list[ResultCell]) -> list[float]:
    """Every intensity (both bounds) above 0 among CELLS' ok rows, each cell's in its own order: a
    figure's x span."""
    return [
        v
        for c in cells
        for r in ordered(c.rows)
        if r.get("status") == "ok"
        for k in (AI_LOW, AI_HIGH)
        if (v := num(r, k)) and v > 0
    ]


# ---- the claims' metrics: (rows, part) -> one value per repeat ---------------------------------
def train_ips(rows: list[dict], part: str) -> float | None:
    return ips(rows, TRAIN)


def val_ips(rows: list[dict], part: str) -> float | None:
    return ips(rows, VAL)


def _median_of(phase: str, key: str, scale: float = 1.0) -> Metric:
    def metric(rows: list[dict], part: str) -> float | None:
        return median(phase_rows(rows, phase), key, scale)

    return metric


gpu_util = _median_of(TRAIN, GPU_UTIL)
cpu_util = _median_of(TRAIN, CPU_SYSTEM)
train_roof_pct = _median_of(TRAIN, ROOF_FRACTION, 100)
val_roof_pct = _median_of(VAL, ROOF_FRACTION, 100)


def _first(rows: list[dict], key: str) -> float | None:
    return next((v for r in points(rows) if (v := number(r.get(key)))), None)


def compute_roof(rows: list[dict], part: str) -> float | None:
    v = _first(rows, ROOF_COMPUTE)
    return v / 1e9 if v else None


def bw_roof(rows: list[dict], part: str) -> float | None:
    v = _first(rows, ROOF_BANDWIDTH)
    return v / 1e9 if v else None


def params_at(classes: int) -> Metric:
    def metric(rows: list[dict], part: str) -> float | None:
        for r in ordered(rows):
            n, nc, head = number(r.get(N_PARAMS)), number(r.get(N_CLASSES)), HEAD_IN.get(str(r.get("model")))
            if n and nc and head:
                return n + (classes - nc) * (head + 1)
        return None

    return metric


def _sweep(rows: list[dict], key: str) -> dict[float, float]:
    """Batch -> KEY's median over the cell's sweep points at that batch."""
    by: dict[float, list[float]] = {}
    for r in phase_rows(rows, SWEEP):
        if (b := number(r.get(BATCH))) and (v := number(r.get(key))):
            by.setdefault(b, []).append(v)
    return {b: statistics.median(v) for b, v in by.items()}


def sweep_gain(hi: int, lo: int) -> Metric:
    def metric(rows: list[dict], part: str) -> float | None:
        got = _sweep(rows, IPS)
        return quotient(got[hi], got[lo]) if hi in got and lo in got else None

    return metric


def sweep_climb(rows: list[dict], part: str) -> float | None:
    flops = _sweep(rows, FLOP_S)
    return quotient(max(flops.values()), flops[min(flops)]) if len(flops) > 1 else None


def nan_passes(rows: list[dict], part: str) -> float | None:
    got = [r.get(LOSS_FINITE) for r in phase_rows(rows, TRAIN)]
    return float(any(v is False for v in got)) if got else None


def _over_ridge(key: str, batch: int | None = None) -> Metric:
    """A training point's intensity (KEY) over its ridge: at BATCH (train or sweep), else the pass's."""

    def metric(rows: list[dict], part: str) -> float | None:
        r = at_batch(rows, batch) if batch else next(iter(phase_rows(rows, TRAIN)), None)
        ai, ridge = (number(r.get(key)), number(r.get(RIDGE))) if r else (None, None)
        return quotient(ai, ridge) if ai and ridge else None

    return metric


def _ai(key: str, batch: int) -> Metric:
    def metric(rows: list[dict], part: str) -> float | None:
        r = at_batch(rows, batch)
        return number(r.get(key)) if r else None

    return metric


# ---- findings -------------------------------------------------------------------------------
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
                        A.Finding(
                            value, (a1, b1, a2, b2), max(f1.rank, f2.rank), what, "x", expect=expect, split=A.device_split(a1, b1)
                        )
                    )
        return out

    return A.named_part(what, part, r1, r2)


def nan_count(what: str, side: dict[str, Any], expect: Expect) -> Part:
    """SIDE's training passes whose loss was not finite, counted over its repeats (a count: it
    decides alone, one pass is enough)."""

    def part(study: Study, cells: list[ResultCell]) -> list[A.Finding]:
        got = A.level_findings(study, cells, Level(side, nan_passes, "non-finite passes"))
        for f in got:
            f.value = stats.summarize([sum(f.sides[0].per.values())])
            f.what, f.expect, f.exact, f.split = what, expect, True, A.device_split(*f.sides)
        return got

    return A.named_part(what, part)


def per_config(side: dict[str, Any], metric: Metric, unit: str, expect: Expect | None = None) -> Part:
    """SIDE's level per configuration that ran (each named by its model and precision), per device."""

    def part(study: Study, cells: list[ResultCell]) -> list[A.Finding]:
        got = A.level_findings(study, cells, Level(side, metric, unit))
        for f in got:
            s = f.sides[0]
            f.what, f.expect, f.split = f"{s.facets.get('model')} {s.facets.get('variant')}", expect, A.device_split(s)
        return got

    return A.named_part("", part)


def _bounds(at: float, one: float, other: float) -> stats.Summary:
    lo, hi = min(one, other), max(one, other)
    return stats.Summary(at, lo, hi, lo, hi, lo, hi, 1, "bounds")


def bar(what: str, side: dict[str, Any], expect: Expect) -> Part:
    """SIDE's training point against its ridge: AI / ridge from the unfused to the compulsory
    bytes (the value shown: at the compulsory bytes, where the report's marker and % of roof sit)."""
    high, low = _over_ridge(AI_HIGH), _over_ridge(AI_LOW)

    def part(study: Study, cells: list[ResultCell]) -> list[A.Finding]:
        out = []
        for s in A.sides(study, cells, side, high):
            lows = [v for c in s.cells if (v := low(c.rows, s.part)) is not None]
            if lows:
                at = statistics.median(s.per.values())
                value = _bounds(at, statistics.median(lows), at)
                out.append(A.Finding(value, (s,), 0, what, "x", expect=expect, split=A.device_split(s)))
        return out

    return A.named_part(what, part)


def ai_order(what: str, x: str, y: str, expect: Expect, precision: str = "fp32") -> Part:
    """Model X's training intensity over model Y's at AI_BATCH on one device and run, at the
    unfused bytes and at the compulsory bytes: the two readings are its bounds (the value
    shown: at the compulsory bytes). One answer, from the device with the most repeats: counts
    are the same work on every device (they differ in the third digit where a device's kernels
    dispatch other ops)."""
    high, low = _ai(AI_HIGH, AI_BATCH), _ai(AI_LOW, AI_BATCH)

    def part(study: Study, cells: list[ResultCell]) -> list[A.Finding]:
        def at(model: str) -> dict[tuple[str, str], tuple[A.Side, float, float]]:
            out: dict[tuple[str, str], tuple[A.Side, float, float]] = {}
            for s in A.sides(study, cells, {"model": model, "variant": precision}, high):
                lows = [v for c in s.cells if (v := low(c.rows, s.part)) is not None]
                if lows:
                    out.setdefault((s.run, s.part), (s, statistics.median(lows), statistics.median(s.per.values())))
            return out

        ys = at(y)
        out = []
        for key, (sx, lx, hx) in at(x).items():
            if key in ys:
                sy, ly, hy = ys[key]
                hi, lo = quotient(hx, hy), quotient(lx, ly)
                if hi is not None and lo is not None:  # intensities of 0 (or a divisor past reach) form no ratio
                    out.append(A.Finding(_bounds(hi, lo, hi), (sx, sy), 0, what, "x", expect=expect))
        return out

    return A.named_part(what, part)


# ---- the Study hooks --------------------------------------------------------------------------------
def throughput(rows: list[dict]) -> dict[str, float]:
    """Row backend -> its training pass's img/s (ips; a sweep's points are per batch size: none)."""
    parts = dict.fromkeys(str(r.get("backend")) for r in phase_rows(rows, TRAIN))
    return {p: v for p in parts if (v := ips(rows, TRAIN, p)) is not None}


def accuracy(rows: list[dict], part: str) -> tuple[str, float] | None:
    """(its name, the validation accuracy of PART's validation pass at the largest batch)."""
    return last(phase_rows(rows, VAL, part), BATCH, VAL_ACC)


def loss_curve(rows: list[dict], part: str):
    """PART's training loss by batch size over its training points (bench.core.study.curve)."""
    return curve([r for p in (TRAIN, SWEEP) for r in phase_rows(rows, p, part)], BATCH, LOSS)


ROOFS_BUSY = "roofs_measured_busy"  # the roofs were measured while other work loaded the machine


def above_roof(rows: list[dict], busy: bool = False) -> list[tuple[str, float]]:
    """(phase, roof fraction) of every point above its measured roof, in the cell's order: of the
    points whose roofs were measured on a quiet machine, or (BUSY) on a busy one (a low roof: a point
    above it says how loaded the machine was, not that a count is wrong)."""
    return [
        (str(r.get("phase")), f)
        for r in points(rows)
        if (f := number(r.get(ROOF_FRACTION))) is not None and f > 1.0 and (r.get(ROOFS_BUSY) is True) == busy
    ]


def flops_off(rows: list[dict]) -> list[tuple[str, object]]:
    """(phase, batch) of every point whose achieved FLOP/s is not img/s per device x FLOPs per
    image (within 1 %)."""
    out = []
    for r in points(rows):
        per = number(r.get(TRAIN_FLOPS if r.get("phase") != VAL else FWD_FLOPS))
        rate, got = number(r.get(IPS)), number(r.get(FLOP_S))
        world = number(r.get(WORLD)) or 1.0
        if per and rate and got and abs(got - rate / world * per) > 0.01 * got:
            out.append((str(r.get("phase")), r.get(BATCH)))
    return out


def miscounted(rows: list[dict]) -> list[str]:
    """The phases of points whose FLOPs used are not the counter's where the row says `counter`."""
    return [
        str(r.get("phase")) for r in points(rows) if r.get(FLOPS_WHY) == "counter" and r.get(TRAIN_FLOPS) != r.get(COUNTED_FLOPS)
    ]


def progress(rows: list[dict]) -> tuple[str, object, float, float, float | None] | None:
    """(phase, batch, img/s, GFLOP/s, roof fraction or None) of the first point among one step's
    ROWS, for the live progress line; None where it holds no point with both rates."""
    for r in points(rows):
        rate, flop_s = number(r.get(IPS)), number(r.get(FLOP_S))
        if rate is not None and flop_s is not None:
            return str(r.get("phase")), r.get(BATCH), rate, flop_s / 1e9, number(r.get(ROOF_FRACTION))
    return None


def missing(rows: list[dict]) -> str | None:
    """The first ok point row (in the cell's order) lacking one of POINT_NEEDS as a measurement
    (check_rows: bench.core.study.numbers_missing's line), or None."""
    return numbers_missing(ordered(rows), {phase: POINT_NEEDS for phase in POINT_PHASES})
