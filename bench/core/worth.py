"""Is the GPU worth it? Time, energy, cost and the break-even work beside every GPU-over-CPU answer.

For each answer of a speed claim (a Ratio of the study's throughput) whose two sides run one on
a CPU and one on a GPU, on the very sides and pair the time ratio used (bench.core.answers), per
repeat of each side:

    rate      samples/s      the study's throughput x Study.samples_per_unit (an MLP iteration is
                             one pass over its training set)
    energy    J/sample       the median over the cell's timed windows of energy_j_per_sample (net of
                             the idle baseline; bench.measure.energy), or why it is not measured
    fixed     s              system.json's fixed_costs.total_s (process start to the first timed
                             step), else open_s for results made before it was recorded (said so)
    price     USD/h          the user's price for the side's device (x the GPUs it uses); no price,
                             no cost: never a default

and from those:

    time ratio    GPU rate / CPU rate                      above 1x: the GPU trains faster
    energy ratio  CPU J/sample / GPU J/sample              above 1x: the GPU spends less per sample
    cost ratio    CPU USD/sample / GPU USD/sample          above 1x: the GPU costs less per sample
    break-even    the work N above which the GPU finishes first once fixed costs count:
                  F_gpu + N / r_gpu < F_cpu + N / r_cpu, so N* = (F_gpu - F_cpu) / (1/r_cpu - 1/r_gpu);
                  and the same for cost (USD per second of each side x those seconds, plus energy
                  x the kWh price where one is given)

Each with its interval as the time ratio has it (bench.core.stats: a 95 % bootstrap interval from
6 repeats, below that the range): the ratios through stats.ratio (paired by repeat when the sides
ran in one run), the break-even over the repeats' pairs (by repeat in one run, else every pair).
Standard library and bench.core only: the host renders it (host/worth.py).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bench.core import claims as C
from bench.core import stats
from bench.core.study import number

if TYPE_CHECKING:
    from bench.core.answers import Answer, Side
    from bench.core.study import Study

ALWAYS, ABOVE, BELOW, NEVER = "always", "above", "below", "never"
JOULES_PER_KWH = 3.6e6


# ---- the arithmetic ------------------------------------------------------------------------
@dataclass(frozen=True)
class Line:
    """What finishing N samples takes on one side: FIXED + N x PER (seconds, or USD)."""

    fixed: float
    per: float

    def at(self, n: float) -> float:
        return self.fixed + n * self.per


def crossing(gpu: Line, cpu: Line) -> tuple[str, float]:
    """Where GPU's line goes below CPU's, as (kind, N):

    always  the GPU is below for every N >= 0 (N = 0)
    above   below for N > N* only (its fixed cost is higher, its per-sample lower)
    below   below for N < N* only (its fixed cost is lower, its per-sample higher)
    never   never below (N = inf); equal lines never put the GPU first"""
    dfix = gpu.fixed - cpu.fixed  # what the GPU pays more up front
    dper = cpu.per - gpu.per  # what it saves per sample
    if dper > 0:
        n = dfix / dper
        return (ALWAYS, 0.0) if n <= 0 else (ABOVE, n)
    if dper == 0:
        return (ALWAYS, 0.0) if dfix < 0 else (NEVER, math.inf)
    return (BELOW, dfix / dper) if dfix < 0 else (NEVER, math.inf)


def time_line(rate: float, fixed: float) -> Line:
    """Seconds to finish N samples at RATE samples/s after FIXED s."""
    return Line(fixed, 1.0 / rate)


def cost_line(
    rate: float, fixed: float, usd_per_hour: float, j_per_sample: float | None = None, usd_per_kwh: float | None = None
) -> Line:
    """USD to finish N samples: the device's hourly price over the fixed and the per-sample seconds,
    plus, given a kWh price, the energy per sample at it (the fixed costs' energy is not measured)."""
    per_s = usd_per_hour / 3600.0
    energy = (j_per_sample or 0.0) * (usd_per_kwh or 0.0) / JOULES_PER_KWH
    return Line(per_s * fixed, per_s / rate + energy)


@dataclass(frozen=True)
class Even:
    """A break-even work: its kind (crossing's), N* from the sides' medians, and N*'s interval."""

    kind: str
    n: float
    lo: float | None = None
    hi: float | None = None
    interval: str = "none"  # "range": min-max over the repeat pairs; "none": one pair
    pairs: int = 1
    split: str = ""  # "2 of 3 pairs cross": where the repeats disagree on the kind

    @property
    def decided(self) -> bool:
        return not self.split


def even(pairs: list[tuple[Line, Line]], medians: tuple[Line, Line]) -> Even:
    """The break-even of MEDIANS (gpu, cpu) with its interval over PAIRS (one per repeat pair): the
    range of the pairs' N* (a pair that never crosses counts as inf, one that always does as 0),
    as a ratio's range is the range of its paired per-repeat ratios (bench.core.stats)."""
    kind, n = crossing(*medians)
    got = [crossing(g, c) for g, c in pairs]
    kinds = [k for k, _ in got]
    split = "" if all(k == kind for k in kinds) else f"{sum(k == kind for k in kinds)} of {len(kinds)} repeat pairs {kind}"
    vals = sorted(v for _, v in got)
    if len(vals) < 2:
        return Even(kind, n, split=split)
    return Even(kind, n, vals[0], vals[-1], "range", len(vals), split)


# ---- what each side measured ---------------------------------------------------------------
@dataclass
class Facts:
    """One side of a GPU-over-CPU answer, per repeat."""

    side: Side
    platform: str
    rate: dict[int, float]  # samples/s: Study.throughput x samples_per_unit
    fixed: dict[int, float]  # s before the first timed step
    fixed_what: str  # "total_s" or "open_s (process start and imports not recorded)"
    energy: dict[int, float]  # J/sample, net of idle
    energy_why: str  # why energy is not measured (empty when every repeat has it)
    energy_domain: str
    devices: int  # GPUs it used (1 on a CPU): the price counts each
    epoch: int | None  # samples in one epoch of its dataset
    price: Any = None  # host.prices.Price matched for its device
    price_why: str = ""

    @property
    def name(self) -> str:
        return device_name(self.side)


def device_name(side: Side) -> str:
    """What a price is matched against: the GPU's name, or '<cores>-core <CPU model>'."""
    return cell_device_name(side.first, str(side.facets.get("platform")))


def cell_device_name(cell: Any, platform: str) -> str:
    s = cell.system
    if platform == "cpu":
        cores = s.get("cpu_logical_cores") or s.get("cpu_affinity")
        cpu = str(s.get("cpu_model") or cell.device or "CPU").replace("(R)", "").replace(" Processor", "")
        return f"{cores}-core {cpu}" if cores else cpu
    return str(cell.device or "GPU")


def facts(study: Study, side: Side) -> Facts:
    rate: dict[int, float] = {}
    fixed: dict[int, float] = {}
    energy: dict[int, float] = {}
    notes: list[str] = []
    what = "total_s"
    domain = ""
    for c in side.cells:
        per_unit = study.samples_per_unit(c.rows, side.part)
        thr = study.throughput(c.rows).get(side.part)  # the study's training rate, whatever the claim's metric
        if thr and per_unit:
            rate[c.repeat] = thr * per_unit
        fc = c.system.get("fixed_costs")
        total = number(fc.get("total_s")) if isinstance(fc, dict) else None
        if total is None and (o := number(c.system.get("open_s"))) is not None:
            total, what = o, "open_s (made before the kit recorded process start and imports)"
        if total is not None and total >= 0:
            fixed[c.repeat] = total
        mine = [r for r in c.ok_rows if str(r.get("backend")) == side.part]
        js = [v for r in mine if (v := number(r.get("energy_j_per_sample"))) is not None and v > 0]
        domain = domain or next((str(r["energy_domain"]) for r in mine if r.get("energy_domain")), "")
        if js:
            energy[c.repeat] = statistics.median(js)
        else:
            why = next((str(r["energy_note"]) for r in mine if r.get("energy_note")), "")
            notes.append(
                why.removeprefix("not measured: ")
                or "its rows carry no energy figure (made before the kit measured energy per sample)"
            )
    gpus = side.facets.get("gpus")
    return Facts(
        side=side,
        platform=str(side.facets.get("platform")),
        rate=rate,
        fixed=fixed,
        fixed_what=what,
        energy=energy if len(energy) == len(side.cells) else {},
        energy_why="; ".join(dict.fromkeys(notes)),
        energy_domain=domain,
        devices=gpus if isinstance(gpus, int) and gpus > 0 else 1,
        epoch=study.epoch_samples(side.first),
    )


# ---- one answer ----------------------------------------------------------------------------
@dataclass
class Worth:
    """The time, energy and cost answer beside one GPU-over-CPU answer."""

    answer: Answer
    gpu: Facts
    cpu: Facts
    paired: bool
    time: stats.Summary | None = None
    energy: stats.Summary | None = None
    energy_why: str = ""
    cost: stats.Summary | None = None
    cost_why: str = ""
    even_time: Even | None = None
    even_time_why: str = ""
    even_cost: Even | None = None
    even_cost_why: str = ""
    kwh: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def epoch(self) -> int | None:
        return self.gpu.epoch or self.cpu.epoch

    def lines(self, kind: str) -> tuple[Line, Line] | None:
        """(gpu, cpu) time or cost lines at the sides' medians, or None where not formed."""
        return _medians(self, kind)


def is_gpu_over_cpu(answer: Answer) -> bool:
    """A speed claim's answer (a Ratio of the study's throughput, or a headline Ratio: the headline
    holds speed comparisons only) pairing a CPU side with a GPU side."""
    rule = answer.claim.rule
    speed = isinstance(rule, C.Ratio) and (rule.metric is None or answer.claim.headline)
    if not speed or len(answer.findings) != 1:
        return False
    sides = answer.findings[0].sides
    plats = {s.facets.get("platform") for s in sides}
    return len(sides) == 2 and "cpu" in plats and len(plats) == 2


def want_platform(study: Study, want: dict) -> str | None:
    """The platform a claim's side runs on (the `platform` facet it matches): the one it names,
    else its backend's; None where it names neither (any platform)."""
    if "platform" in want:
        return str(want["platform"])
    spec = study.backends.get(str(want["backend"])) if "backend" in want else None
    return spec.platform if spec else None


def claim_is_gpu_over_cpu(study: Study, claim: C.Claim) -> bool:
    """Whether CLAIM's answers are GPU-over-CPU answers (is_gpu_over_cpu) by its declaration alone,
    answered or not: a speed Ratio whose one side runs on a CPU and the other on a GPU."""
    rule = claim.rule
    if not isinstance(rule, C.Ratio) or not (rule.metric is None or claim.headline):
        return False
    plats = {want_platform(study, rule.a), want_platform(study, rule.b)}
    return None not in plats and "cpu" in plats and len(plats) == 2


def worth_of(study: Study, answer: Answer, prices: Any = None) -> Worth:
    """The Worth of ANSWER (is_gpu_over_cpu) at PRICES (host.prices.Prices or None: no cost)."""
    f = answer.findings[0]
    a, b = f.sides
    fa, fb = facts(study, a), facts(study, b)
    gpu, cpu = (fa, fb) if fa.platform != "cpu" else (fb, fa)
    w = Worth(answer, gpu, cpu, paired=f.rank == 0)
    if gpu.rate and cpu.rate:
        w.time = stats.ratio(gpu.rate, cpu.rate, paired=w.paired)
    # energy: both sides need it on every repeat
    lacking = [f"{x.name} ({'GPU' if x is gpu else 'CPU'}): {x.energy_why}" for x in (gpu, cpu) if not x.energy]
    if lacking:
        w.energy_why = "not measured: " + "; ".join(lacking)
    else:
        w.energy = stats.ratio(cpu.energy, gpu.energy, paired=w.paired)
    # break-even in time
    if gpu.fixed and cpu.fixed and gpu.rate and cpu.rate:
        w.even_time = _even(w, "time")
    else:
        w.even_time_why = "not formed: " + "; ".join(f"{x.name} has no fixed costs recorded" for x in (gpu, cpu) if not x.fixed)
    # cost
    if prices is None:
        w.cost_why = w.even_cost_why = "no price given"
        return w
    w.kwh = prices.kwh_usd
    for x in (gpu, cpu):
        x.price = prices.for_device(x.name)
        if x.price is None:
            x.price_why = f"no price matches {x.name!r}"
    missing = [x.price_why for x in (gpu, cpu) if x.price is None]
    if w.kwh is not None and lacking:
        missing.append(f"--kwh-price needs energy per sample on both sides ({w.energy_why.removeprefix('not measured: ')})")
    if missing:
        w.cost_why = w.even_cost_why = "not measured: " + "; ".join(missing)
        return w
    gc, cc = _per_sample_cost(w, gpu), _per_sample_cost(w, cpu)
    w.cost = stats.ratio(cc, gc, paired=w.paired)
    if gpu.fixed and cpu.fixed:
        w.even_cost = _even(w, "cost")
    else:
        w.even_cost_why = w.even_time_why
    return w


def _usd_h(x: Facts) -> float:
    return float(x.price.usd_per_hour) * x.devices


def _per_sample_cost(w: Worth, x: Facts) -> dict[int, float]:
    return {r: cost_line(v, 0.0, _usd_h(x), x.energy.get(r), w.kwh).per for r, v in x.rate.items()}


def _line(w: Worth, x: Facts, kind: str, r: int) -> Line | None:
    rate, fixed = x.rate.get(r), x.fixed.get(r)
    if rate is None or fixed is None or rate <= 0:
        return None
    if kind == "time":
        return time_line(rate, fixed)
    return cost_line(rate, fixed, _usd_h(x), x.energy.get(r), w.kwh)


def _median_facts(x: Facts) -> Facts:
    m = Facts(
        x.side, x.platform, {0: statistics.median(x.rate.values())}, {0: statistics.median(x.fixed.values())},
        x.fixed_what, {0: statistics.median(x.energy.values())} if x.energy else {}, x.energy_why, x.energy_domain,
        x.devices, x.epoch, x.price, x.price_why,
    )  # fmt: skip
    return m


def _medians(w: Worth, kind: str) -> tuple[Line, Line] | None:
    if not (w.gpu.rate and w.cpu.rate and w.gpu.fixed and w.cpu.fixed):
        return None
    if kind == "cost" and (w.gpu.price is None or w.cpu.price is None):
        return None
    g, c = _line(w, _median_facts(w.gpu), kind, 0), _line(w, _median_facts(w.cpu), kind, 0)
    return (g, c) if g and c else None


def _even(w: Worth, kind: str) -> Even | None:
    med = _medians(w, kind)
    if med is None:
        return None
    gr = sorted(set(w.gpu.rate) & set(w.gpu.fixed))
    cr = sorted(set(w.cpu.rate) & set(w.cpu.fixed))
    if w.paired and gr == cr:
        keys = [(r, r) for r in gr]
    else:
        keys = [(i, j) for i in gr for j in cr]
    pairs = [(g, c) for i, j in keys if (g := _line(w, w.gpu, kind, i)) and (c := _line(w, w.cpu, kind, j))]
    return even(pairs, med)


def worth_all(registry: dict[str, Study], answers: list[Answer], prices: Any = None) -> list[Worth]:
    """A Worth for every GPU-over-CPU answer, in the answers' order."""
    return [worth_of(registry[a.study], a, prices) for a in answers if a.study in registry and is_gpu_over_cpu(a)]


__all__ = [
    "ABOVE",
    "ALWAYS",
    "BELOW",
    "NEVER",
    "Even",
    "Facts",
    "Line",
    "Worth",
    "cost_line",
    "crossing",
    "cell_device_name",
    "claim_is_gpu_over_cpu",
    "device_name",
    "even",
    "facts",
    "is_gpu_over_cpu",
    "time_line",
    "want_platform",
    "worth_all",
    "worth_of",
]
